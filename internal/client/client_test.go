package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/rules"
)

// flaky fails the first n round trips as if the hub could not be reached.
type flaky struct {
	n     int32
	calls atomic.Int32
	next  http.RoundTripper
}

func (f *flaky) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.calls.Add(1) <= f.n {
		return nil, errors.New("connection refused")
	}
	return f.next.RoundTrip(r)
}

func newTestClient(t *testing.T, h http.Handler, failFirst int32) (*Client, *flaky) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f := &flaky{n: failFirst, next: http.DefaultTransport}
	c, err := New(srv.URL, "tok", WithHTTPClient(&http.Client{Transport: f}), WithRetryDelay(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return c, f
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func TestRetryPolicy(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, apitypes.JobView{ID: "j-1"})
	})
	ctx := context.Background()
	tests := []struct {
		name      string
		call      func(c *Client) error
		wantTries int32
		wantErr   bool
	}{
		{"GET retries", func(c *Client) error { _, err := c.Job(ctx, "j-1"); return err }, 3, false},
		{"keyed submit retries", func(c *Client) error {
			_, _, err := c.Submit(ctx, apitypes.SubmitRequest{Agent: "exec", Key: "k"})
			return err
		}, 3, false},
		{"submit without key does not", func(c *Client) error {
			_, _, err := c.Submit(ctx, apitypes.SubmitRequest{Agent: "exec"})
			return err
		}, 1, true},
		{"cancel does not", func(c *Client) error { _, err := c.Cancel(ctx, "j-1"); return err }, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, f := newTestClient(t, ok, 2)
			err := tt.call(c)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got := f.calls.Load(); got != tt.wantTries {
				t.Errorf("round trips = %d, want %d", got, tt.wantTries)
			}
		})
	}
}

func TestGETGivesUpAfterBoundedTries(t *testing.T) {
	c, f := newTestClient(t, http.NotFoundHandler(), 100)
	if _, err := c.Whoami(context.Background()); err == nil {
		t.Fatal("want an error")
	}
	if got := f.calls.Load(); got != boundedTries {
		t.Errorf("round trips = %d, want %d", got, boundedTries)
	}
}

func TestErrorAnswers(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		wantCode   string
		wantTries  int32
		wantStatus int
	}{
		{"protocol error", 404, `{"error":{"code":"not_found","message":"no job j-9"}}`, rules.ErrNotFound, 1, 404},
		{"conflict", 409, `{"error":{"code":"conflict","message":"job ended"}}`, rules.ErrConflict, 1, 409},
		{"plain text", 401, "go away\n", rules.ErrUnauthorized, 1, 401},
		{"proxy page is retried", 502, "<html>bad gateway</html>", rules.ErrInternal, boundedTries, 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, f := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}), 0)
			_, err := c.Job(context.Background(), "j-9")
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != tt.wantStatus {
				t.Fatalf("err = %v, want an APIError with status %d", err, tt.wantStatus)
			}
			var pe *rules.Error
			if !errors.As(err, &pe) || pe.Code != tt.wantCode || Code(err) != tt.wantCode {
				t.Errorf("code = %v, want %s", Code(err), tt.wantCode)
			}
			if got := f.calls.Load(); got != tt.wantTries {
				t.Errorf("round trips = %d, want %d", got, tt.wantTries)
			}
		})
	}
}

func TestRequestShape(t *testing.T) {
	var gotAuth, gotPath, gotQuery string
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotPath, gotQuery = r.Header.Get("Authorization"), r.URL.EscapedPath(), r.URL.RawQuery
		writeJSON(w, 200, apitypes.RunnerView{Name: "a b"})
	}), 0)
	if _, err := c.RevokeRunner(context.Background(), "a b"); err != nil {
		t.Fatal(err)
	}
	if gotAuth != "Bearer tok" || gotPath != "/api/v1/runners/a%20b/revoke" {
		t.Errorf("auth %q path %q", gotAuth, gotPath)
	}
	if _, err := c.Jobs(context.Background(), JobFilter{State: "queued", Limit: 5}); err != nil {
		t.Fatal(err)
	}
	if gotQuery != "limit=5&state=queued" {
		t.Errorf("query %q", gotQuery)
	}
}

func TestSubmitCreated(t *testing.T) {
	status := http.StatusCreated
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, status, apitypes.JobView{ID: "j-1"})
	}), 0)
	for _, st := range []int{http.StatusCreated, http.StatusOK} {
		status = st
		v, created, err := c.Submit(context.Background(), apitypes.SubmitRequest{Agent: "exec", Key: "k"})
		if err != nil || v.ID != "j-1" || created != (st == http.StatusCreated) {
			t.Errorf("status %d: got %v %v %v", st, v.ID, created, err)
		}
	}
}

func TestNormalizeURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:7700/", "http://127.0.0.1:7700"},
		{"127.0.0.1:7700", "http://127.0.0.1:7700"},
		{"HTTPS://Hub.Example:443/drover/", "https://hub.example:443/drover"},
		{"", ""},
		{"ftp://x", ""},
		{"http://u:p@x", ""},
		{"http://x/?a=b", ""},
	}
	for _, tt := range tests {
		got, err := NormalizeURL(tt.in)
		if (err != nil) != (tt.want == "") || got != tt.want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestTenancyRoutes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		call       func(c *Client) error
		wantMethod string
		wantPath   string // escaped
		wantBody   string // JSON, "" for none
	}{
		{"users", func(c *Client) error { _, err := c.Users(ctx); return err }, "GET", "/api/v1/users", ""},
		{"remove user", func(c *Client) error { _, err := c.RemoveUser(ctx, "a/b"); return err },
			"DELETE", "/api/v1/users/a%2Fb", ""},
		{"rotate token", func(c *Client) error { _, err := c.RotateToken(ctx, "bob"); return err },
			"POST", "/api/v1/users/bob/token", ""},
		{"share runner", func(c *Client) error {
			_, err := c.ShareRunner(ctx, "gpu 1", apitypes.ShareRequest{User: "bob"})
			return err
		}, "POST", "/api/v1/runners/gpu%201/share", `{"user":"bob"}`},
		{"unshare runner", func(c *Client) error {
			_, err := c.UnshareRunner(ctx, "gpu1", apitypes.ShareRequest{Hub: true})
			return err
		}, "POST", "/api/v1/runners/gpu1/unshare", `{"hub":true}`},
		{"share account", func(c *Client) error {
			_, err := c.ShareAccount(ctx, apitypes.AccountShareRequest{Runner: "gpu1", Account: "work", Project: "web"})
			return err
		}, "POST", "/api/v1/accounts/share", `{"runner":"gpu1","account":"work","project":"web"}`},
		{"unshare account", func(c *Client) error {
			_, err := c.UnshareAccount(ctx, apitypes.AccountShareRequest{Runner: "gpu1", Account: "work", User: "bob"})
			return err
		}, "POST", "/api/v1/accounts/unshare", `{"runner":"gpu1","account":"work","user":"bob"}`},
		{"members", func(c *Client) error { _, err := c.Members(ctx, "web"); return err },
			"GET", "/api/v1/projects/web/members", ""},
		{"add member", func(c *Client) error { _, err := c.AddMember(ctx, "web", "bob"); return err },
			"POST", "/api/v1/projects/web/members", `{"user":"bob"}`},
		{"remove member", func(c *Client) error { _, err := c.RemoveMember(ctx, "web", "b?b"); return err },
			"DELETE", "/api/v1/projects/web/members/b%3Fb", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var method, path, body string
			c, f := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				method, path = r.Method, r.URL.EscapedPath()
				b, _ := io.ReadAll(r.Body)
				body = strings.TrimSpace(string(b))
				writeJSON(w, 200, struct{}{})
			}), 0)
			if err := tt.call(c); err != nil {
				t.Fatal(err)
			}
			if method != tt.wantMethod || path != tt.wantPath || body != tt.wantBody {
				t.Errorf("sent %s %s %s, want %s %s %s", method, path, body, tt.wantMethod, tt.wantPath, tt.wantBody)
			}
			if n := f.calls.Load(); n != 1 {
				t.Errorf("round trips = %d, want 1", n)
			}
		})
	}
}

// TestMutationsAreNotRetried: a rotation, removal or share whose answer was
// lost is not sent again (a second rotation would revoke the first token).
func TestMutationsAreNotRetried(t *testing.T) {
	ctx := context.Background()
	for name, call := range map[string]func(c *Client) error{
		"rotate":        func(c *Client) error { _, err := c.RotateToken(ctx, "bob"); return err },
		"remove user":   func(c *Client) error { _, err := c.RemoveUser(ctx, "bob"); return err },
		"share runner":  func(c *Client) error { _, err := c.ShareRunner(ctx, "r", apitypes.ShareRequest{User: "u"}); return err },
		"accept share":  func(c *Client) error { _, err := c.AcceptShare(ctx, "r", apitypes.AnswerShareRequest{}); return err },
		"remove member": func(c *Client) error { _, err := c.RemoveMember(ctx, "web", "bob"); return err },
	} {
		c, f := newTestClient(t, http.NotFoundHandler(), 5)
		if err := call(c); err == nil {
			t.Errorf("%s: want an error", name)
		}
		if n := f.calls.Load(); n != 1 {
			t.Errorf("%s: round trips = %d, want 1", name, n)
		}
	}
}
