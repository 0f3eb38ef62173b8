package client

import (
	"context"
	"net/http"

	"drover/internal/apitypes"
)

// SetTriggers turns a project's forge triggers on or changes them (its
// owner or an admin): the hub registers the webhook on the project's
// forge repository itself, with a secret nobody copies.
func (c *Client) SetTriggers(ctx context.Context, project string, req apitypes.ForgeTriggersRequest) (apitypes.ForgeTriggersView, error) {
	return decode[apitypes.ForgeTriggersView](ctx, c, call{method: http.MethodPut, path: "/projects/" + seg(project) + "/triggers",
		body: req, keyed: true}, "set the triggers of project "+project)
}

// Triggers shows a project's forge triggers.
func (c *Client) Triggers(ctx context.Context, project string) (apitypes.ForgeTriggersView, error) {
	return decode[apitypes.ForgeTriggersView](ctx, c, call{method: http.MethodGet, path: "/projects/" + seg(project) + "/triggers"},
		"show the triggers of project "+project)
}

// RemoveTriggers turns a project's forge triggers off and removes its
// webhook from the forge.
func (c *Client) RemoveTriggers(ctx context.Context, project string) (apitypes.ForgeTriggersView, error) {
	return decode[apitypes.ForgeTriggersView](ctx, c, call{method: http.MethodDelete, path: "/projects/" + seg(project) + "/triggers"},
		"remove the triggers of project "+project)
}

// LinkUser links a forge login to a user (admin only).
func (c *Client) LinkUser(ctx context.Context, name string, req apitypes.ForgeLinkRequest) (apitypes.ForgeLinkView, error) {
	return decode[apitypes.ForgeLinkView](ctx, c, call{method: http.MethodPost, path: "/users/" + seg(name) + "/links", body: req, keyed: true},
		"link "+req.Login+" on "+req.Forge+" to user "+name)
}

// UnlinkUser removes a link of a forge login to a user (admin only).
func (c *Client) UnlinkUser(ctx context.Context, name, forge, login string) (apitypes.ForgeLinkView, error) {
	return decode[apitypes.ForgeLinkView](ctx, c, call{method: http.MethodDelete,
		path: "/users/" + seg(name) + "/links/" + seg(forge) + "/" + seg(login)}, "unlink "+login+" on "+forge+" from user "+name)
}

// Links lists a user's forge links (an admin, or the user themself).
func (c *Client) Links(ctx context.Context, name string) (apitypes.ForgeLinkList, error) {
	return decode[apitypes.ForgeLinkList](ctx, c, call{method: http.MethodGet, path: "/users/" + seg(name) + "/links"},
		"list the forge links of user "+name)
}
