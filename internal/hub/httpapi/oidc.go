package httpapi

import (
	"context"
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// OIDC is signing in to the dashboard with an OpenID Connect provider
// (internal/signin): its providers and the links of their identities.
type OIDC interface {
	PutOIDCProvider(ctx context.Context, p call.Caller, name string, req apitypes.OIDCProviderRequest) (apitypes.OIDCProviderView, error)
	OIDCProviders(ctx context.Context, p call.Caller) (apitypes.OIDCProviderList, error)
	RemoveOIDCProvider(ctx context.Context, p call.Caller, name string) (apitypes.OIDCProviderView, error)
	LinkOIDC(ctx context.Context, p call.Caller, user string, req apitypes.OIDCLinkRequest) (apitypes.OIDCLinkView, error)
	UnlinkOIDC(ctx context.Context, p call.Caller, user, provider, subject string) (apitypes.OIDCLinkView, error)
	OIDCLinks(ctx context.Context, p call.Caller, user string) (apitypes.OIDCLinkList, error)
}

// The OIDC API's HTTP transport: /oidc and /users/{name}/oidc-links (a
// subject may hold a '/': it goes in the query).
func (a *API) registerOIDC(mux *http.ServeMux) {
	u, p := store.TokenUser, apitypes.APIPrefix
	mux.Handle("GET "+p+"/oidc", a.As(u, func(w http.ResponseWriter, r *http.Request, c call.Caller) error {
		out, err := a.core.OIDCProviders(r.Context(), c)
		return reply(w, http.StatusOK, out, err)
	}))
	mux.Handle("PUT "+p+"/oidc/{name}", a.As(u, func(w http.ResponseWriter, r *http.Request, c call.Caller) error {
		var req apitypes.OIDCProviderRequest
		if err := decodeBody(r, w, &req); err != nil {
			return err
		}
		out, err := a.core.PutOIDCProvider(r.Context(), c, r.PathValue("name"), req)
		return reply(w, http.StatusOK, out, err)
	}))
	mux.Handle("DELETE "+p+"/oidc/{name}", a.As(u, func(w http.ResponseWriter, r *http.Request, c call.Caller) error {
		out, err := a.core.RemoveOIDCProvider(r.Context(), c, r.PathValue("name"))
		return reply(w, http.StatusOK, out, err)
	}))
	mux.Handle("GET "+p+"/users/{name}/oidc-links", a.As(u, func(w http.ResponseWriter, r *http.Request, c call.Caller) error {
		out, err := a.core.OIDCLinks(r.Context(), c, r.PathValue("name"))
		return reply(w, http.StatusOK, out, err)
	}))
	mux.Handle("POST "+p+"/users/{name}/oidc-links", a.As(u, func(w http.ResponseWriter, r *http.Request, c call.Caller) error {
		var req apitypes.OIDCLinkRequest
		if err := decodeBody(r, w, &req); err != nil {
			return err
		}
		out, err := a.core.LinkOIDC(r.Context(), c, r.PathValue("name"), req)
		return reply(w, http.StatusOK, out, err)
	}))
	mux.Handle("DELETE "+p+"/users/{name}/oidc-links/{provider}", a.As(u, func(w http.ResponseWriter, r *http.Request, c call.Caller) error {
		out, err := a.core.UnlinkOIDC(r.Context(), c, r.PathValue("name"), r.PathValue("provider"), r.URL.Query().Get("subject"))
		return reply(w, http.StatusOK, out, err)
	}))
}
