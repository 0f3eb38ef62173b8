// Package call holds what the hub's core and its transports (the HTTP
// API, the runner gateway, git hosting, the pages) say to each other about
// a request: who is asking (Caller) and why it was refused (Refusal). It is
// a leaf, so a transport can name them without importing the core.
package call

import (
	"fmt"
	"net/http"

	"drover/internal/rules"
	"drover/internal/store"
)

// Caller is an authenticated caller.
type Caller struct {
	Kind     store.TokenKind
	UserID   string
	Name     string
	Admin    bool
	RunnerID string
	// TokenHash is the hash of the runner token the caller authenticated
	// with: a connection made with it must end when it is replaced.
	TokenHash string
}

// Refusal is an error with a code and HTTP status, safe to show the caller.
type Refusal struct {
	Status int
	Code   string
	Msg    string
	Size   *int64
}

func (e *Refusal) Error() string { return e.Code + ": " + e.Msg }

// Body is the refusal as the protocol carries it.
func (e *Refusal) Body() *rules.Error {
	return &rules.Error{Code: e.Code, Message: e.Msg, Size: e.Size}
}

// Errf is a refusal with any status and code.
func Errf(status int, code, format string, args ...any) *Refusal {
	return &Refusal{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

func BadRequest(format string, args ...any) *Refusal {
	return Errf(http.StatusBadRequest, rules.ErrBadRequest, format, args...)
}

func NotFound(format string, args ...any) *Refusal {
	return Errf(http.StatusNotFound, rules.ErrNotFound, format, args...)
}

func Conflict(format string, args ...any) *Refusal {
	return Errf(http.StatusConflict, rules.ErrConflict, format, args...)
}

func Forbidden(format string, args ...any) *Refusal {
	return Errf(http.StatusForbidden, rules.ErrForbidden, format, args...)
}

// Fenced refuses a request of an attempt that is no longer current.
func Fenced(format string, args ...any) *Refusal {
	return Errf(http.StatusConflict, rules.ErrFenced, format, args...)
}
