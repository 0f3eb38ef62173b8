package runner

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/rules"
	"drover/internal/sandbox/sandboxtest"
)

// testTiming polls fast; requests and outages still get generous bounds.
func testTiming() loginTiming {
	return loginTiming{every: 10 * time.Millisecond, request: 30 * time.Second, maxOutage: 200 * time.Millisecond, maxDelay: 20 * time.Millisecond}
}

func replyJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func notApproved(w http.ResponseWriter) {
	replyJSON(w, http.StatusUnauthorized, apitypes.ErrorBody{Error: rules.Error{Code: rules.ErrUnauthorized, Message: "token not recognised"}})
}

func login(ctx context.Context, hub, name, home string, out io.Writer) error {
	return loginFlow(ctx, LoginOptions{Hub: hub, Name: name, Home: home, Out: out}, testTiming())
}

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
			notApproved(w)
			return
		}
		replyJSON(w, http.StatusOK, apitypes.RunnerView{Name: "box-1"})
	}))
	defer srv.Close()

	home := filepath.Join(t.TempDir(), "home")
	var out sandboxtest.Buffer
	must(t, login(context.Background(), srv.URL+"/", "box-1", home, &out))

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
			replyJSON(w, http.StatusOK, apitypes.RunnerView{Name: tt.approved})
		}))
		home := t.TempDir()
		var out sandboxtest.Buffer
		must(t, login(context.Background(), srv.URL, tt.asked, home, &out))
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

// A hub that is not there, or not a drover hub, fails the login at once,
// naming the address tried, before any approval link is printed.
func TestLoginFailsFastOnAWrongHub(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	closed := "http://" + l.Addr().String()
	l.Close()
	serve := func(h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	html := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			io.WriteString(w, "<html><body>nope</body></html>")
		}
	}
	tests := []struct {
		name string
		hub  string
		want string // besides the address
	}{
		{"closed port", closed, "connection refused"},
		{"no such host", "http://drover-test.invalid:7700", "drover-test.invalid"},
		{"404 html", serve(html(http.StatusNotFound)), "404"},
		{"200 html", serve(html(http.StatusOK)), "not a drover hub"},
		{"401 without drover's body", serve(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("WWW-Authenticate", `Basic realm="proxy"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		}), "401"},
		{"404 json of another API", serve(func(w http.ResponseWriter, r *http.Request) {
			replyJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		}), "404"},
		{"redirect", serve(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.example"+r.URL.Path, http.StatusMovedPermanently)
		}), "https://elsewhere.example"},
		{"server error", serve(html(http.StatusBadGateway)), "502"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			home := t.TempDir()
			var out sandboxtest.Buffer
			err := login(ctx, tt.hub, "r", home, &out)
			if err == nil || ctx.Err() != nil {
				t.Fatalf("login = %v (context %v), want a prompt failure", err, ctx.Err())
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tt.hub+"/api/v1/runner/login") {
				t.Errorf("error %q does not name the address tried", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
			if strings.Contains(out.String(), "approve") || exists(filepath.Join(home, "login.json")) {
				t.Errorf("printed a link or saved a login:\n%s", out.String())
			}
		})
	}
}

// After a first real contact, the hub failing is retried for a bounded
// time; a non-drover answer or a refusal ends the wait at once.
func TestLoginWaitAfterFirstContact(t *testing.T) {
	script := func(answers ...http.HandlerFunc) string {
		var mu sync.Mutex
		n := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			i := min(n, len(answers)-1)
			n++
			mu.Unlock()
			answers[i](w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	wait := func(w http.ResponseWriter, r *http.Request) { notApproved(w) }
	down := func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad gateway", http.StatusBadGateway) }
	ok := func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, http.StatusOK, apitypes.RunnerView{Name: "r"})
	}
	gone := func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }
	refused := func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, http.StatusForbidden, apitypes.ErrorBody{Error: rules.Error{Code: rules.ErrForbidden, Message: "runner revoked"}})
	}
	tests := []struct {
		name    string
		hub     string
		wantErr string // "" for success
	}{
		{"hub restarts, then approves", script(wait, down, down, wait, ok), ""},
		{"hub stays down", script(wait, wait, down), "lost the hub"},
		{"a non-hub answers", script(wait, gone), "not a drover hub"},
		{"the hub refuses", script(wait, refused), "runner revoked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			home := t.TempDir()
			err := login(ctx, tt.hub, "r", home, &sandboxtest.Buffer{})
			if tt.wantErr == "" {
				must(t, err)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || ctx.Err() != nil {
				t.Fatalf("login = %v, want %q", err, tt.wantErr)
			}
			if exists(filepath.Join(home, "login.json")) {
				t.Fatal("saved an unapproved login")
			}
		})
	}
}

func TestLoginFlowGivesUp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { notApproved(w) }))
	defer srv.Close()
	home := t.TempDir()
	var out sandboxtest.Buffer
	err := loginFlow(context.Background(), LoginOptions{Hub: srv.URL, Name: "r", Home: home, Out: &out, Timeout: 50 * time.Millisecond}, testTiming())
	if err == nil || !strings.Contains(err.Error(), "not approved within 50ms") || !strings.Contains(out.String(), "up to 50ms") {
		t.Fatalf("login with a timeout = %v\n%s", err, out.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	if err := login(ctx, srv.URL, "r", home, &sandboxtest.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("login cancelled = %v", err)
	}
	if exists(filepath.Join(home, "login.json")) {
		t.Fatal("saved an unapproved login")
	}
}

func TestLoginValidation(t *testing.T) {
	home := t.TempDir()
	for _, name := range []string{"", "-x", "a b", "a/b", strings.Repeat("a", 65), ".."} {
		if err := LoginFlow(context.Background(), LoginOptions{Hub: "http://h", Name: name, Home: home, Out: &sandboxtest.Buffer{}}); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	for _, hub := range []string{"", "h:7700", "ftp://h", "http://"} {
		if err := LoginFlow(context.Background(), LoginOptions{Hub: hub, Name: "r", Home: home, Out: &sandboxtest.Buffer{}}); err == nil {
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
