// Package signin is signing in to the dashboard with a forge account: the
// OAuth2 authorization code flow (state and PKCE) with a forge connection's
// OAuth application, mapped to a drover user only through a link an admin
// made (drover users link); or with an OpenID Connect provider's identity
// the same way (oidc.go). The browser session it ends in is the
// dashboard's own (Pages.SignIn), the one a pasted token makes.
//
// The forge's access token is used once, to read who signed in, and then
// dropped: it is never stored or logged.
package signin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/hub/call"
	"drover/internal/rules"
	"drover/internal/store"
	"drover/internal/web"
)

// Pages is what the flow needs of the dashboard.
type Pages interface {
	// SignIn makes the browser session for u and sends the browser on.
	SignIn(w http.ResponseWriter, r *http.Request, u web.User, next string, crossSite bool)
	ErrorPage(w http.ResponseWriter, r *http.Request, status int, title, why string)
}

// Config configures the flow.
type Config struct {
	Store store.Store
	// PublicURL is the hub's URL; without one no forge sign-in is offered
	// (the forge needs a fixed redirect URI).
	PublicURL string
	// HTTP is the client of the forges (nil: http.DefaultClient).
	HTTP   *http.Client
	Logger *slog.Logger
	Now    func() time.Time
}

// Flow serves the flow's pages and its configuration.
type Flow struct {
	cfg   Config
	pages Pages
	// used are the states of finished flows, until they expire: a state
	// is good once, even with its cookie replayed.
	mu   sync.Mutex
	used map[string]time.Time
}

// New makes the service.
func New(pages Pages, cfg Config) *Flow {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = http.DefaultClient
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	return &Flow{cfg: cfg, pages: pages, used: map[string]time.Time{}}
}

// stateTTL bounds a flow: from the button to the forge's redirect back.
const stateTTL = 10 * time.Minute

// stateCookie carries a flow's state, PKCE verifier and where to go on; it
// is HttpOnly and SameSite=Lax (the forge's redirect back is a cross-site
// navigation a Strict cookie would miss).
const stateCookie = "drover_signin"

// maxSecret bounds a client secret.
const maxSecret = 4 << 10

// endpoints are a forge kind's OAuth2 and user URLs.
func endpoints(f store.Forge) (oauth2.Endpoint, string, error) {
	root := strings.TrimRight(f.URL, "/")
	switch f.Kind {
	case forge.KindGitea:
		return oauth2.Endpoint{AuthURL: root + "/login/oauth/authorize", TokenURL: root + "/login/oauth/access_token",
			AuthStyle: oauth2.AuthStyleInParams}, root + "/api/v1/user", nil
	case forge.KindGitHub:
		api := root + "/api/v3/user" // GitHub Enterprise
		if u, err := url.Parse(root); err == nil && strings.EqualFold(u.Host, "github.com") {
			api = "https://api.github.com/user"
		}
		return oauth2.Endpoint{AuthURL: root + "/login/oauth/authorize", TokenURL: root + "/login/oauth/access_token",
			AuthStyle: oauth2.AuthStyleInParams}, api, nil
	case forge.KindGitLab:
		return oauth2.Endpoint{AuthURL: root + "/oauth/authorize", TokenURL: root + "/oauth/token",
			AuthStyle: oauth2.AuthStyleInParams}, root + "/api/v4/user", nil
	}
	return oauth2.Endpoint{}, "", fmt.Errorf("forge kind %q has no sign-in", f.Kind)
}

// scopes are the least each kind needs to read the user.
func scopes(kind string) []string {
	switch kind {
	case forge.KindGitLab:
		return []string{"read_user"}
	case forge.KindGitea:
		return []string{"read:user"}
	}
	return nil // GitHub: no scope reads the public profile
}

// Callback is forge name's redirect URI.
func (s *Flow) Callback(name string) string {
	return s.cfg.PublicURL + "/auth/forge/" + url.PathEscape(name) + "/callback"
}

// Routes mounts the flow's two pages.
func (s *Flow) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+forgePath+"{name}", s.start)
	mux.HandleFunc("GET "+forgePath+"{name}/callback", s.callback)
	mux.HandleFunc("GET "+oidcPath+"{name}", s.startOIDC)
	mux.HandleFunc("GET "+oidcPath+"{name}/callback", s.callbackOIDC)
}

// Buttons are the forges (those with an application) and the OpenID
// Connect providers one may sign in with; none without a public URL.
func (s *Flow) Buttons(ctx context.Context, next string) []web.ForgeButton {
	if s.cfg.PublicURL == "" {
		return nil
	}
	var os []store.ForgeOAuth
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		os, err = tx.ForgeOAuths()
		return err
	})
	if err != nil {
		s.cfg.Logger.Warn("list forges to sign in with", "err", err)
		return s.oidcButtons(ctx, next)
	}
	out := make([]web.ForgeButton, 0, len(os))
	for _, o := range os {
		out = append(out, web.ForgeButton{Name: o.Forge,
			URL: "/auth/forge/" + url.PathEscape(o.Forge) + "?next=" + url.QueryEscape(next)})
	}
	return append(out, s.oidcButtons(ctx, next)...)
}

// app is a forge's application as the flow uses it.
type app struct {
	conf    oauth2.Config
	userURL string
}

// app reads forge name's application; a forge without one is not found.
func (s *Flow) app(ctx context.Context, name string) (app, error) {
	var f store.Forge
	var o store.ForgeOAuth
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		if o, err = tx.ForgeOAuth(name); err != nil {
			return err
		}
		f, err = tx.Forge(name)
		return err
	})
	if err != nil {
		return app{}, err
	}
	ep, userURL, err := endpoints(f)
	if err != nil {
		return app{}, err
	}
	return app{conf: oauth2.Config{ClientID: o.ClientID, ClientSecret: o.Secret, Endpoint: ep,
		RedirectURL: s.Callback(name), Scopes: scopes(f.Kind)}, userURL: userURL}, nil
}

// flow is what the state cookie carries. Forge is the forge's or the
// OIDC provider's name (the cookie's path tells which).
type flow struct {
	Forge    string `json:"f"`
	State    string `json:"s"`
	Verifier string `json:"v"`
	Nonce    string `json:"o,omitempty"` // OIDC's
	Next     string `json:"n"`
}

// Each kind's flow is under its own path: its state cookie is sent to
// that kind's callback only.
const (
	forgePath = "/auth/forge/"
	oidcPath  = "/auth/oidc/"
)

// newFlow starts a flow with name in the browser: its state cookie, bound
// to path.
func (s *Flow) newFlow(w http.ResponseWriter, r *http.Request, path, name string) flow {
	f := flow{Forge: name, State: random(), Verifier: oauth2.GenerateVerifier(), Next: web.Next(r.URL.Query().Get("next"))}
	if path == oidcPath {
		f.Nonce = random()
	}
	b, _ := json.Marshal(f)
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Value: base64.RawURLEncoding.EncodeToString(b),
		Path: path, MaxAge: int(stateTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: strings.HasPrefix(s.cfg.PublicURL, "https:")})
	return f
}

// endFlow checks a callback to path against the flow its browser started,
// and ends that flow whatever comes of the callback (a state is good
// once). On a refusal it has answered, and ok is false; else the code is
// the authorization code to exchange. fail answers the callback's
// refusals (who: the forge or the provider).
func (s *Flow) endFlow(w http.ResponseWriter, r *http.Request, path, who string) (f flow, code string, fail func(int, string), ok bool) {
	name := r.PathValue("name")
	fail = func(status int, why string) {
		s.cfg.Logger.Info("sign-in refused", who, name, "why", why)
		s.pages.ErrorPage(w, r, status, "Not signed in", why)
	}
	f, ok = s.flowOf(r)
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Value: "", Path: path, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: strings.HasPrefix(s.cfg.PublicURL, "https:")})
	q := r.URL.Query()
	switch {
	case !ok || f.Forge != name || q.Get("state") == "" || q.Get("state") != f.State || (path == oidcPath) != (f.Nonce != ""):
		fail(http.StatusBadRequest, "This sign-in was not started in this browser, or it expired: start again from the sign-in page.")
		return flow{}, "", fail, false
	case !s.useState(f.State):
		fail(http.StatusBadRequest, "This sign-in was used already: start again from the sign-in page.")
		return flow{}, "", fail, false
	case q.Get("error") != "":
		fail(http.StatusForbidden, "The "+who+" did not sign you in ("+rules.Clip(rules.Escape(q.Get("error"), false), 60)+").")
		return flow{}, "", fail, false
	case q.Get("code") == "":
		fail(http.StatusBadRequest, "The "+who+" sent no authorization code: start again from the sign-in page.")
		return flow{}, "", fail, false
	}
	return f, q.Get("code"), fail, true
}

// exchange trades a flow's code for its tokens; on a refusal it has
// answered.
func (s *Flow) exchange(ctx context.Context, conf oauth2.Config, f flow, code, who string, fail func(int, string)) (*oauth2.Token, bool) {
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		s.cfg.Logger.Info("sign-in: code refused", "by", who, "name", f.Forge, "err", exchangeError(err))
		fail(http.StatusForbidden, "The "+who+" refused the sign-in (its authorization code or this hub's application): start again from the sign-in page.")
		return nil, false
	}
	return tok, true
}

func (s *Flow) start(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.cfg.PublicURL == "" {
		s.pages.ErrorPage(w, r, http.StatusNotFound, "Not found", "This hub has no public URL (drover hub --url), so it offers no forge sign-in.")
		return
	}
	a, err := s.app(r.Context(), name)
	if err != nil {
		s.refuse(w, r, name, "read the forge's sign-in", err)
		return
	}
	f := s.newFlow(w, r, forgePath, name)
	http.Redirect(w, r, a.conf.AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier)), http.StatusSeeOther)
}

// refuse shows why a flow cannot go on; a forge without sign-in reads as
// not found.
func (s *Flow) refuse(w http.ResponseWriter, r *http.Request, name, doing string, err error) {
	if errors.Is(err, store.ErrNotFound) {
		s.pages.ErrorPage(w, r, http.StatusNotFound, "Not found", "No forge "+name+" to sign in with.")
		return
	}
	s.cfg.Logger.Error("forge sign-in", "forge", name, "doing", doing, "err", err)
	s.pages.ErrorPage(w, r, http.StatusInternalServerError, "Not signed in", "Could not "+doing+"; try again later.")
}

func (s *Flow) callback(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f, code, fail, ok := s.endFlow(w, r, forgePath, "forge")
	if !ok {
		return
	}
	a, err := s.app(r.Context(), name)
	if err != nil {
		s.refuse(w, r, name, "read the forge's sign-in", err)
		return
	}
	ctx := context.WithValue(r.Context(), oauth2.HTTPClient, s.cfg.HTTP)
	tok, ok := s.exchange(ctx, a.conf, f, code, "forge", fail)
	if !ok {
		return
	}
	login, err := s.login(ctx, a, tok.AccessToken)
	if err != nil {
		s.cfg.Logger.Warn("forge sign-in: read the forge's user", "forge", name, "err", err)
		fail(http.StatusBadGateway, "Could not read who you are on the forge: try again later.")
		return
	}
	u, why, err := s.linked(r.Context(), name, login)
	switch {
	case err != nil:
		s.refuse(w, r, name, "read the forge account's link", err)
		return
	case why != "":
		fail(http.StatusForbidden, why)
		return
	}
	s.cfg.Logger.Info("forge sign-in", "forge", name, "login", login, "user", u.Name)
	s.pages.SignIn(w, r, u, f.Next, true)
}

// exchangeError is a refused exchange without the server's reply body
// (its error page might echo what was sent).
func exchangeError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return "it answered " + re.ErrorCode
		}
		if re.Response != nil {
			return "it answered " + re.Response.Status
		}
	}
	return "the exchange failed"
}

// flowOf reads the state cookie.
func (s *Flow) flowOf(r *http.Request) (flow, bool) {
	c, err := r.Cookie(stateCookie)
	if err != nil {
		return flow{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	var f flow
	if err != nil || json.Unmarshal(b, &f) != nil || f.State == "" || f.Verifier == "" {
		return flow{}, false
	}
	return f, true
}

// useState marks state used; false when it was.
func (s *Flow) useState(state string) bool {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, at := range s.used {
		if now.Sub(at) > stateTTL {
			delete(s.used, k)
		}
	}
	if _, ok := s.used[state]; ok {
		return false
	}
	s.used[state] = now
	return true
}

// login reads the signed-in forge user's login with token (then dropped).
func (s *Flow) login(ctx context.Context, a app, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.userURL, nil)
	if err != nil {
		return "", fmt.Errorf("read the forge's user: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("read the forge's user: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("read the forge's user: %s", resp.Status)
	}
	var u struct {
		Login    string `json:"login"`    // GitHub, Gitea
		Username string `json:"username"` // GitLab (Gitea has it too)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&u); err != nil {
		return "", fmt.Errorf("read the forge's user: %w", err)
	}
	if u.Login == "" {
		u.Login = u.Username
	}
	if u.Login == "" {
		return "", errors.New("read the forge's user: it has no login")
	}
	return u.Login, nil
}

// linked is the drover user forge login is linked to, or why it may not
// sign in.
func (s *Flow) linked(ctx context.Context, name, login string) (web.User, string, error) {
	return s.linkedUser(ctx, func(tx store.Tx) (string, error) {
		l, err := tx.ForgeLink(name, login)
		return l.UserID, err
	}, fmt.Sprintf("The forge account %s on %s is not linked to a drover user; an admin links it with drover users link USER --forge %s --login %s.",
		login, name, name, login), fmt.Sprintf("The drover user linked to %s on %s was removed.", login, name))
}

// linkedUser is the user a link find reads names, or why there is none to
// sign in as: unlinked when there is no link, removed when its user is
// gone.
func (s *Flow) linkedUser(ctx context.Context, find func(tx store.Tx) (string, error), unlinked, removed string) (web.User, string, error) {
	var u store.User
	why := ""
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		id, err := find(tx)
		if errors.Is(err, store.ErrNotFound) {
			why = unlinked
			return nil
		} else if err != nil {
			return err
		}
		u, err = tx.User(id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && u.RemovedAt != nil) {
			why = removed
			return nil
		}
		return err
	})
	return web.User{ID: u.ID, Name: u.Name, Admin: u.Admin}, why, err
}

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// SetOAuth sets forge name's application (admins only): users of the forge
// may then sign in to the dashboard. The secret is never shown again.
func (s *Flow) SetOAuth(ctx context.Context, c call.Caller, name string, req apitypes.ForgeOAuthRequest) (apitypes.ForgeOAuthView, error) {
	if !c.Admin {
		return apitypes.ForgeOAuthView{}, call.Forbidden("only an admin sets a forge's sign-in")
	}
	if req.Off {
		err := s.cfg.Store.Write(ctx, func(tx store.Tx) error { return tx.RemoveForgeOAuth(name) })
		if errors.Is(err, store.ErrNotFound) {
			return apitypes.ForgeOAuthView{}, call.NotFound("forge %s has no sign-in", rules.Clip(rules.Escape(name, false), 80))
		} else if err != nil {
			return apitypes.ForgeOAuthView{}, fmt.Errorf("turn off the sign-in of forge %s: %w", name, err)
		}
		s.cfg.Logger.Info("forge sign-in off", "forge", name, "by", c.Name)
		return apitypes.ForgeOAuthView{Forge: name}, nil
	}
	if err := checkClient(req.ClientID, req.ClientSecret); err != nil {
		return apitypes.ForgeOAuthView{}, err
	}
	now := s.cfg.Now()
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		f, err := tx.Forge(name)
		if err != nil {
			return err
		}
		if _, _, err := endpoints(f); err != nil {
			return call.BadRequest("%v", err)
		}
		return tx.PutForgeOAuth(store.ForgeOAuth{Forge: name, ClientID: req.ClientID, Secret: req.ClientSecret,
			UpdatedBy: c.UserID, UpdatedAt: now})
	})
	if errors.Is(err, store.ErrNotFound) {
		return apitypes.ForgeOAuthView{}, call.NotFound("no forge %s", rules.Clip(rules.Escape(name, false), 80))
	} else if err != nil {
		return apitypes.ForgeOAuthView{}, fmt.Errorf("set the sign-in of forge %s: %w", name, err)
	}
	s.cfg.Logger.Info("forge sign-in set", "forge", name, "by", c.Name)
	return apitypes.ForgeOAuthView{Forge: name, ClientID: req.ClientID, On: true, Callback: s.Callback(name),
		NoPublicURL: s.cfg.PublicURL == ""}, nil
}

// checkClient checks an application's client id and secret.
func checkClient(id, secret string) error {
	switch {
	case id == "" || len(id) > 256 || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return call.BadRequest("a client id is 1-256 printable characters without spaces")
	case secret == "" || len(secret) > maxSecret:
		return call.BadRequest("a client secret is 1-%d bytes", maxSecret)
	}
	return nil
}
