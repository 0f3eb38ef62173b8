package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/retry"
	"drover/internal/store"
	"drover/internal/store/postgres"
	"drover/internal/store/sqlite"
	"drover/internal/testkit"
	"drover/internal/webhook"
)

var (
	alice = call.Caller{UserID: "u-alice", Name: "alice", Kind: store.TokenUser}
	bob   = call.Caller{UserID: "u-bob", Name: "bob", Kind: store.TokenUser}
)

// fakeCore is the hub's core as webhooks see it: a job is seen by its
// requester and the members of its project.
type fakeCore struct {
	mu      sync.Mutex
	members map[string][]string // project → user ids
	leading atomic.Bool
}

func (f *fakeCore) SeesJob(_ context.Context, userID string, j store.Job) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return j.RequesterID == userID || slices.Contains(f.members[j.Project], userID), nil
}

func (f *fakeCore) SeesProject(_ context.Context, c call.Caller, project string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.members[project], c.UserID) {
		return call.NotFound("no project named %q", project)
	}
	return nil
}

func (f *fakeCore) JobURL(id string) string { return "https://hub.example/jobs/" + id }
func (f *fakeCore) Leading() bool           { return f.leading.Load() }

func (f *fakeCore) setMembers(project string, users ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members[project] = users
}

// received is one request a receiver got.
type received struct {
	Delivery, Event, Signature string
	Body                       []byte
	Payload                    webhook.Payload
}

// receiver is a webhook receiver in test code: it records every request
// and answers answer's status (204 when answer is nil).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(r received, n int) int // n: requests before this one
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g := received{Delivery: r.Header.Get(webhook.HeaderDelivery), Event: r.Header.Get(webhook.HeaderEvent),
			Signature: r.Header.Get(webhook.HeaderSignature), Body: body}
		_ = json.Unmarshal(body, &g.Payload)
		rc.mu.Lock()
		n := len(rc.got)
		rc.got = append(rc.got, g)
		answer := rc.answer
		rc.mu.Unlock()
		status := http.StatusNoContent
		if answer != nil {
			status = answer(g, n)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// waitFor polls cond until it holds; the test fails after a long while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fastRetry retries at once, a few times.
var fastRetry = retry.Policy{First: 5 * time.Millisecond, Max: 20 * time.Millisecond, Tries: 5}

type env struct {
	st    store.Store
	core  *fakeCore
	hooks *webhook.Hooks
}

func newEnv(t *testing.T, p retry.Policy) *env {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	return newEnvOn(t, p, st, err)
}

// newEnvOn is newEnv on a store opened already.
func newEnvOn(t *testing.T, p retry.Policy, st store.Store, err error) *env {
	t.Helper()
	e := newStoreEnv(t, st, err)
	e.core.leading.Store(true)
	e.hooks = e.start(t, p)
	return e
}

// newStoreEnv is an environment on st with its users and a core, and no
// sender yet.
func newStoreEnv(t *testing.T, st store.Store, err error) *env {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	if err := st.Write(t.Context(), func(tx store.Tx) error {
		for _, c := range []call.Caller{alice, bob} {
			if err := tx.InsertUser(store.User{ID: c.UserID, Name: c.Name, CreatedAt: now}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return &env{st: st, core: &fakeCore{members: map[string][]string{}}}
}

// start starts another Hooks on the environment's store.
func (e *env) start(t *testing.T, p retry.Policy) *webhook.Hooks {
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	h := webhook.New(ctx, e.core, webhook.Config{Store: e.st, Retry: p, Sweep: 20 * time.Millisecond, AllowPrivate: true})
	t.Cleanup(func() { cancel(); h.Wait() })
	return h
}

func (e *env) add(t *testing.T, c call.Caller, req apitypes.WebhookRequest) apitypes.WebhookView {
	t.Helper()
	v, err := e.hooks.AddWebhook(t.Context(), c, req)
	if err != nil {
		t.Fatalf("add webhook: %v", err)
	}
	return v
}

// move writes job id of requester on project in state (a new job when it
// does not exist), as the hub's writes do, and tells the hooks.
func (e *env) move(t *testing.T, id, requester, project string, state job.State) {
	t.Helper()
	now := time.Now()
	err := e.st.Write(t.Context(), func(tx store.Tx) error {
		j, err := tx.Job(id)
		if err != nil {
			return tx.InsertJob(store.Job{ID: id, State: state, Agent: "claude", RequesterID: requester, Project: project,
				CreatedAt: now, UpdatedAt: now})
		}
		j.State, j.UpdatedAt = state, now
		if state.Terminal() {
			j.FinishedAt, j.Reason, j.ExitCode = &now, job.ReasonExited, new(int)
		}
		return tx.UpdateJob(j)
	})
	if err != nil {
		t.Fatal(err)
	}
	e.hooks.JobChanged(id)
}

func (e *env) deliveries(t *testing.T, c call.Caller, hook string) []apitypes.WebhookDeliveryView {
	t.Helper()
	l, err := e.hooks.WebhookDeliveries(t.Context(), c, hook, 0)
	if err != nil {
		t.Fatal(err)
	}
	return l.Deliveries
}

func events(rs []received) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Payload.Job.ID+" "+r.Event)
	}
	return out
}

// TestDeliversSigned: each event of the owner's job arrives once, signed
// with the hook's secret (a wrong secret does not verify), in the job's
// order, with the headers receivers rely on.
func TestDeliversSigned(t *testing.T) {
	e := newEnv(t, fastRetry)
	rc := newReceiver(t)
	h := e.add(t, alice, apitypes.WebhookRequest{URL: rc.srv.URL, Events: webhook.Events})
	if !strings.HasPrefix(h.Secret, webhook.SecretPrefix) || len(h.Secret) < 26 {
		t.Fatalf("secret %q", h.Secret)
	}
	for _, s := range []job.State{job.Queued, job.Offered, job.Running, job.Waiting, job.Queued, job.Running, job.Completed} {
		e.move(t, "j-1", alice.UserID, "", s)
	}
	e.move(t, "j-2", bob.UserID, "", job.Queued) // bob's: not alice's hook's
	want := []string{"j-1 job.queued", "j-1 job.started", "j-1 job.asked", "j-1 job.queued", "j-1 job.started", "j-1 job.finished"}
	waitFor(t, "six deliveries", func() bool { return len(rc.requests()) >= len(want) })
	got := rc.requests()
	if g := events(got); !slices.Equal(g, want) {
		t.Fatalf("events %q, want %q", g, want)
	}
	now := time.Now()
	seen := map[string]bool{}
	for _, r := range got {
		if err := webhook.Verify(h.Secret, r.Signature, r.Body, now, time.Minute); err != nil {
			t.Errorf("delivery %s: %v", r.Delivery, err)
		}
		if err := webhook.Verify("whsec_wrong", r.Signature, r.Body, now, time.Minute); err == nil {
			t.Errorf("delivery %s verifies with a wrong secret", r.Delivery)
		}
		if err := webhook.Verify(h.Secret, r.Signature, r.Body, now.Add(time.Hour), time.Minute); err == nil {
			t.Errorf("delivery %s verifies an hour later", r.Delivery)
		}
		if r.Delivery == "" || seen[r.Delivery] || r.Payload.Delivery != r.Delivery || r.Payload.Event != r.Event {
			t.Errorf("delivery id %q (payload %q, event %q/%q) not unique or not the payload's", r.Delivery, r.Payload.Delivery, r.Event, r.Payload.Event)
		}
		seen[r.Delivery] = true
	}
	last := got[len(got)-1].Payload
	if last.Job.State != "completed" || last.Job.ExitCode == nil || last.Job.Requester != "alice" || last.Job.URL != "https://hub.example/jobs/j-1" {
		t.Errorf("finished payload %+v", last.Job)
	}
	waitFor(t, "the log to show the last delivered", func() bool { return e.deliveries(t, alice, h.ID)[0].State == "delivered" })
	ds := e.deliveries(t, alice, h.ID)
	if len(ds) != len(want) || ds[0].Attempts != 1 || ds[0].Status != http.StatusNoContent {
		t.Errorf("delivery log %+v", ds)
	}
}

// TestRedeliversInOrder: a receiver that fails gets the same delivery id
// again until it answers 2xx, and the job's next event waits for it.
func TestRedeliversInOrder(t *testing.T) {
	e := newEnv(t, retry.Policy{First: 5 * time.Millisecond, Max: 20 * time.Millisecond, Tries: 10})
	rc := newReceiver(t)
	rc.answer = func(r received, n int) int {
		if n < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	h := e.add(t, alice, apitypes.WebhookRequest{URL: rc.srv.URL, Events: []string{"job.started", "job.finished"}})
	e.move(t, "j-1", alice.UserID, "", job.Queued)
	e.move(t, "j-1", alice.UserID, "", job.Running)
	e.move(t, "j-1", alice.UserID, "", job.Failed)
	waitFor(t, "five requests", func() bool { return len(rc.requests()) >= 5 })
	got := rc.requests()
	if g := events(got); !slices.Equal(g, []string{"j-1 job.started", "j-1 job.started", "j-1 job.started", "j-1 job.started", "j-1 job.finished"}) {
		t.Fatalf("events %q", g)
	}
	for _, r := range got[1:4] {
		if r.Delivery != got[0].Delivery || string(r.Body) != string(got[0].Body) {
			t.Errorf("a retry carries delivery %s, want %s with the same body", r.Delivery, got[0].Delivery)
		}
	}
	waitFor(t, "the log to show both delivered", func() bool {
		ds := e.deliveries(t, alice, h.ID)
		return len(ds) == 2 && ds[0].State == "delivered" && ds[1].State == "delivered"
	})
	ds := e.deliveries(t, alice, h.ID)
	if ds[1].Attempts != 4 || ds[1].Status != http.StatusOK || ds[1].Event != "job.started" {
		t.Errorf("the retried delivery's log: %+v", ds[1])
	}
}

// TestGivesUp: a receiver that never answers 2xx is given up after the
// policy's tries, recorded, and the job's next event goes on.
func TestGivesUp(t *testing.T) {
	e := newEnv(t, retry.Policy{First: time.Millisecond, Max: 5 * time.Millisecond, Tries: 3})
	rc := newReceiver(t)
	rc.answer = func(r received, _ int) int {
		if r.Event == "job.started" {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	h := e.add(t, alice, apitypes.WebhookRequest{URL: rc.srv.URL, Events: []string{"job.started", "job.finished"}})
	e.move(t, "j-1", alice.UserID, "", job.Running)
	e.move(t, "j-1", alice.UserID, "", job.Completed)
	waitFor(t, "the finished event", func() bool {
		rs := rc.requests()
		return len(rs) > 0 && rs[len(rs)-1].Event == "job.finished"
	})
	if g := events(rc.requests()); !slices.Equal(g, []string{"j-1 job.started", "j-1 job.started", "j-1 job.started", "j-1 job.finished"}) {
		t.Errorf("events %q", g)
	}
	ds := e.deliveries(t, alice, h.ID)
	if ds[1].State != "failed" || ds[1].Attempts != 3 || ds[1].Status != 500 || !strings.Contains(ds[1].Error, "gave up") {
		t.Errorf("the given-up delivery's log: %+v", ds[1])
	}
}

// TestVisibility: a project hook hears of the project's jobs while its
// owner may see them, and of nothing else; an owner removed from the
// project stops hearing, even of events recorded before.
func TestVisibility(t *testing.T) {
	e := newEnv(t, fastRetry)
	e.core.setMembers("web", alice.UserID, bob.UserID)
	bobs := newReceiver(t)
	mine := newReceiver(t)
	hp := e.add(t, bob, apitypes.WebhookRequest{URL: bobs.srv.URL, Events: []string{"job.queued"}, Project: "web"})
	e.add(t, bob, apitypes.WebhookRequest{URL: mine.srv.URL, Events: []string{"job.queued"}}) // bob's own jobs
	e.move(t, "j-web", alice.UserID, "web", job.Queued)
	e.move(t, "j-api", alice.UserID, "api", job.Queued)
	e.move(t, "j-alone", alice.UserID, "", job.Queued)
	waitFor(t, "the web job's event", func() bool { return len(bobs.requests()) == 1 })

	// bob leaves the project while a delivery to him is being retried,
	// and before the next job's event.
	asked, removed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	bobs.answer = func(r received, _ int) int {
		if r.Payload.Job.ID == "j-web2" {
			once.Do(func() { close(asked) })
			<-removed
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	e.move(t, "j-web2", alice.UserID, "web", job.Queued)
	<-asked
	e.core.setMembers("web", alice.UserID)
	close(removed)
	e.move(t, "j-web3", alice.UserID, "web", job.Queued)
	waitFor(t, "the delivery recorded before to be given up", func() bool {
		ds := e.deliveries(t, bob, hp.ID)
		return len(ds) == 2 && ds[0].State == "failed"
	})
	if g := events(bobs.requests()); !slices.Equal(g, []string{"j-web job.queued", "j-web2 job.queued"}) {
		t.Errorf("bob's project hook got %q", g)
	}
	if g := events(mine.requests()); len(g) != 0 {
		t.Errorf("bob's own-jobs hook got %q", g)
	}
	if ds := e.deliveries(t, bob, hp.ID); !strings.Contains(ds[0].Error, "may no longer see") {
		t.Errorf("log %+v", ds[0])
	}
	// Others' hooks read as missing.
	if _, err := e.hooks.WebhookDeliveries(t.Context(), alice, hp.ID, 0); !isStatus(err, http.StatusNotFound) {
		t.Errorf("alice reads bob's hook's log: %v", err)
	}
	if _, err := e.hooks.RemoveWebhook(t.Context(), alice, hp.ID); !isStatus(err, http.StatusNotFound) {
		t.Errorf("alice removes bob's hook: %v", err)
	}
	l, err := e.hooks.ListWebhooks(t.Context(), alice)
	if err != nil || len(l.Webhooks) != 0 {
		t.Errorf("alice lists %+v (%v)", l.Webhooks, err)
	}
}

func isStatus(err error, status int) bool {
	var r *call.Refusal
	return errors.As(err, &r) && r.Status == status
}

// TestAddRefusals: bad input is refused clearly and adds nothing.
func TestAddRefusals(t *testing.T) {
	e := newEnv(t, fastRetry)
	e.core.setMembers("web", alice.UserID)
	ok := apitypes.WebhookRequest{URL: "https://hooks.example/x", Events: []string{"job.finished"}}
	with := func(f func(*apitypes.WebhookRequest)) apitypes.WebhookRequest {
		r := ok
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		req  apitypes.WebhookRequest
		want string
	}{
		{"no URL", with(func(r *apitypes.WebhookRequest) { r.URL = "" }), "http or https URL"},
		{"ftp", with(func(r *apitypes.WebhookRequest) { r.URL = "ftp://hooks.example/x" }), `scheme is "ftp"`},
		{"file", with(func(r *apitypes.WebhookRequest) { r.URL = "file:///etc/passwd" }), `scheme is "file"`},
		{"credentials", with(func(r *apitypes.WebhookRequest) { r.URL = "https://u:pw@hooks.example/x" }), "carries credentials"},
		{"no host", with(func(r *apitypes.WebhookRequest) { r.URL = "https:///x" }), "no host"},
		{"too long", with(func(r *apitypes.WebhookRequest) { r.URL = "https://h.example/" + strings.Repeat("a", webhook.MaxURL) }), "the limit is"},
		{"control", with(func(r *apitypes.WebhookRequest) { r.URL = "https://h.example/\x1b[31m" }), "control character"},
		{"no events", with(func(r *apitypes.WebhookRequest) { r.Events = nil }), "job.queued, job.started, job.asked, job.finished"},
		{"unknown event", with(func(r *apitypes.WebhookRequest) { r.Events = []string{"job.finished", "job.exploded"} }),
			`unknown event "job.exploded": the events are job.queued, job.started, job.asked, job.finished`},
		{"format", with(func(r *apitypes.WebhookRequest) { r.Format = "xml" }), `unknown format "xml"`},
		{"unseen project", with(func(r *apitypes.WebhookRequest) { r.Project = "secret" }), `no project named "secret"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.hooks.AddWebhook(t.Context(), alice, tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !isStatus(err, http.StatusBadRequest) && !isStatus(err, http.StatusNotFound) {
				t.Fatalf("error %v, want a refusal with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Errorf("the refusal repeats the URL's password: %v", err)
			}
		})
	}
	l, err := e.hooks.ListWebhooks(t.Context(), alice)
	if err != nil || len(l.Webhooks) != 0 {
		t.Fatalf("refusals added %+v (%v)", l.Webhooks, err)
	}
	v := e.add(t, alice, with(func(r *apitypes.WebhookRequest) {
		r.Project = "web"
		r.Events = []string{"job.finished", "job.queued", "job.finished"}
	}))
	if !slices.Equal(v.Events, []string{"job.queued", "job.finished"}) || v.Format != "json" {
		t.Errorf("added %+v", v)
	}
	l, _ = e.hooks.ListWebhooks(t.Context(), alice)
	if len(l.Webhooks) != 1 || l.Webhooks[0].Secret != "" {
		t.Errorf("the listing %+v shows a secret", l.Webhooks)
	}
}

// TestFormats: a chat format is a rendering of the same event, the
// agent's question escaped for its target.
func TestFormats(t *testing.T) {
	e := newEnv(t, fastRetry)
	slack, matrix := newReceiver(t), newReceiver(t)
	e.add(t, alice, apitypes.WebhookRequest{URL: slack.srv.URL, Events: []string{"job.asked"}, Format: "slack"})
	e.add(t, alice, apitypes.WebhookRequest{URL: matrix.srv.URL, Events: []string{"job.asked"}, Format: "matrix"})
	e.move(t, "j-1", alice.UserID, "", job.Running)
	if err := e.st.Write(t.Context(), func(tx store.Tx) error {
		if err := tx.InsertRunner(store.Runner{ID: "r-1", Name: "box", OwnerID: alice.UserID, Slots: 1, CreatedAt: time.Now()}); err != nil {
			return err
		}
		if err := tx.InsertAttempt(store.Attempt{ID: "a-1", JobID: "j-1", RunnerID: "r-1", Epoch: 1, State: job.AttemptAsked,
			OfferedAt: time.Now(), LeaseUntil: time.Now()}); err != nil {
			return err
		}
		return tx.InsertQuestion(store.Question{ID: "q-1", JobID: "j-1", AttemptID: "a-1", Text: "<!channel> ok? <script>x</script> & go", AskedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	e.move(t, "j-1", alice.UserID, "", job.Waiting)
	waitFor(t, "both messages", func() bool { return len(slack.requests()) == 1 && len(matrix.requests()) == 1 })
	var s map[string]string
	if err := json.Unmarshal(slack.requests()[0].Body, &s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s["text"], "&lt;!channel&gt; ok? &lt;script&gt;x&lt;/script&gt; &amp; go") || strings.Contains(s["text"], "<!channel>") {
		t.Errorf("slack text %q", s["text"])
	}
	var m map[string]string
	if err := json.Unmarshal(matrix.requests()[0].Body, &m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m["formatted_body"], "&lt;script&gt;") || strings.Contains(m["formatted_body"], "<script>") || m["msgtype"] != "m.notice" {
		t.Errorf("matrix message %q", m)
	}
}

// TestExpandsOnce: two senders on one store (a leader change's overlap)
// and a change expanded by both still make one delivery per hook, and a
// job's events go out in order.
func TestExpandsOnce(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { expandsOnce(t, newEnv(t, fastRetry)) })
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(t.Context(), testkit.StartPostgres(t))
		expandsOnce(t, newEnvOn(t, fastRetry, st, err))
	})
}

func expandsOnce(t *testing.T, e *env) {
	e.start(t, fastRetry)
	rc := newReceiver(t)
	h := e.add(t, alice, apitypes.WebhookRequest{URL: rc.srv.URL, Events: webhook.Events})
	for i := range 20 {
		id := "j-" + string(rune('a'+i))
		e.move(t, id, alice.UserID, "", job.Queued)
		e.move(t, id, alice.UserID, "", job.Completed)
	}
	waitFor(t, "forty deliveries", func() bool {
		ds := e.deliveries(t, alice, h.ID)
		done := 0
		for _, d := range ds {
			if d.State == "delivered" {
				done++
			}
		}
		return done == 40
	})
	if n := len(e.deliveries(t, alice, h.ID)); n != 40 {
		t.Errorf("%d deliveries, want 40", n)
	}
	byJob := map[string][]string{}
	for _, r := range rc.requests() {
		if k := r.Payload.Job.ID; len(byJob[k]) == 0 || byJob[k][len(byJob[k])-1] != r.Event {
			byJob[k] = append(byJob[k], r.Event) // a resend of the same event is at least once
		}
	}
	for k, evs := range byJob {
		if !slices.Equal(evs, []string{"job.queued", "job.finished"}) {
			t.Errorf("job %s: %q", k, evs)
		}
	}
}

// TestNoRedirectElsewhere: a receiver's redirect to another host is not
// followed with the signed body.
func TestNoRedirectElsewhere(t *testing.T) {
	e := newEnv(t, retry.Policy{First: time.Millisecond, Max: time.Millisecond, Tries: 1})
	other := newReceiver(t)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.srv.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	h := e.add(t, alice, apitypes.WebhookRequest{URL: redirect.URL, Events: []string{"job.queued"}})
	e.move(t, "j-1", alice.UserID, "", job.Queued)
	waitFor(t, "the delivery to be given up", func() bool {
		ds := e.deliveries(t, alice, h.ID)
		return len(ds) == 1 && ds[0].State == "failed"
	})
	if ds := e.deliveries(t, alice, h.ID); ds[0].Status != http.StatusTemporaryRedirect {
		t.Errorf("log %+v", ds[0])
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
}
