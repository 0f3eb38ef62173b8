package hub

import (
	"net/http"

	"drover/internal/hub/call"
	"drover/internal/protocol"
)

// The sharing and membership API's HTTP transport over the operations of
// state_access.go.

// shareRunner serves POST /runners/{name}/share and /unshare.
func (a httpAPI) shareRunner(share bool) func(http.ResponseWriter, *http.Request, call.Caller) error {
	return func(w http.ResponseWriter, r *http.Request, p call.Caller) error {
		req := call.ShareRunnerRequest{Name: r.PathValue("name"), Share: share}
		if err := decodeBody(r, w, &req.ShareRequest); err != nil {
			return err
		}
		out, err := a.h.ShareRunner(r.Context(), p, req)
		return reply(w, http.StatusOK, out, err)
	}
}

// answerShare serves POST /runners/{name}/accept and /decline.
func (a httpAPI) answerShare(accept bool) func(http.ResponseWriter, *http.Request, call.Caller) error {
	return func(w http.ResponseWriter, r *http.Request, p call.Caller) error {
		req := call.AnswerShareRequest{Name: r.PathValue("name"), Accept: accept}
		if err := decodeBody(r, w, &req.AnswerShareRequest); err != nil {
			return err
		}
		out, err := a.h.AnswerShare(r.Context(), p, req)
		return reply(w, http.StatusOK, out, err)
	}
}

// shareAccount serves POST /accounts/share and /accounts/unshare.
func (a httpAPI) shareAccount(share bool) func(http.ResponseWriter, *http.Request, call.Caller) error {
	return func(w http.ResponseWriter, r *http.Request, p call.Caller) error {
		req := call.ShareAccountRequest{Share: share}
		if err := decodeBody(r, w, &req.AccountShareRequest); err != nil {
			return err
		}
		out, err := a.h.ShareAccount(r.Context(), p, req)
		return reply(w, http.StatusOK, out, err)
	}
}

// members serves GET /projects/{name}/members.
func (a httpAPI) members(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.Members(r.Context(), p, call.MembersRequest{Project: r.PathValue("name")})
	return reply(w, http.StatusOK, out, err)
}

// changeMember serves POST /projects/{name}/members (add) and DELETE
// /projects/{name}/members/{user} (remove).
func (a httpAPI) changeMember(add bool) func(http.ResponseWriter, *http.Request, call.Caller) error {
	return func(w http.ResponseWriter, r *http.Request, p call.Caller) error {
		req := call.ChangeMemberRequest{Project: r.PathValue("name"), User: r.PathValue("user"), Add: add}
		if add {
			var body protocol.MemberRequest
			if err := decodeBody(r, w, &body); err != nil {
				return err
			}
			req.User = body.User
		}
		out, err := a.h.ChangeMember(r.Context(), p, req)
		return reply(w, http.StatusOK, out, err)
	}
}
