package httpapi

import (
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
)

// The sharing and membership API's HTTP transport over the operations of
// Runners, Accounts and Projects.

// shareRunner serves POST /runners/{name}/share and /unshare.
func (a *API) shareRunner(share bool) func(http.ResponseWriter, *http.Request, call.Caller) error {
	return func(w http.ResponseWriter, r *http.Request, p call.Caller) error {
		req := call.ShareRunnerRequest{Name: r.PathValue("name"), Share: share}
		if err := decodeBody(r, w, &req.ShareRequest); err != nil {
			return err
		}
		out, err := a.core.ShareRunner(r.Context(), p, req)
		return reply(w, http.StatusOK, out, err)
	}
}

// answerShare serves POST /runners/{name}/accept and /decline.
func (a *API) answerShare(accept bool) func(http.ResponseWriter, *http.Request, call.Caller) error {
	return func(w http.ResponseWriter, r *http.Request, p call.Caller) error {
		req := call.AnswerShareRequest{Name: r.PathValue("name"), Accept: accept}
		if err := decodeBody(r, w, &req.AnswerShareRequest); err != nil {
			return err
		}
		out, err := a.core.AnswerShare(r.Context(), p, req)
		return reply(w, http.StatusOK, out, err)
	}
}

// shareAccount serves POST /accounts/share and /accounts/unshare.
func (a *API) shareAccount(share bool) func(http.ResponseWriter, *http.Request, call.Caller) error {
	return func(w http.ResponseWriter, r *http.Request, p call.Caller) error {
		req := call.ShareAccountRequest{Share: share}
		if err := decodeBody(r, w, &req.AccountShareRequest); err != nil {
			return err
		}
		out, err := a.core.ShareAccount(r.Context(), p, req)
		return reply(w, http.StatusOK, out, err)
	}
}

// members serves GET /projects/{name}/members.
func (a *API) members(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.Members(r.Context(), p, call.MembersRequest{Project: r.PathValue("name")})
	return reply(w, http.StatusOK, out, err)
}

// changeMember serves POST /projects/{name}/members (add) and DELETE
// /projects/{name}/members/{user} (remove).
func (a *API) changeMember(add bool) func(http.ResponseWriter, *http.Request, call.Caller) error {
	return func(w http.ResponseWriter, r *http.Request, p call.Caller) error {
		req := call.ChangeMemberRequest{Project: r.PathValue("name"), User: r.PathValue("user"), Add: add}
		if add {
			var body apitypes.MemberRequest
			if err := decodeBody(r, w, &body); err != nil {
				return err
			}
			req.User = body.User
		}
		out, err := a.core.ChangeMember(r.Context(), p, req)
		return reply(w, http.StatusOK, out, err)
	}
}
