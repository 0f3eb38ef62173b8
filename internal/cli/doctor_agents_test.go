package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/accounts"
	"drover/internal/sandbox"
	"drover/internal/testkit"
	"drover/internal/testkit/ciskip"
)

// doctorJSON runs `runner doctor --json` and splits its list into the
// sandbox checks and the agent checks.
func doctorJSON(t *testing.T, env map[string]string, args ...string) ([]sandbox.Check, map[string]agentCheck, cliResult) {
	t.Helper()
	r := runCLI(t, env, "", append([]string{"runner", "doctor", "--json"}, args...)...)
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
		t.Fatalf("doctor --json printed %q: %v (stderr %s)", r.stdout, err, r.stderr)
	}
	var checks []sandbox.Check
	agents := map[string]agentCheck{}
	for _, it := range items {
		var c agentCheck
		if err := json.Unmarshal(it, &c); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(c.Kind, "agent:") {
			agents[c.Agent] = c
			continue
		}
		var sc sandbox.Check
		if err := json.Unmarshal(it, &sc); err != nil {
			t.Fatal(err)
		}
		checks = append(checks, sc)
	}
	return checks, agents, r
}

func TestDoctorAgentsEmptyPATH(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"PATH": ""}
	// --sandbox none: whether bwrap works here is not this test's business.
	checks, agents, r := doctorJSON(t, env, "--sandbox", "none", "--home", home)
	if r.code != 0 {
		t.Fatalf("doctor with no agent CLIs: exit %d: %s", r.code, r.stderr)
	}
	if len(checks) == 0 {
		t.Fatal("the sandbox checks are gone")
	}
	if len(agents) != 4 {
		t.Fatalf("agents = %+v", agents)
	}
	for _, name := range doctorAgents() {
		c := agents[name]
		if c.Installed || c.OK || c.Runs || c.Kind != "agent:"+name || !strings.Contains(c.Detail, "not installed") || c.Fix == "" {
			t.Errorf("%s: %+v", name, c)
		}
	}
	if _, err := os.Stat(home + "/accounts"); !os.IsNotExist(err) {
		t.Errorf("the doctor created the accounts directory: %v", err)
	}

	r = runCLI(t, env, "", "runner", "doctor", "--sandbox", "none", "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, "\nAGENT ") || !strings.Contains(r.stdout, "to install codex: npm install -g @openai/codex") {
		t.Fatalf("doctor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestDoctorAgentsPinnedCLIs(t *testing.T) {
	// The pinned CLIs scripts/test installs (skipped without them, failed
	// under CI=true).
	var pinnedCLIs string
	for _, name := range doctorAgents() {
		pinnedCLIs = testkit.AgentCLI(t, name)
	}
	home := t.TempDir()
	s, err := accounts.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []accounts.Account{
		{Agent: "claude", Kind: accounts.KindLogin, Label: "a"},
		{Agent: "claude", Kind: accounts.KindLogin, Label: "b"},
		{Agent: "codex", Kind: accounts.KindLogin},
		{Agent: "codex", Kind: accounts.KindLogin, Label: "never-logged-in"},
	} {
		acct, err := s.Add(a, "")
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case a.Agent == "claude":
			claudeLogin(t, s.Dir(acct.ID))
		case a.Label == "":
			if err := os.WriteFile(filepath.Join(s.Dir(acct.ID), "auth.json"), []byte(`{"OPENAI_API_KEY":"sk-x"}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	as, _ := s.List()
	if err := s.SetLimited(as[1].ID, time.Now().Add(240*time.Hour), "limit"); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PATH": pinnedCLIs + ":" + os.Getenv("PATH")}
	checks, agents, r := doctorJSON(t, env, "--home", home)
	bwrapOK := false
	for _, c := range checks {
		if c.Kind == sandbox.KindBwrap {
			bwrapOK = c.OK
		}
	}
	if bwrapOK != (r.code == 0) {
		t.Fatalf("exit %d with bwrap working %v: %s", r.code, bwrapOK, r.stderr)
	}
	want := map[string]string{"claude": "Claude Code", "codex": "codex-cli", "opencode": ".", "gemini": "."}
	for name, v := range want {
		c := agents[name]
		if !c.Installed || !strings.HasPrefix(c.Path, "/") || len(c.Mounts) == 0 || c.Sandbox != sandbox.KindBwrap {
			t.Errorf("%s: %+v", name, c)
			continue
		}
		if !bwrapOK {
			continue // the sandbox check already said why
		}
		if !c.Runs || !c.OK || !strings.Contains(c.Version, v) {
			t.Errorf("%s does not run in bwrap: %+v", name, c)
		}
	}
	if n := agents["claude"].Accounts; n.Ready != 1 || n.Limited != 1 {
		t.Errorf("claude accounts %+v", n)
	}
	if n := agents["codex"].Accounts; n.Ready != 1 || n.Limited != 0 || n.NeedFix != 1 {
		t.Errorf("codex accounts %+v", n)
	}
	if n := agents["gemini"].Accounts; n.Ready+n.Limited != 0 {
		t.Errorf("gemini accounts %+v", n)
	}

	// The unisolated sandbox runs them too, and the text report says so.
	r = runCLI(t, env, "", "runner", "doctor", "--sandbox", "none", "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, "RUNS IN none") || !strings.Contains(r.stdout, "1 ready, 1 limited") ||
		!strings.Contains(r.stdout, "1 ready, 1 to fix") || !strings.Contains(r.stdout, "codex has 1 account(s) that need a login or attention") ||
		!strings.Contains(r.stdout, "gemini has no account yet") || strings.Contains(r.stdout, "to install") {
		t.Fatalf("doctor --sandbox none: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestVersionLine(t *testing.T) {
	for in, want := range map[string]string{
		"2.1.197 (Claude Code)\n": "2.1.197 (Claude Code)",
		"WARNING: proceeding, even though we could not create PATH aliases\ncodex-cli 0.171.0\n": "codex-cli 0.171.0",
		"\n  0.61.0  \n":       "0.61.0",
		"no version here\nx\n": "no version here",
		"":                     "",
	} {
		if got := versionLine(in); got != want {
			t.Errorf("versionLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDoctorAgentsFakeCLIs needs no vendor CLI: shell scripts stand in for
// one that works and one whose --version fails.
func TestDoctorAgentsFakeCLIs(t *testing.T) {
	bin := t.TempDir()
	for name, script := range map[string]string{
		"codex":  "#!/bin/sh\necho 'WARNING: something'\necho \"codex-cli 9.8.7 $HOME\"\n",
		"claude": "#!/bin/sh\necho 'config is broken' >&2\nexit 3\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"PATH": bin + ":/usr/bin:/bin"}
	for _, kind := range []string{sandbox.KindNone, sandbox.KindBwrap} {
		checks, agents, r := doctorJSON(t, env, "--sandbox", kind, "--home", t.TempDir())
		if kind == sandbox.KindBwrap && r.code != 0 {
			for _, c := range checks {
				if c.Kind == kind && !c.OK {
					ciskip.Skipf(t, "bwrap does not work here: %s", c.Detail)
				}
			}
		}
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", kind, r.code, r.stderr)
		}
		codex, claude := agents["codex"], agents["claude"]
		if !codex.OK || !codex.Runs || !strings.HasPrefix(codex.Version, "codex-cli 9.8.7 ") {
			t.Errorf("%s: codex %+v", kind, codex)
		}
		// HOME inside is a throwaway directory, never the runner's.
		if strings.Contains(codex.Version, os.Getenv("HOME")+" ") || strings.HasSuffix(codex.Version, " "+os.Getenv("HOME")) {
			t.Errorf("%s: codex ran with the real HOME: %q", kind, codex.Version)
		}
		if !claude.Installed || claude.Runs || claude.OK || !strings.Contains(claude.RunsError, "exited 3: config is broken") {
			t.Errorf("%s: claude %+v", kind, claude)
		}
		if agents["gemini"].Installed {
			t.Errorf("%s: gemini found: %+v", kind, agents["gemini"])
		}
	}
}

// The doctor shows the API root each agent's api-key accounts use, as
// drover resolved it from the runner's environment, and says when a
// variable cannot be used.
func TestDoctorAgentsShowEndpoints(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"PATH": "", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1/",
		"GOOGLE_GEMINI_BASE_URL": "http://gw.example/v1beta"}
	_, agents, r := doctorJSON(t, env, "--sandbox", "none", "--home", home)
	if r.code != 0 {
		t.Fatalf("doctor: exit %d: %s", r.code, r.stderr)
	}
	for _, tc := range []struct{ agent, endpoint, from, err string }{
		{"claude", "https://api.anthropic.com", "vendor", ""},
		{"codex", "http://127.0.0.1:11434", "OPENAI_BASE_URL", ""},
		{"opencode", "http://127.0.0.1:11434", "OPENAI_BASE_URL", ""},
		{"gemini", "", "GOOGLE_GEMINI_BASE_URL", "plain http only to a loopback address"},
	} {
		c := agents[tc.agent]
		if c.Endpoint != tc.endpoint || c.EndpointFrom != tc.from || (tc.err == "") != (c.EndpointError == "") ||
			!strings.Contains(c.EndpointError, tc.err) {
			t.Errorf("%s: endpoint %q from %q (error %q), want %q from %q (error %q)", tc.agent,
				c.Endpoint, c.EndpointFrom, c.EndpointError, tc.endpoint, tc.from, tc.err)
		}
	}
	r = runCLI(t, env, "", "runner", "doctor", "--sandbox", "none", "--home", home)
	if !strings.Contains(r.stdout, "http://127.0.0.1:11434 (OPENAI_BASE_URL)") ||
		!strings.Contains(r.stdout, "gemini: GOOGLE_GEMINI_BASE_URL: base URL: plain http only") {
		t.Fatalf("doctor:\n%s%s", r.stdout, r.stderr)
	}
}

// A vendor variable the runner cannot use stops it at start, naming the
// variable and never quoting what may be a secret in it.
func TestRunnerRefusesAnUnusableBaseURL(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"OPENAI_BASE_URL", "http://gw.example/v1", "plain http only to a loopback address"},
		{"ANTHROPIC_BASE_URL", "https://u:sk-secret@gw.example", "must not hold credentials"},
		{"GOOGLE_GEMINI_BASE_URL", "gw.example/v1beta", "want http:// or https://"},
	} {
		r := runCLI(t, map[string]string{"PATH": "", tc.name: tc.value}, "", "runner", "--home", t.TempDir())
		if r.code != 2 || !strings.Contains(r.stderr, tc.name) || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "sk-secret") {
			t.Errorf("%s=%s: exit %d, %s", tc.name, tc.value, r.code, r.stderr)
		}
	}
}
