package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/accounts"
	"drover/internal/testkit/fakemodel"
)

const testKey = "sk-cli-SECRET-0987654321"

func listAccounts(t *testing.T, home string) []accountView {
	t.Helper()
	r := runCLI(t, nil, "", "runner", "account", "list", "--json", "--home", home)
	if r.code != 0 {
		t.Fatalf("account list --json: exit %d: %s", r.code, r.stderr)
	}
	var vs []accountView
	if err := json.Unmarshal([]byte(r.stdout), &vs); err != nil {
		t.Fatalf("account list --json printed %q: %v", r.stdout, err)
	}
	return vs
}

func TestAccountAddAPIKey(t *testing.T) {
	home := t.TempDir()
	r := runCLI(t, nil, "  "+testKey+" \n", "runner", "account", "add", "--agent", "codex", "--label", "work",
		"--api-key-stdin", "--base-url", "https://gw.example/v1/", "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, "ready") {
		t.Fatalf("add: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	vs := listAccounts(t, home)
	if len(vs) != 1 {
		t.Fatalf("list = %+v", vs)
	}
	v := vs[0]
	if v.Agent != "codex" || v.Label != "work" || v.Kind != accounts.KindAPIKey || v.BaseURL != "https://gw.example" || v.State != "ready" {
		t.Fatalf("account %+v", v)
	}
	key, err := os.ReadFile(filepath.Join(home, "accounts", v.ID, "key"))
	if err != nil || string(key) != testKey {
		t.Fatalf("key file: %q, %v; want the trimmed key", key, err)
	}
	for _, args := range [][]string{
		{"runner", "account", "list", "--home", home},
		{"runner", "account", "list", "--json", "--home", home},
	} {
		r := runCLI(t, nil, "", args...)
		if r.code != 0 || strings.Contains(r.stdout+r.stderr, testKey) || !strings.Contains(r.stdout, v.ID) {
			t.Errorf("%q: exit %d, shows the key or not the account:\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(home, "accounts", "accounts.json")); strings.Contains(string(b), testKey) {
		t.Error("the key is in accounts.json")
	}
}

func TestAccountAddLoginPrintsTheLogin(t *testing.T) {
	home := t.TempDir()
	for _, tt := range []struct {
		agent, want string // want: the command, with @DIR@ for the config dir
	}{
		{"claude", "CLAUDE_CONFIG_DIR=@DIR@ claude auth login"},
		{"codex", "CODEX_HOME=@DIR@ codex login"},
		{"gemini", "HOME=@DIR@ gemini"},
		{"opencode", "XDG_DATA_HOME=@DIR@/data opencode auth login"},
	} {
		r := runCLI(t, nil, testKey+"\n", "runner", "account", "add", "--agent", tt.agent, "--home", home)
		if r.code != 0 {
			t.Fatalf("add %s: exit %d: %s", tt.agent, r.code, r.stderr)
		}
		vs := listAccounts(t, home)
		v := vs[len(vs)-1]
		if v.Agent != tt.agent || v.Kind != accounts.KindLogin {
			t.Fatalf("added %+v", v)
		}
		dir := filepath.Join(home, "accounts", v.ID, "config")
		if st, err := os.Stat(dir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Fatalf("config dir %s: %v", dir, err)
		}
		want := strings.ReplaceAll(tt.want, "@DIR@", dir)
		if !strings.Contains(r.stdout, "\n  "+want+"\n") || !strings.Contains(r.stdout, "ready after that") {
			t.Errorf("add %s printed\n%s\nwant the line %q", tt.agent, r.stdout, want)
		}
		if strings.Contains(r.stdout+r.stderr, testKey) {
			t.Errorf("add %s echoed stdin", tt.agent)
		}
	}
	// A directory that needs quoting is quoted for the shell.
	odd := filepath.Join(t.TempDir(), "runner home")
	r := runCLI(t, nil, "", "runner", "account", "add", "--agent", "codex", "--home", odd)
	if r.code != 0 || !strings.Contains(r.stdout, "CODEX_HOME='"+odd+"/accounts/") {
		t.Fatalf("add in %q: exit %d\n%s%s", odd, r.code, r.stdout, r.stderr)
	}
}

func TestAccountDefaultHome(t *testing.T) {
	state := t.TempDir()
	env := map[string]string{"XDG_STATE_HOME": state}
	if r := runCLI(t, env, "", "runner", "account", "add", "--agent", "gemini", "--label", "g1"); r.code != 0 {
		t.Fatalf("add: exit %d: %s", r.code, r.stderr)
	}
	s, err := accounts.Open(filepath.Join(state, "drover", "runner"))
	if err != nil {
		t.Fatal(err)
	}
	if as, err := s.List(); err != nil || len(as) != 1 || as[0].Label != "g1" {
		t.Fatalf("accounts in the default home: %+v, %v", as, err)
	}
	if r := runCLI(t, env, "", "runner", "accounts", "remove", "g1"); r.code != 0 {
		t.Fatalf("remove: exit %d: %s", r.code, r.stderr)
	}
}

func TestAccountBadInput(t *testing.T) {
	home := t.TempDir()
	if r := runCLI(t, nil, "", "runner", "account", "add", "--agent", "claude", "--label", "main", "--home", home); r.code != 0 {
		t.Fatalf("add: exit %d: %s", r.code, r.stderr)
	}
	for _, tt := range []struct {
		stdin string
		args  []string
		code  int
	}{
		{"", []string{"add"}, 2},
		{"", []string{"add", "--agent", "cursor"}, 2},
		{"", []string{"add", "--agent", "claude", "--label", "two words"}, 2},
		{"", []string{"add", "--agent", "claude", "--label", strings.Repeat("x", 65)}, 2},
		{"", []string{"add", "--agent", "codex", "--base-url", "https://gw.example"}, 2},
		{"", []string{"add", "--agent", "codex", "--api-key", testKey}, 2}, // keys never come from argv
		{"", []string{"add", "--agent", "codex", "extra"}, 2},
		{" \n\t", []string{"add", "--agent", "codex", "--api-key-stdin"}, 1},
		{testKey, []string{"add", "--agent", "codex", "--api-key-stdin", "--base-url", "http://gw.example"}, 1},
		{testKey, []string{"add", "--agent", "codex", "--api-key-stdin", "--base-url", "https://gw.example/?k=" + testKey}, 1},
		{testKey + " more", []string{"add", "--agent", "codex", "--api-key-stdin"}, 1},
		{"", []string{"add", "--agent", "claude", "--label", "main"}, 1},
		{"", []string{"remove"}, 2},
		{"", []string{"remove", "nope"}, 1},
		{"", []string{"list", "extra"}, 2},
		{"", []string{"bogus"}, 2},
	} {
		args := append(append([]string{"runner", "account"}, tt.args...), "--home", home)
		r := runCLI(t, nil, tt.stdin, args...)
		if r.code != tt.code || !strings.HasPrefix(r.stderr, "drover: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: exit %d (want %d), stderr %q", tt.args, r.code, tt.code, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, testKey) {
			t.Errorf("%q: the key shows: %s%s", tt.args, r.stdout, r.stderr)
		}
	}
	if vs := listAccounts(t, home); len(vs) != 1 {
		t.Fatalf("bad input changed the accounts: %+v", vs)
	}
}

func TestAccountListAndRemove(t *testing.T) {
	home := t.TempDir()
	s, err := accounts.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Add(accounts.Account{Agent: "claude", Kind: accounts.KindLogin, Label: "shared"}, "")
	if err != nil {
		t.Fatal(err)
	}
	x, err := s.Add(accounts.Account{Agent: "codex", Kind: accounts.KindAPIKey, Label: "shared"}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	claudeLogin(t, s.Dir(c.ID))
	// Far enough ahead that the test cannot outlive it.
	if err := s.SetLimited(c.ID, time.Now().Add(240*time.Hour), "weekly limit reached"); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, nil, "", "runner", "account", "list", "--home", home)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(lines[1], c.ID) || !strings.Contains(lines[1], "limited until ") || !strings.Contains(lines[1], ": weekly limit reached") {
		t.Errorf("limited account: %q", lines[1])
	}
	if !strings.Contains(lines[2], x.ID) || !strings.Contains(lines[2], "ready") {
		t.Errorf("ready account: %q", lines[2])
	}
	vs := listAccounts(t, home)
	if len(vs) != 2 || vs[0].State != "limited" || vs[0].LimitMessage != "weekly limit reached" || vs[1].State != "ready" {
		t.Errorf("list --json: %+v", vs)
	}

	r = runCLI(t, nil, "", "runner", "account", "remove", "shared", "--home", home)
	if r.code != 1 || !strings.Contains(r.stderr, c.ID) || !strings.Contains(r.stderr, x.ID) {
		t.Fatalf("remove of an ambiguous label: exit %d, %s", r.code, r.stderr)
	}
	r = runCLI(t, nil, "", "runner", "account", "remove", x.ID, "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, "removed account "+x.ID) {
		t.Fatalf("remove by id: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "", "runner", "account", "remove", "shared", "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, c.ID) {
		t.Fatalf("remove by label: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(home, "accounts", x.ID)); !os.IsNotExist(err) {
		t.Errorf("the removed account's directory is still there: %v", err)
	}
	if vs := listAccounts(t, home); len(vs) != 0 {
		t.Fatalf("after removes: %+v", vs)
	}
	r = runCLI(t, nil, "", "runner", "account", "list", "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, "no accounts") {
		t.Fatalf("empty list: exit %d\n%s", r.code, r.stdout)
	}
	if r := runCLI(t, nil, "", "runner", "account", "list", "--json", "--home", home); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("empty list --json: %q", r.stdout)
	}
}

// claudeLogin leaves what 'claude auth login' leaves in dir.
func claudeLogin(t *testing.T, dir string) {
	t.Helper()
	login := `{"claudeAiOauth":{"accessToken":"at","refreshToken":"rt","expiresAt":1}}`
	if err := os.WriteFile(filepath.Join(dir, ".credentials.json"), []byte(login), 0o600); err != nil {
		t.Fatal(err)
	}
}

// An account's state is what is true: a login account that never logged
// in needs a login, one its provider refused needs attention; each says
// the command that fixes it, and is ready again once fixed.
func TestAccountNeedsLoginAndAttention(t *testing.T) {
	home := t.TempDir()
	s, err := accounts.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Add(accounts.Account{Agent: "claude", Kind: accounts.KindLogin, Label: "sub"}, "")
	if err != nil {
		t.Fatal(err)
	}
	x, err := s.Add(accounts.Account{Agent: "codex", Kind: accounts.KindAPIKey, Label: "key"}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetAttention(x.ID, "auth_failed", "codex: the provider at https://api.openai.com refused the account's key (HTTP 401 Unauthorized)"); err != nil {
		t.Fatal(err)
	}
	state := func(id string) accountView {
		t.Helper()
		for _, v := range listAccounts(t, home) {
			if v.ID == id {
				return v
			}
		}
		t.Fatalf("no account %s", id)
		return accountView{}
	}
	for _, tc := range []struct {
		id, state, fix string
	}{
		{c.ID, "needs login", "drover runner account login " + c.ID},
		{x.ID, "needs attention", "drover runner account reset " + x.ID + " --api-key-stdin"},
	} {
		if v := state(tc.id); v.State != tc.state || !strings.Contains(v.Fix, tc.fix) || v.Why == "" {
			t.Errorf("%s: %+v, want %s fixed by %q", tc.id, v, tc.state, tc.fix)
		}
	}
	r := runCLI(t, nil, "", "runner", "account", "list", "--home", home)
	if !strings.Contains(r.stdout, "needs login") || !strings.Contains(r.stdout, "fix: drover runner account login "+c.ID) ||
		!strings.Contains(r.stdout, "needs attention") || !strings.Contains(r.stdout, "HTTP 401") {
		t.Errorf("list:\n%s", r.stdout)
	}
	r = runCLI(t, nil, "", "runner", "account", "login", "sub", "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, ": needs login (not logged in: no login in ") ||
		!strings.Contains(r.stdout, "CLAUDE_CONFIG_DIR="+s.Dir(c.ID)+" claude auth login") {
		t.Errorf("account login: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	claudeLogin(t, s.Dir(c.ID))
	if v := state(c.ID); v.State != "ready" || v.Fix != "" {
		t.Errorf("after the login: %+v, want ready", v)
	}
	const newKey = "sk-new-key-0987"
	r = runCLI(t, nil, newKey+"\n", "runner", "account", "reset", "key", "--api-key-stdin", "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, "it is ready") || strings.Contains(r.stdout+r.stderr, newKey) {
		t.Fatalf("reset: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if v := state(x.ID); v.State != "ready" || v.Attention != "" {
		t.Errorf("after reset: %+v, want ready", v)
	}
	if k, err := s.Key(x.ID); err != nil || k != newKey {
		t.Errorf("key after reset = %q, %v; want the new one", k, err)
	}
	r = runCLI(t, nil, newKey+"\n", "runner", "account", "reset", "sub", "--api-key-stdin", "--home", home)
	if r.code == 0 || !strings.Contains(r.stderr, "a login account takes no key") {
		t.Errorf("reset of a login account with a key: exit %d\n%s", r.code, r.stderr)
	}
}

// TestAccountAddNative: a native account names its provider, base URL and
// model; --no-key is for a server without one; the flags are refused for
// other agents and a native account needs a key or --no-key.
func TestAccountAddNative(t *testing.T) {
	home := t.TempDir()
	r := runCLI(t, nil, "", "runner", "account", "add", "--agent", "native", "--provider", "openai-compatible",
		"--base-url", "http://127.0.0.1:11434/v1/", "--model", "qwen", "--no-key", "--no-probe", "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, "ready") {
		t.Fatalf("add: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, testKey+"\n", "runner", "account", "add", "--agent", "native", "--provider", "anthropic",
		"--api-key-stdin", "--no-probe", "--home", home)
	if r.code != 0 {
		t.Fatalf("add: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	vs := listAccounts(t, home)
	if len(vs) != 2 || vs[0].Provider != "openai-compatible" || vs[0].Model != "qwen" || vs[0].Kind != accounts.KindNoKey ||
		vs[0].BaseURL != "http://127.0.0.1:11434/v1" || vs[1].Provider != "anthropic" || vs[1].State != "ready" {
		t.Fatalf("list = %+v", vs)
	}
	for _, args := range [][]string{
		{"--agent", "native", "--provider", "anthropic"},
		{"--agent", "native", "--provider", "gemini", "--no-key"},
		{"--agent", "native", "--provider", "openai-compatible", "--model", "m", "--no-key"},
		{"--agent", "native", "--provider", "openai-compatible", "--base-url", "http://10.1.2.3/v1", "--model", "m", "--no-key"},
		{"--agent", "claude", "--provider", "anthropic", "--api-key-stdin"},
		{"--agent", "codex", "--no-key"},
	} {
		r := runCLI(t, nil, testKey+"\n", append(append([]string{"runner", "account", "add"}, args...), "--home", home)...)
		if r.code == 0 {
			t.Errorf("%q: accepted", args)
		}
		if strings.Contains(r.stdout+r.stderr, testKey) {
			t.Errorf("%q: the key is in the output", args)
		}
	}
}

// TestAccountAddProbesNative: 'account add' probes a native account's
// endpoint and records how its model takes tool calls ('list' shows it);
// a base URL without /v1 is stored with it when only that answers; an
// endpoint that answers 404 (no such model, or no such path even with
// /v1) or refuses the key is refused, naming the URL tried, and nothing is
// added; the key is in no output.
func TestAccountAddProbesNative(t *testing.T) {
	call := fakemodel.CallTool("probe", map[string]any{"ok": true})
	for _, tt := range []struct {
		name, path, want string // want: the TOOL CALLS column, or "" for refused
		turn             fakemodel.Turn
		opts             []fakemodel.Option
	}{
		{"streamed", "/v1", "streamed", call, nil},
		{"whole answers to streams", "/v1", "whole answers", call, []fakemodel.Option{fakemodel.WholeStreams()}},
		{"tools refused", "/v1", "text protocol", fakemodel.Text("no tools"), []fakemodel.Option{fakemodel.RefuseTools()}},
		{"without /v1", "", "streamed", call, nil},
		{"model not found", "/v1", "", call, []fakemodel.Option{fakemodel.Models("other")}},
		{"no such path", "/api", "", call, nil},
		{"key refused", "/v1", "", call, []fakemodel.Option{fakemodel.RequireKey("another")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			srv := fakemodel.NewFakeChat(t, []fakemodel.Turn{tt.turn, tt.turn}, tt.opts...)
			r := runCLI(t, nil, testKey+"\n", "runner", "account", "add", "--agent", "native", "--provider", "openai-compatible",
				"--base-url", srv.URL+tt.path, "--model", "m", "--api-key-stdin", "--home", home)
			if strings.Contains(r.stdout+r.stderr, testKey) {
				t.Fatalf("the key is in the output:\n%s%s", r.stdout, r.stderr)
			}
			vs := listAccounts(t, home)
			if tt.want == "" {
				if r.code == 0 || len(vs) != 0 || !strings.Contains(r.stderr, srv.URL+tt.path) {
					t.Fatalf("add: exit %d, accounts %+v\n%s%s", r.code, vs, r.stdout, r.stderr)
				}
				return
			}
			if r.code != 0 || len(vs) != 1 || vs[0].BaseURL != srv.URL+"/v1" || vs[0].State != "ready" || toolMode(vs[0].Capabilities) != tt.want {
				t.Fatalf("add: exit %d, accounts %+v\n%s%s\n%s", r.code, vs, r.stdout, r.stderr, srv.Dump())
			}
			if r := runCLI(t, nil, "", "runner", "account", "list", "--home", home); !strings.Contains(r.stdout, "TOOL CALLS") || !strings.Contains(r.stdout, tt.want) {
				t.Fatalf("list:\n%s", r.stdout)
			}
		})
	}
}
