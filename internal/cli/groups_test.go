package cli

import (
	"strings"
	"testing"
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
