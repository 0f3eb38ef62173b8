package hub

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"drover/internal/job"
	"drover/internal/protocol"
)

// browser is an HTTP client with a cookie jar that does not follow
// redirects, as a page's requests look.
type browser struct {
	th *testHub
	c  *http.Client
}

func (th *testHub) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{th: th, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (b *browser) do(method, path string, form url.Values, headers map[string]string) (*http.Response, string) {
	b.th.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.th.srv.URL+path, body)
	if err != nil {
		b.th.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.th.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func (b *browser) same() map[string]string { return map[string]string{"Origin": b.th.srv.URL} }

// signIn signs in with token and returns the session cookie.
func (b *browser) signIn(token string) *http.Cookie {
	b.th.t.Helper()
	resp, body := b.do("POST", "/signin", url.Values{"token": {token}, "next": {"/jobs"}}, b.same())
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/jobs" {
		b.th.t.Fatalf("sign in: %d\n%s", resp.StatusCode, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "drover_session" {
			return c
		}
	}
	b.th.t.Fatal("sign in set no session cookie")
	return nil
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf reads the CSRF token off a page.
func (b *browser) csrf(path string) string {
	b.th.t.Helper()
	_, body := b.do("GET", path, nil, nil)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		b.th.t.Fatalf("no CSRF token on %s:\n%s", path, body)
	}
	return m[1]
}

func TestWebSignInSessionsAndForgedPosts(t *testing.T) {
	th := startHub(t, Config{})
	b := th.browser()

	// Not signed in: pages send to the sign-in page.
	if resp, _ := b.do("GET", "/jobs", nil, nil); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
		t.Fatalf("GET /jobs signed out: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// A wrong token, or a sign-in posted from elsewhere, signs nobody in.
	if resp, body := b.do("POST", "/signin", url.Values{"token": {"drv_u_nope"}}, b.same()); resp.StatusCode != 401 || !strings.Contains(body, "not recognised") || len(resp.Cookies()) != 0 {
		t.Fatalf("bad token: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := b.do("POST", "/signin", url.Values{"token": {th.admin}}, map[string]string{"Origin": "https://evil.example"}); resp.StatusCode != 403 || len(resp.Cookies()) != 0 {
		t.Fatalf("cross-site sign-in: %d", resp.StatusCode)
	}

	c := b.signIn(th.admin)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.MaxAge <= 0 || strings.Contains(th.dbDump(), c.Value) {
		t.Fatalf("session cookie %+v (or stored in the clear)", c)
	}
	// Behind a TLS proxy the cookie is Secure.
	resp, _ := th.browser().do("POST", "/signin", url.Values{"token": {th.admin}},
		map[string]string{"Origin": "https://hub.example", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "hub.example"})
	if cs := resp.Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Fatalf("cookies behind TLS: %+v", cs)
	}
	// The session is no API token.
	if code, e := th.call(c.Value, "GET", "/jobs", nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("the session as a bearer token: %d %+v", code, e)
	}

	v := th.submit("sleep", "60")
	page := "/jobs/" + v.ID
	if resp, body := b.do("GET", page, nil, nil); resp.StatusCode != 200 || !strings.Contains(body, v.ID) || !strings.Contains(body, `id="cancel"`) {
		t.Fatalf("job page: %d\n%s", resp.StatusCode, body)
	}
	token := b.csrf(page)

	// Forged posts change nothing, and say why.
	other := th.browser()
	other.signIn(th.admin)
	staleToken := other.csrf(page) // another session's
	for _, tt := range []struct {
		name    string
		form    url.Values
		headers map[string]string
		status  int
		want    string
	}{
		{"no origin", url.Values{"csrf": {token}}, nil, 403, "no origin"},
		{"another origin", url.Values{"csrf": {token}}, map[string]string{"Origin": "https://evil.example"}, 403, "evil.example"},
		{"cross-site", url.Values{"csrf": {token}}, map[string]string{"Origin": th.srv.URL, "Sec-Fetch-Site": "cross-site"}, 403, "another site"},
		{"no csrf", url.Values{}, b.same(), 403, "CSRF token is missing or stale"},
		{"stale csrf", url.Values{"csrf": {staleToken}}, b.same(), 403, "CSRF token is missing or stale"},
	} {
		resp, body := b.do("POST", page+"/cancel", tt.form, tt.headers)
		if resp.StatusCode != tt.status || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d, want %d with %q\n%s", tt.name, resp.StatusCode, tt.status, tt.want, body)
		}
		if j := th.job(v.ID); j.State.Terminal() || j.Cancelling {
			t.Fatalf("%s: the forged post cancelled the job", tt.name)
		}
	}
	// Without the cookie (another browser), even with the token.
	if resp, body := th.browser().do("POST", page+"/cancel", url.Values{"csrf": {token}}, b.same()); resp.StatusCode != 401 || !strings.Contains(body, "not signed in") {
		t.Fatalf("no session: %d\n%s", resp.StatusCode, body)
	}

	// The real form cancels.
	if resp, body := b.do("POST", page+"/cancel", url.Values{"csrf": {token}}, b.same()); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: %d\n%s", resp.StatusCode, body)
	}
	th.waitJob(v.ID, func(v protocol.JobView) bool { return v.State == job.Cancelled })

	// Another user sees neither the job nor its log.
	bob := th.browser()
	bob.signIn(th.addUser("bob"))
	for _, p := range []string{page, page + "/log", page + "/log/window?end=10", page + "/log/live", page + "/events/live"} {
		if resp, body := bob.do("GET", p, nil, nil); resp.StatusCode != 404 || strings.Contains(body, "sleep") {
			t.Errorf("bob GET %s: %d\n%s", p, resp.StatusCode, body)
		}
	}
	if resp, _ := bob.do("POST", page+"/retry", url.Values{"csrf": {bob.csrf("/jobs")}}, bob.same()); resp.StatusCode != 404 {
		t.Errorf("bob retries the job: %d", resp.StatusCode)
	}

	// Sign-out ends the session; its cookie and CSRF token stop working.
	if resp, body := b.do("POST", "/signout", url.Values{"csrf": {token}}, b.same()); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d\n%s", resp.StatusCode, body)
	}
	b.c.Jar.SetCookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(th.srv.URL, "http://")}, []*http.Cookie{c})
	if resp, body := b.do("POST", page+"/retry", url.Values{"csrf": {token}}, b.same()); resp.StatusCode != 401 || !strings.Contains(body, "signed out") {
		t.Fatalf("after sign-out: %d\n%s", resp.StatusCode, body)
	}
	if th.job(v.ID).State != job.Cancelled {
		t.Fatal("a post after sign-out changed the job")
	}
}

func TestWebSessionExpires(t *testing.T) {
	th := startHub(t, Config{SessionTTL: 1}) // a nanosecond: over by the next request
	b := th.browser()
	c := b.signIn(th.admin) // the jar drops it at once; a browser that kept it:
	hd := map[string]string{"Origin": th.srv.URL, "Cookie": c.Name + "=" + c.Value}
	resp, body := b.do("POST", "/signout", url.Values{"csrf": {"x"}}, hd)
	if resp.StatusCode != 401 || !strings.Contains(body, "expired") {
		t.Fatalf("post with an expired session: %d\n%s", resp.StatusCode, body)
	}
	resp, _ = b.do("GET", "/runners", nil, hd)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("page with an expired session: %d", resp.StatusCode)
	}
	if _, body := b.do("GET", resp.Header.Get("Location"), nil, hd); !strings.Contains(body, "Your session ended") || !strings.Contains(body, `name="next" value="/runners"`) {
		t.Fatalf("the sign-in page after an expired session:\n%s", body)
	}
}

func TestWebRotatedTokenEndsSessions(t *testing.T) {
	th := startHub(t, Config{})
	bobTok := th.addUser("bob")
	b := th.browser()
	b.signIn(bobTok)
	if code, e := th.call(bobTok, "POST", "/users/bob/token", nil, nil); code != 200 {
		t.Fatalf("rotate: %d %+v", code, e)
	}
	if resp, _ := b.do("GET", "/jobs", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a session of a rotated token: %d", resp.StatusCode)
	}
}

func TestMetrics(t *testing.T) {
	th := startHub(t, Config{MetricsToken: "metrics-secret"})
	th.submit("true")
	th.call(th.admin, "GET", "/jobs/nope", nil, nil) // a 404, counted by route

	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", th.srv.URL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tok := range []string{"", "wrong", th.admin} {
		if code, body := get(tok); code != http.StatusUnauthorized || strings.Contains(body, "drover_jobs") {
			t.Fatalf("metrics with %q: %d", tok, code)
		}
	}
	code, body := get("metrics-secret")
	if code != 200 {
		t.Fatalf("metrics: %d\n%s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse metrics: %v\n%s", err, body)
	}
	for _, name := range []string{"drover_jobs", "drover_queue_depth", "drover_queue_oldest_age_seconds", "drover_dispatch_latency_seconds",
		"drover_runners_connected", "drover_log_bytes_total", "drover_http_request_errors_total", "drover_accounts_limited"} {
		if fams[name] == nil {
			t.Errorf("no metric %s", name)
		}
	}
	queued := 0.0
	for _, m := range fams["drover_jobs"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "queued" {
			queued = m.GetGauge().GetValue()
		}
	}
	if queued != 1 || fams["drover_queue_depth"].GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("queued jobs: %v\n%s", queued, body)
	}
	if !strings.Contains(body, `drover_http_request_errors_total{code="404",route="GET /api/v1/jobs/{id}"} 1`) {
		t.Errorf("the 404 is not counted by route:\n%s", body)
	}

	// Without a token configured, the hub's address serves no metrics.
	th2 := startHub(t, Config{})
	req, _ := http.NewRequest("GET", th2.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+th2.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("metrics without a token configured: %d", resp.StatusCode)
	}

	// On an address of their own, metrics need no token.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	th3 := startHub(t, Config{MetricsListen: addr})
	th3.serve()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err = http.Get("http://" + addr + "/metrics"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "drover_queue_depth 0") {
		t.Fatalf("metrics on their own address: %d\n%s", resp.StatusCode, b)
	}
}
