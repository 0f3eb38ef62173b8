package forge_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"drover/internal/forge"
)

type threadsClient interface {
	forge.Threads
	forge.Hooks
}

// TestThreadsArguments: every forge's client refuses bad numbers, ids, commits, markers,
// bodies, logins and hooks with a clear error and without a call.
func TestThreadsArguments(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no call expected", http.StatusTeapot)
	}))
	defer srv.Close()
	good := forge.NewHook{URL: "https://hub.example.com/hooks/github", Secret: "s3cret", Events: []string{forge.HookIssues}}
	hook := func(edit func(*forge.NewHook)) forge.NewHook {
		h := good
		h.Events = append([]string{}, good.Events...)
		edit(&h)
		return h
	}
	createHook := func(edit func(*forge.NewHook)) func(c threadsClient) error {
		return func(c threadsClient) error { _, err := c.CreateHook(t.Context(), repoOR, hook(edit)); return err }
	}
	bad := forge.Repo{Owner: "o", Name: "../x"}
	cases := []struct {
		name, want string
		call       func(c threadsClient) error
	}{
		{"issue number 0", "number 0", func(c threadsClient) error { _, err := c.Issue(t.Context(), repoOR, 0); return err }},
		{"comments of -1", "number -1", func(c threadsClient) error { _, err := c.Comments(t.Context(), repoOR, -1); return err }},
		{"reviews of a bad repo", "repository", func(c threadsClient) error { _, err := c.Reviews(t.Context(), bad, 1); return err }},
		{"threads of 0", "number 0", func(c threadsClient) error { _, err := c.ReviewThreads(t.Context(), repoOR, 0); return err }},
		{"checks of a short sha", "commit id", func(c threadsClient) error { _, err := c.Checks(t.Context(), repoOR, "abc"); return err }},
		{"checks of a ref", "commit id", func(c threadsClient) error { _, err := c.Checks(t.Context(), repoOR, "main"); return err }},
		{"empty marker", "marker is required", func(c threadsClient) error {
			_, err := c.CommentOnce(t.Context(), repoOR, 1, "", "hi")
			return err
		}},
		{"marker with a space", "marker", func(c threadsClient) error {
			_, err := c.CommentOnce(t.Context(), repoOR, 1, "job 1", "hi")
			return err
		}},
		{"marker closing the HTML comment", "marker", func(c threadsClient) error {
			_, err := c.CommentOnce(t.Context(), repoOR, 1, "x-->", "hi")
			return err
		}},
		{"long marker", "at most 64", func(c threadsClient) error {
			_, err := c.CommentOnce(t.Context(), repoOR, 1, strings.Repeat("m", 65), "hi")
			return err
		}},
		{"blank comment", "blank", func(c threadsClient) error { _, err := c.CommentOnce(t.Context(), repoOR, 1, "m", " \n"); return err }},
		{"comment with an escape", "control character", func(c threadsClient) error {
			_, err := c.CommentOnce(t.Context(), repoOR, 1, "m", "a\x1b[2Jb")
			return err
		}},
		{"huge comment", "the limit is", func(c threadsClient) error {
			_, err := c.CommentOnce(t.Context(), repoOR, 1, "m", strings.Repeat("a", forge.MaxBody))
			return err
		}},
		{"edit of comment 0", "comment id 0", func(c threadsClient) error { return c.EditComment(t.Context(), repoOR, 0, "x") }},
		{"blank edit", "blank", func(c threadsClient) error { return c.EditComment(t.Context(), repoOR, 1, "") }},
		{"empty login", "login is required", func(c threadsClient) error { _, err := c.Permission(t.Context(), repoOR, ""); return err }},
		{"login with a slash", "login", func(c threadsClient) error { _, err := c.Permission(t.Context(), repoOR, "a/../b"); return err }},
		{"hook to plain http elsewhere", "loopback", createHook(func(h *forge.NewHook) { h.URL = "http://hub.example.com/hooks" })},
		{"hook with credentials in its URL", "credentials", createHook(func(h *forge.NewHook) { h.URL = "https://u:p@hub.example.com/hooks" })},
		{"hook with a fragment", "fragment", createHook(func(h *forge.NewHook) { h.URL = "https://hub.example.com/hooks#x" })},
		{"hook with a bad query", "query", createHook(func(h *forge.NewHook) { h.URL = "https://hub.example.com/hooks?a=%zz" })},
		{"hook to ftp", "want http", createHook(func(h *forge.NewHook) { h.URL = "ftp://hub.example.com/hooks" })},
		{"hook to no URL", "URL is required", createHook(func(h *forge.NewHook) { h.URL = "" })},
		{"hook without a secret", "secret is required", createHook(func(h *forge.NewHook) { h.Secret = "" })},
		{"hook secret with a newline", "printable ASCII", createHook(func(h *forge.NewHook) { h.Secret = "a\nb" })},
		{"hook of no events", "one event", createHook(func(h *forge.NewHook) { h.Events = nil })},
		{"hook of an unknown event", "push", createHook(func(h *forge.NewHook) { h.Events = []string{"push"} })},
		{"delete of hook 0", "hook id 0", func(c threadsClient) error { return c.DeleteHook(t.Context(), repoOR, 0) }},
	}
	for _, kind := range forge.Kinds() {
		c, err := forge.Open(forge.Conn{Kind: kind, URL: srv.URL, Token: "canary-token-0123456789"}, srv.Client())
		if err != nil {
			t.Fatal(err)
		}
		tc := c.(threadsClient)
		for _, cs := range cases {
			err := cs.call(tc)
			if err == nil || !strings.Contains(err.Error(), cs.want) {
				t.Errorf("%s: %s: %v, want an error saying %q", kind, cs.name, err, cs.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: %s: error %q holds the hook secret", kind, cs.name, err)
			}
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d calls made with bad arguments, want none", n)
	}
}
