package hub

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/testkit"
)

// TestBrowserSignInWithGitea: a real Gitea with an OAuth2 application
// whose redirect URI is the hub's callback; its user alice is linked to
// drover user bob. In headless Chromium, "Sign in with gt" on the
// dashboard's sign-in page goes to Gitea's login form, then (once granted)
// back to the dashboard, signed in as bob.
func TestBrowserSignInWithGitea(t *testing.T) {
	t.Parallel()
	g := testkit.StartGitea(t)
	th, _ := startHubWithURL(t)
	_, password := g.CreateLogin(t, "alice")
	if code, e := th.call(th.admin, "PUT", "/forges/gt", apitypes.ForgeRequest{Kind: forge.KindGitea, URL: g.URL, Token: g.AdminToken}, nil); code != http.StatusOK {
		t.Fatalf("add forge: %d %+v", code, e)
	}
	callback := th.cfg.PublicURL + "/auth/forge/gt/callback"
	var app struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	g.API(t, g.AdminToken, http.MethodPost, "/user/applications/oauth2", map[string]any{
		"name": "drover", "redirect_uris": []string{callback}, "confidential_client": true}, &app)
	var v apitypes.ForgeOAuthView
	if code, e := th.call(th.admin, "PUT", "/forges/gt/oauth", apitypes.ForgeOAuthRequest{ClientID: app.ClientID, ClientSecret: app.ClientSecret}, &v); code != http.StatusOK || v.Callback != callback {
		t.Fatalf("set the forge's sign-in: %d %+v %+v", code, e, v)
	}
	th.addUser("bob")
	if code, e := th.call(th.admin, "POST", "/users/bob/links", apitypes.ForgeLinkRequest{Forge: "gt", Login: "alice"}, nil); code != http.StatusOK {
		t.Fatalf("link: %d %+v", code, e)
	}

	signInThroughGitea(t, th, password, "Sign in with gt", "signed-in-with-gitea")
}

// signInThroughGitea signs in from the dashboard's only sign-in button,
// which reads label, through Gitea's login form as alice (password), and
// checks the dashboard is then bob's.
func signInThroughGitea(t *testing.T, th *testHub, password, label, shot string) {
	t.Helper()
	b := testkit.StartBrowser(t)
	b.DismissDialogs()
	b.Do("the sign-in page", time.Minute, chromedp.Navigate(th.srv.URL+"/signin?next=/runners"),
		chromedp.WaitVisible(chromedp.CSS(`.forge-signin a`)))
	if got := testkit.Eval[string](b, `document.querySelector(".forge-signin a").textContent`); got != label {
		t.Fatalf("the button reads %q", got)
	}
	if !testkit.Eval[bool](b, `document.querySelector("#token") !== null`) {
		t.Fatal("the token paste is gone")
	}
	// Gitea's pages may not fire their load event (the test's build has
	// no frontend assets): wait for elements instead.
	b.Do("Gitea's login form", time.Minute, chromedp.Click(chromedp.CSS(`.forge-signin a`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name=user_name]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=user_name]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), password),
		chromedp.Submit(chromedp.CSS(`input[name=password]`)))
	// Gitea asks once whether to grant the application.
	b.Do("Gitea's grant page or the dashboard", time.Minute, chromedp.WaitVisible(chromedp.CSS(`#authorize-app, .who`)))
	if testkit.Eval[bool](b, `document.querySelector("#authorize-app") !== null`) {
		b.Do("grant the application", time.Minute, chromedp.Click(chromedp.CSS(`#authorize-app`)))
	}
	// WaitVisible, not Until: the hub's page goes on to /runners by itself,
	// and a poll loses its page's context to that navigation.
	b.Do("signed in on the dashboard", time.Minute, chromedp.WaitVisible(chromedp.CSS(`.who`)))
	if path := testkit.Eval[string](b, `location.pathname`); path != "/runners" {
		t.Fatalf("landed on %s, want /runners", path)
	}
	b.Screenshot(shot)
	if who := testkit.Eval[string](b, `document.querySelector(".who").textContent`); strings.TrimSpace(who) != "bob" {
		t.Fatalf("signed in as %q, want bob", who)
	}
}

// TestBrowserSignInWithOIDC: the same real Gitea as a generic OpenID
// Connect provider (discovery at its issuer, an ID token for the openid
// scope), its user alice's subject linked to drover user bob. "Sign in
// with gitea-id" goes through Gitea's login to the dashboard, signed in as
// bob.
func TestBrowserSignInWithOIDC(t *testing.T) {
	t.Parallel()
	g := testkit.StartGitea(t)
	th, _ := startHubWithURL(t)
	_, password := g.CreateLogin(t, "alice")
	callback := th.cfg.PublicURL + "/auth/oidc/gitea-id/callback"
	var app struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	g.API(t, g.AdminToken, http.MethodPost, "/user/applications/oauth2", map[string]any{
		"name": "drover-oidc", "redirect_uris": []string{callback}, "confidential_client": true}, &app)
	var v apitypes.OIDCProviderView
	if code, e := th.call(th.admin, "PUT", "/oidc/gitea-id", apitypes.OIDCProviderRequest{Issuer: g.URL, ClientID: app.ClientID,
		ClientSecret: app.ClientSecret}, &v); code != http.StatusOK || v.Callback != callback {
		t.Fatalf("add the provider: %d %+v %+v", code, e, v)
	}
	var alice struct {
		ID int64 `json:"id"`
	}
	g.API(t, g.AdminToken, http.MethodGet, "/users/alice", nil, &alice)
	th.addUser("bob")
	if code, e := th.call(th.admin, "POST", "/users/bob/oidc-links", apitypes.OIDCLinkRequest{Provider: "gitea-id",
		Subject: strconv.FormatInt(alice.ID, 10)}, nil); code != http.StatusOK {
		t.Fatalf("link: %d %+v", code, e)
	}
	signInThroughGitea(t, th, password, "Sign in with gitea-id", "signed-in-with-oidc")
}
