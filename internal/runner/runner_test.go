package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/agent/catalog"
	"drover/internal/ids"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/retry"
	"drover/internal/rules"
	"drover/internal/sandbox"
	"drover/internal/sandbox/sandboxtest"
)

type testRunner struct {
	*Runner
	home   string
	cancel context.CancelFunc
	done   chan error
}

// newCatalog is every agent, as a runner that finds no vendor CLI has them.
func newCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	c, err := catalog.New(catalog.Config{})
	must(t, err)
	return c
}

// startRunner runs a runner against h. An empty home makes a fresh one.
// prep may adjust the runner before it runs.
func startRunner(t *testing.T, h *fakeHub, home string, tune func(*Config), prep ...func(*Runner)) *testRunner {
	t.Helper()
	if home == "" {
		home = filepath.Join(t.TempDir(), "home")
		must(t, SaveLogin(home, Login{Hub: h.srv.URL, Name: "r1", Token: h.token}))
	}
	// Unisolated: these tests watch the runner's mechanics through host
	// paths and pids; sandbox_test.go runs attempts in bubblewrap.
	cfg := Config{Home: home, StopGrace: 200 * time.Millisecond, Sandbox: sandbox.Policy{Kind: sandbox.KindNone}, Agents: newCatalog(t),
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if tune != nil {
		tune(&cfg)
	}
	r, err := New(cfg)
	must(t, err)
	r.jitter = func(time.Duration) time.Duration { return 10 * time.Millisecond }
	r.stopWait = 20 * time.Second
	for _, p := range prep {
		p(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr := &testRunner{Runner: r, home: home, cancel: cancel, done: make(chan error, 1)}
	go func() { tr.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-tr.done:
		case <-time.After(60 * time.Second):
			t.Error("runner did not stop")
		}
	})
	return tr
}

// stop stops the runner gracefully and returns Run's error.
func (tr *testRunner) stop(t *testing.T) error {
	t.Helper()
	tr.cancel()
	select {
	case err := <-tr.done:
		tr.done <- err // for the cleanup
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("runner did not stop")
		return nil
	}
}

// wait waits for Run to return on its own.
func (tr *testRunner) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-tr.done:
		tr.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// holds counts the attempts the runner holds.
func (tr *testRunner) holds() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.attempts)
}

func newRef() protocol.AttemptRef {
	return protocol.AttemptRef{Job: ids.New("jb"), Attempt: ids.New("at"), Epoch: 1}
}

func shSpec(script string) protocol.JobSpec {
	return protocol.JobSpec{Agent: "exec", Args: []string{"sh", "-c", script}, Requester: "u", LogCap: 1 << 20}
}

func (tr *testRunner) journalFile(attempt, ext string) string {
	return filepath.Join(tr.home, "journal", attempt+ext)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	sandboxtest.WaitFor(t, "pid file "+path, func() bool {
		b, err := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	return pid
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func wantOutcome(t *testing.T, f protocol.Finish, state job.AttemptState, reason job.Reason, code *int) {
	t.Helper()
	o := f.Outcome
	if o.State != state || o.Reason != reason {
		t.Fatalf("outcome = %s/%s (%q), want %s/%s", o.State, o.Reason, o.Message, state, reason)
	}
	if (code == nil) != (o.ExitCode == nil) || (code != nil && *code != *o.ExitCode) {
		t.Fatalf("outcome exit code = %v, want %v", ptrStr(o.ExitCode), ptrStr(code))
	}
}

func ptrStr(p *int) string {
	if p == nil {
		return "none"
	}
	return strconv.Itoa(*p)
}

func intp(i int) *int { return &i }

// wantHello checks that hello number n listed exactly ref, in phase.
func wantHello(t *testing.T, h *fakeHub, n int, ref protocol.AttemptRef, phase string) {
	t.Helper()
	var hello protocol.Hello
	must(t, h.received(protocol.TypeHello)[n].f.Decode(&hello))
	if len(hello.Attempts) != 1 || hello.Attempts[0].AttemptRef != ref || hello.Attempts[0].Phase != phase {
		t.Fatalf("hello %d lists %+v, want %s %s", n, hello.Attempts, ref, phase)
	}
}

// wantClaimedOnce checks the runner's own record: ref was claimed, once.
func wantClaimedOnce(t *testing.T, home string, ref protocol.AttemptRef) {
	t.Helper()
	claims, err := Claims(home)
	must(t, err)
	if len(claims) != 1 || claims[0].Attempt != ref.Attempt || claims[0].Job != ref.Job || claims[0].Epoch != ref.Epoch {
		t.Fatalf("claims = %+v, want %s once", claims, ref)
	}
}

func TestRunsAttemptEndToEnd(t *testing.T) {
	h := newFakeHub(t)
	var acceptSeen = make(chan protocol.Frame, 1)
	h.setHook(func(c *hubConn, f protocol.Frame) bool {
		if f.Type == protocol.TypeAccept {
			acceptSeen <- f // answered by the test, once it checked nothing ran
			return true
		}
		return false
	})
	t.Setenv("DROVER_RUNNER_SECRET", "do-not-leak")
	tr := startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	claim := tr.journalFile(ref.Attempt, extClaim)
	script := fmt.Sprintf(`test -f %s && echo claimed-before-start; for i in 1 2 3 4 5; do echo line $i; done; env; echo err >&2; exit 0`, claim)
	h.offer(ref, shSpec(script))

	acc := <-acceptSeen
	// Held and listed as offered, but nothing claimed or started before the ok.
	h.waitFrame("status listing the offer", func(g got) bool {
		var s protocol.Status
		return g.f.Type == protocol.TypeStatus && g.f.Decode(&s) == nil && len(s.Attempts) == 1 &&
			s.Attempts[0].Phase == protocol.PhaseOffered
	})
	time.Sleep(50 * time.Millisecond) // give a wrong runner the chance to start early
	if exists(claim) || exists(filepath.Join(tr.home, "work", ref.Attempt)) {
		t.Fatal("claimed or started before the hub confirmed the accept")
	}
	h.current().answer(acc)

	fin := h.waitFinish(ref.Attempt)
	wantOutcome(t, fin, job.AttemptCompleted, job.ReasonExited, intp(0))
	log := h.log(ref.Attempt)
	out := string(log)
	if !strings.HasPrefix(out, "claimed-before-start\nline 1\nline 2\nline 3\nline 4\nline 5\n") || !strings.HasSuffix(out, "err\n") {
		t.Fatalf("log = %q", out)
	}
	for _, want := range []string{"DROVER_JOB=" + ref.Job, "DROVER_ATTEMPT=" + ref.Attempt, "DROVER_EPOCH=1",
		"HOME=" + filepath.Join(tr.home, "work", ref.Attempt), "TERM=dumb", "LANG=C.UTF-8", "PATH=" + jobPath} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("job environment lacks %s", want)
		}
	}
	if strings.Contains(out, "DROVER_RUNNER_SECRET") || strings.Contains(out, h.token) {
		t.Error("runner environment or token leaked into the job")
	}
	if fin.LogSize != int64(len(log)) || fin.LogSHA256 != sha(log) {
		t.Fatalf("finish log %d/%s does not match the uploaded log", fin.LogSize, fin.LogSHA256)
	}

	sandboxtest.WaitFor(t, "done marker and cleanup", func() bool {
		return exists(tr.journalFile(ref.Attempt, extDone)) && !exists(filepath.Join(tr.home, "work", ref.Attempt)) &&
			!exists(filepath.Join(tr.home, "spool", ref.Attempt+".log"))
	})
	rc, err := tr.jr.readReceipt(ref.Attempt)
	must(t, err)
	if rc.LogSize != fin.LogSize || rc.LogSHA256 != fin.LogSHA256 || rc.Outcome.State != job.AttemptCompleted {
		t.Fatalf("receipt %+v does not match the finish", rc)
	}
	wantClaimedOnce(t, tr.home, ref)
	sandboxtest.WaitFor(t, "a status with nothing held", func() bool {
		s, ok := h.lastStatus()
		return ok && len(s.Attempts) == 0
	})
	if id := acc.ID; !strings.HasPrefix(id, "rq-") {
		t.Fatalf("request id %q", id)
	}
	// Requests are in order: accept, logs, finish.
	if len(h.received(protocol.TypeHeartbeat)) == 0 {
		t.Error("no heartbeat")
	}
}

func TestOutcomes(t *testing.T) {
	h := newFakeHub(t)
	startRunner(t, h, "", func(c *Config) { c.Slots = 4 })
	h.waitConn(0)
	cases := []struct {
		spec   protocol.JobSpec
		state  job.AttemptState
		reason job.Reason
		code   *int
	}{
		{shSpec("exit 3"), job.AttemptFailed, job.ReasonExited, intp(3)},
		{protocol.JobSpec{Agent: "exec", Args: []string{"drover-no-such-program"}}, job.AttemptFailed, job.ReasonSpawnFailed, nil},
		{protocol.JobSpec{Agent: "nope", Args: []string{"true"}}, job.AttemptFailed, job.ReasonSpawnFailed, nil},
		{protocol.JobSpec{Agent: "exec", Args: []string{"sleep", "1000"}, Timeout: protocol.Duration(50 * time.Millisecond)},
			job.AttemptFailed, job.ReasonTimeout, intp(128 + 15)},
	}
	refs := make([]protocol.AttemptRef, len(cases))
	for i, c := range cases {
		refs[i] = newRef()
		h.offer(refs[i], c.spec)
	}
	for i, c := range cases {
		wantOutcome(t, h.waitFinish(refs[i].Attempt), c.state, c.reason, c.code)
	}
}

func TestLogCapTruncates(t *testing.T) {
	h := newFakeHub(t)
	startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	spec := shSpec("head -c 5000 /dev/zero | tr '\\0' x; echo; echo after")
	spec.LogCap = 1000
	h.offer(ref, spec)
	fin := h.waitFinish(ref.Attempt)
	want := strings.Repeat("x", 1000) + "\n[drover: output truncated at 1000 bytes]\n"
	if got := string(h.log(ref.Attempt)); got != want || fin.LogSize != int64(len(want)) {
		t.Fatalf("log = %d bytes %q..., want the first 1000 and the marker", len(got), got[max(0, len(got)-60):])
	}
}

func TestLogsArriveInOrderInSmallChunks(t *testing.T) {
	h := newFakeHub(t)
	h.welcome.LogChunkBytes = 7
	h.welcome.LogBatchBytes = 3
	startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, shSpec(`i=0; while [ $i -lt 200 ]; do echo "line $i"; i=$((i+1)); done`))
	h.waitFinish(ref.Attempt)
	var want strings.Builder
	for i := range 200 {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if got := string(h.log(ref.Attempt)); got != want.String() {
		t.Fatalf("log differs from the output: %q", got)
	}
	if n := len(h.requestsFor(protocol.TypeLog, ref.Attempt)); n < want.Len()/7 {
		t.Fatalf("%d log requests, want chunks of at most 7 bytes", n)
	}
}

func TestRepeatedOfferRunsOnce(t *testing.T) {
	h := newFakeHub(t)
	tr := startRunner(t, h, "", func(c *Config) { c.Slots = 2 })
	h.waitConn(0)
	marks := filepath.Join(t.TempDir(), "ran")
	ref := newRef()
	spec := shSpec(fmt.Sprintf("echo ran >> %s; sleep 0.3", marks))
	h.offer(ref, spec)
	h.waitFrame("accept", func(g got) bool { return g.f.Type == protocol.TypeAccept })
	h.offer(ref, spec)
	h.offer(ref, spec)
	h.waitFinish(ref.Attempt)
	// Offered once more after it finished, by a hub that takes the accept
	// as if it were offered again: reported again, never run again.
	sandboxtest.WaitFor(t, "done and forgotten", func() bool { return tr.holds() == 0 })
	h.once(protocol.TypeAccept, func(c *hubConn, f protocol.Frame) { c.writeReply(f.ID, protocol.Reply{OK: true}) })
	h.offer(ref, spec)
	sandboxtest.WaitFor(t, "the finish resent", func() bool { return len(h.requestsFor(protocol.TypeFinish, ref.Attempt)) == 2 })
	b, err := os.ReadFile(marks)
	must(t, err)
	if string(b) != "ran\n" {
		t.Fatalf("the job ran %d times", strings.Count(string(b), "ran"))
	}
	if n := len(h.requestsFor(protocol.TypeAccept, ref.Attempt)); n != 2 {
		t.Fatalf("%d accepts, want one per time the attempt was not held", n)
	}
	wantClaimedOnce(t, tr.home, ref)
}

func TestDeclinesWithoutFreeSlot(t *testing.T) {
	h := newFakeHub(t)
	startRunner(t, h, "", nil)
	h.waitConn(0)
	busy, extra := newRef(), newRef()
	h.offer(busy, shSpec("sleep 1000"))
	h.waitFrame("accept", func(g got) bool { return g.f.Type == protocol.TypeAccept })
	h.offer(extra, shSpec("echo nope"))
	g := h.waitFrame("decline", func(g got) bool { return g.f.Type == protocol.TypeDecline })
	var d protocol.Decline
	must(t, g.f.Decode(&d))
	if d.AttemptRef != extra || d.Reason == "" {
		t.Fatalf("decline = %+v", d)
	}
	if len(h.requestsFor(protocol.TypeAccept, extra.Attempt)) != 0 {
		t.Fatal("accepted an offer without a free slot")
	}
}

// TestResendsPendingRequests cuts the connection after the hub applied each
// kind of request but before its reply arrived: the runner must resend it
// with the same id, and the hub's apply-once keeps the effect single.
func TestResendsPendingRequests(t *testing.T) {
	for _, typ := range []string{protocol.TypeAccept, protocol.TypeLog, protocol.TypeFinish} {
		t.Run(typ, func(t *testing.T) {
			h := newFakeHub(t)
			h.once(typ, func(c *hubConn, f protocol.Frame) {
				h.apply(f) // applied, but the reply is lost
				c.cut()
			})
			tr := startRunner(t, h, "", nil)
			h.waitConn(0)
			ref := newRef()
			h.offer(ref, shSpec("echo one; echo two"))
			h.waitConn(1)
			sandboxtest.WaitFor(t, "done", func() bool { return exists(tr.journalFile(ref.Attempt, extDone)) })
			fin := h.waitFinish(ref.Attempt)
			wantOutcome(t, fin, job.AttemptCompleted, job.ReasonExited, intp(0))
			if got := string(h.log(ref.Attempt)); got != "one\ntwo\n" {
				t.Fatalf("log = %q", got)
			}
			reqs := h.requestsFor(typ, ref.Attempt)
			if len(reqs) < 2 || reqs[0].n != 0 || reqs[1].n != 1 || reqs[0].f.ID != reqs[1].f.ID {
				t.Fatalf("%s requests %+v: want the first resent with the same id on the next connection", typ, reqs)
			}
			phase := map[string]string{protocol.TypeAccept: protocol.PhaseOffered,
				protocol.TypeLog: protocol.PhaseRunning, protocol.TypeFinish: protocol.PhaseFinishing}[typ]
			wantHello(t, h, 1, ref, phase)
			wantClaimedOnce(t, tr.home, ref)
		})
	}
}

func TestHelloListsRunningAttempt(t *testing.T) {
	h := newFakeHub(t)
	startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	dir := t.TempDir()
	h.offer(ref, shSpec(fmt.Sprintf("touch %s/started; while [ ! -f %s/go ]; do sleep 0.01; done; echo finished", dir, dir)))
	sandboxtest.WaitFor(t, "job started", func() bool { return exists(filepath.Join(dir, "started")) })
	h.current().cut()
	h.waitConn(1)
	wantHello(t, h, 1, ref, protocol.PhaseRunning)
	must(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o600))
	wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	if got := string(h.log(ref.Attempt)); got != "finished\n" {
		t.Fatalf("log = %q", got)
	}
}

func TestOffsetMismatchResyncs(t *testing.T) {
	h := newFakeHub(t)
	h.once(protocol.TypeLog, func(c *hubConn, f protocol.Frame) {
		// The hub holds only the first 3 bytes (say, from a request whose
		// reply was lost) and tells the runner so.
		var l protocol.Log
		h.expect(f.Decode(&l))
		h.apply(f)
		c.writeReply(f.ID, errReply(rules.ErrOffset, h.truncate(l.Attempt, 3)))
	})
	startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, shSpec("echo hello world"))
	fin := h.waitFinish(ref.Attempt)
	if got := string(h.log(ref.Attempt)); got != "hello world\n" || fin.LogSize != 12 {
		t.Fatalf("log = %q (finish says %d bytes)", got, fin.LogSize)
	}
	logs := h.requestsFor(protocol.TypeLog, ref.Attempt)
	var second protocol.Log
	must(t, logs[1].f.Decode(&second))
	if second.Offset != 3 {
		t.Fatalf("after the mismatch the runner sent offset %d, want 3", second.Offset)
	}
}

func TestLogIncompleteReuploads(t *testing.T) {
	h := newFakeHub(t)
	h.once(protocol.TypeFinish, func(c *hubConn, f protocol.Frame) {
		var fin protocol.Finish
		h.expect(f.Decode(&fin))
		// The hub lost the tail.
		c.writeReply(f.ID, errReply(rules.ErrLogIncomplete, h.truncate(fin.Attempt, 2)))
	})
	startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, shSpec("echo abcdef"))
	fin := h.waitFinish(ref.Attempt)
	if got := string(h.log(ref.Attempt)); got != "abcdef\n" || fin.LogSize != 7 {
		t.Fatalf("log = %q", got)
	}
	fins := h.requestsFor(protocol.TypeFinish, ref.Attempt)
	if len(fins) != 2 || fins[0].f.ID == fins[1].f.ID {
		t.Fatalf("finish requests %+v: want a second one with a new id", fins)
	}
}

func TestRetriesInternalErrors(t *testing.T) {
	for _, typ := range []string{protocol.TypeLog, protocol.TypeFinish} {
		h := newFakeHub(t)
		h.once(typ, func(c *hubConn, f protocol.Frame) {
			c.writeReply(f.ID, protocol.Reply{Error: &rules.Error{Code: rules.ErrInternal, Message: "database busy"}})
		})
		startRunner(t, h, "", nil)
		ref := runsEchoHi(t, h)
		if n := len(h.requestsFor(typ, ref.Attempt)); n != 2 {
			t.Fatalf("%d %s requests, want one retry", n, typ)
		}
	}
}

func TestBadRequestDropsAttempt(t *testing.T) {
	h := newFakeHub(t)
	h.refuse(protocol.TypeLog, rules.ErrBadRequest)
	tr := startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	pidFile := filepath.Join(t.TempDir(), "pid")
	h.offer(ref, shSpec(fmt.Sprintf("echo $$ > %s; echo out; exec sleep 1000", pidFile)))
	pid := readPid(t, pidFile)
	sandboxtest.WaitFor(t, "process killed and attempt dropped", func() bool {
		return !sandboxtest.Alive(pid) && exists(tr.journalFile(ref.Attempt, extDropped))
	})
	if n := len(h.requestsFor(protocol.TypeLog, ref.Attempt)); n != 1 {
		t.Fatalf("%d log requests after bad_request, want no retry", n)
	}
	if len(h.requestsFor(protocol.TypeFinish, ref.Attempt)) != 0 {
		t.Fatal("finished a dropped attempt")
	}
}

func TestCancelStopsProcessTree(t *testing.T) {
	h := newFakeHub(t)
	startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	pidFile := filepath.Join(t.TempDir(), "child")
	h.offer(ref, shSpec(fmt.Sprintf(`(trap "" TERM; exec sleep 1000) & echo $! > %s; echo started; wait`, pidFile)))
	child := readPid(t, pidFile)
	h.current().send(protocol.TypeCancel, protocol.CancelOrder{AttemptRef: ref, Reason: "user"})
	fin := h.waitFinish(ref.Attempt)
	wantOutcome(t, fin, job.AttemptCancelled, job.ReasonCancelled, intp(128+15))
	sandboxtest.WaitFor(t, "child gone", func() bool { return !sandboxtest.Alive(child) })
	if got := string(h.log(ref.Attempt)); got != "started\n" {
		t.Fatalf("log = %q", got)
	}
	// A cancel for an unknown attempt is ignored.
	h.current().send(protocol.TypeCancel, protocol.CancelOrder{AttemptRef: newRef(), Reason: "user"})
}

func TestCancelBeforeLaunchRunsNothing(t *testing.T) {
	h := newFakeHub(t)
	accepts := make(chan protocol.Frame, 1)
	h.once(protocol.TypeAccept, func(c *hubConn, f protocol.Frame) { accepts <- f })
	tr := startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	marker := filepath.Join(t.TempDir(), "ran")
	h.offer(ref, shSpec("touch "+marker))
	acc := <-accepts
	h.current().send(protocol.TypeCancel, protocol.CancelOrder{AttemptRef: ref, Reason: "user"})
	// The cancel is read before the accept's reply, so it is applied first.
	h.current().answer(acc)
	wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptCancelled, job.ReasonCancelled, nil)
	if exists(marker) || exists(tr.journalFile(ref.Attempt, extClaim)) {
		t.Fatal("an attempt cancelled before launch was claimed or run")
	}
}

func TestDropKillsWithoutFinish(t *testing.T) {
	h := newFakeHub(t)
	tr := startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	pidFile := filepath.Join(t.TempDir(), "child")
	h.offer(ref, shSpec(fmt.Sprintf(`(trap "" TERM; exec sleep 1000) & echo $! > %s; wait`, pidFile)))
	child := readPid(t, pidFile)
	h.current().send(protocol.TypeDrop, protocol.DropOrder{AttemptRef: ref, Reason: "fenced"})
	sandboxtest.WaitFor(t, "child killed, attempt marked dropped", func() bool {
		return !sandboxtest.Alive(child) && exists(tr.journalFile(ref.Attempt, extDropped))
	})
	sandboxtest.WaitFor(t, "status without the attempt", func() bool {
		s, ok := h.lastStatus()
		return ok && len(s.Attempts) == 0
	})
	if _, ok := h.fake.FinishOf(ref.Attempt); ok || len(h.requestsFor(protocol.TypeFinish, ref.Attempt)) != 0 {
		t.Fatal("a dropped attempt was finished")
	}
	// The slot is free again.
	next := newRef()
	h.offer(next, shSpec("true"))
	h.waitFinish(next.Attempt)
}

func TestFencedAcceptForgetsOffer(t *testing.T) {
	h := newFakeHub(t)
	h.refuse(protocol.TypeAccept, rules.ErrFenced)
	tr := startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, shSpec("echo never"))
	sandboxtest.WaitFor(t, "status without the attempt", func() bool {
		s, ok := h.lastStatus()
		return ok && len(s.Attempts) == 0 && len(h.requestsFor(protocol.TypeAccept, ref.Attempt)) == 1
	})
	if exists(tr.journalFile(ref.Attempt, extClaim)) {
		t.Fatal("claimed an attempt the hub refused")
	}
}

// writeJournal sets up what a runner that died mid-attempt leaves behind.
func writeJournal(t *testing.T, home string, ref protocol.AttemptRef, spool string, rc *receipt) {
	t.Helper()
	jr := &journal{dir: filepath.Join(home, "journal")}
	must(t, os.MkdirAll(jr.dir, 0o700))
	must(t, os.MkdirAll(filepath.Join(home, "spool"), 0o700))
	must(t, jr.claim(Claim{Job: ref.Job, Attempt: ref.Attempt, Epoch: ref.Epoch, ClaimedAt: time.Now(), PID: 1}))
	must(t, os.WriteFile(filepath.Join(home, "spool", ref.Attempt+".log"), []byte(spool), 0o600))
	if rc != nil {
		must(t, jr.writeReceipt(*rc))
	}
}

// A login saved under another name than the hub's takes the hub's, from
// the welcome.
func TestRunnerTakesTheHubsName(t *testing.T) {
	h := newFakeHub(t)
	home := filepath.Join(t.TempDir(), "home")
	must(t, SaveLogin(home, Login{Hub: h.srv.URL, Name: "asked", Token: h.token}))
	startRunner(t, h, home, nil)
	h.waitConn(0)
	sandboxtest.WaitFor(t, "the hub's name in the login", func() bool {
		l, err := LoadLogin(home)
		return err == nil && l.Name == h.welcome.RunnerName
	})
}

func TestRecoversClaimWithoutReceipt(t *testing.T) {
	h := newFakeHub(t)
	home := filepath.Join(t.TempDir(), "home")
	must(t, SaveLogin(home, Login{Hub: h.srv.URL, Name: "r1", Token: h.token}))
	ref := newRef()
	writeJournal(t, home, ref, "partial output\n", nil)
	// The hub already holds part of the log from before the crash.
	h.fake.Held(ref)
	h.fake.SetLog(ref.Attempt, []byte("partial "))

	var finishSeen = make(chan protocol.Frame, 1)
	h.setHook(func(c *hubConn, f protocol.Frame) bool {
		if f.Type == protocol.TypeFinish && len(finishSeen) == 0 {
			finishSeen <- f
			return true
		}
		return false
	})
	tr := startRunner(t, h, home, nil)
	h.waitConn(0)
	wantHello(t, h, 0, ref, protocol.PhaseFinishing)
	f := <-finishSeen
	// Offered again while finishing: never launched again.
	h.offer(ref, shSpec("echo again"))
	time.Sleep(50 * time.Millisecond)
	h.current().answer(f)
	fin := h.waitFinish(ref.Attempt)
	wantOutcome(t, fin, job.AttemptUnknown, job.ReasonInterrupted, nil)
	if got := string(h.log(ref.Attempt)); got != "partial output\n" || fin.LogSHA256 != sha([]byte(got)) {
		t.Fatalf("log = %q", got)
	}
	sandboxtest.WaitFor(t, "done", func() bool { return exists(tr.journalFile(ref.Attempt, extDone)) })
	if len(h.received(protocol.TypeAccept)) != 0 || exists(filepath.Join(home, "work", ref.Attempt)) {
		t.Fatal("a claimed attempt was accepted or launched again")
	}
}

func TestRecoversReceiptWithoutDone(t *testing.T) {
	h := newFakeHub(t)
	// The first runner never gets its finish acknowledged.
	h.setHook(func(c *hubConn, f protocol.Frame) bool { return f.Type == protocol.TypeFinish })
	tr := startRunner(t, h, "", nil, func(r *Runner) { r.stopWait = 200 * time.Millisecond })
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, shSpec("echo done; exit 5"))
	h.waitFrame("finish", func(g got) bool { return g.f.Type == protocol.TypeFinish })
	if !exists(tr.journalFile(ref.Attempt, extReceipt)) {
		t.Fatal("finish sent before the receipt was written")
	}
	must(t, tr.stop(t))
	if exists(tr.journalFile(ref.Attempt, extDone)) {
		t.Fatal("done without an acknowledgement")
	}

	h.setHook(nil)
	tr2 := startRunner(t, h, tr.home, nil)
	fin := h.waitFinish(ref.Attempt)
	wantOutcome(t, fin, job.AttemptFailed, job.ReasonExited, intp(5))
	if got := string(h.log(ref.Attempt)); got != "done\n" {
		t.Fatalf("log = %q", got)
	}
	wantHello(t, h, 1, ref, protocol.PhaseFinishing)
	sandboxtest.WaitFor(t, "done", func() bool { return exists(tr2.journalFile(ref.Attempt, extDone)) })
	wantClaimedOnce(t, tr.home, ref)
}

func TestWelcomeDropsRecoveredAttempt(t *testing.T) {
	h := newFakeHub(t)
	home := filepath.Join(t.TempDir(), "home")
	must(t, SaveLogin(home, Login{Hub: h.srv.URL, Name: "r1", Token: h.token}))
	ref := newRef()
	code := 0
	writeJournal(t, home, ref, "out\n", &receipt{Job: ref.Job, Attempt: ref.Attempt, Epoch: ref.Epoch,
		Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: &code}, LogSize: 4, LogSHA256: sha([]byte("out\n"))})
	h.onWelcome = func(c *hubConn, hello protocol.Hello, w *protocol.Welcome) {
		for _, a := range hello.Attempts {
			w.Drop = append(w.Drop, protocol.DropOrder{AttemptRef: a.AttemptRef, Reason: "fenced"})
		}
	}
	tr := startRunner(t, h, home, nil)
	h.waitConn(0)
	sandboxtest.WaitFor(t, "dropped marker", func() bool { return exists(tr.journalFile(ref.Attempt, extDropped)) })
	sandboxtest.WaitFor(t, "status without it", func() bool {
		s, ok := h.lastStatus()
		return ok && len(s.Attempts) == 0
	})
	if len(h.requestsFor(protocol.TypeLog, ref.Attempt))+len(h.requestsFor(protocol.TypeFinish, ref.Attempt)) != 0 {
		t.Fatal("sent requests for a dropped attempt")
	}
}

// TestReplacedThenRestartReportsInterrupted: a runner told it was replaced
// exits at once, killing its agent without a receipt; the next start on the
// same home reports that attempt interrupted and never runs it again.
func TestReplacedThenRestartReportsInterrupted(t *testing.T) {
	h := newFakeHub(t)
	tr := startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	dir := t.TempDir()
	h.offer(ref, shSpec(fmt.Sprintf("echo $$ > %s/pid; echo working; exec sleep 1000", dir)))
	pid := readPid(t, filepath.Join(dir, "pid"))
	h.waitFrame("log", func(g got) bool { return g.f.Type == protocol.TypeLog })
	h.current().ws.Close(protocol.CloseReplaced, "replaced")
	err := tr.wait(t)
	if err == nil || !strings.Contains(err.Error(), "replaced by a newer connection of runner r1") {
		t.Fatalf("Run = %v, want the replaced error", err)
	}
	if !waitGone(pid) {
		t.Fatal("agent survived the runner")
	}
	if h.dialCount() != 1 {
		t.Fatalf("%d dials: a replaced runner must not reconnect", h.dials)
	}
	if exists(tr.journalFile(ref.Attempt, extReceipt)) {
		t.Fatal("receipt written for an attempt whose outcome is unknown")
	}

	startRunner(t, h, tr.home, nil)
	fin := h.waitFinish(ref.Attempt)
	wantOutcome(t, fin, job.AttemptUnknown, job.ReasonInterrupted, nil)
	if got := string(h.log(ref.Attempt)); got != "working\n" {
		t.Fatalf("log = %q", got)
	}
	wantClaimedOnce(t, tr.home, ref)
	if n := len(h.requestsFor(protocol.TypeAccept, ref.Attempt)); n != 1 {
		t.Fatalf("%d accepts: the attempt was taken again", n)
	}
}

func waitGone(pid int) bool {
	deadline := time.Now().Add(10 * time.Second)
	for sandboxtest.Alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func TestRejectedTokenEndsRun(t *testing.T) {
	for _, status := range []int{401, 403} {
		h := newFakeHub(t)
		h.reject = status
		tr := startRunner(t, h, "", nil)
		err := tr.wait(t)
		if err == nil || !strings.Contains(err.Error(), "rejected the token") || !strings.Contains(err.Error(), "drover runner login") {
			t.Fatalf("Run = %v", err)
		}
		if h.dialCount() != 1 {
			t.Fatalf("%d dials, want no retry", h.dials)
		}
	}
}

func TestRevokedCloseEndsRun(t *testing.T) {
	h := newFakeHub(t)
	tr := startRunner(t, h, "", nil)
	h.waitConn(0).ws.Close(protocol.CloseRevoked, "revoked")
	if err := tr.wait(t); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("Run = %v", err)
	}
}

func TestReconnectsAfterOtherCloses(t *testing.T) {
	h := newFakeHub(t)
	startRunner(t, h, "", nil)
	h.waitConn(0).ws.Close(protocol.CloseDead, "no heartbeat")
	h.waitConn(1).ws.Close(protocol.CloseProtocol, "bad frame")
	h.waitConn(2)
	h.mu.Lock()
	h.reject = 503
	h.mu.Unlock()
	h.current().cut()
	sandboxtest.WaitFor(t, "retries through a hub outage", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.dials >= 6
	})
	h.mu.Lock()
	h.reject = 0
	h.mu.Unlock()
	h.waitConn(3)
}

func TestGracefulStop(t *testing.T) {
	h := newFakeHub(t)
	// The job exits on SIGTERM at once; the long grace only keeps a loaded
	// machine from turning that into a SIGKILL.
	tr := startRunner(t, h, "", func(c *Config) { c.Slots, c.StopGrace = 2, time.Minute })
	h.waitConn(0)
	ref, quick := newRef(), newRef()
	pidFile := filepath.Join(t.TempDir(), "pid")
	h.offer(ref, shSpec(fmt.Sprintf(`trap 'echo bye; exit 0' TERM; echo $$ > %s; echo working; while :; do sleep 0.01; done`, pidFile)))
	h.offer(quick, shSpec("echo quick"))
	pid := readPid(t, pidFile)
	h.waitFinish(quick.Attempt)
	h.waitFrame("log", func(g got) bool {
		var l protocol.Log
		return g.f.Type == protocol.TypeLog && g.f.Decode(&l) == nil && l.Attempt == ref.Attempt
	})

	if err := tr.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil after a graceful stop", err)
	}
	fin, ok := h.fake.FinishOf(ref.Attempt)
	if !ok {
		t.Fatal("no finish before Run returned")
	}
	wantOutcome(t, fin, job.AttemptReleased, job.ReasonRunnerShutdown, intp(0))
	if got := string(h.log(ref.Attempt)); !strings.HasPrefix(got, "working\n") || !strings.HasSuffix(got, "bye\n") {
		t.Fatalf("log = %q", got)
	}
	if sandboxtest.Alive(pid) {
		t.Fatal("agent still running")
	}
	c := h.current()
	<-c.closed // every frame is recorded
	if c.status != 1000 {
		t.Fatalf("connection closed with %d, want normal closure", c.status)
	}
	if s, _ := h.lastStatus(); len(s.Attempts) != 0 || s.Slots != 0 {
		t.Fatalf("last status %+v, want nothing held and no slots", s)
	}
	// The runner said it was draining before it released the attempt, so
	// that the hub does not offer it straight back.
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range h.frames {
		var st protocol.Status
		if g.f.Type == protocol.TypeStatus && g.f.Decode(&st) == nil && st.Slots == 0 {
			break
		}
		if g.f.Type == protocol.TypeFinish && strings.Contains(string(g.f.Body), ref.Attempt) {
			t.Fatal("released the attempt before reporting zero slots")
		}
	}
	if !exists(tr.journalFile(ref.Attempt, extDone)) {
		t.Fatal("released attempt not marked done")
	}
}

func TestGracefulStopDeclinesOffers(t *testing.T) {
	h := newFakeHub(t)
	// Finishes are held back, so the stop lasts until the test offers.
	var held []protocol.Frame
	h.setHook(func(c *hubConn, f protocol.Frame) bool {
		if f.Type == protocol.TypeFinish {
			h.mu.Lock()
			held = append(held, f)
			h.mu.Unlock()
			return true
		}
		return false
	})
	tr := startRunner(t, h, "", func(c *Config) { c.Slots = 2 })
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, shSpec("exec sleep 1000"))
	h.waitFrame("accept", func(g got) bool { return g.f.Type == protocol.TypeAccept })
	sandboxtest.WaitFor(t, "running", func() bool {
		s, ok := h.lastStatus()
		return ok && len(s.Attempts) == 1 && s.Attempts[0].Phase == protocol.PhaseRunning
	})
	tr.cancel()
	h.waitFrame("released finish", func(g got) bool { return g.f.Type == protocol.TypeFinish })
	late := newRef()
	h.offer(late, shSpec("echo late"))
	h.waitFrame("decline", func(g got) bool { return g.f.Type == protocol.TypeDecline })
	h.mu.Lock()
	f := held[0]
	h.mu.Unlock()
	h.current().answer(f)
	if err := tr.wait(t); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptReleased, job.ReasonRunnerShutdown, intp(128+15))
}

func TestRunRefusesSecondRunnerOnHome(t *testing.T) {
	h := newFakeHub(t)
	tr := startRunner(t, h, "", nil)
	h.waitConn(0)
	r2, err := New(Config{Home: tr.home, Agents: newCatalog(t)})
	must(t, err)
	if err := r2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "another runner") {
		t.Fatalf("second Run = %v", err)
	}
}

func TestReconnectWaits(t *testing.T) {
	prev := time.Duration(0)
	for n := range 12 {
		d := retryCeiling(n)
		if d < prev || d > time.Minute {
			t.Fatalf("retryCeiling(%d) = %s", n, d)
		}
		prev = d
	}
	if retryCeiling(0) != 500*time.Millisecond || retryCeiling(30) != time.Minute {
		t.Fatalf("retryCeiling(0) = %s, retryCeiling(30) = %s", retryCeiling(0), retryCeiling(30))
	}
	for range 100 {
		if d := fullJitter(time.Second); d < 0 || d > time.Second {
			t.Fatalf("jitter %s out of range", d)
		}
	}
	if err := retry.Sleep(canceled(), time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep ignored ctx: %v", err)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestConnectURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:7700":        "ws://h:7700/api/v1/runner/connect",
		"https://h/":           "wss://h/api/v1/runner/connect",
		"https://h/drover/":    "wss://h/drover/api/v1/runner/connect",
		"https://h/drover?x=1": "",
	} {
		got, err := connectURL(in)
		if want == "" {
			if _, err := hubBase(in); err == nil {
				t.Errorf("hubBase(%q) accepted a query", in)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("connectURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestStopWhileHubUnreachable(t *testing.T) {
	h := newFakeHub(t)
	h.reject = http.StatusServiceUnavailable
	tr := startRunner(t, h, "", nil, func(r *Runner) { r.jitter = func(time.Duration) time.Duration { return time.Hour } })
	sandboxtest.WaitFor(t, "a dial", func() bool { return h.dialCount() >= 1 })
	tr.cancel()
	select {
	case err := <-tr.done:
		tr.done <- err
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stopping waited for the reconnect backoff")
	}
}

// TestReconnectWithAttemptsComesBackWithinALease: however often its hub
// refuses it, a runner holding an attempt retries at least every quarter
// lease (the hub keeps the attempt a lease), while an idle runner backs
// off further. Before, the 60 s backoff applied to both, and a hub down
// (or stopped) a few seconds found the attempt's runner away past its
// lease: the attempt was lost although nothing killed the runner.
func TestReconnectWithAttemptsComesBackWithinALease(t *testing.T) {
	const lease = 8 * time.Second
	for _, holding := range []bool{true, false} {
		t.Run(fmt.Sprintf("holding=%v", holding), func(t *testing.T) {
			h := newFakeHub(t)
			h.welcome.Lease = protocol.Duration(lease)
			var (
				mu       sync.Mutex
				ceilings []time.Duration
			)
			startRunner(t, h, "", nil, func(r *Runner) {
				r.jitter = func(c time.Duration) time.Duration {
					mu.Lock()
					defer mu.Unlock()
					ceilings = append(ceilings, c)
					return time.Millisecond
				}
			})
			c := h.waitConn(0)
			if holding {
				h.offer(protocol.AttemptRef{Job: "j1", Attempt: "a1", Epoch: 1}, shSpec("exec sleep 1000"))
				h.waitFrame("accept", func(g got) bool { return g.f.Type == protocol.TypeAccept })
			}
			h.mu.Lock()
			h.reject = http.StatusServiceUnavailable
			h.mu.Unlock()
			c.ws.CloseNow()
			deadline := time.Now().Add(30 * time.Second)
			for h.dialCount() < 12 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			h.mu.Lock()
			h.reject = 0 // back, so that the runner stops without waiting to report
			h.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			if len(ceilings) < 10 {
				t.Fatalf("%d reconnect delays", len(ceilings))
			}
			top := slices.Max(ceilings)
			if holding && top > lease/4 {
				t.Fatalf("a runner holding an attempt waited up to %s between tries (lease %s): %v", top, lease, ceilings)
			}
			if !holding && top <= lease/4 {
				t.Fatalf("an idle runner backed off only to %s: %v", top, ceilings)
			}
		})
	}
}

func TestPingTimeout(t *testing.T) {
	for _, c := range []struct {
		hubs      int
		hb, lease time.Duration
		want      time.Duration
	}{
		{1, 20 * time.Second, time.Minute, time.Minute},             // one hub: nowhere else to go
		{1, time.Second, 10 * time.Second, 10 * time.Second},        // at least 10 s
		{3, 20 * time.Second, time.Minute, 15 * time.Second},        // a quarter lease
		{3, time.Second, 10 * time.Second, 2500 * time.Millisecond}, // the campaigns' timing
		{3, time.Second, 2 * time.Second, time.Second},              // never under a second
		{3, time.Second, 0, 10 * time.Second},                       // no welcome yet
	} {
		urls := []string{"http://a", "http://b", "http://c"}[:c.hubs]
		r := &Runner{hubs: newHubList(urls), timing: timing{heartbeat: c.hb, lease: c.lease}}
		if got := r.pingTimeout(c.hb); got != c.want {
			t.Errorf("%d hubs, heartbeat %s, lease %s: ping timeout %s, want %s", c.hubs, c.hb, c.lease, got, c.want)
		}
	}
}
