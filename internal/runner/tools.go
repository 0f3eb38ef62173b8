package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"drover/internal/buildinfo"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/sandbox"
	"drover/internal/tools"
)

// A job with tools gets, per attempt, drover's MCP tool server: on a unix
// socket bridged into the sandbox at toolsAddr (on loopback for --sandbox
// none), with a token that dies with the attempt. The agent learns where it
// is from DROVER_MCP_CONFIG, a 0600 file in a folder mounted read-only; the
// token is in that file only, never in argv or the environment.

// toolsAddr is where the tool server appears inside a sandbox; the egress
// proxy and credential endpoints use 3128 and up.
const toolsAddr = "127.0.0.1:3100"

// maxSocketPath leaves room under the 108-byte sun_path limit.
const maxSocketPath = 100

// attemptTools is one attempt's running tool server.
type attemptTools struct {
	tools   *tools.Tools
	dir     string // read-only for the agent: mcp.json, history.json, bin/drover
	exe     string // the runner's executable, shown as bin/drover ("": not shown)
	url     string
	socket  string // host unix socket; "" on loopback
	tmp     string // a short socket folder when the attempt's path is too long
	history bool
	token   string // the attempt's bearer token: only ever written to 0600 files
	stop    context.CancelFunc
	done    chan error
}

func (r *Runner) toolsPath(id string) string { return filepath.Join(r.cfg.Home, "work", id+".tools") }

// homePath is a vendor CLI's private home: beside the attempt's directory,
// never in it, since that is the sandbox's root when the job has no
// repository (and a worktree's files are published).
func (r *Runner) homePath(id string) string { return filepath.Join(r.cfg.Home, "work", id+".home") }

// startTools serves the attempt's tools until stopTools.
func (r *Runner) startTools(a *attempt, out io.Writer) (_ *attemptTools, err error) {
	root := r.toolsPath(a.ref.Attempt)
	if err := freshDir(root); err != nil {
		return nil, err
	}
	at := &attemptTools{dir: filepath.Join(root, "agent"), done: make(chan error, 1)}
	defer func() {
		if err != nil && at.tmp != "" {
			os.RemoveAll(at.tmp)
		}
	}()
	if err := os.Mkdir(at.dir, 0o700); err != nil {
		return nil, fmt.Errorf("make tools folder: %w", err)
	}
	if at.exe, err = r.showDrover(at.dir); err != nil {
		return nil, err
	}
	var ln net.Listener
	if r.cfg.Sandbox.Kind == sandbox.KindNone {
		// Nothing to bridge: the agent shares the host's loopback.
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("listen for the tools: %w", err)
		}
		at.url = "http://" + ln.Addr().String() + tools.Path
	} else {
		at.socket = filepath.Join(root, "tools.sock")
		if len(at.socket) > maxSocketPath {
			if at.tmp, err = os.MkdirTemp("", "drover-tools-"); err != nil {
				return nil, fmt.Errorf("make tools socket folder: %w", err)
			}
			at.socket = filepath.Join(at.tmp, "tools.sock")
		}
		if ln, err = net.Listen("unix", at.socket); err != nil {
			return nil, fmt.Errorf("listen for the tools: %w", err)
		}
		// The client inside sends Host: 127.0.0.1:PORT, a loopback name,
		// so the SDK's DNS-rebinding rule would hold were it applied.
		at.url = "http://" + toolsAddr + tools.Path
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	if rs := a.spec.Resume; rs != nil {
		if err := writeHistory(filepath.Join(at.dir, "history.json"), rs); err != nil {
			return nil, err
		}
		at.history = true
	}
	token := tools.NewToken()
	at.token = token
	at.tools = tools.New(&toolBackend{r: r, a: a, out: out})
	srv, err := tools.NewServer(at.tools, token, tools.Options{Logger: r.log.With("attempt", a.ref.String()), Version: buildinfo.Version()})
	if err != nil {
		return nil, err
	}
	if err := tools.WriteMCPConfig(at.config(), at.url, token); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(r.life)
	at.stop = stop
	go func() { at.done <- srv.Serve(ctx, ln) }()
	return at, nil
}

func (at *attemptTools) config() string { return filepath.Join(at.dir, "mcp.json") }

// binDir holds drover itself, for `drover tool` in an exec agent's script.
func (at *attemptTools) binDir() string { return filepath.Join(at.dir, "bin") }

// showDrover puts the runner's own executable at dir/bin/drover for the
// agent: a symlink without a sandbox, else an empty file that the
// sandbox mounts the executable on (read-only; see policy). The binary holds
// no secret: the token stays in the config file.
func (r *Runner) showDrover(dir string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the drover executable for the tools: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", fmt.Errorf("find the drover executable for the tools: %w", err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		return "", fmt.Errorf("make tools folder: %w", err)
	}
	dst := filepath.Join(bin, "drover")
	if r.cfg.Sandbox.Kind == sandbox.KindNone {
		err = os.Symlink(exe, dst)
	} else {
		err = os.WriteFile(dst, nil, 0o500)
	}
	if err != nil {
		return "", fmt.Errorf("show drover to the agent: %w", err)
	}
	return exe, nil
}

// env is what the agent's environment gains from the tools.
func (at *attemptTools) env() []string {
	env := []string{"DROVER_MCP_CONFIG=" + at.config(), "DROVER_TOOLS_URL=" + at.url}
	if at.history {
		env = append(env, "DROVER_HISTORY="+filepath.Join(at.dir, "history.json"))
	}
	return env
}

// policy adds the tools to an attempt's sandbox policy.
func (at *attemptTools) policy(p *sandbox.Policy) {
	p.ReadOnly = append(p.ReadOnly[:len(p.ReadOnly):len(p.ReadOnly)], sandbox.Mount{Src: at.dir})
	if at.exe != "" {
		// After the folder: it is mounted on the empty file showDrover made.
		p.ReadOnly = append(p.ReadOnly, sandbox.Mount{Src: at.exe, Dst: filepath.Join(at.binDir(), "drover")})
	}
	p.Env = append(p.Env[:len(p.Env):len(p.Env)], "DROVER_MCP_CONFIG", "DROVER_TOOLS_URL", "DROVER_HISTORY")
	if at.socket != "" {
		p.Sockets = append(p.Sockets[:len(p.Sockets):len(p.Sockets)], sandbox.Socket{Addr: toolsAddr, Path: at.socket})
	}
}

// stopTools stops the server, which ends the token, and returns what the
// tools say about the turn. Calls in flight get the server's grace.
func (r *Runner) stopTools(a *attempt, at *attemptTools) tools.Status {
	at.stop()
	if err := <-at.done; err != nil {
		r.log.Warn("tool server", "attempt", a.ref.String(), "err", err)
	}
	if at.tmp != "" {
		if err := os.RemoveAll(at.tmp); err != nil {
			r.log.Warn("remove tools socket folder", "attempt", a.ref.String(), "err", err)
		}
	}
	return at.tools.Status()
}

// toolsOutcome applies the tool rule (job.ToolOutcome) with what the
// attempt's tool server saw.
func toolsOutcome(o job.Outcome, st tools.Status) job.Outcome {
	o = job.ToolOutcome(o, st == tools.Waiting, st == tools.Delivered)
	o.Message = clip(o.Message, 4096)
	return o
}

// writeHistory gives an agent that cannot resume its session the questions
// so far with their approved answers (only approved ones reach an offer).
func writeHistory(path string, rs *protocol.ResumeSpec) error {
	b, err := json.MarshalIndent(struct {
		Attempt   int64                   `json:"attempt"`
		Questions []protocol.QuestionView `json:"questions"`
		Omitted   int                     `json:"omitted,omitempty"`
	}{rs.Attempt, rs.History, rs.Omitted}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode history: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// toolBackend relays an attempt's tool calls to the hub as requests, which
// are resent with the same id after a reconnect, and publishes its work.
type toolBackend struct {
	r   *Runner
	a   *attempt
	out io.Writer // the attempt's log
}

var errNoRepo = errors.New("this job has no repository to publish")

// publish publishes the work and returns the job's head; a job without a
// repository has nothing to publish. checkpoint marks work in progress.
func (b *toolBackend) publish(ctx context.Context, checkpoint bool) (string, error) {
	if b.a.ws == nil {
		return "", errNoRepo
	}
	if b.a.spec.Mode == protocol.ModeObserve {
		return b.a.ws.wt.Head(), nil // observe mode publishes nothing
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	head, err := b.r.publish(ctx, b.a, b.a.ws.wt, b.out, checkpoint)
	if err != nil {
		return "", fmt.Errorf("publish the work: %w", err)
	}
	return head, nil
}

// hub is where the tools' requests go. They wait for their reply as long
// as the attempt lives, whatever becomes of the tool call that made them,
// so they take the runner's life, not the call's context.
func (b *toolBackend) hub() (context.Context, protocol.Hub) { return b.r.life, b.r.hubFor(b.a) }

func (b *toolBackend) Ask(ctx context.Context, q tools.Question) (tools.AskResult, error) {
	ask, err := askOf(b.a.ref, q) // before publishing: a refused question publishes nothing
	if err != nil {
		return tools.AskResult{}, err
	}
	head, err := b.publish(ctx, true)
	if err != nil && !errors.Is(err, errNoRepo) {
		return tools.AskResult{}, err
	}
	rctx, hub := b.hub()
	ack, err := hub.Ask(rctx, newRequestID(), ask)
	if err != nil {
		return tools.AskResult{}, toolErr(protocol.TypeAsk, err)
	}
	return tools.AskResult{QuestionID: ack.QuestionID, Head: head}, nil
}

// askOf is the ask request of the agent's question, checked against the
// hub's limits.
func askOf(ref protocol.AttemptRef, q tools.Question) (protocol.Ask, error) {
	ask := protocol.Ask{AttemptRef: ref, Question: q.Text, Choices: q.Choices}
	d, err := rules.QuestionExpiry(q.ExpiresInSeconds)
	if err != nil {
		return ask, err
	}
	ask.ExpiresIn = protocol.Duration(d)
	return ask, ask.Validate()
}

func (b *toolBackend) Checkpoint(ctx context.Context, message string) (tools.CheckpointResult, error) {
	head, err := b.publish(ctx, true)
	if err != nil {
		return tools.CheckpointResult{}, err
	}
	fmt.Fprintf(b.out, "drover: checkpoint at %s: %s\n", head, clip(message, 200))
	return tools.CheckpointResult{Head: head}, nil
}

func (b *toolBackend) Deliver(ctx context.Context, summary string) error {
	if _, err := b.publish(ctx, false); err != nil && !errors.Is(err, errNoRepo) {
		return err
	}
	rctx, hub := b.hub()
	return toolErr(protocol.TypeDeliver, hub.Deliver(rctx, newRequestID(), protocol.Deliver{AttemptRef: b.a.ref, Summary: summary}))
}

func (b *toolBackend) Context(ctx context.Context) (tools.JobContext, error) {
	rctx, hub := b.hub()
	jc, err := hub.Context(rctx, newRequestID(), protocol.GetContext{AttemptRef: b.a.ref})
	if err != nil {
		return tools.JobContext{}, toolErr(protocol.TypeContext, err)
	}
	return toolContext(jc, b.a.ws), nil
}

// SparseAdd widens the attempt's own sparse worktree. The runner does it
// outside the sandbox: only it holds the token the hub wants for the new
// part's blobs. The agent's copy of the admin dir gets the new cone too,
// so that its git keeps to it.
func (b *toolBackend) SparseAdd(ctx context.Context, paths []string) (tools.SparseResult, error) {
	aw := b.a.ws
	if aw == nil {
		return tools.SparseResult{}, errors.New("this job has no repository, so no sparse checkout to widen")
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	added, err := aw.wt.Widen(ctx, paths)
	if err != nil {
		return tools.SparseResult{}, err
	}
	if len(added) > 0 {
		fmt.Fprintf(b.out, "drover: sparse checkout widened by %s\n", strings.Join(added, ", "))
		if aw.admin != "" {
			if err := aw.copyAdmin("info/sparse-checkout"); err != nil {
				// The widening stands (publications follow the runner's
				// record); only the agent's own git misses the new cone.
				fmt.Fprintf(b.out, "drover: the agent's git keeps the old cone: %v\n", err)
			}
		}
	}
	return tools.SparseResult{Added: added, Cone: aw.wt.Sparse()}, nil
}

// questionRecords maps the hub's questions to what the tools and the
// prompt show.
func questionRecords(qs []protocol.QuestionView) []tools.QuestionRecord {
	var out []tools.QuestionRecord
	for _, q := range qs {
		qr := tools.QuestionRecord{ID: q.ID, Question: q.Question, Choices: q.Choices, AskedAt: q.AskedAt}
		if a := q.Answer; a != nil {
			qr.Answer = &tools.Answer{Text: a.Text, Choice: a.Choice, By: a.By, AnsweredAt: a.AnsweredAt, Approved: a.Approved}
		}
		out = append(out, qr)
	}
	return out
}

// toolContext maps the hub's context to what the tool shows.
func toolContext(jc protocol.JobContext, aw *attemptWorkspace) tools.JobContext {
	tc := tools.JobContext{JobID: jc.Job, Attempt: int(jc.Attempt), Prompt: jc.Prompt,
		Repository: jc.Project, Base: jc.Base, Head: jc.Head}
	if aw != nil {
		tc.ContextDir = aw.context
	}
	for _, f := range jc.Context {
		tc.ContextFiles = append(tc.ContextFiles, tools.ContextFile{Name: f.Name, Size: f.Size})
	}
	tc.Questions = questionRecords(jc.Questions)
	if jc.Forge != nil {
		// The tools show it as the hub read it; it cannot fail to encode.
		tc.Forge, _ = json.Marshal(jc.Forge)
	}
	for _, at := range jc.Attempts {
		msg := at.Message
		if at.Summary != "" {
			msg = joinMsg(msg, "delivered: "+at.Summary)
		}
		tc.Attempts = append(tc.Attempts, tools.AttemptRecord{Number: int(at.Number), State: string(at.State), Reason: string(at.Reason), Message: msg})
	}
	return tc
}
