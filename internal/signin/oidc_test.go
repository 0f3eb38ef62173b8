package signin_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// fakeOIDCProvider is an OpenID Connect provider in test code: discovery,
// a JWKS of one RSA key, an authorization endpoint that hands out one code
// per authorization (remembering its PKCE challenge and nonce) and a token
// endpoint that answers a code with an RS256 ID token. Its fields bend the
// ID token for the refusal tests.
type fakeOIDCProvider struct {
	t   *testing.T
	srv *httptest.Server
	key *rsa.PrivateKey

	mu      sync.Mutex
	sub     string
	signer  *rsa.PrivateKey // nil: key; another key makes a bad signature
	aud     string          // "": the client id
	iss     string          // "": the issuer
	exp     time.Duration   // from now; 0: an hour
	nonce   string          // "": the authorization's
	noToken bool            // answer without an ID token
	codes   map[string]authz
}

type authz struct{ challenge, nonce string }

const fakeClientID, fakeSecret = "drover-hub", "oidc-s3cret"

func newFakeOIDCProvider(t *testing.T) *fakeOIDCProvider {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakeOIDCProvider{t: t, key: key, sub: "sub-alice", codes: map[string]authz{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"issuer": p.srv.URL, "authorization_endpoint": p.srv.URL + "/authorize",
			"token_endpoint": p.srv.URL + "/token", "jwks_uri": p.srv.URL + "/keys", "response_types_supported": []string{"code"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		to, _ := url.Parse(q.Get("redirect_uri"))
		v := url.Values{"state": {q.Get("state")}}
		if q.Get("code_challenge_method") == "S256" && q.Get("client_id") == fakeClientID && strings.Contains(q.Get("scope"), "openid") {
			code := "code-" + q.Get("state")
			p.mu.Lock()
			p.codes[code] = authz{q.Get("code_challenge"), q.Get("nonce")}
			p.mu.Unlock()
			v.Set("code", code)
		} else {
			v.Set("error", "invalid_request")
		}
		to.RawQuery = v.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		a, ok := p.codes[r.PostForm.Get("code")]
		delete(p.codes, r.PostForm.Get("code")) // a code is good once
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || b64(sum[:]) != a.challenge || id != fakeClientID || secret != fakeSecret {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		out := map[string]any{"access_token": "at", "token_type": "bearer"}
		if !p.noToken {
			out["id_token"] = p.idToken(a.nonce)
		}
		writeJSON(w, http.StatusOK, out)
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// idToken mints the ID token of an authorization with nonce (p.mu held).
func (p *fakeOIDCProvider) idToken(nonce string) string {
	or := func(v, def string) string {
		if v != "" {
			return v
		}
		return def
	}
	exp := p.exp
	if exp == 0 {
		exp = time.Hour
	}
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": or(p.iss, p.srv.URL), "sub": p.sub, "aud": or(p.aud, fakeClientID),
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(exp).Unix(), "nonce": or(p.nonce, nonce)})
	head, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"})
	signed := b64(head) + "." + b64(claims)
	key := p.key
	if p.signer != nil {
		key = p.signer
	}
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		p.t.Error(err)
	}
	return signed + "." + b64(sig)
}

func (p *fakeOIDCProvider) set(f func(p *fakeOIDCProvider)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

var admin = call.Caller{Kind: store.TokenUser, UserID: "u-admin", Name: "admin", Admin: true}

// newOIDCEnv is newEnv with the fake provider "corp", its subject
// sub-alice linked to bob and sub-ghost to the removed user gone.
func newOIDCEnv(t *testing.T) (*env, *fakeOIDCProvider) {
	t.Helper()
	e := newEnv(t)
	p := newFakeOIDCProvider(t)
	if _, err := e.flow.PutOIDCProvider(t.Context(), admin, "corp",
		apitypes.OIDCProviderRequest{Issuer: p.srv.URL, ClientID: fakeClientID, ClientSecret: fakeSecret}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	err := e.st.Write(t.Context(), func(tx store.Tx) error {
		return errors.Join(tx.PutOIDCLink(store.OIDCLink{Provider: "corp", Subject: "sub-alice", UserID: "u-bob", CreatedAt: now}),
			tx.PutOIDCLink(store.OIDCLink{Provider: "corp", Subject: "sub-ghost", UserID: "u-gone", CreatedAt: now}))
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, p
}

func TestOIDCSignIn(t *testing.T) {
	e, _ := newOIDCEnv(t)
	code, body, _ := get(t, browser(t), e.hub.URL+"/auth/oidc/corp?next=/runners")
	if code != http.StatusOK || body != "signed in as bob to /runners" {
		t.Fatalf("sign-in: %d %q", code, body)
	}
	btn := e.flow.Buttons(t.Context(), "/jobs")
	if len(btn) != 2 || btn[1].Name != "corp" || btn[1].URL != "/auth/oidc/corp?next=%2Fjobs" {
		t.Fatalf("buttons: %+v", btn)
	}
}

func TestOIDCRefusals(t *testing.T) {
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signIn := func(t *testing.T, e *env) (int, string) {
		c, b, _ := get(t, browser(t), e.hub.URL+"/auth/oidc/corp")
		return c, b
	}
	for _, tc := range []struct {
		name string
		bend func(p *fakeOIDCProvider)
		run  func(t *testing.T, e *env) (int, string)
		want string
	}{
		{"bad signature", func(p *fakeOIDCProvider) { p.signer = other }, signIn, "ID token did not verify"},
		{"wrong audience", func(p *fakeOIDCProvider) { p.aud = "another-client" }, signIn, "ID token did not verify"},
		{"wrong issuer", func(p *fakeOIDCProvider) { p.iss = "https://evil.example" }, signIn, "ID token did not verify"},
		{"expired", func(p *fakeOIDCProvider) { p.exp = -time.Minute }, signIn, "ID token did not verify"},
		{"nonce mismatch", func(p *fakeOIDCProvider) { p.nonce = "not-the-flows" }, signIn, "not this sign-in's"},
		{"no ID token", func(p *fakeOIDCProvider) { p.noToken = true }, signIn, "sent no ID token"},
		{"unlinked subject", func(p *fakeOIDCProvider) { p.sub = "sub-mallory" }, signIn,
			"The identity sub-mallory of corp is not linked to a drover user; an admin links it with drover users link USER --oidc corp --subject sub-mallory."},
		{"removed user", func(p *fakeOIDCProvider) { p.sub = "sub-ghost" }, signIn, "was removed"},
		{"replayed state", nil, func(t *testing.T, e *env) (int, string) { return replayAt(t, e, "/auth/oidc/corp") }, "used already"},
		{"no state cookie", nil, func(t *testing.T, e *env) (int, string) {
			c, b, _ := get(t, browser(t), e.hub.URL+"/auth/oidc/corp/callback?state=x&code=y")
			return c, b
		}, "not started in this browser"},
		{"code refused", nil, func(t *testing.T, e *env) (int, string) {
			b := browser(t)
			state := startAt(t, e, b, "/auth/oidc/corp")
			c, body, _ := get(t, b, e.hub.URL+"/auth/oidc/corp/callback?state="+state+"&code=forged")
			return c, body
		}, "The provider refused the sign-in"},
		{"unknown provider", nil, func(t *testing.T, e *env) (int, string) {
			c, b, _ := get(t, browser(t), e.hub.URL+"/auth/oidc/nope")
			return c, b
		}, "No provider nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, p := newOIDCEnv(t)
			if tc.bend != nil {
				p.set(tc.bend)
			}
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

// startAt starts a flow at path in b without following the redirect, and
// returns the authorization URL's state.
func startAt(t *testing.T, e *env, b *http.Client, path string) string {
	t.Helper()
	nb := *b
	nb.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := nb.Get(e.hub.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("state") == "" || loc.Query().Get("code_challenge_method") != "S256" {
		t.Fatalf("start: %d %v", resp.StatusCode, loc)
	}
	return loc.Query().Get("state")
}

func TestOIDCProviders(t *testing.T) {
	e, p := newOIDCEnv(t)
	bob := call.Caller{Kind: store.TokenUser, UserID: "u-bob", Name: "bob"}
	good := apitypes.OIDCProviderRequest{Issuer: p.srv.URL, ClientID: fakeClientID, ClientSecret: "new"}
	for _, tc := range []struct {
		name string
		c    call.Caller
		prov string
		req  apitypes.OIDCProviderRequest
		want string
	}{
		{"not admin", bob, "corp", good, "only an admin"},
		{"bad name", admin, "a b", good, "a name is"},
		{"http to another host", admin, "corp", apitypes.OIDCProviderRequest{Issuer: "http://id.example", ClientID: "x", ClientSecret: "y"}, "https URL"},
		{"not a URL", admin, "corp", apitypes.OIDCProviderRequest{Issuer: "id.example", ClientID: "x", ClientSecret: "y"}, "https URL"},
		{"no secret", admin, "corp", apitypes.OIDCProviderRequest{Issuer: p.srv.URL, ClientID: "x"}, "client secret"},
		{"discovery names another issuer", admin, "corp", apitypes.OIDCProviderRequest{Issuer: p.srv.URL + "/", ClientID: "x", ClientSecret: "y"}, "discovery document"},
		{"no discovery", admin, "new", apitypes.OIDCProviderRequest{Issuer: p.srv.URL + "/nothing", ClientID: "x", ClientSecret: "y"}, "discovery document"},
	} {
		if _, err := e.flow.PutOIDCProvider(t.Context(), tc.c, tc.prov, tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	l, err := e.flow.OIDCProviders(t.Context(), bob)
	if err != nil || len(l.Providers) != 1 || l.Providers[0].Issuer != p.srv.URL || l.Providers[0].Callback != e.hub.URL+"/auth/oidc/corp/callback" {
		t.Fatalf("a refused change changed the providers: %+v %v", l, err)
	}
	if b, _ := json.Marshal(l); strings.Contains(string(b), fakeSecret) {
		t.Fatalf("the list shows the secret: %s", b)
	}
	// Another provider at the same name is refused: its subjects are not
	// the linked ones.
	p2 := newFakeOIDCProvider(t)
	if _, err := e.flow.PutOIDCProvider(t.Context(), admin, "corp", apitypes.OIDCProviderRequest{Issuer: p2.srv.URL, ClientID: "x", ClientSecret: "y"}); err == nil || !strings.Contains(err.Error(), "remove it first") {
		t.Fatalf("another issuer: %v", err)
	}

	// Links: admins only; a subject links to one user.
	link := apitypes.OIDCLinkRequest{Provider: "corp", Subject: "sub-carol"}
	if _, err := e.flow.LinkOIDC(t.Context(), bob, "bob", link); err == nil {
		t.Fatal("a user linked an identity")
	}
	for _, req := range []apitypes.OIDCLinkRequest{{Provider: "nope", Subject: "s"}, {Provider: "corp", Subject: "bad\nsub"}, {Provider: "corp"}} {
		if _, err := e.flow.LinkOIDC(t.Context(), admin, "bob", req); err == nil {
			t.Errorf("link %+v: no error", req)
		}
	}
	if _, err := e.flow.LinkOIDC(t.Context(), admin, "admin", apitypes.OIDCLinkRequest{Provider: "corp", Subject: "sub-alice"}); err == nil || !strings.Contains(err.Error(), "another user") {
		t.Fatalf("relink to another user: %v", err)
	}
	if v, err := e.flow.LinkOIDC(t.Context(), admin, "bob", link); err != nil || v.Subject != "sub-carol" {
		t.Fatalf("link: %+v %v", v, err)
	}
	if _, err := e.flow.OIDCLinks(t.Context(), bob, "admin"); err == nil {
		t.Fatal("bob read admin's links")
	}
	if ls, err := e.flow.OIDCLinks(t.Context(), bob, "bob"); err != nil || len(ls.Links) != 2 {
		t.Fatalf("bob's links: %+v %v", ls, err)
	}
	if _, err := e.flow.UnlinkOIDC(t.Context(), admin, "admin", "corp", "sub-carol"); err == nil {
		t.Fatal("unlinked another user's identity")
	}
	if _, err := e.flow.UnlinkOIDC(t.Context(), admin, "bob", "corp", "sub-carol"); err != nil {
		t.Fatal(err)
	}

	// Removing the provider removes its links and its button.
	if _, err := e.flow.RemoveOIDCProvider(t.Context(), bob, "corp"); err == nil {
		t.Fatal("a user removed a provider")
	}
	if _, err := e.flow.RemoveOIDCProvider(t.Context(), admin, "corp"); err != nil {
		t.Fatal(err)
	}
	if ls, err := e.flow.OIDCLinks(t.Context(), admin, "bob"); err != nil || len(ls.Links) != 0 {
		t.Fatalf("links after removal: %+v %v", ls, err)
	}
	if btn := e.flow.Buttons(t.Context(), "/jobs"); len(btn) != 1 {
		t.Fatalf("buttons after removal: %+v", btn)
	}
}
