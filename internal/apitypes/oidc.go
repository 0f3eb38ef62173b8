package apitypes

import "time"

// OIDCProviderRequest adds or replaces an OpenID Connect provider users
// sign in to the dashboard with (PUT /oidc/{name}, admins): its issuer
// and this hub's client there. The secret never comes back. A provider's
// issuer does not change: its subjects mean nothing under another.
type OIDCProviderRequest struct {
	Issuer       string `json:"issuer"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

// OIDCProviderView is a provider: Callback is the redirect URI to
// register with its client (NoPublicURL: the hub has none, so no sign-in
// is offered).
type OIDCProviderView struct {
	Name        string    `json:"name"`
	Issuer      string    `json:"issuer"`
	ClientID    string    `json:"client_id"`
	Callback    string    `json:"callback,omitempty"`
	NoPublicURL bool      `json:"no_public_url,omitempty"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// OIDCProviderList is the providers, by name.
type OIDCProviderList struct {
	Providers []OIDCProviderView `json:"providers"`
}

// OIDCLinkRequest links an identity of a provider (its subject, the ID
// token's "sub") to a user (POST /users/{name}/oidc-links, admins): it
// signs in to the dashboard as the user.
type OIDCLinkRequest struct {
	Provider string `json:"provider"`
	Subject  string `json:"subject"`
}

// OIDCLinkView is one link of a provider's subject to a user.
type OIDCLinkView struct {
	User      string    `json:"user"`
	Provider  string    `json:"provider"`
	Subject   string    `json:"subject"`
	CreatedAt time.Time `json:"created_at"`
}

// OIDCLinkList is a user's links.
type OIDCLinkList struct {
	Links []OIDCLinkView `json:"links"`
}
