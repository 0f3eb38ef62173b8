package runner

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/sandbox/sandboxtest"
	"drover/internal/testkit/disk"
)

// A hub whose disk is full refuses log and finish with no_space: the runner
// keeps the output and retries past the tries an internal error gets, and
// the attempt completes with its whole log.
func TestNoSpaceRetriedWhileTheAttemptLives(t *testing.T) {
	for _, typ := range []string{protocol.TypeLog, protocol.TypeFinish} {
		t.Run(typ, func(t *testing.T) {
			h := newFakeHub(t)
			const refusals = maxTries + 2
			var n atomic.Int32
			h.setHook(func(c *hubConn, f protocol.Frame) bool {
				if f.Type != typ || n.Add(1) > refusals {
					return false
				}
				c.writeReply(f.ID, protocol.Reply{Error: &rules.Error{Code: rules.ErrNoSpace, Message: "the hub's disk is full"}})
				return true
			})
			tr := startRunner(t, h, "", nil)
			ref := runsEchoHi(t, h)
			if got := len(h.requestsFor(typ, ref.Attempt)); got != refusals+1 {
				t.Fatalf("%d %s requests, want %d refused and one taken", got, typ, refusals)
			}
			if exists(tr.journalFile(ref.Attempt, extDropped)) {
				t.Fatal("the attempt was given up")
			}
		})
	}
}

// Finishes refused for a full disk do not use up the re-uploads of a log
// the hub then says it lacks.
func TestNoSpaceFinishesLeaveReuploads(t *testing.T) {
	h := newFakeHub(t)
	const refusals = maxTries + 2
	var n atomic.Int32
	h.setHook(func(c *hubConn, f protocol.Frame) bool {
		if f.Type != protocol.TypeFinish {
			return false
		}
		switch k := n.Add(1); {
		case k <= refusals:
			c.writeReply(f.ID, protocol.Reply{Error: &rules.Error{Code: rules.ErrNoSpace, Message: "the hub's disk is full"}})
		case k == refusals+1:
			size := h.truncate(refAttempt(f), 0)
			c.writeReply(f.ID, protocol.Reply{Error: &rules.Error{Code: rules.ErrLogIncomplete, Message: "lost it", Size: &size}})
		default:
			return false
		}
		return true
	})
	startRunner(t, h, "", nil)
	runsEchoHi(t, h)
}

// runsEchoHi offers `echo hi` to the runner connected to h and checks it
// completes with its whole log.
func runsEchoHi(t *testing.T, h *fakeHub) protocol.AttemptRef {
	t.Helper()
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, shSpec("echo hi"))
	wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	if got := string(h.log(ref.Attempt)); got != "hi\n" {
		t.Fatalf("log = %q", got)
	}
	return ref
}

func refAttempt(f protocol.Frame) string {
	var ref protocol.AttemptRef
	_ = f.Decode(&ref)
	return ref.Attempt
}

// startOnTmpfs starts a runner whose home is on a tmpfs of size bytes,
// after before (if set) ran on the mount, and waits for its connection.
func startOnTmpfs(t *testing.T, size int64, before func(mnt string), tune func(*Config)) (h *fakeHub, mnt, home string) {
	t.Helper()
	mnt = disk.Tmpfs(t, size)
	h = newFakeHub(t)
	home = filepath.Join(mnt, "home")
	must(t, SaveLogin(home, Login{Hub: h.srv.URL, Name: "r1", Token: h.token}))
	if before != nil {
		before(mnt)
	}
	startRunner(t, h, home, tune)
	h.waitConn(0)
	return h, mnt, home
}

// A spool the disk refuses stops the agent and fails the attempt
// runner_disk_full, with a marker line after the bytes that were kept and
// a finish whose size and digest cover both.
func TestSpoolWriteFailureFailsTheAttempt(t *testing.T) {
	h, _, _ := startOnTmpfs(t, 2<<20, nil, nil)
	ref := newRef()
	pidFile := filepath.Join(t.TempDir(), "pid")
	// 8 MB, then it would sleep forever: only the full disk ends it.
	spec := shSpec(fmt.Sprintf("echo $$ > %s; yes 0123456789abcdef | head -c 8000000; exec sleep 1000", pidFile))
	spec.LogCap = 64 << 20 // the disk, not the cap, cuts it
	h.offer(ref, spec)
	fin := h.waitFinish(ref.Attempt)
	wantOutcome(t, fin, job.AttemptFailed, job.ReasonRunnerDiskFull, nil)
	if pid := readPid(t, pidFile); sandboxtest.Alive(pid) {
		t.Fatalf("agent %d still runs after its output could not be kept", pid)
	}
	log := h.log(ref.Attempt)
	kept, marker, ok := strings.Cut(string(log), "\n"+diskFullMarker)
	want := strings.Repeat("0123456789abcdef\n", 8000000/17+1)
	if !ok || len(kept) == 0 || !strings.HasPrefix(want, kept) || !strings.HasSuffix(marker, "\n") {
		t.Fatalf("log of %d bytes: marker %v, kept a prefix of the output %v, ends %q", len(log), ok, strings.HasPrefix(want, kept), marker)
	}
	if fin.LogSize != int64(len(log)) || fin.LogSHA256 != sha(log) {
		t.Fatalf("finish says %d bytes %s, the hub holds %d %s", fin.LogSize, fin.LogSHA256, len(log), sha(log))
	}
}

// Below its free-space floor a runner says it is not ready and declines
// offers; once space returns it says it is ready and runs them.
func TestBelowFloorDeclinesUntilSpaceReturns(t *testing.T) {
	var free func()
	h, _, _ := startOnTmpfs(t, 4<<20, func(mnt string) { free = disk.Fill(t, mnt, 1<<20) }, func(c *Config) { c.MinFree = 2 << 20 })
	var hello protocol.Hello
	must(t, h.received(protocol.TypeHello)[0].f.Decode(&hello))
	if !strings.Contains(hello.NotReady, "below its floor of 2.0 MiB") {
		t.Fatalf("hello of a runner below its floor: not_ready %q", hello.NotReady)
	}
	ref := newRef()
	h.offer(ref, shSpec("echo nope"))
	g := h.waitFrame("decline", func(g got) bool { return g.f.Type == protocol.TypeDecline })
	var d protocol.Decline
	must(t, g.f.Decode(&d))
	if d.AttemptRef != ref || d.Reason != hello.NotReady {
		t.Fatalf("decline = %+v", d)
	}

	free()
	sandboxtest.WaitFor(t, "a status saying the runner is ready", func() bool {
		st, ok := h.lastStatus()
		return ok && st.NotReady == ""
	})
	again := newRef()
	h.offer(again, shSpec("echo yes"))
	wantOutcome(t, h.waitFinish(again.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
}

// A claim the journal cannot keep launches nothing and fails the attempt
// runner_disk_full (no floor here, so the offer is taken).
func TestJournalWriteFailureFailsTheAttempt(t *testing.T) {
	h, mnt, home := startOnTmpfs(t, 1<<20, nil, nil)
	disk.Fill(t, mnt, 0)
	ref := newRef()
	ran := filepath.Join(t.TempDir(), "ran")
	h.offer(ref, shSpec("touch "+ran))
	fin := h.waitFinish(ref.Attempt)
	wantOutcome(t, fin, job.AttemptFailed, job.ReasonRunnerDiskFull, nil)
	if !strings.Contains(fin.Outcome.Message, "claim") || exists(ran) {
		t.Fatalf("message %q, agent ran: %v", fin.Outcome.Message, exists(ran))
	}
	if claims, err := Claims(home); err != nil || len(claims) != 0 {
		t.Fatalf("claims %+v (%v): a claim that was not kept must not stay", claims, err)
	}
}
