package httpapi

import (
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
)

// The users API's HTTP transport over Users.

func (a *API) addUser(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.NewUserRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.AddUser(r.Context(), p, req)
	return reply(w, http.StatusCreated, out, err)
}

func (a *API) listUsers(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.ListUsers(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) removeUser(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.RemoveUser(r.Context(), p, call.UserRequest{Name: r.PathValue("name")})
	return reply(w, http.StatusOK, out, err)
}

func (a *API) rotateToken(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.RotateToken(r.Context(), p, call.UserRequest{Name: r.PathValue("name")})
	return reply(w, http.StatusOK, out, err)
}

// whoami serves GET /whoami, which takes a token of any kind.
func (a *API) whoami(w http.ResponseWriter, r *http.Request) error {
	tok, err := bearer(r)
	if err != nil {
		return err
	}
	p, err := a.core.AuthenticateToken(r.Context(), tok)
	if err != nil {
		return err
	}
	out, err := a.core.Whoami(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}
