// Package hub is drover's control plane: the HTTP API, the runner gateway,
// the dispatcher and the lease keeper.
package hub

import (
	"context"
	"errors"
	"net"
	"net/http"
)

// Hub is a running control plane.
type Hub struct {
	cfg Config
}

// Open opens (or creates) the hub's state under cfg.DataDir: the SQLite
// database with its migrations applied, and on first start the admin token,
// written once to DataDir/admin.token (0600).
func Open(ctx context.Context, cfg Config) (*Hub, error) {
	cfg.defaults()
	return nil, errors.New("hub: not implemented yet")
}

// AdminTokenPath is where the first start wrote the admin token.
func (h *Hub) AdminTokenPath() string { return "" }

// Handler serves /api/v1 (API and runner gateway).
func (h *Hub) Handler() http.Handler { return http.NotFoundHandler() }

// Serve serves on ln until ctx is done, then shuts down gracefully.
func (h *Hub) Serve(ctx context.Context, ln net.Listener) error { return errors.New("not implemented") }

// EnsureLocalRunner registers (or re-keys) a runner owned by the admin and
// returns its fresh token; `drover up` uses it for its in-process runner.
func (h *Hub) EnsureLocalRunner(ctx context.Context, name string) (token string, err error) {
	return "", errors.New("not implemented")
}

// Close stops background work and closes the store.
func (h *Hub) Close() error { return nil }
