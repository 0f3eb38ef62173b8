package hubrepo

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// refRepo is a hosted project "p" with two commits, a and b.
func refRepo(t testing.TB, sessions bool) (Repos, string, string) {
	t.Helper()
	r := Repos{Root: t.TempDir()}
	if sessions {
		r.Refs = &RefSessions{}
		t.Cleanup(r.Refs.Close)
	}
	ctx := context.Background()
	if err := r.Create(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	tree, err := r.git(ctx, "p", "mktree")
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.git(ctx, "p", "commit-tree", "-m", "a", tree)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.git(ctx, "p", "commit-tree", "-p", a, "-m", "b", tree)
	if err != nil {
		t.Fatal(err)
	}
	return r, a, b
}

// Refs moved through a session behave as through a process each: the same
// compare-and-swap, the same refusals, and a refusal leaves the ref alone
// and the next update working.
func TestUpdateRefThroughSessionsAndProcesses(t *testing.T) {
	for _, sessions := range []bool{false, true} {
		t.Run(fmt.Sprintf("sessions=%v", sessions), func(t *testing.T) {
			r, a, b := refRepo(t, sessions)
			ctx := context.Background()
			const ref = "refs/drover/jobs/j1"
			steps := []struct {
				name     string
				new, old string
				wantErr  string
				wantAt   string
			}{
				{"create", a, "", "", a},
				{"create again", b, "", "exists", a},
				{"move from a stale value", b, b, "expected", a},
				{"move", b, a, "", b},
				{"delete from a stale value", "", a, "expected", b},
				{"delete", "", b, "", ""},
				{"create after delete", a, "", "", a},
			}
			for _, st := range steps {
				err := r.UpdateRef(ctx, "p", ref, st.new, st.old)
				if st.wantErr == "" && err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				if st.wantErr != "" && (err == nil || !strings.Contains(err.Error(), st.wantErr) || !strings.Contains(err.Error(), ref)) {
					t.Fatalf("%s: %v; want an error naming the ref and saying %q", st.name, err, st.wantErr)
				}
				if at, err := r.Ref(ctx, "p", ref); err != nil || at != st.wantAt {
					t.Fatalf("%s: ref at %q (%v), want %q", st.name, at, err, st.wantAt)
				}
			}
			if err := r.UpdateRef(ctx, "p", "refs/drover/jobs/x\x00update refs/heads/main", a, ""); err == nil {
				t.Fatal("a ref with a NUL was taken")
			}
			if at, _ := r.Ref(ctx, "p", "refs/heads/main"); at != "" {
				t.Fatalf("a NUL in a ref name moved refs/heads/main to %s", at)
			}
		})
	}
}

// Many updates at once from many goroutines each happen exactly once, on
// one process (no more than one is ever started for the repository).
func TestRefSessionSerializesConcurrentUpdates(t *testing.T) {
	r, a, _ := refRepo(t, true)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			errs <- r.UpdateRef(ctx, "p", fmt.Sprintf("refs/drover/jobs/c%d", i), a, "")
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	out, err := r.git(ctx, "p", "for-each-ref", "--count=100", "refs/drover/jobs/")
	if err != nil || strings.Count(out, "\n")+1 != 40 {
		t.Fatalf("refs: %v\n%s", err, out)
	}
	r.Refs.mu.Lock()
	n := len(r.Refs.open)
	r.Refs.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d sessions open for one repository, want 1", n)
	}
}

// A session that went idle, was closed, or whose caller gave up is not
// reused; the next update still works.
func TestRefSessionEnds(t *testing.T) {
	r, a, b := refRepo(t, true)
	ctx := context.Background()
	r.Refs.Idle = time.Millisecond
	if err := r.UpdateRef(ctx, "p", "refs/drover/jobs/i1", a, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		r.Refs.mu.Lock()
		defer r.Refs.mu.Unlock()
		return len(r.Refs.open) == 0
	})
	if err := r.UpdateRef(ctx, "p", "refs/drover/jobs/i1", b, a); err != nil {
		t.Fatalf("after the idle session ended: %v", err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.UpdateRef(cancelled, "p", "refs/drover/jobs/i2", a, ""); err == nil {
		// git may have answered before the kill landed; either way the
		// session is not left in an unknown state.
		t.Log("the update beat the cancellation")
	}
	if err := r.UpdateRef(ctx, "p", "refs/drover/jobs/i3", a, ""); err != nil {
		t.Fatalf("after a cancelled call: %v", err)
	}

	r.Refs.Close()
	if err := r.UpdateRef(ctx, "p", "refs/drover/jobs/i1", a, b); err != nil {
		t.Fatalf("after Close: %v", err)
	}
	if at, _ := r.Ref(ctx, "p", "refs/drover/jobs/i1"); at != a {
		t.Fatalf("after Close the ref is at %s, want %s", at, a)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkUpdateRef pins one new ref per iteration, through a process
// each and through a session: run both in one `go test -bench` and compare.
func BenchmarkUpdateRef(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip(err)
	}
	for _, sessions := range []bool{false, true} {
		b.Run(fmt.Sprintf("sessions=%v", sessions), func(b *testing.B) {
			r, a, _ := refRepo(b, sessions)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				if err := r.UpdateRef(ctx, "p", fmt.Sprintf("refs/drover/jobs/b%d", i), a, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
