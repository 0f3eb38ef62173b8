package client

import (
	"context"
	"net/http"

	"drover/internal/apitypes"
)

// GitURL is the hub's smart HTTP URL of a project, for plain git.
func (c *Client) GitURL(project string) string { return c.base + "/git/" + seg(project) }

// Projects lists the hub's projects (hosted ones and those mapped to a
// remote) with their owners.
func (c *Client) Projects(ctx context.Context) (apitypes.ProjectList, error) {
	return decode[apitypes.ProjectList](ctx, c, call{method: http.MethodGet, path: "/projects"}, "list projects")
}

// MapProject maps a project to a remote URL runners fetch from with their
// own credentials; an empty remote makes it hosted on the hub again.
func (c *Client) MapProject(ctx context.Context, name, remote string) (apitypes.ProjectView, error) {
	return decode[apitypes.ProjectView](ctx, c, call{method: http.MethodPut, path: "/projects/" + seg(name),
		body: apitypes.MapProjectRequest{Remote: remote}}, "map project "+name)
}

// Members lists a project's owner and members.
func (c *Client) Members(ctx context.Context, project string) (apitypes.MemberList, error) {
	return decode[apitypes.MemberList](ctx, c, call{method: http.MethodGet, path: "/projects/" + seg(project) + "/members"},
		"list the members of project "+project)
}

// AddMember makes a user a member of a project (its owner or an admin).
func (c *Client) AddMember(ctx context.Context, project, user string) (apitypes.MemberList, error) {
	return decode[apitypes.MemberList](ctx, c, call{method: http.MethodPost, path: "/projects/" + seg(project) + "/members",
		body: apitypes.MemberRequest{User: user}}, "add "+user+" to project "+project)
}

// RemoveMember takes a user out of a project (its owner or an admin).
func (c *Client) RemoveMember(ctx context.Context, project, user string) (apitypes.MemberList, error) {
	return decode[apitypes.MemberList](ctx, c, call{method: http.MethodDelete,
		path: "/projects/" + seg(project) + "/members/" + seg(user)}, "remove "+user+" from project "+project)
}

// ProjectConfig reads a project's network policies, setup and caches.
func (c *Client) ProjectConfig(ctx context.Context, project string) (apitypes.ProjectConfig, error) {
	return decode[apitypes.ProjectConfig](ctx, c, call{method: http.MethodGet, path: "/projects/" + seg(project) + "/config"},
		"read the config of project "+project)
}

// SetProjectConfig changes a project's config (its owner or an admin).
func (c *Client) SetProjectConfig(ctx context.Context, project string, req apitypes.ProjectConfigRequest) (apitypes.ProjectConfig, error) {
	return decode[apitypes.ProjectConfig](ctx, c, call{method: http.MethodPut, path: "/projects/" + seg(project) + "/config", body: req},
		"change the config of project "+project)
}

// Secrets lists a project's secrets: names, hosts and dates, never values
// (its owner or an admin).
func (c *Client) Secrets(ctx context.Context, project string) (apitypes.SecretList, error) {
	return decode[apitypes.SecretList](ctx, c, call{method: http.MethodGet, path: "/projects/" + seg(project) + "/secrets"},
		"list the secrets of project "+project)
}

// SetSecret sets a project secret (its owner or an admin).
func (c *Client) SetSecret(ctx context.Context, project, name string, req apitypes.SecretRequest) (apitypes.SecretList, error) {
	return decode[apitypes.SecretList](ctx, c, call{method: http.MethodPut, path: "/projects/" + seg(project) + "/secrets/" + seg(name), body: req},
		"set secret "+name+" of project "+project)
}

// RemoveSecret removes a project secret (its owner or an admin).
func (c *Client) RemoveSecret(ctx context.Context, project, name string) (apitypes.SecretList, error) {
	return decode[apitypes.SecretList](ctx, c, call{method: http.MethodDelete, path: "/projects/" + seg(project) + "/secrets/" + seg(name)},
		"remove secret "+name+" of project "+project)
}
