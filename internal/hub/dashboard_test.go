package hub

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/testkit"
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
	t.Parallel()
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
	th.waitJob(v.ID, func(v apitypes.JobView) bool { return v.State == job.Cancelled })

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
	t.Parallel()
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
	t.Parallel()
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

// getMetrics is GET /metrics with a bearer token ("": none).
func (th *testHub) getMetrics(token string) (int, string) {
	th.t.Helper()
	code, b := th.send(token, "GET", "/metrics", nil)
	return code, string(b)
}

// scrape reads /metrics with the metrics token through the Prometheus
// text parser.
func (th *testHub) scrape(token string) (map[string]*dto.MetricFamily, string) {
	th.t.Helper()
	code, body := th.getMetrics(token)
	if code != 200 {
		th.t.Fatalf("metrics: %d\n%s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		th.t.Fatalf("parse metrics: %v\n%s", err, body)
	}
	return fams, body
}

// metricValue is the value of a family's metric whose labels include
// label=value ("" for the family's only metric); -1 when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name, label, value string) float64 {
	for _, m := range fams[name].GetMetric() {
		if label != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == label && l.GetValue() == value }) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// Publications, egress denials and draining runners are counted: a
// published bundle's bytes, each finish's denials by phase, and a runner
// that reported no slots.
func TestMetricsCountPublicationsDenialsAndDraining(t *testing.T) {
	t.Parallel()
	rs := startRepoJob(t, Config{MetricsToken: "m"})
	th := rs.th
	fams, _ := th.scrape("m")
	if metricValue(fams, "drover_publication_bytes_total", "", "") != 0 || metricValue(fams, "drover_runners_draining", "", "") != 0 {
		t.Fatalf("before: publication bytes %v, draining %v", metricValue(fams, "drover_publication_bytes_total", "", ""), metricValue(fams, "drover_runners_draining", "", ""))
	}
	head := commitOn(t, rs.dir, rs.base, "a.txt", "a\n")
	b := bundle(t, rs.dir, head, rs.base)
	if a := th.publish(rs.tok, rs.o.AttemptRef, head, b, "", false); a.code != http.StatusOK {
		t.Fatalf("publish: %+v", a)
	}
	fin := protocol.Finish{AttemptRef: rs.o.AttemptRef, Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)},
		LogSize: 0, LogSHA256: sum(nil), Isolation: &protocol.Isolation{Kind: "bwrap",
			Denials: []protocol.Denial{{Host: "a.example:443", Phase: "agent", Count: 2}, {Host: "b.example:443", Phase: "agent", Count: 1}, {Host: "c.example:443", Phase: "setup", Count: 4}}}}
	wantOK(t, rs.sr.request(protocol.TypeFinish, fin))
	wantOK(t, rs.sr.request(protocol.TypeFinish, fin)) // a repeated finish counts nothing again
	rs.sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 0})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fams, _ = th.scrape("m"); metricValue(fams, "drover_runners_draining", "", "") == 1 || time.Now().After(deadline) {
			break
		}
	}
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{
		{"drover_publication_bytes_total", "", "", float64(len(b))},
		{"drover_egress_denials_total", "phase", "agent", 3},
		{"drover_egress_denials_total", "phase", "setup", 4},
		{"drover_runners_draining", "", "", 1},
		{"drover_runners_connected", "", "", 1},
		{"drover_attempts_finished_total", "outcome", "completed", 1},
	} {
		if got := metricValue(fams, c.name, c.label, c.value); got != c.want {
			t.Errorf("%s{%s=%q} = %v, want %v", c.name, c.label, c.value, got, c.want)
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{MetricsToken: "metrics-secret"})
	th.submit("true")
	th.call(th.admin, "GET", "/jobs/nope", nil, nil) // a 404, counted by route

	for _, tok := range []string{"", "wrong", th.admin} {
		if code, body := th.getMetrics(tok); code != http.StatusUnauthorized || strings.Contains(body, "drover_jobs") {
			t.Fatalf("metrics with %q: %d", tok, code)
		}
	}
	fams, body := th.scrape("metrics-secret")
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

// accessState is everything the access controls can change: runner box's
// revocation and shares (as the admin sees them), the shares of its owner's
// (token's) account and project proj's members.
func (th *testHub) accessState(owner string) string {
	th.t.Helper()
	rv := th.runnersOf(th.admin)["box"]
	var acct []apitypes.Share
	for _, a := range th.accounts(owner) {
		if a.Runner == "box" {
			acct = a.SharedWith
		}
	}
	ms, _ := th.members(th.admin, "proj")
	return fmt.Sprintf("revoked=%v access=%s shares=%v account=%v members=%v", rv.Revoked, rv.Access, rv.SharedWith, acct, ms.Members)
}

// startAccessFixture starts a hub with users alice, bob and carol, alice's
// runner box with account acct_1, and alice's project proj.
func startAccessFixture(t *testing.T) (th *testHub, alice, bob string) {
	t.Helper()
	th, alice, bob = startTenants(t)
	th.addUser("carol")
	th.registerRunnerOf(alice, "box")
	th.seedAccounts("box", protocol.AccountInfo{ID: "acct_1", Agent: "claude", Kind: "login", State: "ready"})
	th.hostProject(alice, "proj")
	return th, alice, bob
}

// The runners and projects pages' controls act as the API does for the
// same user: a user who may not is refused with the API's answer, and a
// post without the session's CSRF token or from another origin is
// refused before anything is read; neither changes anything.
func TestWebAccessControls(t *testing.T) {
	t.Parallel()
	th, alice, bob := startAccessFixture(t)

	ab, bb := th.browser(), th.browser()
	ab.signIn(alice)
	bb.signIn(bob)
	aCSRF, bCSRF := ab.csrf("/runners"), bb.csrf("/runners")
	controls := []struct {
		path string
		form url.Values
	}{
		{"/runners/box/share", url.Values{"kind": {"user"}, "subject": {"carol"}}},
		{"/accounts/share", url.Values{"runner": {"box"}, "account": {"acct_1"}, "kind": {"user"}, "subject": {"carol"}}},
		{"/projects/proj/members/add", url.Values{"user": {"carol"}}},
		{"/runners/box/revoke", url.Values{}}, // last: a revoked runner is shared no more
	}
	with := func(f url.Values, csrf string) url.Values {
		out := url.Values{"csrf": {csrf}}
		for k, v := range f {
			out[k] = v
		}
		return out
	}
	before := th.accessState(alice)
	for _, c := range controls {
		for _, tt := range []struct {
			name    string
			b       *browser
			form    url.Values
			headers map[string]string
			want    []int
		}{
			{"another user", bb, with(c.form, bCSRF), bb.same(), []int{403, 404}},
			{"no csrf", ab, c.form, ab.same(), []int{403}},
			{"another session's csrf", ab, with(c.form, bCSRF), ab.same(), []int{403}},
			{"another origin", ab, with(c.form, aCSRF), map[string]string{"Origin": "https://evil.example"}, []int{403}},
			{"no origin", ab, with(c.form, aCSRF), nil, []int{403}},
			{"signed out", th.browser(), with(c.form, aCSRF), ab.same(), []int{401}},
		} {
			resp, body := tt.b.do("POST", c.path, tt.form, tt.headers)
			if !slices.Contains(tt.want, resp.StatusCode) || !strings.Contains(body, "Refused") && !strings.Contains(body, "Forbidden") && !strings.Contains(body, "Not Found") {
				t.Errorf("%s %s: %d, want one of %v\n%s", tt.name, c.path, resp.StatusCode, tt.want, body)
			}
			if now := th.accessState(alice); now != before {
				t.Fatalf("%s %s changed access:\n%s\nwas\n%s", tt.name, c.path, now, before)
			}
		}
	}
	// Bob learns nothing of alice's runner from its page either.
	if _, body := bb.do("GET", "/runners", nil, nil); strings.Contains(body, "box") {
		t.Fatalf("bob's runners page shows alice's runner:\n%s", body)
	}

	// Bad input: a clear refusal, nothing changed.
	for _, c := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/runners/box/share", url.Values{"kind": {"user"}, "subject": {"nobody"}}, "nobody"},
		{"/runners/box/share", url.Values{"kind": {"group"}, "subject": {"carol"}}, "share with a user, a project or the hub"},
		{"/runners/box/share", url.Values{"kind": {"hub"}}, "only an admin"},
		{"/runners/box/unshare", url.Values{"kind": {"user"}, "subject": {"carol"}}, "not shared with"},
		{"/runners/nope/revoke", url.Values{}, "no runner named"},
		{"/accounts/share", url.Values{"runner": {"box"}, "account": {"acct_9"}, "kind": {"user"}, "subject": {"carol"}}, "acct_9"},
		{"/accounts/share", url.Values{"runner": {"box"}, "account": {"acct_1"}, "kind": {"hub"}}, "not the hub"},
		{"/projects/proj/members/add", url.Values{"user": {"nobody"}}, "no user named"},
		{"/projects/proj/members/remove", url.Values{"user": {"alice"}}, "stays a member"},
		{"/projects/proj/members/drop", url.Values{"user": {"carol"}}, "no such change"},
	} {
		resp, body := ab.do("POST", c.path, with(c.form, aCSRF), ab.same())
		if resp.StatusCode < 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s %v: %d, want a refusal with %q\n%s", c.path, c.form, resp.StatusCode, c.want, body)
		}
		if now := th.accessState(alice); now != before {
			t.Fatalf("%s %v changed access:\n%s", c.path, c.form, now)
		}
	}

	// The real forms change what the API would.
	for _, c := range controls {
		if resp, body := ab.do("POST", c.path, with(c.form, aCSRF), ab.same()); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%s", c.path, resp.StatusCode, body)
		}
	}
	if got, want := th.accessState(alice), "revoked=true access=private shares=[{carol  true}] account=[{carol  false}] members=[alice carol]"; got != want {
		t.Fatalf("after the controls: %s, want %s", got, want)
	}
	if _, body := bb.do("GET", "/projects", nil, nil); strings.Contains(body, `data-project="proj"`) {
		t.Fatal("bob sees alice's project")
	}
	if resp, body := ab.do("POST", "/projects/proj/members/remove", with(url.Values{"user": {"carol"}}, aCSRF), ab.same()); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove carol: %d\n%s", resp.StatusCode, body)
	}
	if ms, _ := th.members(th.admin, "proj"); !slices.Equal(ms.Members, []string{"alice"}) {
		t.Fatalf("members after removing carol: %v", ms.Members)
	}
}

// browserSignIn signs the browser in with token through the sign-in form.
func (th *testHub) browserSignIn(b *testkit.Browser, token string) {
	th.t.Helper()
	b.Do("sign in", 3*time.Minute, chromedp.Navigate(th.srv.URL+"/signin"), chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin button")), chromedp.WaitVisible(chromedp.CSS(".who")))
}

// In a real browser, a runner's owner shares the runner and one of its
// accounts and takes the shares back, adds and removes a project member,
// and revokes the runner; each form goes through the hub's own function.
func TestBrowserAccessControls(t *testing.T) {
	t.Parallel()
	th, alice, _ := startAccessFixture(t)
	b := testkit.StartBrowser(t)
	th.browserSignIn(b, alice)
	shares := func(sel string) string {
		return testkit.Eval[string](b, `Array.from(document.querySelectorAll(`+strconv.Quote(sel+" small.share")+`)).map(e => e.textContent).join(",")`)
	}

	b.Do("the runners page", time.Minute, chromedp.Navigate(th.srv.URL+"/runners"), chromedp.WaitVisible(chromedp.CSS(`#runner-box`)))
	b.Do("share the runner with carol", time.Minute,
		chromedp.Click(chromedp.CSS(`#runner-box details.share-runner summary`)),
		chromedp.SetValue(chromedp.CSS(`#runner-box details.share-runner select`), "user"),
		chromedp.SendKeys(chromedp.CSS(`#runner-box details.share-runner input[name=subject]`), "carol"),
		chromedp.Click(chromedp.CSS(`#runner-box details.share-runner form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#runner-box small.share`)))
	if got := shares("#runner-box"); got != "shared with carol (pending: not accepted yet)" {
		t.Fatalf("runner shares shown: %q", got)
	}
	if got := th.runnersOf(th.admin)["box"].SharedWith; len(got) != 1 || got[0].User != "carol" {
		t.Fatalf("runner shares stored: %v", got)
	}
	b.Do("share the account with project proj", time.Minute,
		chromedp.Click(chromedp.CSS(`#account-order details.share-account summary`)),
		chromedp.SetValue(chromedp.CSS(`#account-order details.share-account select`), "project"),
		chromedp.SendKeys(chromedp.CSS(`#account-order details.share-account input[name=subject]`), "proj"),
		chromedp.Click(chromedp.CSS(`#account-order details.share-account button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#account-order small.share`)))
	if got := shares("#account-order"); got != "shared with project proj" {
		t.Fatalf("account shares shown: %q", got)
	}
	b.Screenshot("runners-shared")
	b.Submit("unshare the account", `#account-order button.unshare`)
	b.Submit("unshare the runner", `#runner-box button.unshare`)
	if got := shares("#runner-box") + shares("#account-order"); got != "" {
		t.Fatalf("shares shown after unsharing: %q", got)
	}
	if got := th.runnersOf(th.admin)["box"].SharedWith; len(got) != 0 {
		t.Fatalf("runner shares after unsharing: %v", got)
	}

	b.Do("the projects page", time.Minute, chromedp.Navigate(th.srv.URL+"/projects"), chromedp.WaitVisible(chromedp.CSS(`#project-proj`)),
		chromedp.SendKeys(chromedp.CSS(`#project-proj form.add-member input[name=user]`), "carol"),
		chromedp.Click(chromedp.CSS(`#project-proj form.add-member button`)),
		chromedp.WaitVisible(chromedp.CSS(`#project-proj li[data-member=carol]`)))
	if n := testkit.Eval[int](b, `document.querySelectorAll("#project-proj li[data-member=alice] button").length`); n != 0 {
		t.Fatal("the owner has a remove button")
	}
	b.Screenshot("projects-members")
	if ms, _ := th.members(th.admin, "proj"); !slices.Equal(ms.Members, []string{"alice", "carol"}) {
		t.Fatalf("members: %v", ms.Members)
	}
	b.Submit("remove carol", `#project-proj li[data-member=carol] button`)
	if n := testkit.Eval[int](b, `document.querySelectorAll("#project-proj li[data-member=carol]").length`); n != 0 {
		t.Fatal("carol is still shown as a member")
	}

	b.Do("revoke the runner", time.Minute, chromedp.Navigate(th.srv.URL+"/runners"), chromedp.WaitVisible(chromedp.CSS(`#runner-box`)),
		chromedp.Click(chromedp.CSS(`#runner-box details.revoke summary`)),
		chromedp.Click(chromedp.CSS(`#runner-box details.revoke button`)),
		chromedp.WaitVisible(chromedp.CSS(`#runner-box .badge.bad`)))
	if n := testkit.Eval[int](b, `document.querySelectorAll("#runner-box form").length`); n != 0 {
		t.Fatalf("a revoked runner still has %d controls", n)
	}
	b.Screenshot("runners-revoked")
	if !th.runnersOf(th.admin)["box"].Revoked {
		t.Fatal("the runner is not revoked")
	}
}

// The job page shows the published change from the hub's repository,
// escaped; the raw diff is the patch; nobody else sees either; a bound
// cuts the diff.
func TestWebResultDiff(t *testing.T) {
	t.Parallel()
	rs := startRepoJob(t, Config{})
	th := rs.th
	head := commitOn(t, rs.dir, rs.base, "page.html", "<script>alert(1)</script>\n")
	if a := th.publish(rs.tok, rs.o.AttemptRef, head, bundle(t, rs.dir, head, rs.base), "", false); a.code != http.StatusOK {
		t.Fatalf("publish: %+v", a)
	}
	b := th.browser()
	b.signIn(th.admin)
	page := "/jobs/" + rs.o.Job
	_, body := b.do("GET", page, nil, nil)
	for _, want := range []string{`<div class="ds"> page.html | 1 +</div>`, `<div class="dh">diff --git a/page.html b/page.html</div>`,
		`<div class="da">+&lt;script&gt;alert(1)&lt;/script&gt;</div>`, "drover fetch " + rs.o.Job} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %q:\n%s", want, body)
		}
	}
	if resp, raw := b.do("GET", page+"/diff", nil, nil); resp.StatusCode != 200 || !strings.Contains(raw, "+<script>alert(1)</script>\n") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("raw diff: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	bob := th.browser()
	bob.signIn(th.addUser("bob"))
	if resp, raw := bob.do("GET", page+"/diff", nil, nil); resp.StatusCode != 404 || strings.Contains(raw, "script") {
		t.Fatalf("bob's raw diff: %d\n%s", resp.StatusCode, raw)
	}
	patch, cut, err := th.h.repos.Diff(t.Context(), "web", rs.base, head, 20)
	if err != nil || !cut || len(patch) != 20 {
		t.Fatalf("a bounded diff: %q cut=%v err=%v", patch, cut, err)
	}
}

// The runners page follows the hub without a reload: a runner that
// connects appears, the attempt it takes shows as a link to its job, a
// draining runner says so, and one that goes away turns offline.
func TestBrowserRunnersPageIsLive(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := th.registerRunner("r1")
	b := testkit.StartBrowser(t)
	th.browserSignIn(b, th.admin)
	b.Do("the runners page", time.Minute, chromedp.Navigate(th.srv.URL+"/runners"), chromedp.WaitVisible(chromedp.CSS(`#runner-r1`)))
	state := `document.querySelector("#runner-r1 td.state").textContent`
	if got := testkit.Eval[string](b, state); got != "offline" {
		t.Fatalf("before the runner connects: %q", got)
	}
	testkit.Eval[bool](b, `(window.samePage = true)`)
	sr, _ := th.dial(tok, protocol.Hello{Slots: 1})
	b.Until("the runner is online", 30*time.Second, state+` === "online"`)
	j := th.submit("sleep", "60")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	b.Until("its attempt shows", 30*time.Second, fmt.Sprintf(`document.querySelector("#runner-r1 a[href='/jobs/%s']") !== null`, j.ID))
	b.Screenshot("runners-live")
	sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 0})
	b.Until("the runner drains", 30*time.Second, state+` === "draining"`)
	sr.ws.CloseNow()
	b.Until("the runner is offline", 30*time.Second, state+` === "offline"`)
	if !testkit.Eval[bool](b, `window.samePage === true`) {
		t.Fatal("the page was reloaded")
	}
}

// In a real browser the job page's buttons act on the job as the API
// does and offer only what its state allows: cancel a queued job, then
// retry it, cancel it again and restart it; another user's page for the
// job says it is not found and offers nothing.
func TestBrowserJobControls(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	j := th.submitAs(alice, apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}})
	b := testkit.StartBrowser(t)
	th.browserSignIn(b, alice)
	page := th.srv.URL + "/jobs/" + j.ID
	b.Do("the job page", time.Minute, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#state")))
	buttons := func() string {
		return testkit.Eval[string](b, `Array.from(document.querySelectorAll(".actions button")).map(e => e.id).join(" ")`)
	}
	for _, step := range []struct {
		button, state, buttons string
	}{
		{"", "queued", "cancel"},
		{"cancel", "cancelled", "retry restart"},
		{"retry", "queued", "cancel"},
		{"cancel", "cancelled", "retry restart"},
		{"restart", "queued", "cancel"},
	} {
		if step.button != "" {
			b.Submit(step.button, "#"+step.button)
		}
		if got := testkit.Eval[string](b, `document.getElementById("state").textContent`); got != step.state {
			t.Fatalf("after %q: state %q, want %q", step.button, got, step.state)
		}
		if got := buttons(); got != step.buttons {
			t.Fatalf("after %q: buttons %q, want %q", step.button, got, step.buttons)
		}
		if got := th.job(j.ID).State; string(got) != step.state {
			t.Fatalf("after %q: the hub has the job %s", step.button, got)
		}
	}
	b.Screenshot("job-controls")

	b2 := testkit.StartBrowser(t)
	th.browserSignIn(b2, bob)
	b2.Do("bob's job page", time.Minute, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#why")))
	if got := testkit.Eval[string](b2, `document.getElementById("why").textContent + document.querySelectorAll("main form").length`); !strings.Contains(got, `no job "`+j.ID+`"`) || !strings.HasSuffix(got, "0") {
		t.Fatalf("bob's page: %q", got)
	}
}

// The job page follows the job without a reload: the attempt a runner
// takes appears with its runner, and when it ends the state, the outcome
// and the actions the new state allows are shown.
func TestBrowserJobPageIsLive(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1})
	j := th.submit("false")
	b := testkit.StartBrowser(t)
	th.browserSignIn(b, th.admin)
	b.Do("the job page", time.Minute, chromedp.Navigate(th.srv.URL+"/jobs/"+j.ID), chromedp.WaitVisible(chromedp.CSS("#state")))
	testkit.Eval[bool](b, `(window.samePage = true)`)
	o := sr.offerFor(j.ID)
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	b.Until("the attempt shows", 30*time.Second, `document.querySelector("#attempts tbody tr") !== null &&
		document.querySelector("#attempts tbody tr").textContent.includes("r1") && document.getElementById("state").textContent === "running"`)
	fin := protocol.Finish{AttemptRef: o.AttemptRef, Outcome: job.Outcome{State: job.AttemptFailed, Reason: job.ReasonExited, ExitCode: exit(1)},
		LogSize: 0, LogSHA256: sum(nil), Usage: &protocol.Usage{InputTokens: 10, OutputTokens: 20, CostUSD: 0.5}}
	wantOK(t, sr.request(protocol.TypeFinish, fin))
	b.Until("the outcome shows", 30*time.Second, `document.getElementById("state").textContent === "failed" &&
		document.querySelector("#attempts tbody tr").textContent.includes("exit 1") && document.querySelector("#attempts td.usage").textContent.includes("$0.5000") &&
		document.getElementById("retry") !== null && document.getElementById("cancel") === null`)
	b.Screenshot("job-live")
	if !testkit.Eval[bool](b, `window.samePage === true`) {
		t.Fatal("the page was reloaded")
	}
}

// The pipeline pages ask the hub's pipelines for the signed-in user: a
// pipeline the engine does not show the user reads as not found, the page
// and its stream alike; signed out, the page sends the browser to sign in
// and back.
func TestWebPipelinePages(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	if resp, _ := th.browser().do("GET", "/pipelines", nil, nil); resp.StatusCode != http.StatusSeeOther ||
		resp.Header.Get("Location") != "/signin?next=%2Fpipelines" {
		t.Fatalf("signed out: %d to %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	b := th.browser()
	b.signIn(th.admin)
	if resp, body := b.do("GET", "/pipelines", nil, nil); resp.StatusCode != 200 || !strings.Contains(body, `<a href="/pipelines" aria-current="page">Pipelines</a>`) {
		t.Fatalf("the pipelines page: %d\n%s", resp.StatusCode, body)
	}
	for _, path := range []string{"/pipelines/p_nope", "/pipelines/p_nope/live"} {
		if resp, body := b.do("GET", path, nil, nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no pipeline") {
			t.Errorf("GET %s: %d\n%s", path, resp.StatusCode, body)
		}
	}
}
