// Package httpapi is the hub's HTTP API (/api/v1): each handler
// authenticates, decodes its request, calls one operation of the hub's
// core (Core, which the core implements) and encodes the reply. It never
// imports the core: the hub, its composition root, mounts it with
// Register and uses As for the runner's WebSocket route.
package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/hub/call"
	"drover/internal/rules"
	"drover/internal/store"
)

// MaxBody is the largest JSON request body but a submission's.
const MaxBody = 1 << 20

// maxSubmitBody leaves room for the context files (base64 in JSON).
const maxSubmitBody = MaxBody + (rules.MaxContextTotal+2)/3*4 + rules.MaxContextFiles*2048

// Config is what the API needs besides the core.
type Config struct {
	Logger *slog.Logger
	// TransferCap bounds a publication's bundle.
	TransferCap int64
	// SpoolDir holds publications while they are checked.
	SpoolDir string
}

// API is the HTTP API over a Core.
type API struct {
	core Core
	cfg  Config
}

// New is the API over core.
func New(core Core, cfg Config) *API { return &API{core: core, cfg: cfg} }

// Handler is a route's function: the error, if any, is answered by the
// one mapping of refusals to statuses and bodies.
type Handler func(w http.ResponseWriter, r *http.Request, p call.Caller) error

// As serves fn to callers holding a token of kind.
func (a *API) As(kind store.TokenKind, fn Handler) http.Handler {
	return a.Public(func(w http.ResponseWriter, r *http.Request) error {
		tok, err := bearer(r)
		if err != nil {
			return err
		}
		p, err := a.core.AuthenticateAs(r.Context(), tok, kind)
		if err != nil {
			return err
		}
		return fn(w, r, p)
	})
}

// Public serves fn, which authenticates callers itself if at all, and
// answers its error as a refusal.
func (a *API) Public(fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			a.writeError(w, r, err)
		}
	})
}

// Register mounts every route of the API on mux.
func (a *API) Register(mux *http.ServeMux) {
	u, rn := store.TokenUser, store.TokenRunner
	p := apitypes.APIPrefix
	mux.Handle("POST "+p+"/jobs", a.As(u, a.submitJob))
	mux.Handle("GET "+p+"/jobs", a.As(u, a.listJobs))
	mux.Handle("GET "+p+"/jobs/{id}", a.As(u, a.showJob))
	mux.Handle("POST "+p+"/jobs/{id}/cancel", a.As(u, a.actOnJob("cancel")))
	mux.Handle("POST "+p+"/jobs/{id}/retry", a.As(u, a.actOnJob("retry")))
	mux.Handle("POST "+p+"/jobs/{id}/answer", a.As(u, a.answerJob))
	mux.Handle("POST "+p+"/jobs/{id}/approve", a.As(u, a.actOnJob("approve")))
	mux.Handle("POST "+p+"/jobs/{id}/restart", a.As(u, a.actOnJob("restart")))
	mux.Handle("POST "+p+"/jobs/{id}/publish", a.As(u, a.publishJob))
	mux.Handle("GET "+p+"/forges", a.As(u, a.listForges))
	mux.Handle("PUT "+p+"/forges/{name}", a.As(u, a.putForge))
	mux.Handle("DELETE "+p+"/forges/{name}", a.As(u, a.removeForge))
	mux.Handle("PUT "+p+"/forges/{name}/oauth", a.As(u, a.setForgeOAuth))
	mux.Handle("POST "+p+"/pipelines", a.As(u, a.runPipeline))
	mux.Handle("GET "+p+"/pipelines", a.As(u, a.listPipelines))
	mux.Handle("GET "+p+"/pipelines/{id}", a.As(u, a.showPipeline))
	mux.Handle("POST "+p+"/pipelines/{id}/cancel", a.As(u, a.cancelPipeline))
	mux.Handle("POST "+p+"/pipelines/{id}/retry", a.As(u, a.retryPipeline))
	mux.Handle("GET "+p+"/pipelines/{id}/events", a.As(u, a.pipelineEvents))
	mux.Handle("POST "+p+"/evals", a.As(u, a.startEval))
	mux.Handle("GET "+p+"/evals", a.As(u, a.listEvals))
	mux.Handle("GET "+p+"/evals/{id}", a.As(u, a.showEval))
	mux.Handle("GET "+p+"/evals/{id}/report", a.As(u, a.evalReport))
	mux.Handle("POST "+p+"/evals/{id}/cancel", a.As(u, a.cancelEval))
	mux.Handle("POST "+p+"/webhooks", a.As(u, a.addWebhook))
	mux.Handle("GET "+p+"/webhooks", a.As(u, a.listWebhooks))
	mux.Handle("DELETE "+p+"/webhooks/{id}", a.As(u, a.removeWebhook))
	mux.Handle("GET "+p+"/webhooks/{id}/deliveries", a.As(u, a.webhookDeliveries))
	mux.Handle("GET "+p+"/questions", a.As(u, a.questions))
	mux.Handle("GET "+p+"/jobs/{id}/log", a.As(u, a.followLog))
	mux.Handle("GET "+p+"/jobs/{id}/events", a.As(u, a.jobEvents))
	mux.Handle("GET "+p+"/whoami", a.Public(a.whoami))
	mux.Handle("POST "+p+"/users", a.As(u, a.addUser))
	mux.Handle("GET "+p+"/users", a.As(u, a.listUsers))
	mux.Handle("DELETE "+p+"/users/{name}", a.As(u, a.removeUser))
	mux.Handle("POST "+p+"/users/{name}/token", a.As(u, a.rotateToken))
	mux.Handle("GET "+p+"/runners", a.As(u, a.runners))
	mux.Handle("POST "+p+"/runners/approve", a.As(u, a.approve))
	mux.Handle("POST "+p+"/runners/{name}/revoke", a.As(u, a.revokeRunner))
	mux.Handle("POST "+p+"/runners/{name}/share", a.As(u, a.shareRunner(true)))
	mux.Handle("POST "+p+"/runners/{name}/unshare", a.As(u, a.shareRunner(false)))
	mux.Handle("POST "+p+"/runners/{name}/accept", a.As(u, a.answerShare(true)))
	mux.Handle("POST "+p+"/runners/{name}/decline", a.As(u, a.answerShare(false)))
	mux.Handle("GET "+p+"/accounts", a.As(u, a.accounts))
	mux.Handle("POST "+p+"/accounts/move", a.As(u, a.moveAccount))
	mux.Handle("POST "+p+"/accounts/share", a.As(u, a.shareAccount(true)))
	mux.Handle("POST "+p+"/accounts/unshare", a.As(u, a.shareAccount(false)))
	mux.Handle("GET "+p+"/runner/login", a.As(rn, a.runnerLogin))
	mux.Handle("POST "+p+"/runner/publish", a.As(rn, a.publish))
	mux.Handle("GET "+p+"/runner/context", a.As(rn, a.runnerContext))
	mux.Handle("POST "+p+"/runner/register", a.Public(a.register))
	mux.Handle("POST "+p+"/fleet/launches", a.As(u, a.launch))
	mux.Handle("GET "+p+"/fleet/launches", a.As(u, a.launches))
	mux.Handle("GET "+p+"/fleet/launches/{id}", a.As(u, a.launchView))
	mux.Handle("POST "+p+"/fleet/launches/{id}/revoke", a.As(u, a.revokeLaunch))
	mux.Handle("POST "+p+"/fleet/launches/{id}/failure", a.As(u, a.launchFailure))
	mux.Handle("GET "+p+"/fleet/demand", a.As(u, a.demand))
	mux.Handle("GET "+p+"/hubs", a.As(u, a.hubs))
	mux.Handle("GET "+p+"/projects", a.As(u, a.listProjects))
	mux.Handle("PUT "+p+"/projects/{name}", a.As(u, a.mapProject))
	mux.Handle("GET "+p+"/projects/{name}/members", a.As(u, a.members))
	mux.Handle("POST "+p+"/projects/{name}/members", a.As(u, a.changeMember(true)))
	mux.Handle("DELETE "+p+"/projects/{name}/members/{user}", a.As(u, a.changeMember(false)))
	mux.Handle("GET "+p+"/projects/{name}/config", a.As(u, a.projectConfig))
	mux.Handle("PUT "+p+"/projects/{name}/config", a.As(u, a.setProjectConfig))
	mux.Handle("GET "+p+"/projects/{name}/secrets", a.As(u, a.listSecrets))
	mux.Handle("PUT "+p+"/projects/{name}/secrets/{secret}", a.As(u, a.setSecret))
	mux.Handle("DELETE "+p+"/projects/{name}/secrets/{secret}", a.As(u, a.removeSecret))
	a.registerForgeWork(mux)
	a.registerOIDC(mux)
	a.registerGroups(mux)
}

// bearer is the request's bearer token; its absence is a 401.
func bearer(r *http.Request) (string, error) {
	tok, err := auth.BearerToken(r.Header.Get("Authorization"))
	if err != nil {
		return "", call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "%v", err)
	}
	return tok, nil
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

// writeError is the one mapping of an error to an HTTP status and
// protocol.ErrorBody; a refusal is logged once.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := a.core.AsRefusal(err)
	if ae.Status < 500 {
		a.cfg.Logger.Info("request refused", "method", r.Method, "path", r.URL.Path, "code", ae.Code, "msg", ae.Msg)
	}
	writeJSON(w, ae.Status, apitypes.ErrorBody{Error: *ae.Body()})
}

func decodeBody(r *http.Request, w http.ResponseWriter, v any) error {
	return decodeBodyMax(r, w, v, MaxBody)
}

// decodeBodyMax decodes a JSON body of at most limit bytes into v, strictly
// (call.DecodeJSON), refusing fields v lacks: such a field is a request
// this hub cannot honour, which must fail rather than be dropped.
func decodeBodyMax(r *http.Request, w http.ResponseWriter, v any, limit int64) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return call.Errf(http.StatusRequestEntityTooLarge, rules.ErrTooLarge, "request body is over %d bytes", limit)
		}
		return call.BadRequest("read the request body: %v", err)
	}
	if err := call.DecodeJSON(data, v, true); err != nil {
		return call.BadRequest("request body: %v", err)
	}
	return nil
}

// queryInt reads the whole-number query parameter name: 0 when absent,
// else a number from lo to hi (an overflowing one is out of range too).
func queryInt(q url.Values, name string, lo, hi int64) (int64, error) {
	s := q.Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, call.BadRequest("%s must be a whole number from %d to %d, not %q", name, lo, hi, call.Truncate(s, 40))
	}
	return n, nil
}
