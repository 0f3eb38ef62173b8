package hub

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/netpolicy"
	"drover/internal/protocol"
)

// A project's owner (or an admin) sets, lists and removes its secrets;
// members who are not its owner and others may neither set nor see them,
// and every refusal changes nothing and never quotes the value. No answer
// holds a value; a job whose setup brings one is offered to the project
// owner's runner, never to a member's runner shared with the project.
func TestProjectSecrets(t *testing.T) {
	t.Parallel()
	const value = "project-secret-4b7d0e"
	th := startHub(t, Config{Network: netpolicy.Catalog{Policies: map[string][]string{
		"private": {"registry.corp.example"}, "other": {"other.example"}}}})
	alice, bob, carol := th.addUser("alice"), th.addUser("bob"), th.addUser("carol")
	_, base := th.hostProject(alice, "web")
	th.addMember(alice, "web", "bob")
	cmds, setupNet := []string{"fetch-deps"}, []string{"private"}
	if code, e := th.call(alice, "PUT", "/projects/web/config", apitypes.ProjectConfigRequest{SetupNetwork: &setupNet, SetupCommands: &cmds}, nil); code != http.StatusOK {
		t.Fatalf("set config: %d %+v", code, e)
	}
	good := apitypes.SecretRequest{Host: "registry.corp.example", Value: value}
	with := func(f func(*apitypes.SecretRequest)) apitypes.SecretRequest { r := good; f(&r); return r }
	for name, tc := range map[string]struct {
		token, path string
		req         apitypes.SecretRequest
		status      int
	}{
		"a member who is not the owner": {bob, "npm", good, http.StatusForbidden},
		"a non-member":                  {carol, "npm", good, http.StatusForbidden},
		"a bad name":                    {alice, "Bad-Name", good, http.StatusBadRequest},
		"no host":                       {alice, "npm", with(func(r *apitypes.SecretRequest) { r.Host = "" }), http.StatusBadRequest},
		"a host the setup does not reach": {alice, "npm", with(func(r *apitypes.SecretRequest) { r.Host = "other.example" }),
			http.StatusBadRequest},
		"plain http off loopback": {alice, "npm", with(func(r *apitypes.SecretRequest) { r.Host = "http://registry.corp.example" }),
			http.StatusBadRequest},
		"a bad header":       {alice, "npm", with(func(r *apitypes.SecretRequest) { r.Header = "X Token:" }), http.StatusBadRequest},
		"no value":           {alice, "npm", with(func(r *apitypes.SecretRequest) { r.Value = "" }), http.StatusBadRequest},
		"a line break":       {alice, "npm", with(func(r *apitypes.SecretRequest) { r.Value = value + "\r\nX-Evil: 1" }), http.StatusBadRequest},
		"a value too long":   {alice, "npm", with(func(r *apitypes.SecretRequest) { r.Value = strings.Repeat("x", protocol.MaxSecretLen+1) }), http.StatusBadRequest},
		"an unknown project": {alice, "npm", good, http.StatusNotFound},
	} {
		before := th.dbDump()
		path := "/projects/web/secrets/" + tc.path
		if name == "an unknown project" {
			path = "/projects/nope/secrets/npm"
		}
		if code, e := th.call(tc.token, "PUT", path, tc.req, nil); code != tc.status || e.Message == "" || strings.Contains(e.Message, value) {
			t.Errorf("%s: %d %+v, want %d with a message without the value", name, code, e, tc.status)
		}
		if after := th.dbDump(); after != before {
			t.Errorf("%s: the refusal changed the database: %s", name, firstDiff(before, after))
		}
	}
	for _, token := range []string{bob, carol} {
		if code, _ := th.call(token, "GET", "/projects/web/secrets", nil, nil); code != http.StatusForbidden {
			t.Errorf("a member who is not the owner or a non-member lists the secrets: %d", code)
		}
	}

	var l apitypes.SecretList
	if code, e := th.call(alice, "PUT", "/projects/web/secrets/npm", good, &l); code != http.StatusOK {
		t.Fatalf("owner sets a secret: %d %+v", code, e)
	}
	if len(l.Secrets) != 1 || l.Secrets[0].Upstream != "https://registry.corp.example" || l.Secrets[0].Header != "Authorization" ||
		l.Secrets[0].KeyEnv != "DROVER_SECRET_NPM" || l.Secrets[0].CreatedBy != "alice" {
		t.Fatalf("secrets = %+v", l)
	}
	for _, path := range []string{"/projects/web/secrets", "/projects/web/config", "/projects"} {
		code, body := th.rawGet(alice, path)
		if code != http.StatusOK || strings.Contains(body, value) {
			t.Fatalf("GET %s: %d, holds the value: %t", path, code, strings.Contains(body, value))
		}
	}

	// Only the owner's runner (or an admin's) receives a job whose setup
	// brings the secret.
	own, _ := th.dial(th.registerRunnerOf(alice, "a-box"), protocol.Hello{Slots: 1})
	th.share(alice, "a-box", true, apitypes.ShareRequest{Project: "web"})
	bobs := th.registerRunnerOf(bob, "b-box")
	th.share(bob, "b-box", true, apitypes.ShareRequest{Project: "web"})
	th.accept(alice, "b-box", "web")
	shared, _ := th.dial(bobs, protocol.Hello{Slots: 1})
	busy := th.submitAs(alice, apitypes.SubmitRequest{Args: []string{"sleep", "1"}})
	hold := own.offerFor(busy.ID)
	j := th.submitAs(bob, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	th.waitQueued(j.ID, "every runner that can take it is busy")
	if got := shared.heard(300 * time.Millisecond); strings.Contains(got, value) || strings.Contains(got, `"offer"`) {
		t.Fatalf("a member's runner heard an offer or the secret: %s", got)
	}
	runToEnd(t, own, hold, "", 0)
	o := own.offerFor(j.ID)
	if o.Spec.Setup == nil || len(o.Spec.Setup.Credentials) != 1 || o.Spec.Setup.Credentials[0].Key != value ||
		o.Spec.Setup.Credentials[0].KeyEnv != "DROVER_SECRET_NPM" || o.Spec.Setup.Credentials[0].BaseURLEnv != "DROVER_SECRET_NPM_URL" {
		t.Fatalf("the owner's runner got setup %+v", o.Spec.Setup)
	}
	runToEnd(t, own, o, "", 0)
	// With the owner's runner gone, the job waits and says for what.
	own.ws.CloseNow()
	th.waitRunner("a-box", false)
	j2 := th.submitAs(bob, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	th.waitQueued(j2.ID, "needs project secret(s) npm, which only runners owned by an admin or the project's owner alice receive")

	// Removing it takes it out of later offers; a second removal is 404.
	if code, e := th.call(bob, "DELETE", "/projects/web/secrets/npm", nil, nil); code != http.StatusForbidden {
		t.Fatalf("a member removes a secret: %d %+v", code, e)
	}
	if code, e := th.call(alice, "DELETE", "/projects/web/secrets/npm", nil, &l); code != http.StatusOK || len(l.Secrets) != 0 {
		t.Fatalf("owner removes the secret: %d %+v %+v", code, e, l)
	}
	if code, _ := th.call(alice, "DELETE", "/projects/web/secrets/npm", nil, nil); code != http.StatusNotFound {
		t.Fatalf("second removal: %d", code)
	}
	if o := shared.offerFor(j2.ID); o.Spec.Setup == nil || len(o.Spec.Setup.Credentials) != 0 {
		t.Fatalf("after removal the member's runner got setup %+v", o.Spec.Setup)
	}
}

// rawGet is a GET whose answer the test reads as text.
func (th *testHub) rawGet(token, path string) (int, string) {
	th.t.Helper()
	req, _ := http.NewRequest("GET", th.srv.URL+apitypes.APIPrefix+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		th.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&b)
	return resp.StatusCode, string(b)
}
