package native

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"drover/internal/model"
	"drover/internal/tools"
)

// failsafe bounds a wait for a loop that must end; it only fails a test
// that would otherwise hang, and says nothing about how fast it ended.
const failsafe = 2 * time.Minute

// startLoop runs l on tr in the background; its outcome comes on the
// channel.
func startLoop(ctx context.Context, l *loop, tr *Transcript) <-chan Outcome {
	done := make(chan Outcome, 1)
	go func() { done <- l.run(ctx, tr) }()
	return done
}

// ended is the outcome of a loop that must end, and fails the test if it
// never does.
func ended(t *testing.T, done <-chan Outcome, what string) Outcome {
	t.Helper()
	select {
	case out := <-done:
		return out
	case <-time.After(failsafe):
		t.Fatalf("%s: the loop never ended (a tool call holds the runner's slot)", what)
		return Outcome{}
	}
}

// TestFileToolsRefuseSpecialFiles: a FIFO the agent made (open(2) of one
// waits for a writer, forever), a socket and a device get a tool error
// from every file tool instead of wedging the attempt; search skips them.
func TestFileToolsRefuseSpecialFiles(t *testing.T) {
	l, sc, dir := newLoop(t, Limits{})
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("needle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	want := map[string]string{}
	add := func(id, name, args, has string) {
		sc.resps = append(sc.resps, call(id, name, args))
		want[id] = has
	}
	sc.resps = append(sc.resps, call("mk", toolRun, `{"command":"mkfifo fifo"}`))
	for _, f := range []struct{ path, kind string }{{"fifo", "named pipe"}, {"sock", "a socket"}, {"dev", "a device"}} {
		if f.path == "dev" {
			// Only root makes a device node (a copy of /dev/null).
			if err := syscall.Mknod(filepath.Join(dir, "dev"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
				t.Logf("no device case: %v", err)
				continue
			}
		}
		add("r-"+f.path, toolRead, `{"path":"`+f.path+`"}`, f.kind)
		add("w-"+f.path, toolWrite, `{"path":"`+f.path+`","content":"x"}`, f.kind)
		add("e-"+f.path, toolEdit, `{"path":"`+f.path+`","old_text":"a","new_text":"b"}`, f.kind)
		add("l-"+f.path, toolList, `{"path":"`+f.path+`"}`, f.kind)
	}
	add("l-file", toolList, `{"path":"a.txt"}`, "not a directory")
	sc.resps = append(sc.resps, call("s", toolSearch, `{"pattern":"needle|x"}`))

	tr := newTranscript()
	if out := ended(t, startLoop(context.Background(), l, tr), "read_file of a FIFO"); out.End != EndAnswered {
		t.Fatalf("ended %s (%s); want answered", out.End, out.Reason)
	}
	got := map[string]model.Result{}
	for _, m := range tr.Messages {
		for _, r := range m.Results {
			got[r.CallID] = r
		}
	}
	if r := got["mk"]; !strings.Contains(r.Output, "[exit code 0]") {
		t.Fatalf("mkfifo: %q", r.Output)
	}
	for id, has := range want {
		if r := got[id]; !r.IsError || !strings.Contains(r.Output, has) {
			t.Errorf("call %s: %+v; want a tool error saying %q", id, r, has)
		}
	}
	if r := got["s"]; r.IsError || strings.TrimSpace(r.Output) != "a.txt:1:needle" {
		t.Errorf("search: %+v; want the regular file's match only", r)
	}
	if st, err := os.Lstat(filepath.Join(dir, "fifo")); err != nil || st.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO was replaced: %v %v", st, err)
	}
}

// stuckTools is a drover tool that never returns, whatever its context
// says, until the test ends: a system call that cannot be interrupted.
type stuckTools struct {
	fakeTools
	entered chan struct{}
	release chan struct{}
}

func (s *stuckTools) Call(context.Context, string, json.RawMessage) (string, error) {
	close(s.entered)
	<-s.release
	return "late", nil
}

// TestCancelEndsABlockedTool: a cancel during a tool call that ignores
// its context ends the attempt once the grace has passed.
func TestCancelEndsABlockedTool(t *testing.T) {
	l, _, _ := newLoop(t, Limits{}, call("1", tools.ToolDeliver, `{"summary":"x"}`))
	stuck := &stuckTools{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(stuck.release) })
	l.tools.drover = stuck
	l.tools.cmds.grace = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := newTranscript()
	done := startLoop(ctx, l, tr)
	<-stuck.entered
	cancel()
	out := ended(t, done, "a cancelled attempt")
	if out.End != EndCancelled {
		t.Fatalf("ended %s (%s); want cancelled", out.End, out.Reason)
	}
	if r := lastResults(tr); len(r) != 1 || !r[0].IsError || !strings.Contains(r[0].Output, "abandoned") {
		t.Fatalf("results %+v; want the call abandoned", r)
	}
}
