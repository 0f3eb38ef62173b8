package hub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"drover/internal/ids"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// queueUnrunnable puts n queued jobs of the requester that no runner can
// take (a label nobody has) straight into the store, as n submissions would.
func (th *testHub) queueUnrunnable(requesterName string, n int) {
	th.t.Helper()
	now := time.Now()
	err := th.h.store.Write(context.Background(), func(tx store.Tx) error {
		u, err := tx.UserByName(requesterName)
		if err != nil {
			return err
		}
		for i := range n {
			at := now.Add(time.Duration(i-n) * time.Millisecond) // older than anything submitted next
			if err := tx.InsertJob(store.Job{ID: ids.New("j"), State: job.Queued, Agent: "exec", Args: []string{"true"},
				Labels: map[string]string{"gpu": "nobody-has-it"}, RequesterID: u.ID, LogCap: 1 << 20,
				CreatedAt: at, UpdatedAt: at}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		th.t.Fatalf("queue %d jobs: %v", n, err)
	}
}

// TestUnrunnableJobsNeverHideARunnableOne: 10,000 jobs no runner can take,
// older than everything, hold up neither another user's job nor the same
// user's runnable one (the dispatcher read only the 256 oldest, and stopped).
func TestUnrunnableJobsNeverHideARunnableOne(t *testing.T) {
	th := startHub(t, Config{})
	alice, bob := th.addUser("alice"), th.addUser("bob")
	th.queueUnrunnable("alice", 10_000)
	tok := th.registerRunner("shared")
	if code, e := th.call(th.admin, "POST", "/runners/shared/share", protocol.ShareRequest{Hub: true}, nil); code != http.StatusOK {
		t.Fatalf("make the runner hub-wide: %d %+v", code, e)
	}
	sr, _ := th.dial(tok, protocol.Hello{Slots: 2})
	for _, tc := range []struct{ name, token string }{{"another user's", bob}, {"the same user's", alice}} {
		j := th.submitAs(tc.token, protocol.SubmitRequest{})
		if o := sr.offer(); o.Job != j.ID {
			t.Fatalf("%s runnable job %s: the offer was for %s", tc.name, j.ID, o.Job)
		}
	}
	// The unrunnable ones say why, read or not by the pass.
	var l protocol.JobList
	if code, e := th.call(alice, "GET", "/jobs?state=queued&limit=1000", nil, &l); code != http.StatusOK {
		t.Fatalf("list: %d %+v", code, e)
	}
	for _, v := range l.Jobs {
		if v.Waiting == "" {
			t.Fatalf("queued job %s has no reason", v.ID)
		}
	}
}

// TestRequestersTakeTurns: a requester with jobs on the fleet waits behind
// one without, whatever the age of their queued jobs.
func TestRequestersTakeTurns(t *testing.T) {
	th := startHub(t, Config{})
	alice, bob := th.addUser("alice"), th.addUser("bob")
	tok := th.registerRunner("shared")
	if code, e := th.call(th.admin, "POST", "/runners/shared/share", protocol.ShareRequest{Hub: true}, nil); code != http.StatusOK {
		t.Fatalf("make the runner hub-wide: %d %+v", code, e)
	}
	var alices []string
	for i := range 6 {
		alices = append(alices, th.submitAs(alice, protocol.SubmitRequest{Args: []string{"echo", fmt.Sprint(i)}}).ID)
	}
	sr, _ := th.dial(tok, protocol.Hello{Slots: 2})
	first, second := sr.offer(), sr.offer()
	if first.Job != alices[0] || second.Job != alices[1] {
		t.Fatalf("first offers %s, %s; want alice's oldest %s, %s", first.Job, second.Job, alices[0], alices[1])
	}
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: second.AttemptRef}))
	b := th.submitAs(bob, protocol.SubmitRequest{})
	th.waitQueued(b.ID, waitBusy)
	// A slot frees: alice holds one job, bob none, so bob's is next.
	runToEnd(t, sr, first, "0\n", 0)
	if o := sr.offer(); o.Job != b.ID {
		t.Fatalf("after a slot freed the offer was for %s; want bob's %s (alice still holds one)", o.Job, b.ID)
	}
}

// BenchmarkDispatchPass times one dispatch pass over a queue of n jobs no
// runner can take (no runner is connected, so each pass reads and weighs
// the queue and offers nothing): go test -run XXX -bench DispatchPass
// ./internal/hub.
func BenchmarkDispatchPass(b *testing.B) {
	for _, n := range []int{0, 1_000, 100_000} {
		b.Run(fmt.Sprintf("unrunnable=%d", n), func(b *testing.B) {
			h, err := Open(context.Background(), Config{DataDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			th := &testHub{t: &testing.T{}, h: h}
			ctx := context.Background()
			if err := h.store.Write(ctx, func(tx store.Tx) error {
				return tx.InsertUser(store.User{ID: "u-alice", Name: "alice", CreatedAt: time.Now()})
			}); err != nil {
				b.Fatal(err)
			}
			th.queueUnrunnable("alice", n)
			b.ResetTimer()
			for range b.N {
				if err := h.dispatch(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
