package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
)

// rows splits a table into the fields of each line.
func rows(out string) [][]string {
	var rs [][]string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		rs = append(rs, strings.Fields(line))
	}
	return rs
}

// wantRows compares a table with want, line by line.
func wantRows(t *testing.T, what string, r cliResult, want [][]string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: code %d, stdout %q, stderr %q", what, r.code, r.stdout, r.stderr)
	}
	got := rows(r.stdout)
	if len(got) != len(want) {
		t.Fatalf("%s: %d lines, want %d:\n%s", what, len(got), len(want), r.stdout)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("%s line %d: %q, want %q", what, i, got[i], want[i])
		}
	}
}

// locked reads the fake hub's state under its lock.
func locked[T any](h *fakeHub, f func() T) T {
	h.mu.Lock()
	defer h.mu.Unlock()
	return f()
}

// wantUsageErrors runs each command line and wants a usage error (exit 2,
// one line on stderr, nothing on stdout) that sent the hub nothing.
func wantUsageErrors(t *testing.T, h *fakeHub, env map[string]string, lines [][]string) {
	t.Helper()
	for _, args := range lines {
		before := h.requestCount()
		r := runCLI(t, env, "", args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "drover: ") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("%q: code %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
		if n := h.requestCount() - before; n != 0 {
			t.Errorf("%q sent %d request(s)", args, n)
		}
	}
}

func TestUsersListAndRemove(t *testing.T) {
	h := newFakeHub(t)
	created := time.Date(2030, 1, 2, 3, 4, 0, 0, time.Local)
	h.mu.Lock()
	h.userViews = []apitypes.UserView{{Name: "admin", Admin: true, CreatedAt: created, Runners: 2}, {Name: "bob", CreatedAt: created}}
	h.mu.Unlock()
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	header := []string{"NAME", "ADMIN", "RUNNERS", "CREATED", "REMOVED"}
	for _, args := range [][]string{{"users"}, {"users", "list"}} {
		wantRows(t, strings.Join(args, " "), runCLI(t, env, "", args...), [][]string{header,
			{"admin", "yes", "2", "2030-01-02", "03:04", "-"},
			{"bob", "no", "0", "2030-01-02", "03:04", "-"}})
	}
	r := runCLI(t, env, "", "users", "--json")
	var l apitypes.UserList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Users) != 2 || !l.Users[0].Admin {
		t.Fatalf("users --json printed %q: %v", r.stdout, err)
	}

	r = runCLI(t, env, "", "users", "remove", "bob")
	if r.code != 0 || r.stdout != "removed user bob: their tokens and runners are revoked and their unfinished jobs cancelled\n" {
		t.Fatalf("remove: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, env, "", "users")
	if got := rows(r.stdout); len(got) != 3 || got[2][len(got[2])-1] == "-" {
		t.Errorf("after the removal: %q", r.stdout)
	}
	r = runCLI(t, env, "", "users", "remove", "nobody")
	if r.code != 1 || !strings.Contains(r.stderr, "no user nobody") {
		t.Errorf("remove nobody: code %d, stderr %q", r.code, r.stderr)
	}
	wantUsageErrors(t, h, env, [][]string{
		{"users", "remove"},
		{"users", "remove", "a", "b"},
		{"users", "remove", "a/b"},
		{"users", "list", "extra"},
		{"users", "token", "rotate", "a", "b"},
		{"users", "token", "rotate", "two words"},
		{"users", "token", "bogus"},
	})
}

func TestUsersAddTokenOut(t *testing.T) {
	h := newFakeHub(t)
	dir := t.TempDir()
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}

	// Without --token-out the token is all of stdout.
	r := runCLI(t, env, "", "users", "add", "alice")
	if r.code != 0 || r.stdout != "drv_u_alice\n" || r.stderr != "" {
		t.Fatalf("add: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	out := filepath.Join(dir, "carol.token")
	r = runCLI(t, env, "", "users", "add", "carol", "--admin", "--token-out", out)
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, out) || strings.Contains(r.stderr, "drv_u_") {
		t.Fatalf("add --token-out: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	wantTokenFile(t, out, "drv_u_carol")

	// An existing file is refused before the hub is asked, and left alone.
	r = runCLI(t, env, "", "users", "add", "dave", "--token-out", out)
	if r.code != 1 || !strings.Contains(r.stderr, "exists") || r.stdout != "" {
		t.Errorf("add --token-out to an existing file: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	wantTokenFile(t, out, "drv_u_carol")
	// So is a file that cannot be created.
	r = runCLI(t, env, "", "users", "add", "dave", "--token-out", filepath.Join(dir, "nodir", "t"))
	if r.code != 1 {
		t.Errorf("add --token-out into a missing directory: code %d, stderr %q", r.code, r.stderr)
	}
	// A refusal by the hub leaves no file behind.
	refused := filepath.Join(dir, "taken.token")
	r = runCLI(t, env, "", "users", "add", "taken", "--token-out", refused)
	if _, err := os.Lstat(refused); r.code != 1 || !os.IsNotExist(err) {
		t.Errorf("refused add: code %d, stderr %q, file: %v", r.code, r.stderr, err)
	}
	users := locked(h, func() []apitypes.NewUserRequest { return slices.Clone(h.users) })
	want := []apitypes.NewUserRequest{{Name: "alice"}, {Name: "carol", Admin: true}, {Name: "taken"}}
	if !slices.Equal(users, want) {
		t.Errorf("the hub got %+v, want %+v", users, want)
	}

	// The global --token-file still names the caller's token: --token-out
	// does not take its place.
	adminToken := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(adminToken, []byte(h.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	erin := filepath.Join(dir, "erin.token")
	r = runCLI(t, map[string]string{"DROVER_HUB": h.URL}, "", "--token-file", adminToken, "users", "add", "erin", "--token-out", erin)
	if r.code != 0 {
		t.Fatalf("add with --token-file and --token-out: code %d, stderr %q", r.code, r.stderr)
	}
	wantTokenFile(t, erin, "drv_u_erin")
	wantTokenFile(t, adminToken, h.token)
}

// wantTokenFile wants path to hold token and be readable by its owner only.
func wantTokenFile(t *testing.T, path, token string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != token+"\n" {
		t.Errorf("%s holds %q (%v), want %q", path, b, err, token+"\n")
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v (%v), want 0600", path, st.Mode().Perm(), err)
	}
}

func TestRotateToken(t *testing.T) {
	h := newFakeHub(t)
	dir := t.TempDir()
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}

	// Another user's token: the new one is all of stdout.
	r := runCLI(t, env, "", "users", "token", "rotate", "bob")
	if r.code != 0 || r.stdout != "drv_u_bob_1\n" || r.stderr != "" {
		t.Fatalf("rotate bob: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// One's own from $DROVER_TOKEN: that variable is stale now, and says so.
	r = runCLI(t, env, "", "users", "token", "rotate")
	if r.code != 0 || r.stdout != "drv_u_admin_2\n" || !strings.Contains(r.stderr, "$DROVER_TOKEN was revoked") {
		t.Fatalf("rotate own: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// One's own from the saved login: the login gets the new token, so the
	// next command works.
	home := t.TempDir()
	login := map[string]string{"HOME": home}
	if r := runCLI(t, login, "drv_u_admin_2\n", "login", "--hub", h.URL); r.code != 0 {
		t.Fatalf("login: code %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, login, "", "users", "token", "rotate")
	if r.code != 0 || r.stdout != "drv_u_admin_3\n" || !strings.Contains(r.stderr, "updated the saved login") {
		t.Fatalf("rotate own from the login: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, login, "", "whoami"); r.code != 0 {
		t.Errorf("whoami after the rotation: code %d, stderr %q", r.code, r.stderr)
	}
	cfg, err := loadConfig(filepath.Join(home, ".config", "drover", "client.json"))
	if err != nil || cfg.Token != "drv_u_admin_3" {
		t.Errorf("saved login %+v, %v", cfg, err)
	}

	// Naming oneself is one's own too; --token-out takes stdout's place.
	out := filepath.Join(dir, "new.token")
	r = runCLI(t, login, "", "users", "token", "rotate", "admin", "--token-out", out)
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, out) || !strings.Contains(r.stderr, "updated the saved login") {
		t.Fatalf("rotate --token-out: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	wantTokenFile(t, out, "drv_u_admin_4")
	if r := runCLI(t, login, "", "whoami"); r.code != 0 {
		t.Errorf("whoami after the second rotation: code %d, stderr %q", r.code, r.stderr)
	}

	// An existing file is refused before anything is rotated.
	r = runCLI(t, login, "", "users", "token", "rotate", "--token-out", out)
	if r.code != 1 || !strings.Contains(r.stderr, "exists") {
		t.Errorf("rotate --token-out to an existing file: code %d, stderr %q", r.code, r.stderr)
	}
	wantTokenFile(t, out, "drv_u_admin_4")
	rotations := locked(h, func() []string { return slices.Clone(h.rotations) })
	if want := []string{"bob", "admin", "admin", "admin"}; !slices.Equal(rotations, want) {
		t.Errorf("rotations %q, want %q", rotations, want)
	}
}

func TestRunnersSharing(t *testing.T) {
	h := newFakeHub(t)
	h.mu.Lock()
	h.runners = []apitypes.RunnerView{
		{Name: "gpu1", Owner: "admin", Access: apitypes.AccessPrivate, Slots: 2},
		{Name: "gpu2", Owner: "bob", Access: apitypes.AccessHub, Connected: true},
		{Name: "gpu3", Owner: "admin", Access: apitypes.AccessPrivate, SharedWith: []apitypes.Share{{User: "bob"}, {Project: "web"}}},
	}
	h.mu.Unlock()
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	for _, args := range [][]string{{"runners"}, {"runners", "list"}} {
		r := runCLI(t, env, "", args...)
		got := rows(r.stdout)
		if r.code != 0 || len(got) != 4 {
			t.Fatalf("%q: code %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
		for i, want := range [][]string{
			{"NAME", "OWNER", "ACCESS", "STATUS"},
			{"gpu1", "admin", "private", "offline"},
			{"gpu2", "bob", "hub", "connected"},
			{"gpu3", "admin", "shared:", "user:bob,project:web", "offline"},
		} {
			if len(got[i]) < len(want) || !slices.Equal(got[i][:len(want)], want) {
				t.Errorf("%q line %d: %q, want it to start with %q", args, i, got[i], want)
			}
		}
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"runners", "share", "gpu1", "--user", "bob"}, "runner gpu1 access: shared: user:bob\n"},
		{[]string{"runners", "share", "gpu1", "--project", "web"}, "runner gpu1 access: shared: user:bob,project:web\n"},
		{[]string{"runners", "unshare", "gpu1", "--user", "bob"}, "runner gpu1 access: shared: project:web\n"},
		{[]string{"runners", "share", "gpu2", "--hub-wide"}, "runner gpu2 access: hub\n"},
		{[]string{"runners", "unshare", "gpu2", "--hub-wide"}, "runner gpu2 access: private\n"},
		// --hub is still the hub's URL on these commands.
		{[]string{"--hub", h.URL, "runners", "share", "gpu2", "--hub-wide"}, "runner gpu2 access: hub\n"},
	} {
		e := env
		if tt.args[0] == "--hub" {
			e = map[string]string{"DROVER_TOKEN": h.token}
		}
		if r := runCLI(t, e, "", tt.args...); r.code != 0 || r.stdout != tt.want {
			t.Errorf("%q: code %d, stdout %q, want %q; stderr %q", tt.args, r.code, r.stdout, tt.want, r.stderr)
		}
	}
	r := runCLI(t, env, "", "runners", "share", "gpu1", "--user", "carol", "--json")
	var v apitypes.RunnerView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Name != "gpu1" || len(v.SharedWith) != 2 {
		t.Errorf("share --json printed %q: %v", r.stdout, err)
	}
	shares := locked(h, func() []string { return slices.Clone(h.shares) })
	want := []string{
		"share gpu1 {User:bob Project: Hub:false}",
		"share gpu1 {User: Project:web Hub:false}",
		"unshare gpu1 {User:bob Project: Hub:false}",
		"share gpu2 {User: Project: Hub:true}",
		"unshare gpu2 {User: Project: Hub:true}",
		"share gpu2 {User: Project: Hub:true}",
		"share gpu1 {User:carol Project: Hub:false}",
	}
	if !slices.Equal(shares, want) {
		t.Errorf("the hub got\n%q\nwant\n%q", shares, want)
	}
	r = runCLI(t, env, "", "runners", "share", "nope", "--user", "bob")
	if r.code != 1 || !strings.Contains(r.stderr, "no runner nope") {
		t.Errorf("share of an unknown runner: code %d, stderr %q", r.code, r.stderr)
	}

	wantUsageErrors(t, h, env, [][]string{
		{"runners", "share", "gpu1"},
		{"runners", "unshare", "gpu1"},
		{"runners", "share", "gpu1", "--user", "bob", "--project", "web"},
		{"runners", "share", "gpu1", "--hub-wide", "--user", "bob"},
		{"runners", "unshare", "gpu1", "--hub-wide", "--project", "web"},
		{"runners", "share", "gpu1", "--user", ""},
		{"runners", "share", "gpu1", "--user", "two words"},
		{"runners", "share", "gpu1", "--project", "a/b"},
		{"runners", "share", "gpu1", "--hub-wide=false"},
		{"runners", "share", "--user", "bob"},
		{"runners", "share", "gpu 1", "--user", "bob"},
		{"runners", "share", "gpu1", "gpu2", "--user", "bob"},
	})
	for _, args := range [][]string{{"runners", "share", "gpu1"}, {"runners", "unshare", "gpu1", "--user", "bob", "--hub-wide"}} {
		if r := runCLI(t, env, "", args...); !strings.HasPrefix(r.stderr, "drover: want exactly one of --user USER, --project PROJECT or --hub-wide") {
			t.Errorf("%q: stderr %q", args, r.stderr)
		}
	}
}

// Shares waiting for consent show as pending to the runner's owner and as
// offered, with the command that accepts them, to their recipient;
// `runners accept` and `decline` answer them.
func TestRunnersAcceptAndDecline(t *testing.T) {
	h := newFakeHub(t)
	h.mu.Lock()
	h.runners = []apitypes.RunnerView{
		{Name: "gpu1", Owner: "admin", Access: apitypes.AccessPrivate, SharedWith: []apitypes.Share{{User: "bob", Pending: true}, {Project: "web"}}},
		{Name: "gpu4", Owner: "carol", Access: apitypes.AccessPrivate, Offered: []apitypes.Share{{User: "admin", Pending: true}, {Project: "web", Pending: true}}},
	}
	h.mu.Unlock()
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	r := runCLI(t, env, "", "runners")
	got := rows(r.stdout)
	if r.code != 0 || len(got) != 5 {
		t.Fatalf("runners: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for i, want := range [][]string{
		{"gpu1", "admin", "shared:", "user:bob(pending),project:web", "offline"},
		{"gpu4", "carol", "offered:", "user:admin(pending),project:web(pending)", "offline"},
	} {
		if !slices.Equal(got[i+1][:len(want)], want) {
			t.Errorf("line %d: %q, want it to start with %q", i+1, got[i+1], want)
		}
	}
	for _, want := range []string{"drover runners accept gpu4 (or decline)", "drover runners accept gpu4 --project web (or decline)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("runners output lacks %q:\n%s", want, r.stdout)
		}
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"runners", "accept", "gpu4"}, "accepted the share of runner gpu4 with you\n"},
		{[]string{"runners", "decline", "gpu4", "--project", "web"}, "declined the share of runner gpu4 with project web\n"},
	} {
		if r := runCLI(t, env, "", tt.args...); r.code != 0 || r.stdout != tt.want {
			t.Errorf("%q: code %d, stdout %q, want %q; stderr %q", tt.args, r.code, r.stdout, tt.want, r.stderr)
		}
	}
	got2 := locked(h, func() []string { return slices.Clone(h.shares) })
	if want := []string{"accept gpu4 {Project:}", "decline gpu4 {Project:web}"}; !slices.Equal(got2, want) {
		t.Errorf("the hub got %q, want %q", got2, want)
	}
	if r := runCLI(t, env, "", "runners", "accept", "nope"); r.code != 1 || !strings.Contains(r.stderr, "not shared with you") {
		t.Errorf("accept of an unknown runner: code %d, stderr %q", r.code, r.stderr)
	}
	wantUsageErrors(t, h, env, [][]string{
		{"runners", "accept"},
		{"runners", "accept", "gpu 4"},
		{"runners", "decline", "gpu4", "--project", "a/b"},
		{"runners", "accept", "gpu4", "gpu1"},
	})
}

func TestAccountsSharing(t *testing.T) {
	h := newAccountsHub(t, []apitypes.AccountView{
		{Runner: "gpu1", ID: "acc-1", Agent: "claude", Label: "work", Kind: "login", State: "ready", Owner: "admin"},
		{Runner: "gpu1", ID: "acc-2", Agent: "codex", Kind: "api-key", State: "ready", Owner: "admin"},
	})
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	shared := func(r cliResult) []string {
		var out []string
		for _, row := range rows(r.stdout)[1:] {
			out = append(out, row[len(row)-1])
		}
		return out
	}
	for _, tt := range []struct {
		args []string
		want []string // the SHARED column afterwards
	}{
		{[]string{"accounts", "share", "gpu1", "work", "--user", "bob"}, []string{"user:bob", "-"}},
		{[]string{"accounts", "share", "gpu1", "acc-2", "--project", "web"}, []string{"user:bob", "project:web"}},
		{[]string{"accounts", "share", "gpu1", "work", "--project", "web"}, []string{"user:bob,project:web", "project:web"}},
		{[]string{"accounts", "unshare", "gpu1", "work", "--user", "bob"}, []string{"project:web", "project:web"}},
	} {
		r := runCLI(t, env, "", tt.args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "POSITION") || !slices.Equal(shared(r), tt.want) {
			t.Errorf("%q: code %d, stdout %q, stderr %q; want SHARED %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
		}
	}
	got := locked(h, func() []string { return slices.Clone(h.acctShares) })
	want := []string{"share gpu1/work {User:bob Project: Pending:false}", "share gpu1/acc-2 {User: Project:web Pending:false}",
		"share gpu1/work {User: Project:web Pending:false}", "unshare gpu1/work {User:bob Project: Pending:false}"}
	if !slices.Equal(got, want) {
		t.Errorf("the hub got %q, want %q", got, want)
	}
	r := runCLI(t, env, "", "accounts", "share", "gpu1", "nope", "--user", "bob")
	if r.code != 1 || !strings.Contains(r.stderr, "has no account nope") {
		t.Errorf("share of an unknown account: code %d, stderr %q", r.code, r.stderr)
	}
	wantUsageErrors(t, h, env, [][]string{
		{"accounts", "share", "gpu1", "work"},
		{"accounts", "unshare", "gpu1", "work"},
		{"accounts", "share", "gpu1", "work", "--user", "bob", "--project", "web"},
		{"accounts", "share", "gpu1", "work", "--hub-wide"},
		{"accounts", "share", "gpu1", "--user", "bob"},
		{"accounts", "share", "gpu1", "", "--user", "bob"},
		{"accounts", "share", "gpu 1", "work", "--user", "bob"},
		{"accounts", "share", "gpu1", "work", "--user", "b\x1bb"},
	})
	for _, args := range [][]string{{"accounts", "share", "gpu1", "work"}, {"accounts", "unshare", "gpu1", "work", "--user", "a", "--project", "b"}} {
		if r := runCLI(t, env, "", args...); !strings.HasPrefix(r.stderr, "drover: want exactly one of --user USER or --project PROJECT") {
			t.Errorf("%q: stderr %q", args, r.stderr)
		}
	}
}

func TestProjectsAndMembers(t *testing.T) {
	h := newFakeHub(t)
	h.mu.Lock()
	h.projects = []apitypes.ProjectView{{Name: "web", Hosted: true, Owner: "alice"},
		{Name: "big", Remote: "https://git.example/big.git", Owner: "admin"}}
	h.mu.Unlock()
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	for _, args := range [][]string{{"projects"}, {"projects", "list"}} {
		wantRows(t, strings.Join(args, " "), runCLI(t, env, "", args...), [][]string{
			{"PROJECT", "OWNER", "HOSTED", "REMOTE"},
			{"web", "alice", "true", "-"},
			{"big", "admin", "false", "https://git.example/big.git"}})
	}
	header := []string{"MEMBER", "ROLE"}
	wantRows(t, "members list", runCLI(t, env, "", "projects", "members", "list", "web"),
		[][]string{header, {"alice", "owner"}})
	wantRows(t, "members add", runCLI(t, env, "", "projects", "members", "add", "web", "bob"),
		[][]string{header, {"alice", "owner"}, {"bob", "member"}})
	wantRows(t, "members add", runCLI(t, env, "", "projects", "members", "add", "web", "carol"),
		[][]string{header, {"alice", "owner"}, {"bob", "member"}, {"carol", "member"}})
	wantRows(t, "members remove", runCLI(t, env, "", "projects", "members", "remove", "web", "bob"),
		[][]string{header, {"alice", "owner"}, {"carol", "member"}})
	r := runCLI(t, env, "", "projects", "members", "list", "web", "--json")
	var l apitypes.MemberList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || l.Owner != "alice" || !slices.Equal(l.Members, []string{"alice", "carol"}) {
		t.Errorf("members list --json printed %q: %v", r.stdout, err)
	}
	r = runCLI(t, env, "", "projects", "members", "list", "nope")
	if r.code != 1 || !strings.Contains(r.stderr, "no project nope") {
		t.Errorf("members of an unknown project: code %d, stderr %q", r.code, r.stderr)
	}
	changes := locked(h, func() []string { return slices.Clone(h.memberChanges) })
	if want := []string{"add web bob", "add web carol", "remove web bob"}; !slices.Equal(changes, want) {
		t.Errorf("the hub got %q, want %q", changes, want)
	}
	wantUsageErrors(t, h, env, [][]string{
		{"projects", "members", "bogus"},
		{"projects", "members", "list"},
		{"projects", "members", "add", "web"},
		{"projects", "members", "remove", "web"},
		{"projects", "members", "add", "web", "bob", "carol"},
		{"projects", "members", "add", "w eb", "bob"},
		{"projects", "members", "remove", "web", "b/ob"},
	})
}
