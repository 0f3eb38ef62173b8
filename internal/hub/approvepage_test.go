package hub

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"drover/internal/auth"
	"drover/internal/protocol"
)

// page does one request to the approval page and returns its status, body
// and headers.
func (th *testHub) page(method, query string, form url.Values, headers map[string]string) (int, string, http.Header) {
	th.t.Helper()
	resp, body := th.browser().do(method, "/approve"+query, form, headers)
	return resp.StatusCode, body, resp.Header
}

func wantPageHeaders(t *testing.T, hd http.Header) {
	t.Helper()
	want := map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "same-origin",
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
	}
	for k, v := range want {
		if got := hd.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

func TestApprovePageShowsTheLogin(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	key := auth.Hash(auth.NewToken(auth.PrefixRunner))
	code, body, hd := th.page("GET", "?name=gpu-1&key="+strings.ToUpper(key), nil, nil)
	if code != 200 {
		t.Fatalf("GET: %d\n%s", code, body)
	}
	wantPageHeaders(t, hd)
	for _, want := range []string{"gpu-1", key, `method="post"`, `type="password"`, `name="replace"`,
		"connects that machine as a runner of yours", "revokes that runner's token"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script") {
		t.Error("the page has a script")
	}

	// What the link carries is shown escaped, even when it is refused.
	evil := "<script>alert(1)</script>"
	for _, q := range []string{
		"?name=" + url.QueryEscape(evil) + "&key=" + key,
		"?name=gpu-1&key=" + url.QueryEscape(evil),
		"?name=" + url.QueryEscape(`x" onmouseover="alert(1)`) + "&key=" + key,
	} {
		code, body, hd := th.page("GET", q, nil, nil)
		if code != http.StatusBadRequest || strings.Contains(body, "<script>") || strings.Contains(body, `" onmouseover`) ||
			strings.Contains(body, `method="post"`) || !strings.Contains(body, "not a runner login") {
			t.Errorf("GET %s: %d\n%s", q, code, body)
		}
		wantPageHeaders(t, hd)
	}
}

func TestApprovePagePost(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	bob := th.addUser("bob")
	runnerTok := th.registerRunner("taken")
	tok := auth.NewToken(auth.PrefixRunner)
	key := auth.Hash(tok)
	same := map[string]string{"Origin": th.srv.URL}
	form := func(name, key, token string, replace bool) url.Values {
		v := url.Values{"name": {name}, "key": {key}, "token": {token}}
		if replace {
			v.Set("replace", "1")
		}
		return v
	}
	refusals := []struct {
		name    string
		form    url.Values
		headers map[string]string
		status  int
		want    string
	}{
		{"no origin", form("gpu-1", key, th.admin, false), nil, 403, "no origin"},
		{"another origin", form("gpu-1", key, th.admin, false), map[string]string{"Origin": "https://evil.example"}, 403, "evil.example"},
		{"null origin", form("gpu-1", key, th.admin, false), map[string]string{"Origin": "null"}, 403, "no origin"},
		{"another port", form("gpu-1", key, th.admin, false), map[string]string{"Origin": th.srv.URL + "1"}, 403, "not from this hub"},
		{"cross-site fetch", form("gpu-1", key, th.admin, false), map[string]string{"Origin": th.srv.URL, "Sec-Fetch-Site": "cross-site"}, 403, "another site"},
		{"no token", form("gpu-1", key, "", false), same, 401, "enter your drover user token"},
		{"bad token", form("gpu-1", key, "drv_u_nope", false), same, 401, "not recognised"},
		{"runner token", form("gpu-1", key, runnerTok, false), same, 403, "user token"},
		{"bad key", form("gpu-1", "abc", th.admin, false), same, 400, "not a runner login"},
		{"taken name", form("taken", key, th.admin, false), same, 409, "is taken"},
		{"another user's name", form("taken", key, bob, true), same, 409, "another user"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			code, body, hd := th.page("POST", "", tt.form, tt.headers)
			if code != tt.status || !strings.Contains(body, tt.want) {
				t.Fatalf("got %d, want %d with %q:\n%s", code, tt.status, tt.want, body)
			}
			wantPageHeaders(t, hd)
			if tok := tt.form.Get("token"); tok != "" && strings.Contains(body, tok) {
				t.Fatal("the page shows the token")
			}
			if _, code := th.loginName(tok); code != http.StatusUnauthorized {
				t.Fatalf("a refused post approved the login: %d", code)
			}
			if name, code := th.loginName(runnerTok); code != 200 || name != "taken" {
				t.Fatalf("a refused post changed runner taken: %q %d", name, code)
			}
		})
	}

	// The query cannot stand in for the form's fields.
	code, _, _ := th.page("POST", "?name=gpu-1&key="+key+"&token="+th.admin, url.Values{}, same)
	if code != http.StatusBadRequest {
		t.Fatalf("fields in the query: %d", code)
	}

	code, body, _ := th.page("POST", "", form("gpu-1", key, th.admin, false), same)
	if code != 200 || !strings.Contains(body, "Runner gpu-1 approved") || !strings.Contains(body, "admin") {
		t.Fatalf("approve: %d\n%s", code, body)
	}
	if name, code := th.loginName(tok); code != 200 || name != "gpu-1" {
		t.Fatalf("the approved login: %q %d", name, code)
	}
	// Idempotent, like the API.
	if code, body, _ := th.page("POST", "", form("gpu-1", key, th.admin, false), same); code != 200 || strings.Contains(body, "revoked") {
		t.Fatalf("the same key again: %d\n%s", code, body)
	}

	// Replace, with the box ticked: the old runner is cut off.
	sr, _ := th.dial(runnerTok, protocol.Hello{})
	newTok := auth.NewToken(auth.PrefixRunner)
	code, body, _ = th.page("POST", "", form("taken", auth.Hash(newTok), th.admin, true), same)
	if code != 200 || !strings.Contains(body, "was revoked") {
		t.Fatalf("replace: %d\n%s", code, body)
	}
	wantClosed(t, sr, protocol.CloseRevoked)
	if _, code := th.loginName(runnerTok); code != http.StatusUnauthorized {
		t.Fatalf("the replaced token: %d", code)
	}
}

// Behind a proxy, the origin is the hub's public address.
func TestApprovePageOriginBehindAProxy(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{PublicURL: "https://hub.example/"})
	key := auth.Hash(auth.NewToken(auth.PrefixRunner))
	form := url.Values{"name": {"gpu-1"}, "key": {key}, "token": {th.admin}}
	for _, tt := range []struct {
		headers map[string]string
		status  int
	}{
		{map[string]string{"Origin": "https://hub.example"}, 200},
		{map[string]string{"Origin": "https://HUB.example:443"}, 200},
		{map[string]string{"Origin": "https://proxy.example", "X-Forwarded-Host": "proxy.example", "X-Forwarded-Proto": "https"}, 200},
		{map[string]string{"Origin": "http://hub.example"}, 403},
		{map[string]string{"Origin": "https://hub.example.evil"}, 403},
	} {
		if code, body, _ := th.page("POST", "", form, tt.headers); code != tt.status {
			t.Errorf("%v: %d, want %d\n%s", tt.headers, code, tt.status, body)
		}
	}
}
