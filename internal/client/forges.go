package client

import (
	"context"
	"net/http"

	"drover/internal/apitypes"
)

// Forges lists the hub's forge connections: kinds, URLs and the projects
// mapped to them, never a credential.
func (c *Client) Forges(ctx context.Context) (apitypes.ForgeList, error) {
	return decode[apitypes.ForgeList](ctx, c, call{method: http.MethodGet, path: "/forges"}, "list forges")
}

// PutForge adds a forge connection or replaces the one of that name (admins).
// The credential in req goes in the body only; no error repeats it.
func (c *Client) PutForge(ctx context.Context, name string, req apitypes.ForgeRequest) (apitypes.ForgeView, error) {
	return decode[apitypes.ForgeView](ctx, c, call{method: http.MethodPut, path: "/forges/" + seg(name), body: req},
		"add forge "+name)
}

// RemoveForge removes a forge connection (admins; refused while a project
// maps to it).
func (c *Client) RemoveForge(ctx context.Context, name string) (apitypes.ForgeView, error) {
	return decode[apitypes.ForgeView](ctx, c, call{method: http.MethodDelete, path: "/forges/" + seg(name)},
		"remove forge "+name)
}

// SetForgeOAuth sets or turns off a forge's sign-in (admins). The client
// secret in req goes in the body only; no error repeats it.
func (c *Client) SetForgeOAuth(ctx context.Context, name string, req apitypes.ForgeOAuthRequest) (apitypes.ForgeOAuthView, error) {
	return decode[apitypes.ForgeOAuthView](ctx, c, call{method: http.MethodPut, path: "/forges/" + seg(name) + "/oauth", body: req},
		"set the sign-in of forge "+name)
}

// PublishJob publishes a completed job's result to its project's forge. The
// hub answers 200 with a publication done or failed, 202 with one pending
// that it carries on by itself; both are the view. It is sent again when
// the hub was not reached (keyed): the hub keeps one publication per job
// and answers a repeat with that one, so a resend pushes and opens nothing
// twice.
func (c *Client) PublishJob(ctx context.Context, jobID string, req apitypes.PublishRequest) (apitypes.PublicationView, error) {
	return decode[apitypes.PublicationView](ctx, c, call{method: http.MethodPost, path: "/jobs/" + seg(jobID) + "/publish",
		body: req, keyed: true}, "publish job "+jobID)
}
