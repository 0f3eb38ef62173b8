package hub

import (
	"net/http"

	"drover/internal/hub/call"
	"drover/internal/protocol"
)

// The users API's HTTP transport over the operations of state_users.go.

func (a httpAPI) addUser(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req protocol.NewUserRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.h.AddUser(r.Context(), p, req)
	return reply(w, http.StatusCreated, out, err)
}

func (a httpAPI) listUsers(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.ListUsers(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}

func (a httpAPI) removeUser(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.RemoveUser(r.Context(), p, call.UserRequest{Name: r.PathValue("name")})
	return reply(w, http.StatusOK, out, err)
}

func (a httpAPI) rotateToken(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.RotateToken(r.Context(), p, call.UserRequest{Name: r.PathValue("name")})
	return reply(w, http.StatusOK, out, err)
}

// whoami serves GET /whoami, which takes a token of any kind.
func (a httpAPI) whoami(w http.ResponseWriter, r *http.Request) {
	p, err := a.h.authenticate(r)
	if err == nil {
		var out protocol.Whoami
		out, err = a.h.Whoami(r.Context(), p)
		err = reply(w, http.StatusOK, out, err)
	}
	if err != nil {
		a.h.writeError(w, r, err)
	}
}
