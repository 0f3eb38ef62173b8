package hub

import (
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/attemptgroup"
	"drover/internal/eval"
	"drover/internal/forgework"
	"drover/internal/githttp"
	"drover/internal/hub/call"
	"drover/internal/hub/httpapi"
	"drover/internal/pipeline"
	"drover/internal/publish"
	"drover/internal/signin"
	"drover/internal/store"
	"drover/internal/webhook"
)

// The hub is the core of its transports (each in a package that never
// imports it) and their composition root: routes mounts them.

// apiCore is what the API calls: the core's operations, and those of
// the capabilities that are packages of their own.
type apiCore struct {
	*Hub
	*publish.Service
	*pipeline.Engine
	*forgework.Triggers
	*webhook.Hooks
	*signin.Flow
	*eval.Evals
	*attemptgroup.Groups
}

var _ httpapi.Core = apiCore{}

func (h *Hub) routes() http.Handler {
	mux := http.NewServeMux()
	api := httpapi.New(apiCore{h, h.publisher, h.pipelines, h.forgework, h.webhooks, h.signin, h.evals, h.groups}, httpapi.Config{Logger: h.log, TransferCap: h.cfg.TransferCap, SpoolDir: h.scratch.dir})
	api.Register(mux)
	mux.Handle("GET "+apitypes.APIPrefix+"/runner/connect", h.gateway.Door(api.As(store.TokenRunner, h.gateway.Serve)))
	mux.Handle(githttp.Prefix, h.gitServer())
	mux.Handle("GET /metrics", api.Public(h.serveMetrics))
	// A forge's webhook: its signature is its authentication (forgework).
	mux.HandleFunc("POST /hooks/{kind}/{hook}", h.forgework.Hook)
	h.opsRoutes(mux)
	h.web.Routes(mux)    // the pages, and the approval page runner login links open
	h.signin.Routes(mux) // signing in to the pages with a forge
	mux.Handle(apitypes.APIPrefix+"/", api.Public(func(_ http.ResponseWriter, r *http.Request) error {
		return call.NotFound("no such API route: %s %s", r.Method, r.URL.Path)
	}))
	return h.metrics.countErrors(mux)
}
