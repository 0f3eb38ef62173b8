package runner

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/sandbox"
	"drover/internal/sandbox/sandboxtest"
	"drover/internal/tools"
)

// buildMCPAgent builds the scripted MCP agent of the e2e tests (the real
// MCP Go SDK client) into a temporary folder.
func buildMCPAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpagent")
	out, err := exec.Command("go", "build", "-o", bin, "drover/internal/e2e/testdata/mcpagent").CombinedOutput()
	if err != nil {
		t.Fatalf("build mcpagent: %v\n%s", err, out)
	}
	return bin
}

// toolsHub scripts the fake hub's side of the tool requests.
type toolsHub struct {
	mu        sync.Mutex
	answer    string // the approved answer the context shows; "" for none
	cutAsk    bool   // drop the connection at the first ask, unanswered
	asks      []protocol.Ask
	askIDs    []string // request ids of the asks received
	delivered []protocol.Deliver
	// onContext sees each context request while its agent runs.
	onContext func(protocol.GetContext)
}

func (th *toolsHub) hook(c *hubConn, f protocol.Frame) bool {
	th.mu.Lock()
	defer th.mu.Unlock()
	switch f.Type {
	case protocol.TypeAsk:
		var a protocol.Ask
		c.h.expect(f.Decode(&a))
		th.asks, th.askIDs = append(th.asks, a), append(th.askIDs, f.ID)
		if th.cutAsk {
			th.cutAsk = false
			c.cut()
			return true
		}
		c.writeReply(f.ID, protocol.Reply{OK: true, Body: c.h.json(protocol.AskAck{QuestionID: "q-1"})})
	case protocol.TypeDeliver:
		var d protocol.Deliver
		c.h.expect(f.Decode(&d))
		th.delivered = append(th.delivered, d)
		c.writeReply(f.ID, protocol.Reply{OK: true})
	case protocol.TypeContext:
		var g protocol.GetContext
		c.h.expect(f.Decode(&g))
		if th.onContext != nil {
			th.onContext(g)
		}
		jc := protocol.JobContext{Job: g.Job, Attempt: 1, Agent: "exec", Prompt: "mcpagent"}
		if th.answer != "" {
			jc.Questions = []protocol.QuestionView{{ID: "q-1", Job: g.Job, Question: "which color?", Choices: []string{"red", "blue"},
				Answer: &protocol.Answer{Text: th.answer, Choice: 2, By: "u", Approved: true}}}
		}
		c.writeReply(f.ID, protocol.Reply{OK: true, Body: c.h.json(jc)})
	default:
		return false
	}
	return true
}

func TestToolsAskThenDeliver(t *testing.T) {
	bin := buildMCPAgent(t)
	h := newFakeHub(t)
	th := &toolsHub{cutAsk: true}
	h.setHook(th.hook)
	tr := startRunner(t, h, "", nil)
	h.waitConn(0)

	// First attempt: context, then ask. The first ask is lost with the
	// connection; the runner resends it, with the same id, on the next one.
	ref := newRef()
	spec := protocol.JobSpec{Agent: "exec", Args: []string{bin}, Requester: "u", LogCap: 1 << 20, Tools: true}
	h.offer(ref, spec)
	fin := h.waitFinish(ref.Attempt)
	wantOutcome(t, fin, job.AttemptAsked, "", intp(0))
	th.mu.Lock()
	if len(th.asks) != 2 || th.askIDs[0] != th.askIDs[1] {
		t.Errorf("asks %v with ids %v: want the same ask twice, resent after the reconnect", th.asks, th.askIDs)
	}
	if a := th.asks[0]; a.Question != "which color?" || strings.Join(a.Choices, ",") != "red,blue" || a.AttemptRef != ref {
		t.Errorf("ask = %+v", a)
	}
	th.mu.Unlock()
	log := string(h.log(ref.Attempt))
	if !strings.Contains(log, "context: ok") || !strings.Contains(log, "ask: ok") {
		t.Fatalf("log = %q", log)
	}
	if strings.Contains(log, "drv_t_") {
		t.Error("the tool token reached the job's output")
	}
	rc, err := tr.jr.readReceipt(ref.Attempt)
	must(t, err)
	if rc.Outcome.State != job.AttemptAsked {
		t.Fatalf("receipt outcome %+v", rc.Outcome)
	}

	// Resumed with the approved answer: context shows it, the agent delivers.
	th.mu.Lock()
	th.answer = "blue"
	ref2 := newRef()
	ref2.Job = ref.Job
	spec.Resume = &protocol.ResumeSpec{Attempt: 1, SameRunner: true, History: []protocol.QuestionView{{ID: "q-1", Job: ref.Job,
		Question: "which color?", Choices: []string{"red", "blue"}, Answer: &protocol.Answer{Text: "blue", Choice: 2, By: "u", Approved: true}}}}
	checked := 0 // under th.mu, like the hook
	th.onContext = func(g protocol.GetContext) {
		checked++
		p := filepath.Join(tr.home, "work", g.Attempt+".tools", "agent", "mcp.json")
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("MCP config: %v, %v; want a 0600 file", fi, err)
			return
		}
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), `"Authorization": "Bearer drv_t_`) {
			t.Errorf("MCP config %s lacks the bearer header (%v)", b, err)
		}
	}
	th.mu.Unlock()
	h.offer(ref2, spec)
	fin = h.waitFinish(ref2.Attempt)
	wantOutcome(t, fin, job.AttemptCompleted, job.ReasonExited, intp(0))
	log = string(h.log(ref2.Attempt))
	for _, want := range []string{"history: ", "answer: blue", "deliver: ok"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q: %q", want, log)
		}
	}
	th.mu.Lock()
	if checked == 0 {
		t.Error("no context request while the resumed agent ran")
	}
	if len(th.delivered) != 1 || th.delivered[0].Summary != "done" || th.delivered[0].AttemptRef != ref2 {
		t.Errorf("delivered %+v", th.delivered)
	}
	th.mu.Unlock()
	sandboxtest.WaitFor(t, "the attempts' tool folders removed", func() bool {
		return !exists(filepath.Join(tr.home, "work", ref.Attempt+".tools")) && !exists(filepath.Join(tr.home, "work", ref2.Attempt+".tools"))
	})
}

func TestToolsTurnWithoutDeliverFails(t *testing.T) {
	bin := buildMCPAgent(t)
	h := newFakeHub(t)
	th := &toolsHub{}
	h.setHook(th.hook)
	startRunner(t, h, "", nil)
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, protocol.JobSpec{Agent: "exec", Args: []string{bin, "partial"}, Requester: "u", LogCap: 1 << 20, Tools: true})
	fin := h.waitFinish(ref.Attempt)
	wantOutcome(t, fin, job.AttemptFailed, job.ReasonNotDelivered, intp(0))
}

// A job with tools finds drover first on its PATH: the runner's executable,
// mounted read-only on the empty file in the tools folder after the folder
// itself (a symlink to it without a sandbox).
func TestToolsShowDroverOnThePath(t *testing.T) {
	for _, kind := range []string{sandbox.KindBwrap, sandbox.KindNone} {
		r := &Runner{cfg: Config{Sandbox: sandbox.Policy{Kind: kind}}}
		dir := t.TempDir()
		exe, err := r.showDrover(dir)
		if err != nil {
			t.Fatal(err)
		}
		at := &attemptTools{dir: dir, exe: exe}
		dst := filepath.Join(dir, "bin", "drover")
		fi, err := os.Lstat(dst)
		switch {
		case err != nil:
			t.Fatal(err)
		case kind == sandbox.KindNone && fi.Mode()&os.ModeSymlink == 0,
			kind != sandbox.KindNone && (!fi.Mode().IsRegular() || fi.Size() != 0):
			t.Errorf("%s: %s is %s (%d bytes)", kind, dst, fi.Mode(), fi.Size())
		}
		var p sandbox.Policy
		at.policy(&p)
		if len(p.ReadOnly) != 2 || p.ReadOnly[0].Src != dir || p.ReadOnly[1] != (sandbox.Mount{Src: exe, Dst: dst}) {
			t.Errorf("%s: read-only mounts %+v", kind, p.ReadOnly)
		}
	}
	env := prependPath([]string{"HOME=/h", "PATH=" + jobPath}, "/t/bin")
	if env[1] != "PATH=/t/bin:"+jobPath || env[0] != "HOME=/h" {
		t.Errorf("env %v", env)
	}
}

// The agent of a sparse job widens its checkout through the sparse_add
// tool: a folder the repository lacks is refused, the runner checks out
// the new folder (its git's cone included), and the publication holds
// exactly the agent's change and deletion there, nothing outside the cone
// taken for deleted. A job that is not sparse is refused the tool.
func TestToolsSparseAddWidensTheCheckout(t *testing.T) {
	bin := buildMCPAgent(t)
	h := newRepoHub(t)
	h.setHook((&toolsHub{}).hook)
	base := h.commit(map[string]string{"top.txt": "t\n", "lib/keep.txt": "k\n", "other/far.txt": "far\n",
		"other/dir/e.txt": "e\n", "other/dir/d.txt": "d\n", "third/z.txt": "z\n"})
	startRunner(t, h.fakeHub, "", nil)
	h.waitConn(0)
	run := func(sparse []string) (protocol.Finish, string, protocol.AttemptRef) {
		ref := newRef()
		spec := h.spec(ref, base, protocol.ModeFix, "")
		spec.Args, spec.Tools, spec.Repo.Sparse = []string{bin, "sparse", "other/dir", "other/dir/e.txt", "other/dir/d.txt"}, true, sparse
		h.offer(ref, spec)
		return h.waitFinish(ref.Attempt), string(h.log(ref.Attempt)), ref
	}

	fin, log, ref := run([]string{"lib"})
	wantOutcome(t, fin, job.AttemptCompleted, job.ReasonExited, intp(0))
	for _, want := range []string{"sparse path no/such/folder is not a folder", "Added other/dir to your sparse checkout",
		"drover: sparse checkout widened by other/dir", "agent cone: lib other/dir (<nil>)", "deliver: ok"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	head := h.head(ref.Job)
	if got := h.hubGit("diff", "--name-status", "--no-renames", base, head); got != "D\tother/dir/d.txt\nM\tother/dir/e.txt" {
		t.Fatalf("published changes:\n%s", got)
	}

	fin, log, _ = run(nil)
	if fin.Outcome.State != job.AttemptFailed || !strings.Contains(log, "the job is not sparse") {
		t.Fatalf("whole job's sparse_add: %+v\n%s", fin.Outcome, log)
	}
}

// The agent's expiry reaches the hub in its unit; beyond a year (or so far
// it would overflow a Duration) it is refused before anything is sent.
func TestAskOfExpiry(t *testing.T) {
	ref := newRef()
	for _, tc := range []struct {
		seconds int64
		want    time.Duration
		ok      bool
	}{
		{0, 0, true},
		{2, 2 * time.Second, true},
		{int64(rules.MaxQuestionExpiry / time.Second), rules.MaxQuestionExpiry, true},
		{int64(rules.MaxQuestionExpiry/time.Second) + 1, 0, false},
		{1 << 62, 0, false},
	} {
		a, err := askOf(ref, tools.Question{Text: "quick?", ExpiresInSeconds: tc.seconds})
		if (err == nil) != tc.ok || tc.ok && (a.ExpiresIn.D() != tc.want || a.AttemptRef != ref) {
			t.Errorf("askOf(%d s) = %+v, %v; want %s, ok %v", tc.seconds, a, err, tc.want, tc.ok)
		}
	}
}

// The hub's forge section passes through to the context tool whole.
func TestToolContextCarriesTheForgeSection(t *testing.T) {
	fc := &protocol.ForgeContext{Forge: "gt", Repo: "acme/web", Number: 7, Title: "t",
		Comments: []protocol.ForgeComment{{Author: "carol", Body: "@bob <b>hi</b>"}}, Notes: []string{"n"}}
	tc := toolContext(protocol.JobContext{Job: "j-1", Forge: fc}, nil)
	var got protocol.ForgeContext
	if err := json.Unmarshal(tc.Forge, &got); err != nil || !reflect.DeepEqual(&got, fc) {
		t.Fatalf("forge section %s: %+v %v", tc.Forge, got, err)
	}
	if tc := toolContext(protocol.JobContext{Job: "j-2"}, nil); tc.Forge != nil {
		t.Errorf("a job without a thread got a forge section: %s", tc.Forge)
	}
}
