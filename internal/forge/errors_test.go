package forge_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"drover/internal/forge"
)

// TestGiteaAnswers covers the answers a real Gitea does not give on demand, from a fake one:
// each maps to its code, Retry-After is read and bounded, the message is cut and escaped, and
// the token, echoed back, is in no error.
func TestGiteaAnswers(t *testing.T) {
	const token = "canary-token-0123456789"
	long := strings.Repeat("x", 500)
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		code       string
		retryAfter time.Duration
		msg        string // a part of Msg
	}{
		{"garbage JSON", 200, nil, `{"number": 1,`, forge.CodeBadReply, 0, "not the JSON expected"},
		{"no pull", 200, nil, `{"number": 0}`, forge.CodeBadReply, 0, "without a number"},
		{"HTML", 200, nil, `<html>`, forge.CodeBadReply, 0, "invalid character"},
		{"unavailable", 503, map[string]string{"Retry-After": "7"}, `{"message":"down for maintenance"}`,
			forge.CodeUnavailable, 7 * time.Second, "down for maintenance"},
		{"rate limited", 429, map[string]string{"Retry-After": "30"}, `{"message":"slow down"}`,
			forge.CodeRateLimited, 30 * time.Second, "slow down"},
		{"rate limited for a day", 429, map[string]string{"Retry-After": "86400"}, "", forge.CodeRateLimited, 10 * time.Minute, ""},
		{"rate limited until a date", 429, map[string]string{"Retry-After": time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}, "",
			forge.CodeRateLimited, 10 * time.Minute, ""},
		{"rate limited, unreadable", 429, map[string]string{"Retry-After": "soon"}, "", forge.CodeRateLimited, 0, ""},
		{"token echoed", 401, nil, `{"message":"bad token ` + token + `"}`, forge.CodeUnauthorized, 0, "[redacted]"},
		{"forbidden", 403, nil, `{"message":"no"}`, forge.CodeUnauthorized, 0, "no"},
		{"refused", 400, nil, "plain words\x1b[2J\x00", forge.CodeRefused, 0, `plain words\x1b[2J\x00`},
		{"long message", 502, nil, long, forge.CodeUnavailable, 0, "xxx…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "token "+token || strings.Contains(r.URL.String(), token) {
					t.Errorf("request %s: the token is not in the Authorization header only", r.URL)
				}
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := forge.NewGitea(srv.URL, token, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.GetPR(t.Context(), forge.Repo{Owner: "o", Name: "r"}, 1)
			fe, ok := errors.AsType[*forge.Error](err)
			if !ok || fe.Code != tc.code || fe.RetryAfter != tc.retryAfter || !strings.Contains(fe.Msg, tc.msg) {
				t.Fatalf("GetPR: %#v, want code %s, retry after %s, a message with %q", err, tc.code, tc.retryAfter, tc.msg)
			}
			if len(fe.Msg) > 200 || strings.Contains(err.Error(), token) || strings.ContainsFunc(err.Error(), func(r rune) bool { return r < 0x20 }) {
				t.Fatalf("GetPR: error %q is over 200 bytes, holds the token or a control character", err)
			}
		})
	}
}

// TestGiteaNoAnswer: a server that is gone is unavailable, and the cause stays reachable.
func TestGiteaNoAnswer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := forge.NewGitea(url, "t0ken", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetPR(t.Context(), forge.Repo{Owner: "o", Name: "r"}, 1)
	if fe, ok := errors.AsType[*forge.Error](err); !ok || fe.Code != forge.CodeUnavailable || fe.Status != 0 || errors.Unwrap(err) == nil {
		t.Fatalf("GetPR of a closed server: %#v, want unavailable with its cause", err)
	}
}

func TestNewGitea(t *testing.T) {
	for _, tc := range []struct{ url, token, err string }{
		{"http://127.0.0.1:3000/", "tok3n", ""},
		{"https://gitea.example", "tok3n", ""},
		{"", "tok3n", "base URL is required"},
		{"http://gitea.example", "tok3n", "plain http only to a loopback"},
		{"https://user:pw@gitea.example", "tok3n", "credentials"},
		{"https://gitea.example", "", "token is required"},
		{"https://gitea.example", "secret with space", "printable ASCII"},
		{"https://gitea.example", "secret\r\nX: y", "printable ASCII"},
	} {
		_, err := forge.NewGitea(tc.url, tc.token, nil)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("NewGitea(%q, %q): %v, want an error with %q", tc.url, tc.token, err, tc.err)
		}
		if err != nil && tc.token != "" && strings.Contains(err.Error(), tc.token) {
			t.Errorf("NewGitea: error %q holds the token", err)
		}
	}
}

// TestCreatePRLosesTheRace: a pull request opened between CreatePR's look and its create
// (Gitea answers 409) is the answer, not an error and not a second one.
func TestCreatePRLosesTheRace(t *testing.T) {
	const pull = `{"number":7,"html_url":"https://g/o/r/pulls/7","state":"open",
		"head":{"ref":"drover/job-1","sha":"` + sha1 + `","repo_id":1},"base":{"ref":"main","repo_id":1}}`
	var lists, posts int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost:
			posts++
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"message":"pull request already exists for these targets"}`))
		case r.URL.Path == "/api/v1/repos/o/r/pulls/main/drover/job-1": // the lookup by base and head
			lists++
			if lists == 1 { // the look before the create: none yet
				w.WriteHeader(http.StatusNotFound)
				w.Write([]byte(`{"message":"The target couldn't be found."}`))
				return
			}
			w.Write([]byte(pull))
		case r.URL.Query().Get("page") != "1":
			w.Write([]byte(`[]`))
		default:
			lists++
			if lists == 1 { // the look before the create: none yet
				w.Write([]byte(`[]`))
				return
			}
			w.Write([]byte(`[` + pull + `]`))
		}
	}))
	defer srv.Close()
	c, err := forge.NewGitea(srv.URL, "tok3n", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	pr, err := c.CreatePR(t.Context(), forge.Repo{Owner: "o", Name: "r"}, forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1"})
	if err != nil || pr.Number != 7 || posts != 1 || lists != 2 {
		t.Fatalf("CreatePR: %+v, %v after %d creates and %d looks; want #7 after 1 and 2", pr, err, posts, lists)
	}
}

const sha1 = "0123456789abcdef0123456789abcdef01234567"
