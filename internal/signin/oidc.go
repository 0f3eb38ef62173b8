package signin

// Sign-in with a generic OpenID Connect provider: discovery from its
// issuer, the authorization code flow with PKCE, state and nonce, and an
// ID token verified against the provider's keys (signature, issuer,
// audience, expiry) whose nonce is the flow's. The identity is the
// provider's issuer and the token's subject, never an email: it signs in
// only as the drover user an admin linked that subject to.

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/rules"
	"drover/internal/store"
	"drover/internal/web"
)

// discoveryTimeout bounds reading a provider's discovery document when an
// admin adds it.
const discoveryTimeout = 20 * time.Second

// maxSubject bounds a subject (OpenID Connect Core: at most 255 ASCII
// characters).
const maxSubject = 255

// OIDCCallback is provider name's redirect URI.
func (s *Flow) OIDCCallback(name string) string {
	return s.cfg.PublicURL + oidcPath + url.PathEscape(name) + "/callback"
}

// oidcClient is a provider as the flow uses it, read fresh per request:
// discovery is two small reads, and a sign-in is rare.
type oidcClient struct {
	conf     oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// errDiscovery is a provider whose discovery failed.
var errDiscovery = errors.New("read the provider's discovery document")

// oidcClient reads provider name and discovers it; a provider not held is
// not found.
func (s *Flow) oidcClient(ctx context.Context, name string) (oidcClient, error) {
	var p store.OIDCProvider
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		p, err = tx.OIDCProvider(name)
		return err
	})
	if err != nil {
		return oidcClient{}, err
	}
	prov, err := oidc.NewProvider(oidc.ClientContext(ctx, s.cfg.HTTP), p.Issuer)
	if err != nil {
		return oidcClient{}, fmt.Errorf("%w at %s: %s", errDiscovery, p.Issuer, rules.Clip(rules.Escape(err.Error(), false), 200))
	}
	return oidcClient{
		conf: oauth2.Config{ClientID: p.ClientID, ClientSecret: p.Secret, Endpoint: prov.Endpoint(),
			RedirectURL: s.OIDCCallback(name), Scopes: []string{oidc.ScopeOpenID}},
		verifier: prov.Verifier(&oidc.Config{ClientID: p.ClientID, Now: s.cfg.Now}),
	}, nil
}

// refuseOIDC shows why a provider's flow cannot go on.
func (s *Flow) refuseOIDC(w http.ResponseWriter, r *http.Request, name string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.pages.ErrorPage(w, r, http.StatusNotFound, "Not found", "No provider "+name+" to sign in with.")
	case errors.Is(err, errDiscovery):
		s.cfg.Logger.Warn("OIDC sign-in", "provider", name, "err", err)
		s.pages.ErrorPage(w, r, http.StatusBadGateway, "Not signed in", "Could not reach the provider: try again later.")
	default:
		s.cfg.Logger.Error("OIDC sign-in", "provider", name, "err", err)
		s.pages.ErrorPage(w, r, http.StatusInternalServerError, "Not signed in", "Could not read the provider's sign-in; try again later.")
	}
}

func (s *Flow) startOIDC(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.cfg.PublicURL == "" {
		s.pages.ErrorPage(w, r, http.StatusNotFound, "Not found", "This hub has no public URL (drover hub --url), so it offers no sign-in with a provider.")
		return
	}
	c, err := s.oidcClient(r.Context(), name)
	if err != nil {
		s.refuseOIDC(w, r, name, err)
		return
	}
	f := s.newFlow(w, r, oidcPath, name)
	http.Redirect(w, r, c.conf.AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), oidc.Nonce(f.Nonce)), http.StatusSeeOther)
}

func (s *Flow) callbackOIDC(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f, code, fail, ok := s.endFlow(w, r, oidcPath, "provider")
	if !ok {
		return
	}
	c, err := s.oidcClient(r.Context(), name)
	if err != nil {
		s.refuseOIDC(w, r, name, err)
		return
	}
	ctx := oidc.ClientContext(r.Context(), s.cfg.HTTP)
	tok, ok := s.exchange(ctx, c.conf, f, code, "provider", fail)
	if !ok {
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		fail(http.StatusBadGateway, "The provider sent no ID token: start again from the sign-in page.")
		return
	}
	// The access token goes unused (and unkept): who signed in is the ID
	// token's, verified.
	id, err := c.verifier.Verify(ctx, raw)
	if err != nil {
		s.cfg.Logger.Info("OIDC sign-in: ID token refused", "provider", name, "err", err)
		fail(http.StatusForbidden, "The provider's ID token did not verify: start again from the sign-in page.")
		return
	}
	if subtle.ConstantTimeCompare([]byte(id.Nonce), []byte(f.Nonce)) != 1 {
		fail(http.StatusForbidden, "The provider's ID token is not this sign-in's: start again from the sign-in page.")
		return
	}
	sub := rules.Clip(rules.Escape(id.Subject, false), maxSubject)
	u, why, err := s.linkedUser(r.Context(), func(tx store.Tx) (string, error) {
		l, err := tx.OIDCLink(name, id.Subject)
		return l.UserID, err
	}, fmt.Sprintf("The identity %s of %s is not linked to a drover user; an admin links it with drover users link USER --oidc %s --subject %s.",
		sub, name, name, sub), fmt.Sprintf("The drover user linked to %s of %s was removed.", sub, name))
	switch {
	case err != nil:
		s.refuseOIDC(w, r, name, fmt.Errorf("read the identity's link: %w", err))
		return
	case why != "":
		fail(http.StatusForbidden, why)
		return
	}
	s.cfg.Logger.Info("OIDC sign-in", "provider", name, "subject", sub, "user", u.Name)
	s.pages.SignIn(w, r, u, f.Next, true)
}

// checkIssuer checks an issuer's URL: https, or http to a loopback host
// (a provider on the hub's own machine).
func checkIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	bad := err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || len(issuer) > 2048
	if !bad && u.Scheme == "http" {
		ip := net.ParseIP(u.Hostname())
		bad = u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback())
	} else if !bad {
		bad = u.Scheme != "https"
	}
	if bad {
		return call.BadRequest("an issuer is an https URL (http only to a loopback host), without a query")
	}
	return nil
}

func (s *Flow) providerView(p store.OIDCProvider) apitypes.OIDCProviderView {
	return apitypes.OIDCProviderView{Name: p.Name, Issuer: p.Issuer, ClientID: p.ClientID, Callback: s.OIDCCallback(p.Name),
		NoPublicURL: s.cfg.PublicURL == "", UpdatedAt: p.UpdatedAt}
}

// PutOIDCProvider adds or replaces provider name (admins only), once its
// discovery document reads: users linked to its subjects may then sign in
// to the dashboard. The secret is never shown again.
func (s *Flow) PutOIDCProvider(ctx context.Context, c call.Caller, name string, req apitypes.OIDCProviderRequest) (apitypes.OIDCProviderView, error) {
	if !c.Admin {
		return apitypes.OIDCProviderView{}, call.Forbidden("only an admin sets a sign-in provider")
	}
	if !rules.ValidName(name) {
		return apitypes.OIDCProviderView{}, call.BadRequest("provider %q: a name is 1-64 letters, digits, '-', '_' or '.'", rules.Clip(rules.Escape(name, false), 40))
	}
	if err := checkIssuer(req.Issuer); err != nil {
		return apitypes.OIDCProviderView{}, err
	}
	if err := checkClient(req.ClientID, req.ClientSecret); err != nil {
		return apitypes.OIDCProviderView{}, err
	}
	dctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	if _, err := oidc.NewProvider(oidc.ClientContext(dctx, s.cfg.HTTP), req.Issuer); err != nil {
		return apitypes.OIDCProviderView{}, call.BadRequest("read the discovery document of %s: %s", rules.Clip(rules.Escape(req.Issuer, false), 200),
			rules.Clip(rules.Escape(err.Error(), false), 200))
	}
	p := store.OIDCProvider{Name: name, Issuer: req.Issuer, ClientID: req.ClientID, Secret: req.ClientSecret, UpdatedBy: c.UserID, UpdatedAt: s.cfg.Now()}
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		old, err := tx.OIDCProvider(name)
		if err == nil && old.Issuer != p.Issuer {
			return call.Conflict("provider %s has the issuer %s; remove it first (which removes its links)", name, rules.Clip(rules.Escape(old.Issuer, false), 200))
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return tx.PutOIDCProvider(p)
	})
	if err != nil {
		return apitypes.OIDCProviderView{}, fmt.Errorf("set sign-in provider %s: %w", name, err)
	}
	s.cfg.Logger.Info("OIDC provider set", "provider", name, "issuer", p.Issuer, "by", c.Name)
	return s.providerView(p), nil
}

// OIDCProviders lists the providers (any user: no secret).
func (s *Flow) OIDCProviders(ctx context.Context, c call.Caller) (apitypes.OIDCProviderList, error) {
	out := apitypes.OIDCProviderList{Providers: []apitypes.OIDCProviderView{}}
	ps, err := s.providers(ctx)
	for _, p := range ps {
		out.Providers = append(out.Providers, s.providerView(p))
	}
	return out, err
}

func (s *Flow) providers(ctx context.Context) ([]store.OIDCProvider, error) {
	var ps []store.OIDCProvider
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		ps, err = tx.OIDCProviders()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list sign-in providers: %w", err)
	}
	return ps, nil
}

// RemoveOIDCProvider removes provider name and its links (admins only).
func (s *Flow) RemoveOIDCProvider(ctx context.Context, c call.Caller, name string) (apitypes.OIDCProviderView, error) {
	if !c.Admin {
		return apitypes.OIDCProviderView{}, call.Forbidden("only an admin removes a sign-in provider")
	}
	var p store.OIDCProvider
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		var err error
		if p, err = tx.OIDCProvider(name); err != nil {
			return err
		}
		return tx.RemoveOIDCProvider(name)
	})
	if errors.Is(err, store.ErrNotFound) {
		return apitypes.OIDCProviderView{}, call.NotFound("no sign-in provider %s", rules.Clip(rules.Escape(name, false), 80))
	} else if err != nil {
		return apitypes.OIDCProviderView{}, fmt.Errorf("remove sign-in provider %s: %w", name, err)
	}
	s.cfg.Logger.Info("OIDC provider removed", "provider", name, "by", c.Name)
	return s.providerView(p), nil
}

// checkSubject checks a subject: 1-255 printable ASCII characters.
func checkSubject(sub string) error {
	if sub == "" || len(sub) > maxSubject || strings.ContainsFunc(sub, func(r rune) bool { return r < ' ' || r >= 0x7f }) {
		return call.BadRequest("a subject is 1-%d printable ASCII characters (the ID token's sub)", maxSubject)
	}
	return nil
}

// userNamed is the user name, not removed.
func userNamed(tx store.Tx, name string) (store.User, error) {
	u, err := tx.UserByName(name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.RemovedAt != nil) {
		return store.User{}, call.NotFound("no user named %q", rules.Clip(rules.Escape(name, false), 40))
	}
	return u, err
}

// LinkOIDC links a provider's subject to user name (admins only: the link
// lets whoever holds that identity sign in as the user).
func (s *Flow) LinkOIDC(ctx context.Context, c call.Caller, name string, req apitypes.OIDCLinkRequest) (apitypes.OIDCLinkView, error) {
	if !c.Admin {
		return apitypes.OIDCLinkView{}, call.Forbidden("only an admin links identities to users")
	}
	if err := checkSubject(req.Subject); err != nil {
		return apitypes.OIDCLinkView{}, err
	}
	l := store.OIDCLink{Provider: req.Provider, Subject: req.Subject, CreatedBy: c.UserID, CreatedAt: s.cfg.Now()}
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		u, err := userNamed(tx, name)
		if err != nil {
			return err
		}
		if _, err := tx.OIDCProvider(req.Provider); errors.Is(err, store.ErrNotFound) {
			return call.NotFound("no sign-in provider %q", rules.Clip(rules.Escape(req.Provider, false), 40))
		} else if err != nil {
			return err
		}
		l.UserID = u.ID
		if old, err := tx.OIDCLink(req.Provider, req.Subject); err == nil {
			if old.UserID == u.ID {
				l = old
				return nil
			}
			return call.Conflict("that identity of %s is linked to another user; unlink it first", req.Provider)
		}
		return tx.PutOIDCLink(l)
	})
	if err != nil {
		return apitypes.OIDCLinkView{}, fmt.Errorf("link an identity of %s to %s: %w", rules.Clip(rules.Escape(req.Provider, false), 40), name, err)
	}
	s.cfg.Logger.Info("OIDC identity linked", "provider", req.Provider, "subject", req.Subject, "user", name, "by", c.Name)
	return apitypes.OIDCLinkView{User: name, Provider: l.Provider, Subject: l.Subject, CreatedAt: l.CreatedAt}, nil
}

// UnlinkOIDC removes the link of provider's subject to user name (admins
// only).
func (s *Flow) UnlinkOIDC(ctx context.Context, c call.Caller, name, provider, subject string) (apitypes.OIDCLinkView, error) {
	if !c.Admin {
		return apitypes.OIDCLinkView{}, call.Forbidden("only an admin unlinks identities")
	}
	var l store.OIDCLink
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		u, err := userNamed(tx, name)
		if err != nil {
			return err
		}
		l, err = tx.OIDCLink(provider, subject)
		if errors.Is(err, store.ErrNotFound) || (err == nil && l.UserID != u.ID) {
			return call.NotFound("that identity of %s is not linked to %s", rules.Clip(rules.Escape(provider, false), 40), name)
		} else if err != nil {
			return err
		}
		return tx.RemoveOIDCLink(provider, subject)
	})
	if err != nil {
		return apitypes.OIDCLinkView{}, fmt.Errorf("unlink an identity from %s: %w", name, err)
	}
	s.cfg.Logger.Info("OIDC identity unlinked", "provider", provider, "subject", subject, "user", name, "by", c.Name)
	return apitypes.OIDCLinkView{User: name, Provider: l.Provider, Subject: l.Subject, CreatedAt: l.CreatedAt}, nil
}

// OIDCLinks lists user name's links: to an admin or the user themself.
func (s *Flow) OIDCLinks(ctx context.Context, c call.Caller, name string) (apitypes.OIDCLinkList, error) {
	out := apitypes.OIDCLinkList{Links: []apitypes.OIDCLinkView{}}
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		u, err := userNamed(tx, name)
		if err != nil {
			return err
		}
		if !c.Admin && c.UserID != u.ID {
			return call.NotFound("no user named %q", rules.Clip(rules.Escape(name, false), 40))
		}
		ls, err := tx.OIDCLinksOf(u.ID)
		for _, l := range ls {
			out.Links = append(out.Links, apitypes.OIDCLinkView{User: name, Provider: l.Provider, Subject: l.Subject, CreatedAt: l.CreatedAt})
		}
		return err
	})
	return out, err
}

// oidcButtons are the providers' sign-in buttons.
func (s *Flow) oidcButtons(ctx context.Context, next string) []web.ForgeButton {
	ps, err := s.providers(ctx)
	if err != nil {
		s.cfg.Logger.Warn("list providers to sign in with", "err", err)
		return nil
	}
	out := make([]web.ForgeButton, 0, len(ps))
	for _, p := range ps {
		out = append(out, web.ForgeButton{Name: p.Name, URL: oidcPath + url.PathEscape(p.Name) + "?next=" + url.QueryEscape(next)})
	}
	return out
}
