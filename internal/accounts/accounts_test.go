package accounts

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

const secret = "sk-test-SECRET-1234567890"

func open(t *testing.T, home string) *Store {
	t.Helper()
	s, err := Open(home)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustAdd(t *testing.T, s *Store, a Account, key string) Account {
	t.Helper()
	got, err := s.Add(a, key)
	if err != nil {
		t.Fatalf("Add(%+v): %v", a, err)
	}
	return got
}

// snapshot is everything under home/accounts but the lock, for "nothing
// changed" checks.
func snapshot(t *testing.T, home string) map[string]string {
	t.Helper()
	m := map[string]string{}
	root := filepath.Join(home, "accounts")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == lockName {
			return nil
		}
		if d.IsDir() {
			m[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		m[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOpenLayout(t *testing.T) {
	home := t.TempDir()
	s := open(t, home)
	a := mustAdd(t, s, Account{Agent: "codex", Kind: KindAPIKey, Label: "work"}, secret)
	for p, want := range map[string]os.FileMode{
		"accounts":                  0o700,
		"accounts/" + a.ID:          0o700,
		"accounts/" + a.ID + "/key": 0o600,
		"accounts/accounts.json":    0o600,
		"accounts/.lock":            0o600,
	} {
		st, err := os.Stat(filepath.Join(home, p))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
	st, err := os.Stat(s.Dir(a.ID))
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("config dir %s: %v, %v", s.Dir(a.ID), st, err)
	}
	if s.Dir(a.ID) != filepath.Join(home, "accounts", a.ID, "config") {
		t.Errorf("Dir = %s", s.Dir(a.ID))
	}
	if !regexp.MustCompile(`^acct_[0-9a-f]{16}$`).MatchString(a.ID) {
		t.Errorf("id %q", a.ID)
	}
	if a.Created.IsZero() {
		t.Error("no Created")
	}
}

func TestIDsStableAcrossReopen(t *testing.T) {
	home := t.TempDir()
	s := open(t, home)
	var added []Account
	for i, agent := range []string{"claude", "codex", "claude", "gemini", "opencode"} {
		a := Account{Agent: agent, Kind: KindLogin, Label: fmt.Sprintf("l%d", i)}
		added = append(added, mustAdd(t, s, a, ""))
	}
	s2 := open(t, home)
	got, err := s2.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(added) {
		t.Fatalf("List after reopen: %d accounts, want %d", len(got), len(added))
	}
	seen := map[string]bool{}
	for i := range got {
		if got[i].ID != added[i].ID || !got[i].Created.Equal(added[i].Created) || got[i].Label != added[i].Label {
			t.Errorf("account %d: %+v, want %+v", i, got[i], added[i])
		}
		if seen[got[i].ID] {
			t.Errorf("id %s twice", got[i].ID)
		}
		seen[got[i].ID] = true
		if g, err := s2.Get(added[i].ID); err != nil || g.ID != added[i].ID {
			t.Errorf("Get(%s) = %+v, %v", added[i].ID, g, err)
		}
	}
}

func TestKeyStoredApart(t *testing.T) {
	home := t.TempDir()
	s := open(t, home)
	a := mustAdd(t, s, Account{Agent: "claude", Kind: KindAPIKey, BaseURL: "https://gw.example/anthropic/"}, secret)
	if a.BaseURL != "https://gw.example/anthropic" {
		t.Errorf("BaseURL = %q, want it without the trailing slash", a.BaseURL)
	}
	k, err := s.Key(a.ID)
	if err != nil || k != secret {
		t.Fatalf("Key = %q, %v", k, err)
	}
	idx, err := os.ReadFile(filepath.Join(home, "accounts", "accounts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(idx), secret) {
		t.Fatal("the key is in accounts.json")
	}
	j, _ := json.Marshal(a)
	if strings.Contains(string(j), secret) || strings.Contains(a.String(), secret) || strings.Contains(fmt.Sprintf("%+v %v", a, a), secret) {
		t.Fatal("the key shows in an Account")
	}
	l := mustAdd(t, s, Account{Agent: "claude", Kind: KindLogin}, "")
	if _, err := s.Key(l.ID); err == nil {
		t.Error("a login account has a key")
	}
	for _, id := range []string{"", "../x", "acct_../../etc", "acct_ABCDEF0123456789"} {
		if _, err := s.Key(id); err == nil {
			t.Errorf("Key(%q) succeeded", id)
		}
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	home := t.TempDir()
	s := open(t, home)
	mustAdd(t, s, Account{Agent: "claude", Kind: KindLogin, Label: "main"}, "")
	before := snapshot(t, home)
	for _, tt := range []struct {
		name string
		a    Account
		key  string
	}{
		{"unknown agent", Account{Agent: "cursor", Kind: KindLogin}, ""},
		{"no agent", Account{Kind: KindLogin}, ""},
		{"no kind", Account{Agent: "claude"}, ""},
		{"unknown kind", Account{Agent: "claude", Kind: "oauth"}, ""},
		{"login with key", Account{Agent: "claude", Kind: KindLogin}, secret},
		{"login with base URL", Account{Agent: "claude", Kind: KindLogin, BaseURL: "https://x.example"}, ""},
		{"api-key without key", Account{Agent: "codex", Kind: KindAPIKey}, ""},
		{"key with space", Account{Agent: "codex", Kind: KindAPIKey}, secret + " x"},
		{"key with newline", Account{Agent: "codex", Kind: KindAPIKey}, secret + "\n"},
		{"key too long", Account{Agent: "codex", Kind: KindAPIKey}, strings.Repeat("k", MaxKeyLen+1)},
		{"label too long", Account{Agent: "claude", Kind: KindLogin, Label: strings.Repeat("a", 65)}, ""},
		{"label with space", Account{Agent: "claude", Kind: KindLogin, Label: "my account"}, ""},
		{"label with slash", Account{Agent: "claude", Kind: KindLogin, Label: "a/b"}, ""},
		{"label like an id", Account{Agent: "claude", Kind: KindLogin, Label: "acct_x"}, ""},
		{"duplicate label", Account{Agent: "claude", Kind: KindLogin, Label: "main"}, ""},
		{"ftp URL", Account{Agent: "codex", Kind: KindAPIKey, BaseURL: "ftp://x.example"}, secret},
		{"no scheme", Account{Agent: "codex", Kind: KindAPIKey, BaseURL: "api.openai.com/v1"}, secret},
		{"plain http remote", Account{Agent: "codex", Kind: KindAPIKey, BaseURL: "http://gw.example/v1"}, secret},
		{"credentials in URL", Account{Agent: "codex", Kind: KindAPIKey, BaseURL: "https://u:" + secret + "@gw.example"}, secret},
		{"query", Account{Agent: "codex", Kind: KindAPIKey, BaseURL: "https://gw.example/?key=" + secret}, secret},
		{"no host", Account{Agent: "codex", Kind: KindAPIKey, BaseURL: "https:///v1"}, secret},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Add(tt.a, tt.key)
			if err == nil {
				t.Fatal("Add succeeded")
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error shows the key: %v", err)
			}
			if after := snapshot(t, home); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("Add changed the store:\n%v\n%v", before, after)
			}
		})
	}
	for _, ref := range []string{"", "nope", "acct_0000000000000000"} {
		if _, err := s.Remove(ref); err == nil {
			t.Errorf("Remove(%q) succeeded", ref)
		}
	}
	if err := s.SetLimited("acct_0000000000000000", time.Unix(1e9, 0), "x"); err == nil {
		t.Error("SetLimited of an unknown account succeeded")
	}
	if after := snapshot(t, home); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("bad Remove/SetLimited changed the store")
	}
}

func TestLoopbackHTTPAllowed(t *testing.T) {
	s := open(t, t.TempDir())
	for _, u := range []string{"http://127.0.0.1:8080/v1", "http://localhost:9000", "http://[::1]:1/x"} {
		if _, err := s.Add(Account{Agent: "opencode", Kind: KindAPIKey, BaseURL: u}, secret); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestSameLabelOtherAgent(t *testing.T) {
	s := open(t, t.TempDir())
	mustAdd(t, s, Account{Agent: "claude", Kind: KindLogin, Label: "work"}, "")
	mustAdd(t, s, Account{Agent: "codex", Kind: KindLogin, Label: "work"}, "")
}

func TestRemove(t *testing.T) {
	home := t.TempDir()
	s := open(t, home)
	c1 := mustAdd(t, s, Account{Agent: "claude", Kind: KindAPIKey, Label: "shared"}, secret)
	x1 := mustAdd(t, s, Account{Agent: "codex", Kind: KindLogin, Label: "shared"}, "")
	g1 := mustAdd(t, s, Account{Agent: "gemini", Kind: KindLogin, Label: "solo"}, "")

	_, err := s.Remove("shared")
	if err == nil || !strings.Contains(err.Error(), c1.ID) || !strings.Contains(err.Error(), x1.ID) {
		t.Fatalf("ambiguous label: %v", err)
	}
	if as, _ := s.List(); len(as) != 3 {
		t.Fatalf("an ambiguous remove removed something: %v", as)
	}

	for _, tt := range []struct {
		ref  string
		want Account
	}{
		{"solo", g1},
		{c1.ID, c1},
		{"shared", x1}, // no longer ambiguous
	} {
		got, err := s.Remove(tt.ref)
		if err != nil || got.ID != tt.want.ID {
			t.Fatalf("Remove(%q) = %+v, %v; want %s", tt.ref, got, err, tt.want.ID)
		}
		if _, err := os.Stat(filepath.Join(home, "accounts", got.ID)); !os.IsNotExist(err) {
			t.Errorf("Remove(%q) left its directory: %v", tt.ref, err)
		}
		if _, err := s.Get(got.ID); err == nil {
			t.Errorf("Get after Remove(%q) succeeded", tt.ref)
		}
	}
	if _, err := s.Key(c1.ID); err == nil {
		t.Error("the removed account's key is still there")
	}
	if as, err := s.List(); err != nil || len(as) != 0 {
		t.Fatalf("List = %v, %v", as, err)
	}
}

func TestPick(t *testing.T) {
	s := open(t, t.TempDir())
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

	_, err := s.Pick("claude", now, nil)
	var nae *NoAccountError
	if !errors.Is(err, ErrNoAccount) || !errors.As(err, &nae) || nae.Limited != 0 || !strings.Contains(err.Error(), "claude") {
		t.Fatalf("Pick with no accounts: %v", err)
	}
	if _, err := s.Pick("cursor", now, nil); err == nil || errors.Is(err, ErrNoAccount) {
		t.Fatalf("Pick of an unknown agent: %v", err)
	}

	a := mustAdd(t, s, Account{Agent: "claude", Kind: KindLogin, Label: "a"}, "")
	mustAdd(t, s, Account{Agent: "codex", Kind: KindLogin}, "")
	b := mustAdd(t, s, Account{Agent: "claude", Kind: KindLogin, Label: "b"}, "")

	steps := []struct {
		name    string
		set     func()
		at      time.Time
		want    string // account id; "" = ErrNoAccount
		reset   time.Time
		message string
	}{
		{name: "first by Created", at: now, want: a.ID},
		{name: "skips limited", set: func() {
			if err := s.SetLimited(a.ID, now.Add(time.Hour), "5-hour limit\nreached"); err != nil {
				t.Fatal(err)
			}
		}, at: now, want: b.ID},
		{name: "all limited names the earliest reset", set: func() {
			if err := s.SetLimited(b.ID, now.Add(30*time.Minute), "weekly"); err != nil {
				t.Fatal(err)
			}
		}, at: now, reset: now.Add(30 * time.Minute), message: "weekly"},
		{name: "limit expires", at: now.Add(30 * time.Minute), want: b.ID},
		{name: "both expired", at: now.Add(time.Hour), want: a.ID},
		{name: "cleared", set: func() {
			if err := s.SetLimited(a.ID, time.Time{}, "ignored"); err != nil {
				t.Fatal(err)
			}
			if err := s.SetLimited(b.ID, now.Add(time.Hour), "x"); err != nil {
				t.Fatal(err)
			}
		}, at: now, want: a.ID},
	}
	for _, st := range steps {
		if st.set != nil {
			st.set()
		}
		got, err := s.Pick("claude", st.at, nil)
		if st.want == "" {
			var e *NoAccountError
			if !errors.As(err, &e) || !errors.Is(err, ErrNoAccount) || e.Limited != 2 || !e.Until.Equal(st.reset) || e.Message != st.message {
				t.Fatalf("%s: Pick = %+v, %v", st.name, got, err)
			}
			if !strings.Contains(err.Error(), st.reset.Format(time.RFC3339)) || !strings.Contains(err.Error(), "claude") {
				t.Fatalf("%s: error %q names neither the agent nor the reset", st.name, err)
			}
			continue
		}
		if err != nil || got.ID != st.want {
			t.Fatalf("%s: Pick = %+v, %v; want %s", st.name, got, err, st.want)
		}
	}

	// Limits persist and their message is one line.
	got, err := open(t, filepath.Dir(s.dir)).Get(b.ID)
	if err != nil || !got.Limited(now) || got.Limited(now.Add(time.Hour)) || got.LimitMessage != "x" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	if err := s.SetLimited(b.ID, now.Add(time.Hour), "line one\n\tline two"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(b.ID); got.LimitMessage != "line one line two" {
		t.Errorf("message %q", got.LimitMessage)
	}
	if got, _ := s.Get(a.ID); got.LimitMessage != "" || !got.LimitedUntil.IsZero() {
		t.Errorf("cleared limit kept %+v", got)
	}
}

func TestConcurrentAdd(t *testing.T) {
	home := t.TempDir()
	// Two stores on one home stand in for two processes: the flock, not
	// the mutex, has to keep them apart.
	stores := []*Store{open(t, home), open(t, home)}
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			agent := Agents()[i%len(Agents())]
			acct := Account{Agent: agent, Kind: KindAPIKey, Label: fmt.Sprintf("k%d", i)}
			if agent == "native" {
				acct.Provider = "anthropic"
			}
			_, err := stores[i%2].Add(acct, fmt.Sprintf("key-%d", i))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	as, err := stores[0].List()
	if err != nil || len(as) != n {
		t.Fatalf("List: %d accounts, %v; want %d", len(as), err, n)
	}
	ids := map[string]bool{}
	for i, a := range as {
		ids[a.ID] = true
		if i > 0 && !as[i-1].Created.Before(a.Created) {
			t.Errorf("accounts %d and %d are not in Created order", i-1, i)
		}
		k, err := stores[1].Key(a.ID)
		if err != nil || k != "key-"+strings.TrimPrefix(a.Label, "k") {
			t.Errorf("%s: key %q, %v", a.Label, k, err)
		}
	}
	if len(ids) != n {
		t.Fatalf("%d distinct ids for %d accounts", len(ids), n)
	}
}

func TestCorruptIndex(t *testing.T) {
	home := t.TempDir()
	open(t, home)
	if err := os.WriteFile(filepath.Join(home, "accounts", "accounts.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(home); err == nil {
		t.Fatal("Open of a corrupt index succeeded")
	}
	if _, err := Open(""); err == nil {
		t.Fatal("Open of no home succeeded")
	}
}

// TestConcurrentAddProcesses has several processes (this test binary,
// re-run as a helper) add accounts to one home at once, as `drover runner
// account add` does while a runner writes limits.
func TestConcurrentAddProcesses(t *testing.T) {
	if home := os.Getenv("DROVER_ACCOUNTS_HELPER_HOME"); home != "" {
		s, err := Open(home)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			a, err := s.Add(Account{Agent: "claude", Kind: KindLogin, Label: fmt.Sprintf("%s-%d", os.Getenv("DROVER_ACCOUNTS_HELPER_ID"), i)}, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetLimited(a.ID, time.Unix(2e9, 0), "limited by "+a.Label); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	home := t.TempDir()
	const procs = 4
	var cmds []*exec.Cmd
	for p := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentAddProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "DROVER_ACCOUNTS_HELPER_HOME="+home, fmt.Sprintf("DROVER_ACCOUNTS_HELPER_ID=p%d", p))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	as, err := open(t, home).List()
	if err != nil || len(as) != procs*10 {
		t.Fatalf("List: %d accounts, %v; want %d", len(as), err, procs*10)
	}
	for _, a := range as {
		if a.LimitMessage != "limited by "+a.Label {
			t.Errorf("%s: a lost update: %+v", a.Label, a)
		}
	}
}

// An account its provider refused sits out until its owner resets it
// (optionally with a new key); Pick passes over it and over what the
// caller finds unusable, and says so when nothing is left.
func TestAttentionAndReset(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := mustAdd(t, s, Account{Agent: "codex", Kind: KindAPIKey, Label: "a"}, "sk-old-key")
	b := mustAdd(t, s, Account{Agent: "codex", Kind: KindLogin, Label: "b"}, "")
	now := time.Now()
	if err := s.SetAttention(a.ID, "auth_failed", "HTTP 401\nUnauthorized"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(a.ID); !got.NeedsAttention() || got.Attention != "HTTP 401 Unauthorized" {
		t.Fatalf("after SetAttention: %+v", got)
	}
	for _, tc := range []struct {
		name   string
		usable func(Account) bool
		want   string // id, or "" for none
	}{
		{"the other one", nil, b.ID},
		{"none usable", func(Account) bool { return false }, ""},
	} {
		got, err := s.Pick("codex", now, tc.usable)
		if got.ID != tc.want {
			t.Errorf("%s: Pick = %s, %v; want %q", tc.name, got.ID, err, tc.want)
		}
		var ne *NoAccountError
		if tc.want == "" && (!errors.As(err, &ne) || ne.Unusable != 2 || !strings.Contains(err.Error(), "need a login or attention")) {
			t.Errorf("%s: error %v, want one counting 2 unusable accounts", tc.name, err)
		}
	}
	if _, err := s.Reset("b", "sk-new"); err == nil {
		t.Error("a login account took a key")
	}
	if _, err := s.Reset("a", "bad key"); err == nil || strings.Contains(err.Error(), "bad key") {
		t.Errorf("a bad key: %v", err)
	}
	got, err := s.Reset("a", "sk-new-key")
	if err != nil || got.NeedsAttention() {
		t.Fatalf("Reset = %+v, %v", got, err)
	}
	if k, err := s.Key(a.ID); err != nil || k != "sk-new-key" {
		t.Errorf("key = %q, %v; want the new one", k, err)
	}
	if f, err := s.Find("a"); err != nil || f.ID != a.ID || f.NeedsAttention() {
		t.Errorf("Find = %+v, %v", f, err)
	}
}

// TestNativeAccounts: a native account names its provider, has a key or
// none, and an openai-compatible one its base URL and model; other agents'
// accounts take neither provider nor model.
func TestNativeAccounts(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	good := []struct {
		a   Account
		key string
	}{
		{Account{Agent: "native", Kind: KindAPIKey, Provider: "anthropic"}, "sk-ant"},
		{Account{Agent: "native", Kind: KindNoKey, Provider: "openai-compatible", BaseURL: "http://127.0.0.1:11434/v1", Model: "qwen"}, ""},
	}
	for _, g := range good {
		got, err := s.Add(g.a, g.key)
		if err != nil {
			t.Fatalf("%+v: %v", g.a, err)
		}
		if got.Provider != g.a.Provider || got.Model != g.a.Model {
			t.Fatalf("stored %+v", got)
		}
	}
	bad := []struct {
		a   Account
		key string
	}{
		{Account{Agent: "native", Kind: KindAPIKey}, "k"},
		{Account{Agent: "native", Kind: KindLogin, Provider: "openai"}, ""},
		{Account{Agent: "native", Kind: KindNoKey, Provider: "openai-compatible", Model: "m"}, ""},
		{Account{Agent: "native", Kind: KindNoKey, Provider: "openai-compatible", BaseURL: "http://127.0.0.1:1/v1"}, ""},
		{Account{Agent: "native", Kind: KindNoKey, Provider: "openai-compatible", BaseURL: "http://10.0.0.1/v1", Model: "m"}, ""},
		{Account{Agent: "claude", Kind: KindAPIKey, Provider: "anthropic"}, "k"},
		{Account{Agent: "claude", Kind: KindNoKey}, ""},
	}
	for _, b := range bad {
		if _, err := s.Add(b.a, b.key); err == nil {
			t.Errorf("%+v: accepted", b.a)
		}
	}
}
