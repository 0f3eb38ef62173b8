package runner

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/sandbox"
	"drover/internal/sandbox/sandboxtest"
)

// TestFailsOverToAnotherHub: a runner given two hubs of one deployment
// moves to the other when its hub dies mid-attempt, resumes the attempt
// there (hello lists it, the log continues at its offset) and finishes it
// once; when that hub dies too it goes back to the first.
func TestFailsOverToAnotherHub(t *testing.T) {
	h := newFakeHub(t)
	peer := h.addPeer()
	tr := startRunner(t, h, "", func(c *Config) { c.Hubs = []string{h.srv.URL, peer.URL} })
	c0 := h.waitConn(0)
	ref := newRef()
	var want strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	h.offer(ref, shSpec(`for i in $(seq 1 30); do echo line $i; sleep 0.05; done`))
	sandboxtest.WaitFor(t, "some output", func() bool { return len(h.log(ref.Attempt)) > 0 })

	h.setDown(c0.host, true) // the hub dies: its connection and every new dial fail
	c0.cut()
	c1 := h.waitConn(1)
	if c1.host == c0.host {
		t.Fatalf("reconnected to the dead hub %s", c0.host)
	}
	wantHello(t, h, 1, ref, protocol.PhaseRunning)
	fin := h.waitFinish(ref.Attempt)
	wantOutcome(t, fin, job.AttemptCompleted, job.ReasonExited, intp(0))
	if got := string(h.log(ref.Attempt)); got != want.String() {
		t.Fatalf("log after the failover = %q, want %q", got, want.String())
	}
	wantClaimedOnce(t, tr.home, ref)
	if n := len(h.requestsFor(protocol.TypeAccept, ref.Attempt)); n != 1 {
		t.Fatalf("%d accepts; want 1", n)
	}

	h.setDown(c0.host, false)
	h.setDown(c1.host, true)
	c1.cut()
	if c2 := h.waitConn(2); c2.host != c0.host {
		t.Fatalf("after the second hub died the runner dialed %s; want the first, %s", c2.host, c0.host)
	}
}

// TestRequestsGoToTheHubInUse: after a failover the attempt's context
// download and publication go to the hub the runner is connected to, not
// to the one it started with.
func TestRequestsGoToTheHubInUse(t *testing.T) {
	h := newRepoHub(t)
	peer := h.addPeer()
	base := h.commit(map[string]string{"a.txt": "a\n"})
	h.context["brief.md"] = []byte("brief\n")
	startRunner(t, h.fakeHub, "", func(c *Config) { c.Hubs = []string{h.srv.URL, peer.URL} })
	c0 := h.waitConn(0)
	h.setDown(c0.host, true)
	c0.cut()
	c1 := h.waitConn(1)
	ref := newRef()
	spec := h.spec(ref, base, protocol.ModeFix, `cp "$DROVER_CONTEXT_DIR/brief.md" brief.md`)
	spec.Repo.URL = "http://" + c1.host + "/git/" + project // a hub names itself in its offers
	spec.Context = []protocol.ContextFile{{Name: "brief.md", Size: 6}}
	h.offer(ref, spec)
	wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	h.mu.Lock()
	asked := slices.Clone(h.asked)
	h.mu.Unlock()
	if len(asked) != 2 || asked[0] != c1.host || asked[1] != c1.host {
		t.Fatalf("context and publication went to %v; want both to %s, the hub in use", asked, c1.host)
	}
}

// TestHubListStartsAnywhere: runners given one list start at every hub of
// it, so that they spread over the hubs.
func TestHubListStartsAnywhere(t *testing.T) {
	urls := []string{"http://a:1", "http://b:1", "http://c:1"}
	seen := map[string]bool{}
	for range 300 {
		seen[newHubList(urls).current()] = true
	}
	if len(seen) != len(urls) {
		t.Fatalf("300 runners started at %v; want every hub of %v", seen, urls)
	}
	l := newHubList(urls)
	first := l.current()
	second := l.failed(first)
	if l.failed(first) != second || second == first {
		t.Fatal("a second report of the same failure moved on again")
	}
}

func TestNewChecksTheHubList(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	must(t, SaveLogin(home, Login{Hub: "http://127.0.0.1:1", Name: "r1", Token: newFakeHub(t).token}))
	for _, tc := range []struct {
		hubs []string
		want string
	}{
		{[]string{"http://a:1", "http://A:1/"}, "listed twice"},
		{[]string{"http://a:1", "ftp://b"}, "scheme"},
		{[]string{"http://a:1", ""}, "entry 2 is empty"},
	} {
		_, err := New(Config{Home: home, Hubs: tc.hubs, Sandbox: sandbox.Policy{Kind: sandbox.KindNone}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with hubs %q: %v; want an error with %q", tc.hubs, err, tc.want)
		}
	}
}
