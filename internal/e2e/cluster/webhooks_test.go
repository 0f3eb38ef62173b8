package cluster

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/testkit"
	"drover/internal/webhook"
)

// TestWebhookHubKilledMidSend: a hub SIGKILLed while a receiver holds its
// delivery of job.finished open sends it again after its restart, with the
// same delivery id, signed with the secret `drover webhooks add` printed.
func TestWebhookHubKilledMidSend(t *testing.T) {
	t.Parallel()
	type req struct {
		delivery, event, sig string
		body                 []byte
	}
	var mu sync.Mutex
	var got []req
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, req{r.Header.Get(webhook.HeaderDelivery), r.Header.Get(webhook.HeaderEvent), r.Header.Get(webhook.HeaderSignature), body})
		first := len(got) == 1
		mu.Unlock()
		if first { // the hub dies while it waits for this answer
			once.Do(func() { close(held) })
			select {
			case <-release:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rc.Close()
	defer close(release)

	hub := testkit.StartHub(t, bin, "--webhook-private") // the receiver is on loopback
	hub.StartRunner(t, "r1")
	c := hub.Client()
	secret, stderr, err := hub.CLIOut("webhooks", "add", rc.URL, "--events", "job.finished")
	if err != nil {
		t.Fatalf("webhooks add: %v\n%s", err, stderr)
	}
	secret = strings.TrimSpace(secret)
	if !strings.HasPrefix(secret, webhook.SecretPrefix) {
		t.Fatalf("webhooks add printed %q", secret)
	}

	v := testkit.Submit(t, c, apitypes.SubmitRequest{Agent: "exec", Args: []string{"sh", "-c", "echo done"}})
	testkit.WaitJob(t, c, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	select {
	case <-held:
	case <-time.After(2 * time.Minute):
		t.Fatal("the hub never sent job.finished")
	}
	hub.Kill()
	hub.Restart()

	testkit.WaitFor(t, 2*time.Minute, "the delivery after the restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	mu.Lock()
	first, again := got[0], got[1]
	mu.Unlock()
	if again.delivery != first.delivery || again.event != "job.finished" || string(again.body) != string(first.body) {
		t.Fatalf("after the restart delivery %s (%s), want %s again with the same body", again.delivery, again.event, first.delivery)
	}
	if err := webhook.Verify(secret, again.sig, again.body, time.Now(), 5*time.Minute); err != nil {
		t.Fatalf("signature: %v", err)
	}
	var p webhook.Payload
	if err := json.Unmarshal(again.body, &p); err != nil || p.Job.ID != v.ID || p.Job.State != string(job.Completed) {
		t.Fatalf("payload %s (%v)", again.body, err)
	}

	out, err := hub.CLI("webhooks", "list", "--json")
	if err != nil || strings.Contains(out, secret) {
		t.Fatalf("webhooks list shows the secret or failed (%v):\n%s", err, out)
	}
	var l apitypes.WebhookList
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Webhooks) != 1 {
		t.Fatalf("webhooks list: %v\n%s", err, out)
	}
	var ds apitypes.WebhookDeliveryList
	testkit.WaitFor(t, 30*time.Second, "the delivery log", func() bool {
		out, err := hub.CLI("webhooks", "deliveries", l.Webhooks[0].ID, "--json")
		return err == nil && json.Unmarshal([]byte(out), &ds) == nil && len(ds.Deliveries) == 1 && ds.Deliveries[0].State == "delivered"
	})
	if d := ds.Deliveries[0]; d.ID != first.delivery || d.Status != http.StatusNoContent {
		t.Errorf("delivery log %+v", d)
	}
	if strings.Contains(hub.Output(), secret) {
		t.Error("the hub's log shows the secret")
	}
}
