// Package runner is the worker side of drover: it dials out to the hub,
// accepts offered attempts, runs their agents, streams their output and
// reports their outcomes so that nothing is lost or run twice when the
// connection drops, the runner dies or the hub restarts.
//
// One goroutine drives each attempt (attempt.go); the connection has one
// reader, one writer and a pinger (conn.go); requests outlive connections
// (requests.go); the journal makes claims and outcomes durable (journal.go).
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"drover/internal/accounts"
	"drover/internal/agent"
	"drover/internal/client"
	"drover/internal/fsutil"
	"drover/internal/netpolicy"
	"drover/internal/protocol"
	"drover/internal/retry"
	"drover/internal/rules"
	"drover/internal/sandbox"
)

// Config configures a runner.
type Config struct {
	Home string // runner home: login.json, journal/, spool/, work/
	// Hubs override the hub URL saved at login: the hubs of one deployment
	// (protocol.HubURLs), tried in turn when one fails.
	Hubs      []string
	Slots     int               // concurrent attempts (default 1)
	Labels    map[string]string // labels jobs can select
	StopGrace time.Duration     // SIGTERM → SIGKILL grace (default 10s)
	Logger    *slog.Logger
	// Sandbox is the boundary every attempt runs in (Kind "" is bwrap,
	// zero Limits are sandbox.DefaultLimits). Root, Mode and Env are set
	// per attempt.
	Sandbox sandbox.Policy
	// Images are the container images a job may name instead of
	// Sandbox.Image (rules.CheckImagePatterns; docker and podman only).
	// The hub offers only such jobs, and the runner refuses any other.
	Images []string
	// Agents are the agents it runs, as its operator configured them
	// (package catalog builds them); required.
	Agents Agents
	// RemoteGitEnv lets fetches from a project's mapped remote use the
	// runner user's own git credentials (workspace.OwnCredentialEnv).
	RemoteGitEnv []string
	// MinFree is the free space (bytes) the file system of Home must keep:
	// below it the runner reports itself not ready and declines offers
	// until space returns. 0 is no floor (the CLI's default is
	// DefaultMinFree).
	MinFree int64
	// MaxJobs ends the runner after that many attempts (0: no limit);
	// IdleTimeout after that long without one (0: never); Drain once it
	// holds nothing and the hub has said for DrainGrace (0:
	// DefaultDrainGrace) that nothing it may run is queued (lifecycle.go).
	MaxJobs int
	// Limits are the runner's spend limits (limits.go).
	Limits      Limits
	IdleTimeout time.Duration
	Drain       bool
	DrainGrace  time.Duration
	// CacheSize is the most bytes the pooled and kept worktrees may take
	// (workspace.GCOptions.Budget); 0 means no budget.
	CacheSize int64
	// ProjectCacheSize is the most bytes the projects' dependency caches
	// may take together; past it whole projects' caches are removed, least
	// recently used first, never one in use (trimCaches). 0: no budget.
	ProjectCacheSize int64
}

// DefaultMinFree is the free-space floor of `drover runner`.
const DefaultMinFree = 256 << 20

const (
	maxSlots       = protocol.MaxSlots // the hub refuses more
	defaultGrace   = 10 * time.Second
	stopWait       = 30 * time.Second // how long a graceful stop waits for the hub's acks
	welcomeTimeout = 30 * time.Second
)

// Runner holds a connection to the hub and runs attempts.
type Runner struct {
	cfg    Config
	login  Login
	hubs   *hubList
	log    *slog.Logger
	jr     *journal
	agents Agents
	accts  *accounts.Store
	ws     *workspaces   // clones and worktrees of jobs with a repository
	box    *sandbox.Host // the sandbox kind, checked at the start

	// Replaceable by tests.
	now            func() time.Time
	sleep          func(context.Context, time.Duration) error
	jitter         func(ceiling time.Duration) time.Duration
	stopWait       time.Duration
	welcomeTimeout time.Duration

	ran      atomic.Bool
	life     context.Context    // set by Run: cancelled when the runner is done for good
	stopConn context.CancelFunc // set by Run: ends the connection loop
	wg       sync.WaitGroup     // attempt goroutines
	idle     chan struct{}      // an attempt was forgotten

	cacheMu sync.Mutex // serializes opening project caches with trimming them

	mu       sync.Mutex
	attempts map[string]*attempt
	pending  []*request
	sess     *session // the welcomed connection, if any
	timing   timing
	dirty    bool // status changed since last sent
	// limitTimer marks the status dirty when the first account limit runs out.
	limitTimer *time.Timer
	// loginTimer looks again, while an account needs a login, whether its
	// owner logged it in (reported holds the accounts last reported).
	loginTimer *time.Timer
	reported   []protocol.AccountInfo
	stopping   bool // graceful stop begun: decline offers
	closing    bool // graceful stop done: close the connection and stay away
	// notReady says why the runner takes no offers though it could run
	// ("": ready): its disk is below the free-space floor (space.go).
	notReady string
	lc       lifeState
	// spend counts what the spend limits bound; spendTimer reports the
	// runner ready again when the limit it is at resets (spendUntil).
	spend      ledgers
	spendTimer *time.Timer
	spendUntil time.Time
}

// timing is what the hub dictates in its welcome.
type timing struct {
	heartbeat time.Duration
	flush     time.Duration
	batch     int
	chunk     int
	logCap    int64
	transfer  int64         // largest publication bundle the hub takes
	lease     time.Duration // how long the hub keeps attempts of a runner away (0: not told)
	idle      time.Duration // heartbeat interval while holding no attempts (0: the hub offers none)
}

func timingFrom(w protocol.Welcome) timing {
	t := timing{
		heartbeat: w.HeartbeatInterval.D(),
		flush:     w.LogFlushInterval.D(),
		batch:     w.LogBatchBytes,
		chunk:     w.LogChunkBytes,
		logCap:    w.LogCap,
		transfer:  w.TransferCap,
		lease:     w.Lease.D(),
		idle:      w.IdleHeartbeatInterval.D(),
	}
	if t.heartbeat <= 0 {
		t.heartbeat = 20 * time.Second
	}
	if t.flush <= 0 {
		t.flush = time.Second
	}
	if t.chunk <= 0 || t.chunk > protocol.MaxLogChunk {
		t.chunk = protocol.MaxLogChunk
	}
	if t.batch <= 0 {
		t.batch = 256 << 10
	}
	if t.logCap <= 0 {
		t.logCap = protocol.DefaultLogCap
	}
	if t.transfer <= 0 {
		t.transfer = protocol.DefaultTransferCap
	}
	return t
}

func (r *Runner) timings() timing {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.timing
}

// New checks cfg and the saved login.
func New(cfg Config) (*Runner, error) {
	if cfg.Home == "" {
		return nil, errors.New("runner home is not set")
	}
	home, err := filepath.Abs(cfg.Home)
	if err != nil {
		return nil, fmt.Errorf("runner home: %w", err)
	}
	cfg.Home = home
	login, err := LoadLogin(home)
	if err != nil {
		return nil, err
	}
	hub, err := hubBase(login.Hub)
	if err != nil {
		return nil, err
	}
	hubs := []string{hub}
	if len(cfg.Hubs) > 0 {
		if hubs, err = rules.HubURLs(strings.Join(cfg.Hubs, ",")); err != nil {
			return nil, err
		}
	}
	if cfg.Slots == 0 {
		cfg.Slots = 1
	}
	if cfg.Slots < 1 || cfg.Slots > maxSlots {
		return nil, fmt.Errorf("slots must be between 1 and %d", maxSlots)
	}
	if err := rules.CheckLabels(cfg.Labels); err != nil {
		return nil, err // the hub would refuse the hello for it
	}
	if cfg.MinFree < 0 {
		return nil, fmt.Errorf("the free-space floor (--min-free) is %d bytes; it must not be negative (0 turns it off)", cfg.MinFree)
	}
	if err := cfg.checkLifecycle(); err != nil {
		return nil, err
	}
	if err := cfg.Limits.Check(); err != nil {
		return nil, err
	}
	if cfg.Drain && cfg.DrainGrace == 0 {
		cfg.DrainGrace = DefaultDrainGrace
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = defaultGrace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for _, d := range []string{"journal", "spool", "work"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			return nil, fmt.Errorf("prepare runner home: %w", err)
		}
	}
	if cfg.Sandbox.Kind == "" {
		cfg.Sandbox.Kind = sandbox.KindBwrap
	}
	if cfg.Sandbox.Limits == (sandbox.Limits{}) {
		cfg.Sandbox.Limits = sandbox.DefaultLimits()
	}
	if err := checkImages(cfg.Sandbox.Kind, cfg.Images); err != nil {
		return nil, err
	}
	// A sandbox that cannot work here fails the start, with the fix, not
	// every job.
	probe := cfg.Sandbox
	probe.Root, probe.Logger = filepath.Join(home, "work"), cfg.Logger
	box, err := sandbox.Probe(context.Background(), probe)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", cfg.Sandbox.Kind, err)
	}
	if cfg.Agents == nil {
		return nil, errors.New("runner: no agents configured")
	}
	accts, err := accounts.Open(home)
	if err != nil {
		return nil, fmt.Errorf("open the runner's accounts: %w", err)
	}
	spend, err := loadLedger(home)
	if err != nil {
		return nil, err
	}
	hl := newHubList(hubs)
	// Publications and context downloads go to the hub in use, as the
	// connection does.
	transfers, err := client.New(hl.current(), login.Token, client.WithFailover(hl.current))
	if err != nil {
		return nil, err
	}
	ws, err := newWorkspaces(home, cfg.RemoteGitEnv, transfers, cfg.Logger.With("runner", login.Name))
	if err != nil {
		return nil, err
	}
	return &Runner{
		cfg:            cfg,
		login:          login,
		hubs:           hl,
		log:            cfg.Logger.With("runner", login.Name),
		jr:             &journal{dir: filepath.Join(home, "journal")},
		box:            box,
		agents:         cfg.Agents,
		accts:          accts,
		ws:             ws,
		now:            time.Now,
		sleep:          retry.Sleep,
		jitter:         fullJitter,
		stopWait:       stopWait,
		welcomeTimeout: welcomeTimeout,
		idle:           make(chan struct{}, 1),
		attempts:       map[string]*attempt{},
		lc:             lifeState{kick: make(chan struct{}, 1)},
		spend:          spend,
		timing:         timingFrom(protocol.Welcome{}),
	}, nil
}

// Run connects and works until ctx is cancelled (then it stops gracefully:
// agents stopped with a grace period, output published, attempts released)
// or until the hub replaces or revokes this runner (returned as an error).
func (r *Runner) Run(ctx context.Context) error {
	if r.ran.Swap(true) {
		return errors.New("runner: Run called twice")
	}
	unlock, err := lockHome(r.cfg.Home)
	if err != nil {
		return err
	}
	defer unlock()
	// The connection and the attempts outlive ctx: a graceful stop still
	// needs them to publish output and outcomes.
	life, end := context.WithCancel(context.WithoutCancel(ctx))
	defer end()
	r.life = life
	if err := r.recover(); err != nil {
		return err
	}
	if use, err := r.CacheUsage(); err != nil {
		r.log.Warn("measure project caches", "err", err)
	} else if len(use) > 0 {
		var total int64
		for _, n := range use {
			total += n
		}
		r.log.Info("project caches in the runner's home", "projects", len(use), "bytes", total)
	}
	r.trimCaches()
	connCtx, stopConn := context.WithCancel(life)
	defer stopConn()
	r.stopConn = stopConn
	r.checkSpace() // before the hello, which says whether the runner is ready
	r.wg.Go(func() { r.watchSpace(life) })
	r.mu.Lock()
	r.lc.started = r.now()
	r.mu.Unlock()
	ending := r.watchLifecycle(life)
	conn := make(chan error, 1)
	go func() { conn <- r.connectLoop(connCtx) }()

	select {
	case err := <-conn:
		r.exit(end, err)
		return err
	case <-ctx.Done():
		r.log.Info("stopping: finishing held attempts")
	case why := <-ending:
		r.log.Info("runner ending: " + why)
	}
	r.beginStop()
	if ended, err := r.awaitIdle(conn); ended {
		r.exit(end, err)
		return err
	}
	r.closeConn()
	select {
	case <-conn:
	case <-time.After(15 * time.Second): // the close handshake is bounded by the library
		end()
		<-conn
	}
	r.exit(end, nil)
	return nil
}

// exit ends the runner for good: anything still running is killed without
// a receipt, so the next start reports it interrupted.
func (r *Runner) exit(end context.CancelFunc, err error) {
	end()
	r.mu.Lock()
	for _, a := range r.attempts {
		a.cancel(errAbandoned)
	}
	r.mu.Unlock()
	r.wg.Wait()
	if err != nil {
		r.log.Error("runner exiting", "err", err)
	}
}

// recover picks up what a previous run left in the journal: every attempt
// claimed or receipted but never acknowledged is held (finishing) again.
func (r *Runner) recover() error {
	recs, bad, err := r.jr.scan()
	if err != nil {
		return err
	}
	for _, err := range bad {
		r.log.Warn("ignoring an unreadable claim (written by a crash before launch)", "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range recs {
		if !rec.open() {
			continue
		}
		var ref protocol.AttemptRef
		if rec.receipt != nil {
			ref = rec.receipt.ref()
		} else {
			ref = protocol.AttemptRef{Job: rec.claim.Job, Attempt: rec.claim.Attempt, Epoch: rec.claim.Epoch}
		}
		if ref.Validate() != nil || ref.Attempt != rec.attempt {
			r.log.Warn("ignoring a malformed journal entry", "attempt", rec.attempt)
			continue
		}
		r.log.Info("resuming attempt from the journal", "attempt", ref.String(), "receipt", rec.receipt != nil)
		r.holdLocked(newAttempt(ref, protocol.JobSpec{}, protocol.PhaseFinishing), r.resume)
	}
	return nil
}

// beginStop tells the hub the runner is draining, declines further offers
// and stops every agent with its grace.
func (r *Runner) beginStop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopping = true
	if r.sess != nil {
		// Queued now, ahead of the finishes that release attempts, so the
		// hub does not offer them straight back to this runner.
		r.sess.push(r.statusLocked())
	}
	for _, a := range r.attempts {
		a.cancel(errShutdown)
	}
}

// awaitIdle waits, bounded, until every held attempt was acknowledged. Those
// left over keep their journal entries and are finished by the next start.
// ended reports that the connection loop returned (with err) meanwhile.
func (r *Runner) awaitIdle(conn <-chan error) (ended bool, err error) {
	deadline := time.NewTimer(r.stopWait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		n := len(r.attempts)
		r.mu.Unlock()
		if n == 0 {
			return false, nil
		}
		select {
		case <-r.idle:
		case err := <-conn:
			return true, err
		case <-deadline.C:
			r.log.Warn("stopping before the hub acknowledged every attempt; the next start finishes them", "attempts", n)
			return false, nil
		}
	}
}

// closeConn sends a last status and closes the connection normally; without
// a connection there is nothing left to say, so reconnecting just stops.
func (r *Runner) closeConn() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closing = true
	if r.sess == nil {
		r.stopConn()
		return
	}
	r.dirty = true
	close(r.sess.final)
}

// lockHome keeps a second runner off the same journal.
func lockHome(home string) (func(), error) {
	var l fsutil.Locker
	unlock, ok, err := l.TryLock(filepath.Join(home, "runner.lock"))
	if err != nil {
		return nil, fmt.Errorf("lock runner home: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("another runner is using %s", home)
	}
	return unlock, nil
}

// boundary builds the sandbox of one attempt, whose agent runs in dir: the
// runner's policy with the attempt's worktree as root and the job's mode.
func (r *Runner) boundary(a *attempt, dir string, extra agent.Extra) (sandbox.Boundary, error) {
	return r.phaseBoundary(a, dir, extra, netpolicy.PhaseAgent, nil)
}

// phaseBoundary is boundary for one phase (setup or agent) of the
// attempt; the setup's proxy adds creds.
func (r *Runner) phaseBoundary(a *attempt, dir string, extra agent.Extra, phase string, creds []protocol.SetupCredential) (sandbox.Boundary, error) {
	p := r.cfg.Sandbox
	p.Root = dir
	if a.spec.Image != "" {
		// launch refused it already; checked again where it is used.
		if why := r.imageRefusal(a.spec.Image); why != "" {
			return nil, errors.New(why)
		}
		p.Image = a.spec.Image
	}
	// What a CLI adds: its install, its account, its home.
	p.ReadOnly = append(p.ReadOnly[:len(p.ReadOnly):len(p.ReadOnly)], extra.ReadOnly...)
	p.ReadWrite = append(p.ReadWrite[:len(p.ReadWrite):len(p.ReadWrite)], extra.ReadWrite...)
	p.Env = append(p.Env[:len(p.Env):len(p.Env)], extra.Env...)
	p.Mode = a.spec.Mode // "" is fix
	p.Env = append(p.Env[:len(p.Env):len(p.Env)], "DROVER_JOB", "DROVER_ATTEMPT", "DROVER_EPOCH")
	if a.ws != nil {
		a.ws.policy(&p)
	}
	if a.tools != nil {
		a.tools.policy(&p)
	}
	// The exec agent needs no network; agents that call a model API get
	// egress rules with them. The spool caps the log, with its own marker.
	p.Network, p.Limits.Output = extra.Network, 0
	if extra.Evidence != nil {
		p.Evidence = extra.Evidence
	}
	if a.spec.Network != nil {
		// The job's project chose policies: they decide what the phase
		// reaches, and each refusal is counted for the finish.
		p.Network = phaseNetwork(a.spec, phase, extra.Network, creds)
		p.Evidence = evidence(phase, &a.denials, extra.Evidence, a.out)
	}
	if phase == netpolicy.PhaseSetup {
		p.Limits.Output = setupOutputCap
	}
	if a.caches != nil {
		a.caches.policy(&p)
	}
	p.Logger = r.log.With("attempt", a.ref.String())
	return r.box.New(a.ctx, p)
}
