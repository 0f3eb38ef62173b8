package runner

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/auth"
	"drover/internal/protocol"
	"drover/internal/sandbox/sandboxtest"
)

func TestLoginFlow(t *testing.T) {
	var mu sync.Mutex
	var tokens []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/runner/login" {
			http.NotFound(w, r)
			return
		}
		tok, _ := auth.BearerToken(r.Header.Get("Authorization"))
		mu.Lock()
		tokens = append(tokens, tok)
		n := len(tokens)
		mu.Unlock()
		if n < 3 {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(protocol.ErrorBody{Error: protocol.Error{Code: protocol.ErrUnauthorized, Message: "not approved"}})
			return
		}
		json.NewEncoder(w).Encode(protocol.RunnerView{Name: "box-1"})
	}))
	defer srv.Close()

	home := filepath.Join(t.TempDir(), "home")
	var out sandboxtest.Buffer
	err := loginFlow(context.Background(), srv.URL+"/", "box-1", home, &out, 10*time.Millisecond)
	must(t, err)

	l, err := LoadLogin(home)
	must(t, err)
	if l.Hub != srv.URL || l.Name != "box-1" || !strings.HasPrefix(l.Token, auth.PrefixRunner) {
		t.Fatalf("saved login %+v", l)
	}
	for _, tok := range tokens {
		if tok != l.Token {
			t.Fatal("polled with another token than the one saved")
		}
	}
	link := srv.URL + "/approve?name=box-1&key=" + auth.Hash(l.Token)
	printed := out.String()
	if !strings.Contains(printed, link+"\n") || !strings.Contains(printed, "drover runner approve '"+link+"'") {
		t.Fatalf("output lacks the approval link or command:\n%s", printed)
	}
	if strings.Contains(printed, l.Token) {
		t.Fatal("the token was printed")
	}
	fi, err := os.Stat(filepath.Join(home, "login.json"))
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("login.json mode %o", fi.Mode().Perm())
	}
	di, err := os.Stat(home)
	must(t, err)
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("home mode %o", di.Mode().Perm())
	}
}

// The runner takes the name the hub approved, whatever it asked for: the
// two never disagree.
func TestLoginTakesTheApprovedName(t *testing.T) {
	for _, tt := range []struct{ asked, approved string }{{"gpu1", "gpu1"}, {"gpu1", "gpu2"}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(protocol.RunnerView{Name: tt.approved})
		}))
		home := t.TempDir()
		var out sandboxtest.Buffer
		must(t, loginFlow(context.Background(), srv.URL, tt.asked, home, &out, 10*time.Millisecond))
		srv.Close()
		l, err := LoadLogin(home)
		must(t, err)
		if l.Name != tt.approved {
			t.Errorf("asked %s, approved %s: saved %s", tt.asked, tt.approved, l.Name)
		}
		said := strings.Contains(out.String(), "approved this runner as "+tt.approved+", not "+tt.asked)
		if said != (tt.asked != tt.approved) || !strings.Contains(out.String(), "Runner "+tt.approved+" approved") {
			t.Errorf("asked %s, approved %s: output\n%s", tt.asked, tt.approved, out.String())
		}
	}
}

func TestLoginFlowGivesUp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := loginFlow(ctx, srv.URL, "r", home, &sandboxtest.Buffer{}, 10*time.Millisecond); err == nil {
		t.Fatal("login flow succeeded without approval")
	}
	if exists(filepath.Join(home, "login.json")) {
		t.Fatal("saved an unapproved login")
	}

	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		json.NewEncoder(w).Encode(protocol.ErrorBody{Error: protocol.Error{Code: protocol.ErrForbidden, Message: "runner revoked"}})
	}))
	defer forbidden.Close()
	err := loginFlow(context.Background(), forbidden.URL, "r", home, &sandboxtest.Buffer{}, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "runner revoked") {
		t.Fatalf("login flow = %v, want the hub's refusal", err)
	}
}

func TestLoginValidation(t *testing.T) {
	home := t.TempDir()
	for _, name := range []string{"", "-x", "a b", "a/b", strings.Repeat("a", 65), ".."} {
		if err := LoginFlow(context.Background(), "http://h", name, home, &sandboxtest.Buffer{}); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	for _, hub := range []string{"", "h:7700", "ftp://h", "http://"} {
		if err := LoginFlow(context.Background(), hub, "r", home, &sandboxtest.Buffer{}); err == nil {
			t.Errorf("hub %q accepted", hub)
		}
	}
	must(t, SaveLogin(home, Login{Hub: "http://h", Name: "r", Token: auth.NewToken(auth.PrefixRunner)}))
	must(t, os.Chmod(filepath.Join(home, "login.json"), 0o644))
	if _, err := LoadLogin(home); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("LoadLogin of a world-readable login = %v", err)
	}
	if _, err := LoadLogin(t.TempDir()); err == nil || !strings.Contains(err.Error(), "drover runner login") {
		t.Fatalf("LoadLogin without a login = %v", err)
	}
	if _, err := New(Config{Home: t.TempDir()}); err == nil {
		t.Fatal("New without a login succeeded")
	}
}
