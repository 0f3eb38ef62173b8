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
