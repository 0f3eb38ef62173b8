package client

import (
	"context"
	"net/http"
	"net/url"

	"drover/internal/apitypes"
)

// PutOIDCProvider adds or replaces a sign-in provider (admins). The client
// secret in req goes in the body only; no error repeats it.
func (c *Client) PutOIDCProvider(ctx context.Context, name string, req apitypes.OIDCProviderRequest) (apitypes.OIDCProviderView, error) {
	return decode[apitypes.OIDCProviderView](ctx, c, call{method: http.MethodPut, path: "/oidc/" + seg(name), body: req},
		"set sign-in provider "+name)
}

// OIDCProviders lists the sign-in providers.
func (c *Client) OIDCProviders(ctx context.Context) (apitypes.OIDCProviderList, error) {
	return decode[apitypes.OIDCProviderList](ctx, c, call{method: http.MethodGet, path: "/oidc"}, "list sign-in providers")
}

// RemoveOIDCProvider removes a sign-in provider and its links (admins).
func (c *Client) RemoveOIDCProvider(ctx context.Context, name string) (apitypes.OIDCProviderView, error) {
	return decode[apitypes.OIDCProviderView](ctx, c, call{method: http.MethodDelete, path: "/oidc/" + seg(name)},
		"remove sign-in provider "+name)
}

// LinkOIDC links a provider's subject to user name (admins).
func (c *Client) LinkOIDC(ctx context.Context, name string, req apitypes.OIDCLinkRequest) (apitypes.OIDCLinkView, error) {
	return decode[apitypes.OIDCLinkView](ctx, c, call{method: http.MethodPost, path: "/users/" + seg(name) + "/oidc-links", body: req, keyed: true},
		"link an identity of "+req.Provider+" to user "+name)
}

// UnlinkOIDC removes the link of a provider's subject to user name (admins).
func (c *Client) UnlinkOIDC(ctx context.Context, name, provider, subject string) (apitypes.OIDCLinkView, error) {
	return decode[apitypes.OIDCLinkView](ctx, c, call{method: http.MethodDelete, path: "/users/" + seg(name) + "/oidc-links/" + seg(provider),
		query: url.Values{"subject": {subject}}}, "unlink an identity of "+provider+" from user "+name)
}

// OIDCLinks lists user name's provider identities.
func (c *Client) OIDCLinks(ctx context.Context, name string) (apitypes.OIDCLinkList, error) {
	return decode[apitypes.OIDCLinkList](ctx, c, call{method: http.MethodGet, path: "/users/" + seg(name) + "/oidc-links"},
		"list the sign-in identities of user "+name)
}
