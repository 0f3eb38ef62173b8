package hub

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"drover/internal/auth"
	"drover/internal/fsutil"
	"drover/internal/githttp"
	"drover/internal/hub/call"
	"drover/internal/protocol"
	"drover/internal/store"
)

const maxBody = 1 << 20

type ctxKey struct{}

// AsRefusal turns any error into one we can show: store errors keep their
// meaning, anything else is internal (and logged, not shown).
func (h *Hub) AsRefusal(err error) *call.Refusal {
	var ae *call.Refusal
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, store.ErrNotFound) {
		return call.NotFound("%v", err)
	}
	if fsutil.IsNoSpace(err) {
		h.diskFull.report(h.log, h.now(), err)
		return call.Errf(http.StatusInsufficientStorage, protocol.ErrNoSpace,
			"the hub's disk is full, so it stored nothing of this request; retry later (the operator must free space in the hub's data directory)")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return call.Errf(http.StatusServiceUnavailable, protocol.ErrInternal, "request cancelled")
	}
	h.log.Error("internal error", "err", err)
	return call.Errf(http.StatusInternalServerError, protocol.ErrInternal, "internal error (see the hub's log)")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// reply encodes an operation's reply with status, or returns its error
// for writeError.
func reply[T any](w http.ResponseWriter, status int, out T, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, status, out)
	return nil
}

func (h *Hub) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := h.refusal(r, err)
	writeJSON(w, ae.Status, protocol.ErrorBody{Error: protocol.Error{Code: ae.Code, Message: ae.Msg, Size: ae.Size}})
}

// refusal is err as the caller may see it, logged once.
func (h *Hub) refusal(r *http.Request, err error) *call.Refusal {
	ae := h.AsRefusal(err)
	if ae.Status < 500 {
		h.log.Info("request refused", "method", r.Method, "path", r.URL.Path, "code", ae.Code, "msg", ae.Msg)
	}
	return ae
}

func decodeBody(r *http.Request, w http.ResponseWriter, v any) error {
	return decodeBodyMax(r, w, v, maxBody)
}

// decodeBodyMax decodes a JSON body of at most limit bytes into v, strictly
// (decodeJSON), refusing fields v lacks: such a field is a request this hub
// cannot honour, which must fail rather than be dropped.
func decodeBodyMax(r *http.Request, w http.ResponseWriter, v any, limit int64) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return call.Errf(http.StatusRequestEntityTooLarge, protocol.ErrTooLarge, "request body is over %d bytes", limit)
		}
		return call.BadRequest("read the request body: %v", err)
	}
	if err := call.DecodeJSON(data, v, true); err != nil {
		return call.BadRequest("request body: %v", err)
	}
	return nil
}

// authenticate resolves the bearer token to a principal. Revoked tokens and
// tokens of revoked runners are refused.
func (h *Hub) authenticate(r *http.Request) (call.Caller, error) {
	tok, err := bearer(r)
	if err != nil {
		return call.Caller{}, err
	}
	return h.AuthenticateToken(r.Context(), tok)
}

// bearer is the request's bearer token; its absence is a 401.
func bearer(r *http.Request) (string, error) {
	tok, err := auth.BearerToken(r.Header.Get("Authorization"))
	if err != nil {
		return "", call.Errf(http.StatusUnauthorized, protocol.ErrUnauthorized, "%v", err)
	}
	return tok, nil
}

// AuthenticateAs resolves a token to a principal holding a token of the
// given kind: every authenticated route's check, and the pages'.
func (h *Hub) AuthenticateAs(ctx context.Context, tok string, kind store.TokenKind) (call.Caller, error) {
	p, err := h.AuthenticateToken(ctx, tok)
	if err != nil {
		return call.Caller{}, err
	}
	if p.Kind != kind {
		return call.Caller{}, call.Forbidden("this call needs a %s token", kind)
	}
	return p, nil
}

// AuthenticateToken resolves a token to a principal.
func (h *Hub) AuthenticateToken(ctx context.Context, tok string) (call.Caller, error) {
	hash := auth.Hash(tok)
	var p call.Caller
	err := h.store.Read(ctx, func(tx store.Tx) error {
		t, err := tx.Token(hash)
		if err != nil {
			return err
		}
		if t.RevokedAt != nil {
			return call.Errf(http.StatusUnauthorized, protocol.ErrUnauthorized, "token was revoked")
		}
		p.Kind = t.Kind
		switch t.Kind {
		case store.TokenUser:
			up, err := userPrincipal(tx, t.OwnerID)
			if err != nil {
				return err
			}
			p = up
		case store.TokenSession:
			return call.Errf(http.StatusUnauthorized, protocol.ErrUnauthorized, "a web session is not an API token; use a user token")
		case store.TokenRunner:
			rn, err := tx.Runner(t.OwnerID)
			if err != nil {
				return err
			}
			if rn.RevokedAt != nil || rn.TokenHash != hash {
				return call.Errf(http.StatusUnauthorized, protocol.ErrUnauthorized, "runner token was revoked")
			}
			p.RunnerID, p.Name, p.TokenHash = rn.ID, rn.Name, hash
		default:
			return call.Errf(http.StatusUnauthorized, protocol.ErrUnauthorized, "unknown token kind")
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return call.Caller{}, call.Errf(http.StatusUnauthorized, protocol.ErrUnauthorized, "token not recognised")
	}
	return p, err
}

// userPrincipal is the live user as a caller with a user token.
func userPrincipal(tx store.Tx, userID string) (call.Caller, error) {
	u, err := tx.User(userID)
	if err != nil {
		return call.Caller{}, err
	}
	if u.RemovedAt != nil {
		return call.Caller{}, call.Errf(http.StatusUnauthorized, protocol.ErrUnauthorized, "user %s was removed", u.Name)
	}
	return call.Caller{Kind: store.TokenUser, UserID: u.ID, Name: u.Name, Admin: u.Admin}, nil
}

// httpAPI is the HTTP transport of the state layer's operations
// (state_*.go): its handlers only decode, call and encode.
type httpAPI struct{ h *Hub }

// handler adapts a function that returns an error, with authentication of
// the required kind; the error is answered by writeError, the one mapping
// of refusals to HTTP statuses and bodies.
func (h *Hub) handler(kind store.TokenKind, fn func(w http.ResponseWriter, r *http.Request, p call.Caller) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, err := bearer(r)
		var p call.Caller
		if err == nil {
			p, err = h.AuthenticateAs(r.Context(), tok, kind)
		}
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		if err := fn(w, r, p); err != nil {
			h.writeError(w, r, err)
		}
	}
}

func (h *Hub) routes() http.Handler {
	mux := http.NewServeMux()
	u, rn := store.TokenUser, store.TokenRunner
	p := protocol.APIPrefix
	api := httpAPI{h}
	mux.Handle("POST "+p+"/jobs", h.handler(u, api.submitJob))
	mux.Handle("GET "+p+"/jobs", h.handler(u, api.listJobs))
	mux.Handle("GET "+p+"/jobs/{id}", h.handler(u, api.showJob))
	mux.Handle("POST "+p+"/jobs/{id}/cancel", h.handler(u, api.actOnJob("cancel")))
	mux.Handle("POST "+p+"/jobs/{id}/retry", h.handler(u, api.actOnJob("retry")))
	mux.Handle("POST "+p+"/jobs/{id}/answer", h.handler(u, api.answerJob))
	mux.Handle("POST "+p+"/jobs/{id}/approve", h.handler(u, api.actOnJob("approve")))
	mux.Handle("POST "+p+"/jobs/{id}/restart", h.handler(u, api.actOnJob("restart")))
	mux.Handle("GET "+p+"/questions", h.handler(u, api.questions))
	mux.Handle("GET "+p+"/jobs/{id}/log", h.handler(u, api.followLog))
	mux.Handle("GET "+p+"/jobs/{id}/events", h.handler(u, api.jobEvents))
	mux.Handle("GET "+p+"/whoami", http.HandlerFunc(api.whoami))
	mux.Handle("POST "+p+"/users", h.handler(u, api.addUser))
	mux.Handle("GET "+p+"/users", h.handler(u, api.listUsers))
	mux.Handle("DELETE "+p+"/users/{name}", h.handler(u, api.removeUser))
	mux.Handle("POST "+p+"/users/{name}/token", h.handler(u, api.rotateToken))
	mux.Handle("GET "+p+"/runners", h.handler(u, api.runners))
	mux.Handle("POST "+p+"/runners/approve", h.handler(u, api.approve))
	mux.Handle("POST "+p+"/runners/{name}/revoke", h.handler(u, api.revokeRunner))
	mux.Handle("POST "+p+"/runners/{name}/share", h.handler(u, api.shareRunner(true)))
	mux.Handle("POST "+p+"/runners/{name}/unshare", h.handler(u, api.shareRunner(false)))
	mux.Handle("POST "+p+"/runners/{name}/accept", h.handler(u, api.answerShare(true)))
	mux.Handle("POST "+p+"/runners/{name}/decline", h.handler(u, api.answerShare(false)))
	mux.Handle("GET "+p+"/accounts", h.handler(u, api.accounts))
	mux.Handle("POST "+p+"/accounts/move", h.handler(u, api.moveAccount))
	mux.Handle("POST "+p+"/accounts/share", h.handler(u, api.shareAccount(true)))
	mux.Handle("POST "+p+"/accounts/unshare", h.handler(u, api.shareAccount(false)))
	mux.Handle("GET "+p+"/runner/login", h.handler(rn, api.runnerLogin))
	mux.Handle("GET "+p+"/runner/connect", h.handler(rn, h.serveRunner))
	mux.Handle("POST "+p+"/runner/publish", h.handler(rn, api.publish))
	mux.Handle("GET "+p+"/runner/context", h.handler(rn, api.runnerContext))
	mux.Handle("POST "+p+"/runner/register", http.HandlerFunc(api.register))
	mux.Handle("POST "+p+"/fleet/launches", h.handler(u, api.launch))
	mux.Handle("GET "+p+"/fleet/launches", h.handler(u, api.launches))
	mux.Handle("GET "+p+"/fleet/launches/{id}", h.handler(u, api.launchView))
	mux.Handle("POST "+p+"/fleet/launches/{id}/revoke", h.handler(u, api.revokeLaunch))
	mux.Handle("POST "+p+"/fleet/launches/{id}/failure", h.handler(u, api.launchFailure))
	mux.Handle("GET "+p+"/fleet/demand", h.handler(u, api.demand))
	mux.Handle("GET "+p+"/projects", h.handler(u, api.listProjects))
	mux.Handle("PUT "+p+"/projects/{name}", h.handler(u, api.mapProject))
	mux.Handle("GET "+p+"/projects/{name}/members", h.handler(u, api.members))
	mux.Handle("POST "+p+"/projects/{name}/members", h.handler(u, api.changeMember(true)))
	mux.Handle("DELETE "+p+"/projects/{name}/members/{user}", h.handler(u, api.changeMember(false)))
	mux.Handle("GET "+p+"/projects/{name}/config", h.handler(u, api.projectConfig))
	mux.Handle("PUT "+p+"/projects/{name}/config", h.handler(u, api.setProjectConfig))
	mux.Handle("GET "+p+"/projects/{name}/secrets", h.handler(u, api.listSecrets))
	mux.Handle("PUT "+p+"/projects/{name}/secrets/{secret}", h.handler(u, api.setSecret))
	mux.Handle("DELETE "+p+"/projects/{name}/secrets/{secret}", h.handler(u, api.removeSecret))
	mux.Handle(githttp.Prefix, h.gitServer())
	mux.HandleFunc("GET /metrics", h.serveMetrics)
	h.opsRoutes(mux)
	h.web.Routes(mux) // the pages, and the approval page runner login links open
	mux.HandleFunc(p+"/", func(w http.ResponseWriter, r *http.Request) {
		h.writeError(w, r, call.NotFound("no such API route: %s %s", r.Method, r.URL.Path))
	})
	return h.metrics.countErrors(mux)
}
