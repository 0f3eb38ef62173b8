package apitypes

import "time"

// ForgeTriggersRequest turns a project's forge triggers on (PUT
// /projects/{name}/triggers): what, on its mapped forge repository,
// starts a job. At least one is required.
type ForgeTriggersRequest struct {
	Label   string `json:"label,omitempty"`   // a label added to an issue: drover:fix
	Command string `json:"command,omitempty"` // a comment command's prefix: /drover
	Reviews bool   `json:"reviews,omitempty"` // a review asking for changes, or COMMAND address, on a pull request
	Assign  string `json:"assign,omitempty"`  // the bot's login: an issue assigned to it
}

// ForgeTriggersView is a project's forge triggers; never the hook's secret.
type ForgeTriggersView struct {
	Project   string    `json:"project"`
	Forge     string    `json:"forge"`
	Repo      string    `json:"repo"`
	HookURL   string    `json:"hook_url"`
	Label     string    `json:"label,omitempty"`
	Command   string    `json:"command,omitempty"`
	Reviews   bool      `json:"reviews,omitempty"`
	Assign    string    `json:"assign,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ForgeLinkRequest links a forge login to a user (POST
// /users/{name}/links): what that login does on the forge, drover does
// as the user.
type ForgeLinkRequest struct {
	Forge string `json:"forge"`
	Login string `json:"login"`
}

// ForgeLinkView is one link of a forge login to a user.
type ForgeLinkView struct {
	User      string    `json:"user"`
	Forge     string    `json:"forge"`
	Login     string    `json:"login"`
	CreatedAt time.Time `json:"created_at"`
}

// ForgeLinkList is a user's links.
type ForgeLinkList struct {
	Links []ForgeLinkView `json:"links"`
}

// ForgeOAuthRequest sets a forge connection's sign-in (PUT
// /forges/{name}/oauth, admins): its OAuth application's client id and
// secret, or Off to turn it off. The secret never comes back.
type ForgeOAuthRequest struct {
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	Off          bool   `json:"off,omitempty"`
}

// ForgeOAuthView is a forge's sign-in: Callback is the redirect URI to
// register with its application (NoPublicURL: the hub has none, so no
// sign-in is offered).
type ForgeOAuthView struct {
	Forge       string `json:"forge"`
	ClientID    string `json:"client_id,omitempty"`
	On          bool   `json:"on"`
	Callback    string `json:"callback,omitempty"`
	NoPublicURL bool   `json:"no_public_url,omitempty"`
}
