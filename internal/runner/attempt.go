package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"drover/internal/agent"
	"drover/internal/agent/facts"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/sandbox"
)

// jobPath is the PATH jobs get: the runner's own is never passed on.
const jobPath = "/usr/local/bin:/usr/bin:/bin"

// Why an attempt's context was cancelled; the outcome depends on it.
var (
	errCancelled = errors.New("cancelled by the hub")
	errShutdown  = errors.New("runner shutting down")
	errDropped   = fmt.Errorf("dropped by the hub: %w", sandbox.ErrKill)
	errAbandoned = fmt.Errorf("runner exiting: %w", sandbox.ErrKill)
	// errDiskFull: the attempt's output could not be kept. Nothing more it
	// prints would be, so the agent is killed at once.
	errDiskFull = fmt.Errorf("the runner's disk is full: %w", sandbox.ErrKill)
)

// diskFull is the outcome of an attempt whose spool or journal the runner
// could not write: never completed, whatever the agent did.
func diskFull(err error) job.Outcome {
	return job.Outcome{State: job.AttemptFailed, Reason: job.ReasonRunnerDiskFull,
		Message: clip("the runner could not keep the attempt's output or journal (free space on the runner): "+err.Error(), 4096)}
}

// attempt is one attempt the runner holds, from offer to acknowledged
// finish. One goroutine drives it; the reader only cancels or forgets it.
type attempt struct {
	ref  protocol.AttemptRef
	spec protocol.JobSpec

	ctx    context.Context // the agent's; its cause says why it was stopped
	cancel context.CancelCauseFunc
	gone   chan struct{}     // closed when forgotten
	ws     *attemptWorkspace // set by launch for a job with a repository
	box    sandbox.Boundary  // set by runAgent: the isolation the finish reports
	tools  *attemptTools     // set by launch for a job with tools
	// session is the agent's session id (set by launch), for a later resume.
	session string
	// account is the account the hub chose for a vendor agent ("": any).
	account string
	// usage is what a vendor agent reported it consumed (set by launch).
	usage *protocol.Usage
	// out is the attempt's log (set by launch), where egress evidence goes.
	out io.Writer
	// denials counts what the egress proxy refused, per phase.
	denials denials
	// caches are the project's caches mounted into the sandbox (set by
	// launch for a job that names some).
	caches *attemptCaches
	// setupReused: the setup was skipped for an earlier successful one.
	setupReused bool
	// turnMax is the attempt's turn limit (0: none): the runner's, or its
	// account's when lower (limits.go).
	turnMax atomic.Int64

	// under Runner.mu
	phase     string
	forgotten bool
	dropped   bool // forgotten because the hub took it away: never finish it
}

func newAttempt(ref protocol.AttemptRef, spec protocol.JobSpec, phase string) *attempt {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &attempt{ref: ref, spec: spec, ctx: ctx, cancel: cancel, gone: make(chan struct{}), phase: phase}
}

// holdLocked registers a and starts the goroutine that drives it.
func (r *Runner) holdLocked(a *attempt, run func(*attempt) error) {
	r.attempts[a.ref.Attempt] = a
	r.markDirtyLocked()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer a.cancel(nil)
		err := run(a)
		r.cleanup(a, err)
	}()
}

// forget stops holding a. dropped means the hub took it away: kill the
// agent without grace and never finish it.
func (r *Runner) forget(a *attempt, dropped bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetLocked(a, dropped)
}

func (r *Runner) forgetLocked(a *attempt, dropped bool) {
	if a.forgotten {
		return
	}
	a.forgotten, a.dropped = true, dropped
	a.cancel(errDropped) // no-op unless the agent still runs
	close(a.gone)
	delete(r.attempts, a.ref.Attempt)
	if len(r.attempts) == 0 {
		r.lc.lastHeld = r.now()
	}
	r.dropRequestsLocked(a.ref.Attempt)
	r.markDirtyLocked()
	select {
	case r.idle <- struct{}{}:
	default:
	}
}

// cleanup runs when an attempt's goroutine ends. A forgotten attempt is
// over: its work dir and spool go, and a dropped one is marked so that no
// later start reports it. Otherwise the runner is stopping and everything
// stays for the next start to finish.
func (r *Runner) cleanup(a *attempt, err error) {
	r.mu.Lock()
	forgotten, dropped := a.forgotten, a.dropped
	r.mu.Unlock()
	if !forgotten {
		if err != nil && !errors.Is(err, errStopped) {
			r.log.Error("attempt ended unexpectedly", "attempt", a.ref.String(), "err", err)
		}
		return
	}
	id := a.ref.Attempt
	if dropped && r.jr.has(id) {
		if err := r.jr.mark(id, extDropped); err != nil {
			r.log.Error("journal", "attempt", a.ref.String(), "err", err)
		}
	}
	for _, p := range []string{r.workPath(id), r.spoolPath(id), r.contextPath(id), r.toolsPath(id), r.homePath(id)} {
		if err := removeTree(p); err != nil {
			r.log.Warn("clean up attempt", "attempt", a.ref.String(), "err", err)
		}
	}
}

func (r *Runner) workPath(id string) string  { return filepath.Join(r.cfg.Home, "work", id) }
func (r *Runner) spoolPath(id string) string { return filepath.Join(r.cfg.Home, "spool", id+".log") }

// runOffered drives an offered attempt: accept, and only on the hub's ok
// claim it durably and launch it.
func (r *Runner) runOffered(a *attempt) error {
	e, err := refusal(r.hubFor(a).Accept(r.life, newRequestID(), protocol.Accept{AttemptRef: a.ref}))
	if err != nil {
		return err
	}
	if e != nil {
		r.log.Info("hub refused the accept", "attempt", a.ref.String(), "err", e)
		r.untake()
		r.forget(a, false)
		return nil
	}
	if a.ctx.Err() != nil {
		// Cancelled or shutting down before launch: nothing ran, nothing is claimed.
		return r.finish(a, nil, 0, unlaunched(context.Cause(a.ctx)), nil)
	}
	if r.jr.has(a.ref.Attempt) {
		err = errClaimed // a receipt without a claim: stopped before launch, but already reported
	} else {
		err = r.jr.claim(Claim{Job: a.ref.Job, Attempt: a.ref.Attempt, Epoch: a.ref.Epoch, ClaimedAt: r.now().UTC(), PID: os.Getpid()})
	}
	if errors.Is(err, errClaimed) {
		r.log.Warn("attempt was claimed before; reporting it instead of running it again", "attempt", a.ref.String())
		return r.resume(a)
	}
	if err != nil {
		r.log.Error("cannot claim attempt; not running it", "attempt", a.ref.String(), "err", err)
		r.checkSpace() // most likely a full disk: stop taking offers now
		return r.finish(a, nil, 0, diskFull(err), nil)
	}
	r.setPhase(a, protocol.PhaseRunning)
	return r.launch(a)
}

// launch runs the agent of a claimed attempt while its output is uploaded,
// then finishes it.
func (r *Runner) launch(a *attempt) error {
	id := a.ref.Attempt
	logCap := a.spec.LogCap
	if logCap <= 0 {
		logCap = r.timings().logCap
	}
	sp, err := createSpool(r.spoolPath(id), logCap, r.now, func(err error) {
		r.log.Error("cannot write the attempt's output; stopping its agent", "attempt", a.ref.String(), "err", err)
		a.cancel(errDiskFull)
		r.checkSpace()
	})
	if err != nil {
		return r.finish(a, nil, 0, diskFull(err), nil)
	}
	defer sp.close()
	a.out = sp
	dir := r.workPath(id)
	if err := freshDir(dir); err != nil {
		sp.end()
		return r.finish(a, sp, 0, failedToStart(err), nil)
	}

	type uploaded struct {
		acked int64
		err   error
	}
	up := make(chan uploaded, 1)
	go func() {
		n, err := r.upload(a, sp, 0)
		up <- uploaded{n, err}
	}()
	var out job.Outcome
	if why := r.imageRefusal(a.spec.Image); why != "" {
		out = job.Outcome{State: job.AttemptFailed, Reason: job.ReasonSpawnFailed, Message: why}
	}
	if out.State == "" && a.spec.Repo != nil {
		// The agent works in the job's worktree; the work dir stays its home.
		if a.ws, err = r.prepareWorkspace(a, sp); err != nil {
			out = startFailed(job.Outcome{State: job.AttemptFailed, Reason: job.ReasonWorkspace, Message: clip(err.Error(), 4096)}, context.Cause(a.ctx))
		}
	}
	if out.State == "" && a.spec.Tools {
		if a.tools, err = r.startTools(a, sp); err != nil {
			fmt.Fprintf(sp, "drover: cannot start the agent's tools: %v\n", err)
			out = startFailed(failedToStart(fmt.Errorf("start the tool server: %w", err)), context.Cause(a.ctx))
		}
	}
	if out.State == "" && len(a.spec.Caches) > 0 && a.spec.Repo != nil {
		if a.caches, err = r.openCaches(a.spec.Repo.Project, a.spec.Caches); err != nil {
			fmt.Fprintf(sp, "drover: cannot prepare the project's caches: %v\n", err)
			out = failedToStart(fmt.Errorf("prepare caches: %w", err))
		}
	}
	if out.State == "" && a.ws != nil {
		// The worktree's monitor made its first walk alongside the steps
		// above; it must have ended before the setup or the agent writes.
		a.ws.wt.Ready()
	}
	if out.State == "" && a.spec.Setup != nil {
		out = r.runSetup(a, sp, dir)
	}
	if out.State == "" {
		res, runErr := r.runAgent(a, sp, dir)
		a.session = clip(res.Session, protocol.MaxSession)
		if u := res.Usage; u != (agent.Usage{}) {
			a.usage = &u
			r.countSpend(a.usage)
		}
		out = outcomeOf(res, runErr, context.Cause(a.ctx))
		if a.tools != nil {
			// Stopped before the publication below: no tool call races it.
			out = toolsOutcome(out, r.stopTools(a, a.tools))
		}
		if a.ws != nil && a.spec.Mode != protocol.ModeObserve {
			// Before anything reads the clone's worktree HEADs. Observe
			// mode keeps what the agent did for its check (its sandbox
			// cannot write HEAD anyway).
			if err := a.ws.wt.RestoreAdmin(); err != nil {
				fmt.Fprintf(sp, "drover: %v\n", err)
				r.log.Warn("restore worktree after the agent", "attempt", a.ref.String(), "err", err)
			}
		}
		if a.ws != nil && r.life.Err() == nil {
			out = r.settleWorkspace(a, a.ws, sp, out)
		}
	}
	if out.State == job.AttemptFailed && out.Message != "" {
		// Why, where 'drover logs' and 'run --wait' show it too (a command
		// that just exited non-zero has no why to add).
		fmt.Fprintf(sp, "drover: the attempt failed (%s): %s\n", out.Reason, out.Message)
	}
	if err := sp.end(); err != nil {
		// Whatever the agent did, its log is not all there: never completed.
		r.log.Error("the attempt's output was not all kept; failing it", "attempt", a.ref.String(), "err", err)
		out = diskFull(err)
	}
	u := <-up
	err = u.err
	if err == nil && r.life.Err() != nil {
		// Killed because the runner is exiting: no receipt, so the next
		// start reports the attempt interrupted.
		err = errStopped
	}
	if err == nil {
		err = r.finish(a, sp, u.acked, out, nil)
	}
	if a.ws != nil {
		r.closeWorkspace(a, a.ws, out, err == nil)
	}
	return err
}

func (r *Runner) runAgent(a *attempt, sp *spool, dir string) (agent.Result, error) {
	ag, ok := r.agents.Lookup(a.spec.Agent)
	if !ok {
		return agent.Result{Reason: job.ReasonSpawnFailed,
			Message: fmt.Sprintf("this runner has no agent %q (it has %v)", a.spec.Agent, r.agents.Names())}, nil
	}
	r.log.Info("running attempt", "attempt", a.ref.String(), "agent", ag.Name())
	env := jobEnv(a.ref, dir)
	dir, env = a.dirEnv(dir, env)
	if a.tools != nil {
		env = append(prependPath(env, a.tools.binDir()), a.tools.env()...)
	}
	// The seam: every agent gets its sandbox through att.Sandbox (the
	// runner's policy for the attempt plus what the agent adds), and those
	// that run under an account their account, prompt and tools.
	att := agent.Attempt{
		Ref: a.ref, Spec: a.spec, Dir: dir, Env: env, Output: sp, Grace: r.cfg.StopGrace, Events: r.turnLimit(a, sp),
		Sandbox: func(extra agent.Extra) (sandbox.Boundary, error) {
			box, err := r.boundary(a, dir, extra)
			if err == nil {
				a.box = box
			}
			return box, err
		},
	}
	if at := a.tools; at != nil {
		att.Tools = &agent.ToolEndpoint{URL: at.url, Token: at.token, MCPConfig: at.config(), Local: at.tools}
	}
	e, ok := facts.Lookup(ag.Name())
	if ok && e.Caps.Portable {
		att.Turns = turnLog{r: r, a: a}
	}
	if ok && e.Accounts() {
		return r.runWithAccount(a, ag, e, att)
	}
	return ag.Run(a.ctx, att)
}

func jobEnv(ref protocol.AttemptRef, dir string) []string {
	return []string{
		"PATH=" + jobPath,
		"HOME=" + dir,
		"LANG=C.UTF-8",
		"TERM=dumb",
		"DROVER_JOB=" + ref.Job,
		"DROVER_ATTEMPT=" + ref.Attempt,
		"DROVER_EPOCH=" + strconv.FormatInt(ref.Epoch, 10),
	}
}

// prependPath puts dir first in env's PATH.
func prependPath(env []string, dir string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + dir + ":" + v
		}
		out[i] = kv
	}
	return out
}

// freshDir makes an empty private directory, removing what a crashed run
// may have left.
func freshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear work dir: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("make work dir: %w", err)
	}
	return nil
}

func failedToStart(err error) job.Outcome {
	return job.Outcome{State: job.AttemptFailed, Reason: job.ReasonAgentError, Message: err.Error()}
}

// resume finishes an attempt the journal has claimed but whose finish was
// never acknowledged: with its receipt if one was written, else as
// interrupted, because the agent may have run and died with an old runner.
// It never launches anything.
func (r *Runner) resume(a *attempt) error {
	r.setPhase(a, protocol.PhaseFinishing)
	rc, err := r.jr.readReceipt(a.ref.Attempt)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r.abandon(a, err)
	}
	sp, err := openSpool(r.spoolPath(a.ref.Attempt))
	if err != nil {
		return r.abandon(a, err)
	}
	defer sp.close()
	if rc == nil {
		size, sum, err := sp.digest()
		if err != nil {
			return r.abandon(a, err)
		}
		rc = &receipt{Job: a.ref.Job, Attempt: a.ref.Attempt, Epoch: a.ref.Epoch, LogSize: size, LogSHA256: sum,
			Outcome: job.Outcome{State: job.AttemptUnknown, Reason: job.ReasonInterrupted,
				Message: "the runner stopped while the attempt was running; its outcome is unknown"}}
		if err := r.jr.writeReceipt(*rc); err != nil {
			r.log.Error("journal", "attempt", a.ref.String(), "err", err)
		}
	}
	acked, err := r.upload(a, sp, 0)
	if err != nil {
		return err
	}
	return r.finish(a, sp, acked, rc.Outcome, rc)
}

// emptySHA256 is the digest of an attempt that produced no output.
var emptySHA256 = func() string { s := sha256.Sum256(nil); return hex.EncodeToString(s[:]) }()

// finish reports an attempt's outcome once its whole output is uploaded:
// the receipt goes to disk first, so that a restart resends this finish
// rather than guessing. sp may be nil when nothing was launched.
func (r *Runner) finish(a *attempt, sp *spool, acked int64, out job.Outcome, rc *receipt) error {
	if rc == nil {
		rc = &receipt{Job: a.ref.Job, Attempt: a.ref.Attempt, Epoch: a.ref.Epoch, Outcome: out, LogSHA256: emptySHA256, Session: a.session, Usage: a.usage}
		if sp != nil {
			size, sum, err := sp.digest()
			if err != nil {
				return r.abandon(a, err)
			}
			rc.LogSize, rc.LogSHA256 = size, sum
			if a.box != nil {
				iso := a.box.Describe()
				iso.Policy = describeNetwork(a.spec, a.spec.Setup != nil)
				iso.Denials = a.denials.list()
				if a.caches != nil {
					iso.Caches = a.caches.names
				}
				iso.SetupReused = a.setupReused
				rc.Isolation = &iso
			}
		}
		if err := r.jr.writeReceipt(*rc); err != nil {
			r.log.Error("finishing without a durable receipt", "attempt", a.ref.String(), "err", err)
		}
	}
	r.setPhase(a, protocol.PhaseFinishing)
	// Counted apart: a full hub disk may refuse any number of finishes,
	// which must not use up the re-uploads of a log the hub lacks.
	reuploads, failures := 0, 0
	for {
		_, err := r.hubFor(a).Finish(r.life, newRequestID(), protocol.Finish{AttemptRef: a.ref, Outcome: rc.Outcome,
			LogSize: rc.LogSize, LogSHA256: rc.LogSHA256, Isolation: rc.Isolation, Session: rc.Session, Usage: rc.Usage})
		e, err := refusal(err)
		if err != nil {
			return err
		}
		if e == nil {
			if err := r.jr.mark(a.ref.Attempt, extDone); err != nil {
				r.log.Error("journal", "attempt", a.ref.String(), "err", err)
			}
			r.log.Info("attempt finished", "attempt", a.ref.String(), "state", rc.Outcome.State,
				"reason", rc.Outcome.Reason, "log_size", rc.LogSize)
			r.forget(a, false)
			return nil
		}
		if e.Code == rules.ErrLogIncomplete && e.Size != nil && sp != nil && reuploads < maxTries-1 {
			reuploads++
			r.log.Info("hub lacks part of the log; uploading it again", "attempt", a.ref.String(), "hub", *e.Size)
			if _, err := r.upload(a, sp, *e.Size); err != nil {
				return err
			}
			continue
		}
		failures++
		again, err := r.retryLater(a, e, failures)
		if err != nil {
			return err
		}
		if !again {
			return r.refused(a, protocol.TypeFinish, e)
		}
	}
}

// outcomeOf maps an agent's result, and why its context was cancelled, to
// what the runner reports.
func outcomeOf(res agent.Result, runErr, cause error) job.Outcome {
	var o job.Outcome
	code := res.ExitCode
	switch {
	case runErr != nil:
		o = job.Outcome{State: job.AttemptFailed, Reason: job.ReasonAgentError, Message: runErr.Error()}
	case res.Reason == job.ReasonSpawnFailed:
		o = startFailed(job.Outcome{State: job.AttemptFailed, Reason: job.ReasonSpawnFailed, Message: res.Message}, cause)
	case res.Reason == job.ReasonTimeout:
		o = job.Outcome{State: job.AttemptFailed, Reason: job.ReasonTimeout, ExitCode: &code}
	case res.Reason == job.ReasonLimited:
		o = job.Outcome{State: job.AttemptReleased, Reason: job.ReasonLimited, ExitCode: &code}
	case refusesAccount(res.Reason) || res.Reason == job.ReasonEndpointUnreachable:
		o = job.Outcome{State: job.AttemptFailed, Reason: res.Reason, ExitCode: &code}
	case errors.Is(cause, errTurns):
		// Stopped by the runner's turn limit, whatever the agent made of it.
		o = job.Outcome{State: job.AttemptFailed, Reason: job.ReasonLimitTurns, ExitCode: &code, Message: cause.Error()}
	case res.Reason == job.ReasonCancelled && errors.Is(cause, errShutdown):
		o = job.Outcome{State: job.AttemptReleased, Reason: job.ReasonRunnerShutdown, ExitCode: &code}
	case res.Reason == job.ReasonCancelled:
		o = job.Outcome{State: job.AttemptCancelled, Reason: job.ReasonCancelled, ExitCode: &code}
	case code == 0:
		o = job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: &code}
	default:
		o = job.Outcome{State: job.AttemptFailed, Reason: job.ReasonExited, ExitCode: &code}
	}
	if o.Message == "" {
		o.Message = res.Message
	}
	o.Message = clip(o.Message, 4096)
	return o
}

// startFailed is the outcome of an attempt whose start failed with out,
// and why its context was cancelled (nil when it was not): a start that
// failed while the attempt was being stopped (the sandbox's probe, a clone
// or the tool server killed with it) is the stop's outcome, not the job's
// failure. A runner stopping mid-start thus releases the job, as it would
// a running one.
func startFailed(out job.Outcome, cause error) job.Outcome {
	if cause != nil {
		o := unlaunched(cause)
		if out.Message != "" {
			o.Message += " (" + out.Message + ")"
		}
		return o
	}
	return out
}

// unlaunched is the outcome of an attempt stopped between offer and launch.
func unlaunched(cause error) job.Outcome {
	if errors.Is(cause, errShutdown) {
		return job.Outcome{State: job.AttemptReleased, Reason: job.ReasonRunnerShutdown, Message: "not started: the runner was stopping"}
	}
	return job.Outcome{State: job.AttemptCancelled, Reason: job.ReasonCancelled, Message: "cancelled before it started"}
}

// clip cuts s to at most n bytes of valid UTF-8.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= n {
		return s
	}
	s = s[:n-3]
	for !utf8.ValidString(s) { // only a rune cut at the end can be broken
		s = s[:len(s)-1]
	}
	return s + "..."
}
