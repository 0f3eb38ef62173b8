package client

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"drover/internal/apitypes"
)

func TestForgeAndPublishRoutes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		call       func(c *Client) error
		wantMethod string
		wantPath   string // escaped
		wantBody   string // JSON, "" for none
	}{
		{"forges", func(c *Client) error { _, err := c.Forges(ctx); return err }, "GET", "/api/v1/forges", ""},
		{"put forge", func(c *Client) error {
			_, err := c.PutForge(ctx, "gh/x y", apitypes.ForgeRequest{Kind: "github", URL: "https://github.com", AppID: 7, PrivateKey: "PEM"})
			return err
		}, "PUT", "/api/v1/forges/gh%2Fx%20y", `{"kind":"github","url":"https://github.com","app_id":7,"private_key":"PEM"}`},
		{"remove forge", func(c *Client) error { _, err := c.RemoveForge(ctx, "a?b"); return err },
			"DELETE", "/api/v1/forges/a%3Fb", ""},
		{"publish", func(c *Client) error {
			_, err := c.PublishJob(ctx, "j/1", apitypes.PublishRequest{Mode: apitypes.PublishToPR, ToPR: 12})
			return err
		}, "POST", "/api/v1/jobs/j%2F1/publish", `{"mode":"to_pr","to_pr":12}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var method, path, body string
			c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		})
	}
}

// TestPublishAnswers: 200 (done or failed) and 202 (pending) both decode to
// the publication; an error answer is an error.
func TestPublishAnswers(t *testing.T) {
	for _, tt := range []struct {
		status    int
		state     string
		wantState string
		wantErr   bool
	}{
		{http.StatusOK, "done", "done", false},
		{http.StatusOK, "failed", "failed", false},
		{http.StatusAccepted, "pending", "pending", false},
		{http.StatusConflict, "", "", true},
	} {
		c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tt.status >= 300 {
				writeJSON(w, tt.status, apitypes.ErrorBody{})
				return
			}
			writeJSON(w, tt.status, apitypes.PublicationView{Job: "j-1", State: tt.state})
		}), 0)
		v, err := c.PublishJob(context.Background(), "j-1", apitypes.PublishRequest{})
		if (err != nil) != tt.wantErr || v.State != tt.wantState {
			t.Errorf("%d %s: got %+v, %v", tt.status, tt.state, v, err)
		}
	}
}

// TestPublishRetriedForgeMutationsNot: a publish whose answer was lost is
// sent again (the hub keeps one publication per job); adding or removing a
// forge is not.
func TestPublishRetriedForgeMutationsNot(t *testing.T) {
	ctx := context.Background()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, struct{}{}) })
	for _, tt := range []struct {
		name      string
		call      func(c *Client) error
		wantTries int32
	}{
		{"publish", func(c *Client) error { _, err := c.PublishJob(ctx, "j-1", apitypes.PublishRequest{}); return err }, 3},
		{"list", func(c *Client) error { _, err := c.Forges(ctx); return err }, 3},
		{"put", func(c *Client) error { _, err := c.PutForge(ctx, "gh", apitypes.ForgeRequest{Token: "t"}); return err }, 1},
		{"remove", func(c *Client) error { _, err := c.RemoveForge(ctx, "gh"); return err }, 1},
	} {
		c, f := newTestClient(t, ok, 2)
		err := tt.call(c)
		if (err != nil) != (tt.wantTries == 1) {
			t.Errorf("%s: err = %v", tt.name, err)
		}
		if n := f.calls.Load(); n != tt.wantTries {
			t.Errorf("%s: round trips = %d, want %d", tt.name, n, tt.wantTries)
		}
	}
}
