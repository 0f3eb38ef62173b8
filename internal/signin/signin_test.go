package signin_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/hub/call"
	"drover/internal/signin"
	"drover/internal/store"
	"drover/internal/store/sqlite"
	"drover/internal/web"
)

// fakeForge is an OAuth2 server of a Gitea kind in test code: it hands out
// one code per authorization (for login), checks the PKCE verifier against
// the challenge, and answers the user endpoint for the token it issued.
type fakeForge struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	login    string // who signs in
	deny     bool   // the user refuses: error=access_denied
	codes    map[string]string
	verifier string // the last verifier sent
}

func newFakeForge(t *testing.T) *fakeForge {
	f := &fakeForge{t: t, login: "alice", codes: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/oauth/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		to, _ := url.Parse(q.Get("redirect_uri"))
		v := url.Values{"state": {q.Get("state")}}
		f.mu.Lock()
		if f.deny {
			v.Set("error", "access_denied")
		} else if q.Get("code_challenge_method") == "S256" && q.Get("client_id") == "cid" {
			code := "code-" + q.Get("state")
			f.codes[code] = q.Get("code_challenge")
			v.Set("code", code)
		}
		f.mu.Unlock()
		to.RawQuery = v.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /login/oauth/access_token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f.mu.Lock()
		defer f.mu.Unlock()
		code, verifier := r.PostForm.Get("code"), r.PostForm.Get("code_verifier")
		f.verifier = verifier
		challenge, ok := f.codes[code]
		delete(f.codes, code) // a code is good once
		sum := sha256.Sum256([]byte(verifier))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != challenge || r.PostForm.Get("client_secret") != "s3cret" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "tok-" + f.login, "token_type": "bearer"})
	})
	mux.HandleFunc("GET /api/v1/user", func(w http.ResponseWriter, r *http.Request) {
		login, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer tok-")
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"login": login})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// fakePages stands for the dashboard: SignIn records who signed in.
type fakePages struct {
	mu     sync.Mutex
	signed []string
}

func (p *fakePages) SignIn(w http.ResponseWriter, r *http.Request, u web.User, next string, crossSite bool) {
	p.mu.Lock()
	p.signed = append(p.signed, u.Name)
	p.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("signed in as " + u.Name + " to " + next))
}

func (p *fakePages) ErrorPage(w http.ResponseWriter, r *http.Request, status int, title, why string) {
	w.WriteHeader(status)
	_, _ = w.Write([]byte(title + ": " + why))
}

type env struct {
	st    store.Store
	f     *fakeForge
	pages *fakePages
	flow  *signin.Flow
	hub   *httptest.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{st: st, f: newFakeForge(t), pages: &fakePages{}}
	mux := http.NewServeMux()
	e.hub = httptest.NewServer(mux)
	t.Cleanup(e.hub.Close)
	e.flow = signin.New(e.pages, signin.Config{Store: st, PublicURL: e.hub.URL})
	e.flow.Routes(mux)
	now := time.Now()
	err = st.Write(t.Context(), func(tx store.Tx) error {
		for _, u := range []string{"admin", "bob", "gone"} {
			if err := tx.InsertUser(store.User{ID: "u-" + u, Name: u, Admin: u == "admin", CreatedAt: now}); err != nil {
				return err
			}
		}
		if err := tx.PutForge(store.Forge{Name: "gt", Kind: forge.KindGitea, URL: e.f.srv.URL, Secret: "t", CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		for login, user := range map[string]string{"alice": "u-bob", "ghost": "u-gone"} {
			if err := tx.PutForgeLink(store.ForgeLink{Forge: "gt", Login: login, UserID: user, CreatedAt: now}); err != nil {
				return err
			}
		}
		return tx.UpdateUser(store.User{ID: "u-gone", Name: "gone", RemovedAt: &now})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.flow.SetOAuth(t.Context(), admin, "gt", apitypes.ForgeOAuthRequest{ClientID: "cid", ClientSecret: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// browser is a client with a cookie jar that follows redirects.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar}
}

func get(t *testing.T, c *http.Client, u string) (int, string, *url.URL) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String(), resp.Request.URL
}

func TestSignInFlow(t *testing.T) {
	e := newEnv(t)
	b := browser(t)
	code, body, _ := get(t, b, e.hub.URL+"/auth/forge/gt?next=/runners")
	if code != http.StatusOK || body != "signed in as bob to /runners" {
		t.Fatalf("sign-in: %d %q", code, body)
	}
	if e.f.verifier == "" {
		t.Fatal("no PKCE verifier sent with the code")
	}
	if btn := e.flow.Buttons(t.Context(), "/jobs"); len(btn) != 1 || btn[0].Name != "gt" || btn[0].URL != "/auth/forge/gt?next=%2Fjobs" {
		t.Fatalf("buttons: %+v", btn)
	}
	// No public URL: no button.
	if btn := signin.New(e.pages, signin.Config{Store: e.st}).Buttons(t.Context(), "/jobs"); len(btn) != 0 {
		t.Fatalf("buttons without a public URL: %+v", btn)
	}
}

func TestSignInRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e *env) (int, string)
		want string
	}{
		{"unlinked", func(t *testing.T, e *env) (int, string) {
			e.f.login = "mallory"
			c, b, _ := get(t, browser(t), e.hub.URL+"/auth/forge/gt")
			return c, b
		}, "not linked to a drover user; an admin links it with drover users link USER --forge gt --login mallory"},
		{"removed user", func(t *testing.T, e *env) (int, string) {
			e.f.login = "ghost"
			c, b, _ := get(t, browser(t), e.hub.URL+"/auth/forge/gt")
			return c, b
		}, "was removed"},
		{"forge error", func(t *testing.T, e *env) (int, string) {
			e.f.deny = true
			c, b, _ := get(t, browser(t), e.hub.URL+"/auth/forge/gt")
			return c, b
		}, "The forge did not sign you in (access_denied)"},
		{"no state cookie", func(t *testing.T, e *env) (int, string) {
			c, b, _ := get(t, browser(t), e.hub.URL+"/auth/forge/gt/callback?state=x&code=y")
			return c, b
		}, "not started in this browser"},
		{"state mismatch", func(t *testing.T, e *env) (int, string) {
			return mismatch(t, e)
		}, "not started in this browser"},
		{"replay", func(t *testing.T, e *env) (int, string) {
			return replay(t, e)
		}, "used already"},
		{"code refused", func(t *testing.T, e *env) (int, string) {
			return badCode(t, e)
		}, "The forge refused the sign-in"},
		{"unknown forge", func(t *testing.T, e *env) (int, string) {
			c, b, _ := get(t, browser(t), e.hub.URL+"/auth/forge/nope")
			return c, b
		}, "No forge nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			code, body := tc.run(t, e)
			if code < 400 || !strings.Contains(body, tc.want) {
				t.Fatalf("got %d %q, want a refusal with %q", code, body, tc.want)
			}
			if len(e.pages.signed) != 0 {
				t.Fatalf("a session was made: %v", e.pages.signed)
			}
		})
	}
}

// startOnly starts a forge's flow in b without following the forge's
// redirect, and returns the authorization URL's state.
func startOnly(t *testing.T, e *env, b *http.Client) string {
	t.Helper()
	return startAt(t, e, b, "/auth/forge/gt")
}

func mismatch(t *testing.T, e *env) (int, string) {
	b := browser(t)
	startOnly(t, e, b)
	other := startOnly(t, e, browser(t)) // another browser's flow
	c, body, _ := get(t, b, e.hub.URL+"/auth/forge/gt/callback?state="+other+"&code=code-"+other)
	return c, body
}

// replay sends a finished flow's callback again with its cookie.
func replay(t *testing.T, e *env) (int, string) { return replayAt(t, e, "/auth/forge/gt") }

// replayAt signs in from path, then sends the finished flow's callback
// again with its cookie.
func replayAt(t *testing.T, e *env, path string) (int, string) {
	b := browser(t)
	nb := *b
	var cb *http.Request
	nb.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
		if strings.Contains(r.URL.Path, "/callback") {
			cb = r
		}
		return nil
	}
	if c, body, _ := get(t, &nb, e.hub.URL+path); c != http.StatusOK {
		t.Fatalf("first sign-in: %d %q", c, body)
	}
	e.pages.signed = nil
	req, _ := http.NewRequest(http.MethodGet, cb.URL.String(), nil)
	for _, ck := range cb.Cookies() {
		req.AddCookie(ck)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	sb.Write(buf[:n])
	return resp.StatusCode, sb.String()
}

func badCode(t *testing.T, e *env) (int, string) {
	b := browser(t)
	state := startOnly(t, e, b)
	c, body, _ := get(t, b, e.hub.URL+"/auth/forge/gt/callback?state="+state+"&code=forged")
	return c, body
}

func TestSetOAuth(t *testing.T) {
	e := newEnv(t)
	bob := call.Caller{Kind: store.TokenUser, UserID: "u-bob", Name: "bob"}
	admin := call.Caller{Kind: store.TokenUser, UserID: "u-admin", Name: "admin", Admin: true}
	for _, tc := range []struct {
		name  string
		c     call.Caller
		forge string
		req   apitypes.ForgeOAuthRequest
	}{
		{"not admin", bob, "gt", apitypes.ForgeOAuthRequest{ClientID: "x", ClientSecret: "y"}},
		{"no forge", admin, "nope", apitypes.ForgeOAuthRequest{ClientID: "x", ClientSecret: "y"}},
		{"no secret", admin, "gt", apitypes.ForgeOAuthRequest{ClientID: "x"}},
		{"bad id", admin, "gt", apitypes.ForgeOAuthRequest{ClientID: "a b", ClientSecret: "y"}},
	} {
		if _, err := e.flow.SetOAuth(t.Context(), tc.c, tc.forge, tc.req); err == nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if o, err := get1(t, e); err != nil || o.ClientID != "cid" {
		t.Fatalf("a refused change changed the sign-in: %+v %v", o, err)
	}
	v, err := e.flow.SetOAuth(t.Context(), admin, "gt", apitypes.ForgeOAuthRequest{Off: true})
	if err != nil || v.On {
		t.Fatalf("off: %+v %v", v, err)
	}
	if btn := e.flow.Buttons(t.Context(), "/jobs"); len(btn) != 0 {
		t.Fatalf("buttons after off: %+v", btn)
	}
}

func get1(t *testing.T, e *env) (o store.ForgeOAuth, err error) {
	err = e.st.Read(t.Context(), func(tx store.Tx) error {
		o, err = tx.ForgeOAuth("gt")
		return err
	})
	return o, err
}
