package hub

import (
	"net/http"
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

	b := testkit.StartBrowser(t)
	b.DismissDialogs()
	b.Do("the sign-in page", time.Minute, chromedp.Navigate(th.srv.URL+"/signin?next=/runners"),
		chromedp.WaitVisible(chromedp.CSS(`.forge-signin a`)))
	if got := testkit.Eval[string](b, `document.querySelector(".forge-signin a").textContent`); got != "Sign in with gt" {
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
	b.Screenshot("signed-in-with-gitea")
	if who := testkit.Eval[string](b, `document.querySelector(".who").textContent`); strings.TrimSpace(who) != "bob" {
		t.Fatalf("signed in as %q, want bob", who)
	}
}
