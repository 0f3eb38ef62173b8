package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/rules"
	"drover/internal/store"
)

// fakeCore knows one token per caller; every operation but Auth's panics
// (through the nil Core), so a test reaching one fails loudly.
type fakeCore struct {
	Core
	callers map[string]call.Caller
}

func (f fakeCore) AuthenticateToken(_ context.Context, tok string) (call.Caller, error) {
	p, ok := f.callers[tok]
	if !ok {
		return call.Caller{}, call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "token not recognised")
	}
	return p, nil
}

func (f fakeCore) AuthenticateAs(ctx context.Context, tok string, kind store.TokenKind) (call.Caller, error) {
	p, err := f.AuthenticateToken(ctx, tok)
	if err == nil && p.Kind != kind {
		err = call.Forbidden("this call needs a %s token", kind)
	}
	return p, err
}

func (f fakeCore) AsRefusal(err error) *call.Refusal {
	var ae *call.Refusal
	if errors.As(err, &ae) {
		return ae
	}
	return call.Errf(http.StatusInternalServerError, rules.ErrInternal, "internal error")
}

func testAPI() *API {
	return New(fakeCore{callers: map[string]call.Caller{
		"u": {Kind: store.TokenUser, UserID: "u1", Name: "ann"},
		"r": {Kind: store.TokenRunner, RunnerID: "r1", Name: "box"},
	}}, Config{Logger: slog.New(slog.DiscardHandler)})
}

// errorOf is the response's status and protocol error code ("" if none).
func errorOf(t *testing.T, rec *httptest.ResponseRecorder) (int, string) {
	t.Helper()
	var b apitypes.ErrorBody
	if rec.Code >= 400 {
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatalf("error body %q: %v", rec.Body.String(), err)
		}
	}
	return rec.Code, b.Error.Code
}

// TestAs: a route's caller is the token's, of the route's kind; anything
// else is refused as the protocol says, before the route runs.
func TestAs(t *testing.T) {
	api := testAPI()
	for _, tc := range []struct {
		name, header string
		status       int
		code         string
	}{
		{"user token", "Bearer u", http.StatusOK, ""},
		{"no token", "", http.StatusUnauthorized, rules.ErrUnauthorized},
		{"not bearer", "Basic dTp1", http.StatusUnauthorized, rules.ErrUnauthorized},
		{"unknown token", "Bearer x", http.StatusUnauthorized, rules.ErrUnauthorized},
		{"runner token", "Bearer r", http.StatusForbidden, rules.ErrForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			h := api.As(store.TokenUser, func(w http.ResponseWriter, _ *http.Request, p call.Caller) error {
				ran = true
				if p.UserID != "u1" {
					t.Errorf("caller %+v", p)
				}
				return reply(w, http.StatusOK, struct{}{}, nil)
			})
			req := httptest.NewRequest("GET", "/x", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if status, code := errorOf(t, rec); status != tc.status || code != tc.code {
				t.Fatalf("got %d %q, want %d %q", status, code, tc.status, tc.code)
			}
			if ran != (tc.status == http.StatusOK) {
				t.Fatalf("route ran: %v", ran)
			}
		})
	}
}

// TestDecodeBody: a body is one strict JSON value within the limit; any
// other is a clear 4xx.
func TestDecodeBody(t *testing.T) {
	type msg struct {
		Name string `json:"name"`
	}
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"ok", `{"name":"a"}`, http.StatusOK, ""},
		{"over the limit", `{"name":"` + strings.Repeat("x", 64) + `"}`, http.StatusRequestEntityTooLarge, rules.ErrTooLarge},
		{"unknown field", `{"nmae":"a"}`, http.StatusBadRequest, rules.ErrBadRequest},
		{"key twice", `{"name":"a","name":"b"}`, http.StatusBadRequest, rules.ErrBadRequest},
		{"two values", `{"name":"a"} {}`, http.StatusBadRequest, rules.ErrBadRequest},
		{"not UTF-8", "{\"name\":\"\xff\"}", http.StatusBadRequest, rules.ErrBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testAPI().Public(func(w http.ResponseWriter, r *http.Request) error {
				var m msg
				if err := decodeBodyMax(r, w, &m, 32); err != nil {
					return err
				}
				return reply(w, http.StatusOK, m, nil)
			})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/x", io.NopCloser(strings.NewReader(tc.body))))
			if status, code := errorOf(t, rec); status != tc.status || code != tc.code {
				t.Fatalf("got %d %q (%s), want %d %q", status, code, rec.Body, tc.status, tc.code)
			}
		})
	}
}
