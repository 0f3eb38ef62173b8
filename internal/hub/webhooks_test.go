package hub

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/store"
	"drover/internal/webhook"
)

// TestWebhooksFollowTheAccessModel: through the API and the hub's own
// rules, a project hook needs its owner to see the project, hears of the
// project's jobs while its owner is a member, and stops when they leave;
// hooks are their owner's (and admins') only.
func TestWebhooksFollowTheAccessModel(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	alice, bob, carol := th.addUser("alice"), th.addUser("bob"), th.addUser("carol")
	_, base := th.hostProject(alice, "web")
	th.addMember(alice, "web", "bob")

	var mu sync.Mutex
	var got []string // job id and event, per request
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p webhook.Payload
		_ = json.Unmarshal(body, &p)
		mu.Lock()
		got = append(got, p.Job.ID+" "+p.Event+" "+p.Job.Requester)
		mu.Unlock()
	}))
	defer rc.Close()
	received := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}

	req := apitypes.WebhookRequest{URL: rc.URL, Events: []string{"job.queued"}, Project: "web"}
	if code, e := th.call(carol, "POST", "/webhooks", req, nil); code != http.StatusNotFound {
		t.Fatalf("carol's hook on a project she may not see: %d %+v", code, e)
	}
	var hook apitypes.WebhookView
	if code, e := th.call(bob, "POST", "/webhooks", req, &hook); code != http.StatusCreated || hook.Secret == "" {
		t.Fatalf("bob's hook: %d %+v %+v", code, e, hook)
	}
	mine := req
	mine.Project = ""
	if code, e := th.call(carol, "POST", "/webhooks", mine, nil); code != http.StatusCreated {
		t.Fatalf("carol's own-jobs hook: %d %+v", code, e)
	}

	j1 := th.submitAs(alice, apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Repo: onRepo("web", base)})
	waitFor(t, "bob hears of alice's job on web", func() bool { return len(received()) == 1 })
	if g := received(); g[0] != j1.ID+" job.queued alice" {
		t.Fatalf("received %q", g)
	}

	th.removeMember(alice, "web", "bob")
	j2 := th.submitAs(alice, apitypes.SubmitRequest{Agent: "exec", Args: []string{"true", "2"}, Repo: onRepo("web", base)})
	j3 := th.submitAs(bob, apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}}) // nobody's hook's
	// Once the outbox is empty, every change was expanded: nothing more comes.
	waitFor(t, "the outbox to be expanded", func() bool { return th.jobChanges() == 0 })
	if g := received(); len(g) != 1 {
		t.Errorf("after bob left web (jobs %s, %s): received %q", j2.ID, j3.ID, g)
	}

	var l apitypes.WebhookList
	if th.call(alice, "GET", "/webhooks", nil, &l); len(l.Webhooks) != 0 {
		t.Errorf("alice lists %+v", l.Webhooks)
	}
	if th.call(th.admin, "GET", "/webhooks", nil, &l); len(l.Webhooks) != 2 || l.Webhooks[0].Secret != "" || l.Webhooks[0].Owner != "bob" {
		t.Errorf("the admin lists %+v", l.Webhooks)
	}
	for _, c := range []struct{ method, path string }{{"DELETE", "/webhooks/" + hook.ID}, {"GET", "/webhooks/" + hook.ID + "/deliveries"}} {
		if code, _ := th.call(carol, c.method, c.path, nil, nil); code != http.StatusNotFound {
			t.Errorf("carol %s %s: %d", c.method, c.path, code)
		}
	}
	var ds apitypes.WebhookDeliveryList
	if code, _ := th.call(bob, "GET", "/webhooks/"+hook.ID+"/deliveries", nil, &ds); code != http.StatusOK || len(ds.Deliveries) != 1 || ds.Deliveries[0].JobID != j1.ID {
		t.Errorf("bob's delivery log: %d %+v", code, ds)
	}
	if code, _ := th.call(bob, "DELETE", "/webhooks/"+hook.ID, nil, nil); code != http.StatusOK {
		t.Errorf("bob removes his hook: %d", code)
	}
	if th.call(bob, "GET", "/webhooks", nil, &l); len(l.Webhooks) != 0 {
		t.Errorf("bob lists %+v after removing it", l.Webhooks)
	}
}

// jobChanges counts the outbox's rows not yet expanded.
func (th *testHub) jobChanges() int {
	th.t.Helper()
	var n int
	if err := th.h.store.Read(th.t.Context(), func(tx store.Tx) error {
		cs, err := tx.JobChanges(0)
		n = len(cs)
		return err
	}); err != nil {
		th.t.Fatal(err)
	}
	return n
}
