package hub

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/forgehook"
	"drover/internal/forgethread"
	"drover/internal/forgework"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// memTriggerForge is a forge in memory for load tests of triggers: every
// login may write, hooks and comments are kept.
type memTriggerForge struct {
	mu       sync.Mutex
	secret   string
	comments int
}

func (f *memTriggerForge) CreateHook(_ context.Context, _ forge.Repo, h forge.NewHook) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.secret = h.Secret
	return 1, nil
}

func (f *memTriggerForge) DeleteHook(context.Context, forge.Repo, int64) error { return nil }

func (f *memTriggerForge) CommentOnce(context.Context, forge.Repo, int, string, string) (forge.Comment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.comments++
	return forge.Comment{ID: int64(f.comments)}, nil
}

func (f *memTriggerForge) Permission(context.Context, forge.Repo, string) (forge.Permission, error) {
	return forge.PermWrite, nil
}

// memForgework is the hub's core to forge triggers with the forge in
// memory: a job starts at the hosted project's head, not at a forge's.
type memForgework struct {
	forgework.Core
	f    *memTriggerForge
	head string
}

func (c memForgework) Forge(context.Context, string) (forgework.Forge, error) { return c.f, nil }
func (c memForgework) Base(context.Context, string) (string, error)           { return c.head, nil }

// hookLoad is a hub whose project web takes a label trigger from a forge
// in memory, bob linked as alice, and a runner of bob's that takes every
// job offered to it and fails it at once.
type hookLoad struct {
	th      *testHub
	f       *memTriggerForge
	hookURL string
	body    []byte // a Gitea issue_label delivery, issue number 3

	mu      sync.Mutex
	sent    map[string]time.Time // delivery id → first sent
	offered map[string]int       // delivery id → offers of its job
	lat     []time.Duration      // first send → offer
}

func newHookLoad(tb testing.TB) *hookLoad {
	tb.Helper()
	f := &memTriggerForge{}
	ff := &fakeThreadForge{markers: map[string]int64{}}
	dir, base := sourceRepo(tb)
	th := startHub(tb, Config{PublicURL: "http://hub.invalid",
		threadForge:   func(store.Forge) (forgethread.Forge, error) { return ff, nil },
		wrapForgework: func(c forgework.Core) forgework.Core { return memForgework{c, f, base} }})
	th.push(dir, "web", base)
	if code, e := th.call(th.admin, "PUT", "/forges/gt", apitypes.ForgeRequest{Kind: forge.KindGitea, URL: "https://gt.example", Token: "token"}, nil); code != http.StatusOK {
		tb.Fatalf("add forge: %d %+v", code, e)
	}
	fname, frepo := "gt", "alice/tools"
	if code, e := th.call(th.admin, "PUT", "/projects/web/config", apitypes.ProjectConfigRequest{Forge: &fname, ForgeRepo: &frepo}, nil); code != http.StatusOK {
		tb.Fatalf("map: %d %+v", code, e)
	}
	bob := th.addUser("bob")
	if code, e := th.call(th.admin, "POST", "/projects/web/members", apitypes.MemberRequest{User: "bob"}, nil); code != http.StatusOK {
		tb.Fatalf("member: %d %+v", code, e)
	}
	if code, e := th.call(th.admin, "POST", "/users/bob/links", apitypes.ForgeLinkRequest{Forge: "gt", Login: "alice"}, nil); code != http.StatusOK {
		tb.Fatalf("link: %d %+v", code, e)
	}
	var tv apitypes.ForgeTriggersView
	if code, e := th.call(th.admin, "PUT", "/projects/web/triggers", apitypes.ForgeTriggersRequest{Label: "drover:fix"}, &tv); code != http.StatusOK {
		tb.Fatalf("triggers: %d %+v", code, e)
	}
	body, err := os.ReadFile(filepath.Join("..", "forgehook", "testdata", "gitea_issue_label.json"))
	if err != nil {
		tb.Fatal(err)
	}
	l := &hookLoad{th: th, f: f, hookURL: th.srv.URL + strings.TrimPrefix(tv.HookURL, "http://hub.invalid"), body: body,
		sent: map[string]time.Time{}, offered: map[string]int{}}
	sr, _ := th.dial(th.registerRunnerOf(bob, "r1"), protocol.Hello{Slots: 8, Agents: []string{"exec", forgework.DefaultAgent}})
	sr.keepAlive(time.Second)
	go l.run(sr)
	return l
}

// run takes every offer, alone on the connection: it notes the offer
// against the job's delivery, accepts it and, once accepted, fails the
// attempt, freeing the slot. It ends with the connection.
func (l *hookLoad) run(sr *scriptRunner) {
	accepts := map[string]protocol.AttemptRef{} // request id → attempt
	seq := 0
	for {
		f, err := sr.tryRead(time.Hour)
		if err != nil {
			return
		}
		switch f.Type {
		case protocol.TypeOffer:
			at := time.Now()
			var o protocol.Offer
			if f.Decode(&o) != nil {
				return
			}
			var key string
			_ = l.th.h.store.Read(context.Background(), func(tx store.Tx) error {
				j, err := tx.Job(o.Job)
				key = j.Key
				return err
			})
			delivery := key[strings.LastIndexByte(key, ':')+1:]
			l.mu.Lock()
			l.offered[delivery]++
			if sent, ok := l.sent[delivery]; ok && l.offered[delivery] == 1 {
				l.lat = append(l.lat, at.Sub(sent))
			}
			l.mu.Unlock()
			seq++
			id := fmt.Sprintf("load-accept-%d", seq)
			accepts[id] = o.AttemptRef
			sr.send(protocol.TypeAccept, id, protocol.Accept{AttemptRef: o.AttemptRef})
		case protocol.TypeReply:
			ref, ok := accepts[f.ReplyTo]
			if !ok {
				continue
			}
			delete(accepts, f.ReplyTo)
			seq++
			sr.send(protocol.TypeFinish, fmt.Sprintf("load-finish-%d", seq), protocol.Finish{AttemptRef: ref,
				Outcome: job.Outcome{State: job.AttemptFailed, Reason: job.ReasonExited, ExitCode: exit(1)}, LogSHA256: sum(nil)})
		}
	}
}

// deliver posts delivery id, a label on issue, as Gitea would, signed; an
// id sent before is a redelivery of the same bytes.
func (l *hookLoad) deliver(tb testing.TB, id string, issue int) {
	l.mu.Lock()
	if _, ok := l.sent[id]; !ok {
		l.sent[id] = time.Now()
	}
	l.mu.Unlock()
	// One issue per delivery: a second label on an issue with a job
	// starts none.
	body := bytes.ReplaceAll(l.body, []byte(`"number": 3,`), fmt.Appendf(nil, `"number": %d,`, 1000+issue))
	req, _ := http.NewRequest(http.MethodPost, l.hookURL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitea-Event", "issues")
	req.Header.Set("X-Gitea-Event-Type", "issue_label")
	req.Header.Set("X-Gitea-Delivery", id)
	l.f.mu.Lock()
	req.Header.Set("X-Hub-Signature-256", forgehook.Sign([]byte(l.f.secret), body))
	l.f.mu.Unlock()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Errorf("delivery %s: %v", id, err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		tb.Errorf("delivery %s: %s", id, resp.Status)
	}
}

// settle waits until every distinct delivery's job was offered, then
// checks that each was offered exactly once and that the hub made no
// other forge job.
func (l *hookLoad) settle(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		l.mu.Lock()
		done := len(l.offered) >= len(l.sent)
		l.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) || tb.Failed() {
			var states []string
			_ = l.th.h.store.Read(context.Background(), func(tx store.Tx) error {
				for _, st := range []store.ForgeDeliveryState{store.DeliveryPending, store.DeliveryDone, store.DeliveryRefused} {
					ds, err := tx.ForgeDeliveries(st, 3)
					if err != nil {
						return err
					}
					for _, d := range ds {
						states = append(states, fmt.Sprintf("%s %s %s %q", d.Delivery, d.State, d.JobID, d.Reason))
					}
				}
				return nil
			})
			l.mu.Lock()
			defer l.mu.Unlock()
			tb.Fatalf("%d of %d deliveries' jobs offered; deliveries, a few of each state: %s", len(l.offered), len(l.sent), strings.Join(states, "; "))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var jobs []store.Job
	if err := l.th.h.store.Read(context.Background(), func(tx store.Tx) error {
		var err error
		jobs, err = tx.Jobs(store.JobFilter{Limit: 100000})
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	forgeJobs := 0
	for _, j := range jobs {
		if strings.HasPrefix(j.Key, forgework.KeyPrefix) {
			forgeJobs++
		}
	}
	if forgeJobs != len(l.sent) {
		tb.Errorf("%d forge jobs for %d distinct deliveries", forgeJobs, len(l.sent))
	}
	for id := range l.sent {
		if n := l.offered[id]; n != 1 {
			tb.Errorf("delivery %s: its job offered %d times", id, n)
		}
	}
}

// TestHookDeliveriesUnderLoad: deliveries sent as fast as the hub takes
// them, every fifth also redelivered, each start exactly one job, offered
// once; none is lost, none doubled.
func TestHookDeliveriesUnderLoad(t *testing.T) {
	t.Parallel()
	l := newHookLoad(t)
	const n = 150
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				id := fmt.Sprintf("load-%d", i)
				l.deliver(t, id, i)
				if i%5 == 0 {
					l.deliver(t, id, i)
				}
			}
		})
	}
	wg.Wait()
	l.settle(t)
}

// BenchmarkHookDeliveriesSustained sends b.N deliveries at 1,000 a minute
// (one every 60 ms; every tenth also redelivered) through the hub's HTTP
// server, and reports the time from a delivery's first send to its job's
// offer to the idle runner, p50 and p99. -benchtime 1000x is a minute.
func BenchmarkHookDeliveriesSustained(b *testing.B) {
	l := newHookLoad(b)
	tick := time.NewTicker(60 * time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		id := fmt.Sprintf("sustained-%d", i)
		l.deliver(b, id, i)
		if i%10 == 9 {
			l.deliver(b, fmt.Sprintf("sustained-%d", i-5), i-5)
		}
	}
	l.settle(b)
	b.StopTimer()
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(l.lat)
	b.ReportMetric(float64(l.lat[len(l.lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(l.lat[len(l.lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(l.sent)), "jobs")
}
