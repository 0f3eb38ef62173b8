package cli

import (
	"strings"
	"testing"

	"drover/internal/apitypes"
)

// A bad drover run --attempts is a usage error before anything is pushed
// or sent (no hub is reachable here), naming what is wrong.
func TestRunAttemptsBadInput(t *testing.T) {
	for _, c := range []struct {
		want string
		args []string
	}{
		{"at least 1", []string{"run", "--repo", ".", "--agent", "claude", "--attempts", "0", "--", "p"}},
		{"the limit is 10", []string{"run", "--repo", ".", "--agent", "claude", "--attempts", "11", "--", "p"}},
		{"2 agents for 3 attempts", []string{"run", "--repo", ".", "--attempts", "3", "--agents", "claude,codex", "--", "p"}},
		{`unknown agent "nosuch"`, []string{"run", "--repo", ".", "--agents", "claude,nosuch", "--", "p"}},
		{"need a prompt", []string{"run", "--repo", ".", "--agent", "claude", "--attempts", "2"}},
		{"need an agent", []string{"run", "--repo", ".", "--attempts", "2", "--", "p"}},
		{"give --repo", []string{"run", "--agent", "claude", "--attempts", "2", "--", "p"}},
		{"--wait does not go with --attempts", []string{"run", "--repo", ".", "--agent", "claude", "--attempts", "2", "--wait", "--", "p"}},
		{"--verify goes with --attempts", []string{"run", "--agent", "exec", "--verify", "true", "--", "true"}},
		{"--judge goes with --attempts", []string{"run", "--agent", "claude", "--judge", "claude", "--", "p"}},
		{"--pick-by-judge goes with --attempts", []string{"run", "--agent", "claude", "--pick-by-judge", "--", "p"}},
		{"--pick-by-judge needs a judge", []string{"run", "--repo", ".", "--agent", "claude", "--attempts", "2", "--verify", "true", "--pick-by-judge", "--", "p"}},
		{"--pick-by-judge needs --verify", []string{"run", "--repo", ".", "--agent", "claude", "--attempts", "2", "--judge", "claude", "--pick-by-judge", "--", "p"}},
		{`the judge: unknown agent "nosuch"`, []string{"run", "--repo", ".", "--agent", "claude", "--attempts", "2", "--judge", "nosuch", "--", "p"}},
		{`the judge: agent "exec" takes no prompt`, []string{"run", "--repo", ".", "--agent", "claude", "--attempts", "2", "--judge", "exec", "--", "p"}},
		{"--judge names an agent", []string{"run", "--repo", ".", "--agent", "claude", "--attempts", "2", "--judge", " ", "--", "p"}},
		{"want an attempt's number", []string{"pick", "p-1", "zero"}},
		{"want GROUP", []string{"compare"}},
	} {
		r := runCLI(t, nil, "", c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("%q: code %d, stdout %q, stderr %q; want a usage error saying %q", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
}

// drover compare prints the judge's verdict after the attempts, the
// judge's words escaped (they are an agent's), or why it is not trusted.
func TestPrintGroupShowsTheJudge(t *testing.T) {
	v := apitypes.GroupView{ID: "p-1", Project: "web", Base: strings.Repeat("a", 40), State: "done",
		Attempts: []apitypes.GroupAttempt{{Number: 1, Agent: "claude", State: "done"}, {Number: 2, Agent: "codex", State: "done"}},
		Judge: &apitypes.GroupJudge{Agent: "claude", Account: "acct", State: "done", Job: "j-9", Verdict: "valid", PickByJudge: true,
			Ranking: []apitypes.GroupRanked{{Attempt: 2, Reason: "tests pass \x1b[2J"}, {Attempt: 1, Reason: "no tests"}},
			Pick:    "attempt 2, ranked first by the judge, picked as the group's result"}}
	var b strings.Builder
	if err := printGroup(&b, v, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"judge: claude:acct, done (job j-9), picks the attempt it ranks first\n", "  1. attempt 2: tests pass \\x1b[2J\n",
		"  2. attempt 1: no tests\n", "  attempt 2, ranked first by the judge, picked"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("want %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "\x1b") {
		t.Errorf("an escape reached the terminal:\n%q", b.String())
	}
	v.Judge = &apitypes.GroupJudge{Agent: "claude", State: "done", Verdict: "invalid", Invalid: "not a JSON verdict: invalid character"}
	b.Reset()
	if err := printGroup(&b, v, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "verdict invalid, not trusted: not a JSON verdict") || strings.Contains(b.String(), "1. attempt") {
		t.Errorf("an invalid verdict:\n%s", b.String())
	}
}
