package forge_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/forge"
)

// ghToken is a canary: a personal access token that no error may carry.
const ghToken = "canary-token-0123456789"

const (
	shaMain = "1111111111111111111111111111111111111111"
	shaJob  = "2222222222222222222222222222222222222222"
	shaNone = "3333333333333333333333333333333333333333"
)

var repoOR = forge.Repo{Owner: "o", Name: "r"}

// withToken is a client of f with its personal access token, and f's repository o/r.
func withToken(t *testing.T, f *fakeGitHub) forge.Client {
	t.Helper()
	f.token = ghToken
	f.addRepo("o", "r", "main", shaMain)
	c, err := forge.Open(forge.Conn{Kind: forge.KindGitHub, URL: f.srv.URL, Token: ghToken}, f.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withApp is a client of f as App 42 installed (installation 7) on f's repository o/r.
func withApp(t *testing.T, f *fakeGitHub) forge.Client {
	t.Helper()
	key, pemKey := newAppKey(t)
	f.appID, f.appKey, f.pemKey = 42, &key.PublicKey, pemKey
	f.installs["o/r"] = 7
	f.addRepo("o", "r", "main", shaMain)
	c, err := forge.Open(forge.Conn{Kind: forge.KindGitHub, URL: f.srv.URL, AppID: 42, PrivateKey: pemKey}, f.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func code(err error) string {
	if fe, ok := errors.AsType[*forge.Error](err); ok {
		return fe.Code
	}
	return ""
}

// TestGitHubPullRequests: a pull request opened once, as a real draft, found by its head and
// base and by its head commit, read, and the repository's default branch; all under the
// Enterprise Server's /api/v3 a loopback URL maps to.
func TestGitHubPullRequests(t *testing.T) {
	f := newFakeGitHub(t)
	c := withToken(t, f)
	f.push("o/r", "drover/job-1", shaJob)
	ctx := t.Context()
	if def, err := c.DefaultBranch(ctx, repoOR); f.seen(err) != nil || def != "main" {
		t.Fatalf("DefaultBranch: %q, %v", def, err)
	}
	n := forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1", Body: "done", Draft: true}
	pr, err := c.CreatePR(ctx, repoOR, n)
	want := forge.PR{Number: 1, URL: f.srv.URL + "/o/r/pull/1", HeadBranch: "drover/job-1", HeadSHA: shaJob,
		Base: "main", State: "open", Draft: true}
	if f.seen(err) != nil || pr != want {
		t.Fatalf("CreatePR: %+v, %v; want %+v", pr, err, want)
	}
	if again, err := c.CreatePR(ctx, repoOR, n); f.seen(err) != nil || again != want || f.creates != 1 {
		t.Fatalf("CreatePR again: %+v, %v after %d creates; want the same pull request after 1", again, err, f.creates)
	}
	if got, ok, err := c.FindPR(ctx, repoOR, "drover/job-1", "main"); f.seen(err) != nil || !ok || got != want {
		t.Fatalf("FindPR: %+v, %v, %v", got, ok, err)
	}
	if _, ok, err := c.FindPR(ctx, repoOR, "drover/job-2", "main"); f.seen(err) != nil || ok {
		t.Fatalf("FindPR of another head: %v, %v", ok, err)
	}
	if got, ok, err := c.FindPRByHeadSHA(ctx, repoOR, shaJob); f.seen(err) != nil || !ok || got != want {
		t.Fatalf("FindPRByHeadSHA: %+v, %v, %v", got, ok, err)
	}
	if _, ok, err := c.FindPRByHeadSHA(ctx, repoOR, shaNone); f.seen(err) != nil || ok {
		t.Fatalf("FindPRByHeadSHA of another commit: %v, %v", ok, err)
	}
	if got, err := c.GetPR(ctx, repoOR, 1); f.seen(err) != nil || got != want {
		t.Fatalf("GetPR: %+v, %v", got, err)
	}
	if _, err := c.GetPR(ctx, repoOR, 9); code(f.seen(err)) != forge.CodeNotFound {
		t.Fatalf("GetPR of none: %v, want not_found", err)
	}
	if _, err := c.DefaultBranch(ctx, forge.Repo{Owner: "o", Name: "gone"}); code(f.seen(err)) != forge.CodeNotFound {
		t.Fatalf("DefaultBranch of no repository: %v, want not_found", err)
	}
	if n := f.openPulls("o/r", "drover/job-1"); n != 1 {
		t.Fatalf("%d open pull requests, want 1", n)
	}
	for _, p := range f.paths {
		if !strings.HasPrefix(p, "/api/v3/repos/o/") {
			t.Errorf("request to %s, want /api/v3/repos/o/...", p)
		}
	}
}

// TestGitHubFindPRByHeadSHAPages: the search goes on to the page GitHub's Link names.
func TestGitHubFindPRByHeadSHAPages(t *testing.T) {
	f := newFakeGitHub(t)
	c := withToken(t, f)
	f.mu.Lock()
	repo := f.repos["o/r"]
	for i := range 150 {
		b := "drover/job-" + strconv.Itoa(i)
		repo.branches[b] = strings.Repeat("0", 37) + strconv.Itoa(100+i)
		f.open(repo, b, "main", b, false)
	}
	f.mu.Unlock()
	pr, ok, err := c.FindPRByHeadSHA(t.Context(), repoOR, strings.Repeat("0", 37)+"249")
	if f.seen(err) != nil || !ok || pr.Number != 150 || f.listCalls != 2 {
		t.Fatalf("FindPRByHeadSHA: %+v, %v, %v after %d pages; want #150 on the second", pr, ok, err, f.listCalls)
	}
}

// TestGitHubCreatePRExactlyOnce: a create whose answer was lost (found by the look after it)
// and a create that lost a race to another each leave one pull request, which CreatePR answers.
func TestGitHubCreatePRExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*fakeGitHub)
	}{
		{"answer lost", func(f *fakeGitHub) { f.dropCreates = 1 }},
		{"race lost", func(f *fakeGitHub) { f.raceCreate = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			c := withToken(t, f)
			f.push("o/r", "drover/job-1", shaJob)
			tc.fault(f)
			n := forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1"}
			pr, err := c.CreatePR(t.Context(), repoOR, n)
			if f.seen(err) != nil || pr.Number != 1 || f.creates != 1 || f.openPulls("o/r", "drover/job-1") != 1 {
				t.Fatalf("CreatePR: %+v, %v after %d creates, %d open; want #1 after 1, 1 open",
					pr, err, f.creates, f.openPulls("o/r", "drover/job-1"))
			}
			if got, _ := c.GetPR(t.Context(), repoOR, 1); got.HeadBranch != "drover/job-1" || pr.Number != 1 {
				t.Fatalf("GetPR: %+v", got)
			}
		})
	}
}

// TestGitHubCreatePRNotReady: GitHub's 422s right after a push (the head not seen yet, or
// not yet compared) are not_ready, for the caller to try again shortly; others stay conflicts.
func TestGitHubCreatePRNotReady(t *testing.T) {
	for _, tc := range []struct {
		name, head, base, headSHA string
		code, msg                 string
	}{
		{"head not seen", "drover/job-1", "main", "", forge.CodeNotReady, "Validation Failed: PullRequest head invalid"},
		{"not compared", "drover/job-1", "main", shaMain, forge.CodeNotReady, "No commits between main and drover/job-1"},
		{"no base", "drover/job-1", "release", shaJob, forge.CodeConflict, "PullRequest base invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			c := withToken(t, f)
			if tc.headSHA != "" {
				f.push("o/r", tc.head, tc.headSHA)
			}
			_, err := c.CreatePR(t.Context(), repoOR, forge.NewPR{Head: tc.head, Base: tc.base, Title: "t"})
			fe, ok := errors.AsType[*forge.Error](f.seen(err))
			if !ok || fe.Code != tc.code || fe.Status != 422 || !strings.Contains(fe.Msg, tc.msg) {
				t.Fatalf("CreatePR: %v, want %s (HTTP 422) with %q", err, tc.code, tc.msg)
			}
		})
	}
}

// TestGitHubAnswers covers GitHub's answers the fake gives on demand: rate limits, primary
// (X-RateLimit-Remaining: 0 until X-RateLimit-Reset) and secondary (Retry-After, or the
// message alone), 403s of a missing right, failures and replies drover cannot read; and no
// secret echoed back is in an error.
func TestGitHubAnswers(t *testing.T) {
	secondary := `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",` +
		`"documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`
	primary := `{"message":"API rate limit exceeded for installation ID 7.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`
	reset := func(d time.Duration) string { return strconv.FormatInt(time.Now().Add(d).Unix(), 10) }
	minted := "ghs_" + strings.Repeat("Z", 36)
	for _, tc := range []struct {
		name     string
		status   int
		header   map[string]string
		body     string
		code     string
		min, max time.Duration // RetryAfter's bounds
		msg      string        // a part of Msg
	}{
		{"secondary, Retry-After", 403, map[string]string{"Retry-After": "30"}, secondary, forge.CodeRateLimited, 30 * time.Second, 30 * time.Second, "secondary rate limit"},
		{"secondary, 429", 429, map[string]string{"Retry-After": "120"}, secondary, forge.CodeRateLimited, 2 * time.Minute, 2 * time.Minute, "secondary rate limit"},
		{"secondary, no time", 403, nil, secondary, forge.CodeRateLimited, time.Minute, time.Minute, "secondary rate limit"},
		{"primary", 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset(5 * time.Minute)}, primary,
			forge.CodeRateLimited, 4 * time.Minute, 5 * time.Minute, "API rate limit exceeded"},
		{"primary for hours", 429, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset(2 * time.Hour)}, primary,
			forge.CodeRateLimited, 10 * time.Minute, 10 * time.Minute, "API rate limit exceeded"},
		{"primary, reset passed", 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset(-time.Minute)}, primary,
			forge.CodeRateLimited, 0, 0, ""},
		{"primary, reset unreadable", 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "soon"}, primary,
			forge.CodeRateLimited, 0, 0, ""},
		{"not a rate limit", 403, map[string]string{"X-RateLimit-Remaining": "4999"}, `{"message":"Resource not accessible by personal access token"}`,
			forge.CodeUnauthorized, 0, 0, "not accessible"},
		{"bad credentials", 401, nil, `{"message":"Bad credentials"}`, forge.CodeUnauthorized, 0, 0, "Bad credentials"},
		{"token echoed", 400, nil, `{"message":"bad token ` + ghToken + `"}`, forge.CodeRefused, 0, 0, "bad token [redacted]"},
		{"minted token echoed", 400, nil, `{"message":"bad token ` + minted + `"}`, forge.CodeRefused, 0, 0, "bad token [redacted]"},
		{"unavailable", 503, map[string]string{"Retry-After": "7"}, `<html>unicorn</html>`, forge.CodeUnavailable, 7 * time.Second, 7 * time.Second, "unicorn"},
		{"garbage JSON", 200, nil, `{"number": x}`, forge.CodeBadReply, 0, 0, "not the JSON expected"},
		// Cut short, as by a connection lost: worth another try.
		{"JSON cut short", 200, nil, `{"number": 1,`, forge.CodeUnavailable, 0, 0, "unexpected EOF"},
		{"no pull", 200, nil, `{"number": 0}`, forge.CodeBadReply, 0, 0, "without a number"},
		{"too long", 200, nil, `{"title":"` + strings.Repeat("x", 9<<20) + `"}`, forge.CodeBadReply, 0, 0, "an answer over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			c := withToken(t, f)
			f.answer = func(w http.ResponseWriter, r *http.Request) bool {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
				return true
			}
			_, err := c.GetPR(t.Context(), repoOR, 1)
			fe, ok := errors.AsType[*forge.Error](f.seen(err))
			if !ok || fe.Code != tc.code || fe.RetryAfter < tc.min || fe.RetryAfter > tc.max || !strings.Contains(fe.Msg, tc.msg) {
				t.Fatalf("GetPR: %#v, want code %s, retry after %s to %s, a message with %q", err, tc.code, tc.min, tc.max, tc.msg)
			}
			if strings.Contains(err.Error(), minted) {
				t.Fatalf("GetPR: error %q holds a token", err)
			}
		})
	}
}

// TestGitHubApp: as a GitHub App, drover finds the repository's installation with its JWT
// (which the fake verifies with the App's public key), mints an installation token, uses it
// for the API and git, and keeps it while it is good.
func TestGitHubApp(t *testing.T) {
	f := newFakeGitHub(t)
	c := withApp(t, f)
	f.push("o/r", "drover/job-1", shaJob)
	ctx := t.Context()
	if def, err := c.DefaultBranch(ctx, repoOR); f.seen(err) != nil || def != "main" {
		t.Fatalf("DefaultBranch: %q, %v", def, err)
	}
	pr, err := c.CreatePR(ctx, repoOR, forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1"})
	if f.seen(err) != nil || pr.Number != 1 || f.mints != 1 {
		t.Fatalf("CreatePR: %+v, %v after %d mints; want #1 after 1", pr, err, f.mints)
	}
	rem, err := c.Remote(ctx, repoOR)
	if f.seen(err) != nil || rem.URL != f.srv.URL+"/o/r.git" {
		t.Fatalf("Remote: %+v, %v", rem, err)
	}
	cred, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(rem.Header, "Basic "))
	tok, ok := strings.CutPrefix(string(cred), "x-access-token:")
	if _, minted := f.tokens[tok]; !ok || !minted || f.mints != 1 {
		t.Fatalf("Remote: header %q is not x-access-token with the token minted, after %d mints", rem.Header, f.mints)
	}
	f.addRepo("o", "other", "main", shaMain)
	if _, err := c.DefaultBranch(ctx, forge.Repo{Owner: "o", Name: "other"}); code(f.seen(err)) != forge.CodeNotFound ||
		!strings.Contains(err.Error(), "installation") {
		t.Fatalf("DefaultBranch of a repository the App is not installed on: %v, want not_found", err)
	}
	if _, err := c.Remote(ctx, forge.Repo{Owner: "o", Name: "other"}); code(f.seen(err)) != forge.CodeNotFound {
		t.Fatalf("Remote of a repository the App is not installed on: %v, want not_found", err)
	}
}

// TestGitHubAppTokens: an installation token is minted again when it is near its expiry
// (ghinstallation's rule) and when GitHub refuses it before then (revoked: drover's rule,
// one try more); else it is kept.
func TestGitHubAppTokens(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ttl     time.Duration
		between func(*fakeGitHub)
		mints   int
	}{
		{"good", time.Hour, func(*fakeGitHub) {}, 1},
		{"near expiry", 30 * time.Second, func(*fakeGitHub) {}, 2},
		{"revoked early", time.Hour, (*fakeGitHub).revokeTokens, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			c := withApp(t, f)
			f.tokenTTL = tc.ttl
			if _, err := c.DefaultBranch(t.Context(), repoOR); f.seen(err) != nil {
				t.Fatal(err)
			}
			tc.between(f)
			if def, err := c.DefaultBranch(t.Context(), repoOR); f.seen(err) != nil || def != "main" || f.mints != tc.mints {
				t.Fatalf("DefaultBranch: %q, %v after %d mints, want main after %d", def, err, f.mints, tc.mints)
			}
		})
	}
}

// TestGitHubAppRefused: a JWT of another key or App, and a mint GitHub refuses, are
// unauthorized, and tried once only.
func TestGitHubAppRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*fakeGitHub)
		msg   string
		calls int // requests the fake saw
	}{
		{"another key", func(f *fakeGitHub) {
			other, _ := newAppKey(t)
			f.appKey = &other.PublicKey
		}, "JSON web token", 1},
		{"another App", func(f *fakeGitHub) { f.appID = 43 }, "Issuer", 1},
		{"suspended", func(f *fakeGitHub) {
			f.answer = func(w http.ResponseWriter, r *http.Request) bool {
				if !strings.HasSuffix(r.URL.Path, "/access_tokens") {
					return false
				}
				f.fail(w, http.StatusForbidden, "This installation has been suspended")
				return true
			}
		}, "mint an installation token", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			c := withApp(t, f)
			tc.edit(f)
			_, err := c.GetPR(t.Context(), repoOR, 1)
			if code(f.seen(err)) != forge.CodeUnauthorized || !strings.Contains(err.Error(), tc.msg) || len(f.paths) != tc.calls {
				t.Fatalf("GetPR: %v after %d requests, want unauthorized with %q after %d", err, len(f.paths), tc.msg, tc.calls)
			}
		})
	}
}

// rewrite sends every request to the fake, keeping the URL it was for.
type rewrite struct {
	to   *url.URL
	next http.RoundTripper
	mu   sync.Mutex
	urls []string
}

func (rw *rewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	rw.mu.Lock()
	rw.urls = append(rw.urls, r.URL.String())
	rw.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = rw.to.Scheme, rw.to.Host, ""
	return rw.next.RoundTrip(r)
}

// TestOpenGitHubURLs: github.com's API is api.github.com, an Enterprise Server's is under
// its /api/v3/; git is under the web root of both.
func TestOpenGitHubURLs(t *testing.T) {
	for _, tc := range []struct {
		root, api, git string
		app            bool
	}{
		{"https://github.com", "https://api.github.com/", "https://github.com/o/r.git", false},
		{"https://GitHub.com/", "https://api.github.com/", "https://github.com/o/r.git", true},
		{"https://ghe.example.com", "https://ghe.example.com/api/v3/", "https://ghe.example.com/o/r.git", false},
		{"https://ghe.example.com/", "https://ghe.example.com/api/v3/", "https://ghe.example.com/o/r.git", true},
	} {
		t.Run(tc.root+" app="+strconv.FormatBool(tc.app), func(t *testing.T) {
			f := newFakeGitHub(t)
			conn := forge.Conn{Kind: forge.KindGitHub, URL: tc.root, Token: ghToken}
			if tc.app {
				withApp(t, f)
				conn = forge.Conn{Kind: forge.KindGitHub, URL: tc.root, AppID: f.appID, PrivateKey: f.pemKey}
			} else {
				f.token = ghToken
				f.addRepo("o", "r", "main", shaMain)
			}
			to, _ := url.Parse(f.srv.URL)
			rw := &rewrite{to: to, next: f.srv.Client().Transport}
			c, err := forge.Open(conn, &http.Client{Transport: rw})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.DefaultBranch(t.Context(), repoOR); f.seen(err) != nil {
				t.Fatal(err)
			}
			want := []string{tc.api + "repos/o/r"}
			if tc.app {
				want = []string{tc.api + "repos/o/r/installation", tc.api + "app/installations/7/access_tokens", tc.api + "repos/o/r"}
			}
			if !slices.Equal(rw.urls, want) {
				t.Fatalf("requests to %q, want %q", rw.urls, want)
			}
			if rem, err := c.Remote(t.Context(), repoOR); f.seen(err) != nil || rem.URL != tc.git {
				t.Fatalf("Remote: %+v, %v; want %s", rem, err, tc.git)
			}
		})
	}
}

func TestOpenGitHub(t *testing.T) {
	_, pemKey := newAppKey(t)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})
	app := func(url string, key []byte) forge.Conn {
		return forge.Conn{Kind: forge.KindGitHub, URL: url, AppID: 42, PrivateKey: key}
	}
	tok := func(url, token string) forge.Conn { return forge.Conn{Kind: forge.KindGitHub, URL: url, Token: token} }
	for _, tc := range []struct {
		name string
		conn forge.Conn
		err  string
	}{
		{"github.com", tok("https://github.com", ghToken), ""},
		{"loopback", tok("http://127.0.0.1:8080", ghToken), ""},
		{"app", app("https://ghe.example.com", pemKey), ""},
		{"plain http", tok("http://ghe.example.com", ghToken), "plain http only to a loopback"},
		{"credentials in URL", tok("https://u:"+ghToken+"@ghe.example.com", ghToken), "credentials"},
		{"token with a space", tok("https://github.com", ghToken+" x"), "printable ASCII"},
		{"token with a newline", tok("https://github.com", ghToken+"\r\nX: y"), "printable ASCII"},
		{"not PEM", app("https://github.com", []byte(ghToken)), "want an RSA key in PEM"},
		{"not RSA", app("https://github.com", ecPEM), "want an RSA key in PEM"},
		{"PEM, not a key", app("https://github.com", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte(ghToken)})), "want an RSA key"},
	} {
		_, err := forge.Open(tc.conn, nil)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), ghToken) {
			t.Errorf("%s: error %q holds the token", tc.name, err)
		}
	}
}

// TestGitHubAppConcurrent: calls at once as an App, each creating the same pull request,
// share the client's installations without a race and open one pull request.
func TestGitHubAppConcurrent(t *testing.T) {
	f := newFakeGitHub(t)
	c := withApp(t, f)
	f.push("o/r", "drover/job-1", shaJob)
	var wg sync.WaitGroup
	prs := make([]forge.PR, 8)
	for i := range prs {
		wg.Go(func() {
			pr, err := c.CreatePR(t.Context(), repoOR, forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1"})
			if f.seen(err) != nil {
				t.Error(err)
			}
			prs[i] = pr
		})
	}
	wg.Wait()
	for _, pr := range prs {
		if pr.Number != 1 {
			t.Fatalf("CreatePR: %+v, want #1", pr)
		}
	}
	if n := f.openPulls("o/r", "drover/job-1"); n != 1 {
		t.Fatalf("%d open pull requests, want 1", n)
	}
}
