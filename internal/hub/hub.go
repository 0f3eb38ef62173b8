// Package hub is drover's control plane: the HTTP API, the runner gateway,
// the dispatcher and the lease keeper. The database is the truth; the
// in-memory view (who is connected, which attempts each runner holds) is
// rebuilt from it at start.
package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"drover/internal/attemptgroup"
	"drover/internal/auth"
	"drover/internal/eval"
	"drover/internal/forgethread"
	"drover/internal/forgework"
	"drover/internal/fsutil"
	"drover/internal/hub/gateway"
	"drover/internal/hubrepo"
	"drover/internal/ids"
	"drover/internal/pipeline"
	"drover/internal/publish"
	"drover/internal/retry"
	"drover/internal/signin"
	"drover/internal/store"
	"drover/internal/store/postgres"
	"drover/internal/store/sqlite"
	"drover/internal/web"
	"drover/internal/webhook"
)

const metaAdmin = "admin_user_id"

// Hub is a running control plane.
type Hub struct {
	cfg   Config
	log   *slog.Logger
	store store.Store
	now   func() time.Time

	wake      chan struct{} // dispatcher doorbell (buffered 1)
	sweepWake chan struct{} // lease sweeper doorbell (buffered 1)

	accessMu sync.Mutex // serializes refreshAccess

	reg  *registry  // the connected runners, under a lock of their own
	gone departures // runners that left on their own, their departures to record

	mu    sync.Mutex
	waits map[string]*waiter // job id → followers waiting for the job's next change
	why   map[string]string  // queued job id → why the last dispatch pass did not offer it
	// shape → why the last pass offered none of its jobs (shapeKey)
	whyShape map[string]string

	diskFull diskFullLog              // logs a full disk once per interval
	stalls   map[string]*logStallInfo // attempt id → its log could not be stored (under mu)
	web      *web.Server              // the dashboard's pages
	gateway  *gateway.Gateway         // the runners' WebSocket
	// publisher carries jobs' results to forges (internal/publish)
	publisher *publish.Service
	// sources remembers the commits whose source tree passed its check
	sources checkedSources
	// pipelines runs pipeline files' steps as jobs (internal/pipeline)
	pipelines *pipeline.Engine
	// evals runs evaluations over datasets (internal/eval)
	evals *eval.Evals
	// watchers are the capability packages woken at every change of a job
	// this hub makes or hears of (pipelines, and any later one); each
	// JobChanged returns at once.
	watchers []jobWatcher
	// enders act on a job's end in the write that ends it (jobend.go)
	enders []jobEnder
	// threads keeps the forge threads jobs work for (internal/forgethread)
	threads *forgethread.Service
	metrics *metrics
	// forgework turns forge events into jobs (internal/forgework)
	forgework *forgework.Triggers
	// webhooks sends outbound webhooks of jobs' changes (internal/webhook)
	webhooks *webhook.Hooks
	// signin signs users in to the dashboard with a forge (internal/signin)
	signin *signin.Flow
	// groups are several attempts side by side, each a pipeline's step
	// (internal/attemptgroup)
	groups *attemptgroup.Groups

	fleet fleetState // what autoscalers wait on
	x     crossHub   // the other hubs on the database (hints.go)

	repos hubrepo.Repos // one bare repository per hosted project
	locks keyLocks      // serializes publications of a job and creation of a repository
	// this hub's own directory for transient files (datadir_shared.go)
	scratch *scratch

	id       string     // this process's hub id, new at every start
	started  time.Time  // when it started
	lead     leadership // its leader term
	stall    stallWatch // its own process's stalls (stall.go)
	stopping atomic.Bool

	bg     sync.WaitGroup
	cancel context.CancelFunc

	// admit limits the hellos attached at once (admission.go)
	admit admission
}

// Open opens (or creates) the hub's state: its store (the SQLite database
// in cfg.DataDir, or the Postgres one cfg.Database names) with its
// migrations applied, and under cfg.DataDir on first start the admin token,
// written once to DataDir/admin.token (0600). Background work (dispatcher,
// lease sweep) runs until Close.
func Open(ctx context.Context, cfg Config) (*Hub, error) {
	cfg.defaults()
	if cfg.DataDir == "" {
		return nil, errors.New("open hub: no data directory given")
	}
	if err := secureDataDir(cfg.DataDir, cfg.Logger); err != nil {
		return nil, fmt.Errorf("open hub: %w", err)
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open hub store: %w", err)
	}
	// Again, now that SQLite made its -wal and -shm (with the database's
	// mode, so this only finds what something else changed).
	if err := secureDataDir(cfg.DataDir, cfg.Logger); err != nil {
		st.Close()
		return nil, fmt.Errorf("open hub: %w", err)
	}
	h, err := New(ctx, cfg, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	return h, nil
}

// openStore opens the store cfg names.
func openStore(ctx context.Context, cfg Config) (store.Store, error) {
	return OpenStore(ctx, cfg.DataDir, cfg.Database)
}

// OpenStore opens the store of the hub with data directory dataDir and
// --db database: Postgres for a postgres:// URL, else SQLite in the data
// directory. Tools that read a stopped hub's state (the fault campaign's
// checker) open it so too.
func OpenStore(ctx context.Context, dataDir, database string) (store.Store, error) {
	switch {
	case database == "":
		return sqlite.Open(ctx, StorePath(dataDir))
	case postgres.IsURL(database):
		return postgres.Open(ctx, database)
	}
	return nil, errors.New("the database must be a postgres:// URL (without one the hub keeps SQLite in its data directory)")
}

// New starts a hub on an already opened store (tests and other store kinds).
func New(ctx context.Context, cfg Config, st store.Store) (*Hub, error) {
	cfg.defaults()
	if err := cfg.Network.Check(); err != nil {
		return nil, fmt.Errorf("hub config: %w", err)
	}
	h := &Hub{
		cfg:       cfg,
		log:       cfg.Logger,
		store:     st,
		now:       time.Now,
		wake:      make(chan struct{}, 1),
		sweepWake: make(chan struct{}, 1),
		gone:      departures{wake: make(chan struct{}, 1)},
		reg:       newRegistry(),
		waits:     map[string]*waiter{},
		stalls:    map[string]*logStallInfo{},
		repos:     hubrepo.Repos{Root: filepath.Join(cfg.DataDir, "repos"), Git: cfg.Git, Refs: &hubrepo.RefSessions{Git: cfg.Git}},
		locks:     newKeyLocks(cfg.DataDir),
		x:         crossHub{hints: hintsFor(cfg, st)},
		id:        ids.New("h"),
	}
	h.started = h.now()
	h.admit = newAdmission()
	h.stall.look(h.started)
	h.metrics = newMetrics(h)
	ws, err := web.New(dashboard{h}, web.Config{PublicURL: cfg.PublicURL, Logger: cfg.Logger,
		ForgeButtons: func(ctx context.Context, next string) []web.ForgeButton { return h.signin.Buttons(ctx, next) }})
	if err != nil {
		return nil, fmt.Errorf("start the hub's pages: %w", err)
	}
	h.web = ws
	h.signin = signin.New(ws, signin.Config{Store: st, PublicURL: cfg.PublicURL, HTTP: cfg.ForgeHTTP, Logger: cfg.Logger, Now: h.now})
	h.gateway = gateway.New(gatewayCore{h}, gateway.Config{Heartbeat: cfg.Heartbeat, Idle: cfg.IdleHeartbeat, BaseURL: web.BaseURL, Logger: cfg.Logger})
	if err := h.bootstrapAdmin(ctx); err != nil {
		return nil, err
	}
	if err := h.recoverWhenSpace(ctx); err != nil {
		return nil, err
	}
	if err := h.loadLaunchFailures(ctx); err != nil {
		return nil, err
	}
	if h.scratch, err = openScratch(ctx, cfg.DataDir, h.repos, h.log); err != nil {
		return nil, fmt.Errorf("open hub: %w", err)
	}
	h.repos.Scratch = h.scratch.dir
	bgctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel = cancel
	h.publisher = publish.New(bgctx, publishCore{h}, publish.Config{Store: st, Git: cfg.Git, Logger: cfg.Logger,
		HTTP: cfg.ForgeHTTP, Metrics: publish.NewMetrics(h.metrics.reg), SigningKey: cfg.SigningKey, Now: h.now})
	h.pipelines = pipeline.New(bgctx, pipelineCore{h}, pipeline.Config{Store: st, Git: cfg.Git, Logger: cfg.Logger, Now: h.now})
	h.watchers = append(h.watchers, h.pipelines) // a pipeline's step may be ready now
	h.evals = eval.New(bgctx, evalCore{pipelineCore{h}}, eval.Config{Store: st, Git: cfg.Git, Logger: cfg.Logger, Now: h.now})
	h.watchers = append(h.watchers, h.evals) // an evaluation's item may be ready to grade
	h.enders = append(h.enders, evalEnder{h})
	h.threads = forgethread.New(bgctx, threadCore{h}, forgethread.Config{Store: st, Logger: cfg.Logger, Now: h.now})
	h.watchers = append(h.watchers, h.threads) // a thread's status comment may show a change
	var fwCore forgework.Core = forgeworkCore{h}
	if cfg.wrapForgework != nil {
		fwCore = cfg.wrapForgework(fwCore)
	}
	h.forgework = forgework.New(bgctx, fwCore, forgework.Config{Store: st, Logger: cfg.Logger, Now: h.now,
		Metrics: forgework.NewMetrics(h.metrics.reg)})
	whc := cfg.Webhooks
	whc.Store, whc.Logger, whc.Now = st, cfg.Logger, h.now
	h.webhooks = webhook.New(bgctx, webhookCore{h}, whc)
	h.watchers = append(h.watchers, h.webhooks) // the job's change is in the outbox: send it
	h.groups = attemptgroup.New(groupCore{h}, attemptgroup.Config{Store: st, Git: cfg.Git, Logger: cfg.Logger, Now: h.now})
	h.bg.Add(5)
	go func() {
		defer h.bg.Done()
		if err := h.publisher.Resume(bgctx); err != nil {
			h.log.Error("could not resume the pending publications", "err", err)
		}
	}()
	go func() { defer h.bg.Done(); h.stallLoop(bgctx) }()
	go func() { defer h.bg.Done(); h.dispatchLoop(bgctx) }()
	go func() { defer h.bg.Done(); h.sweepLoop(bgctx) }()
	go func() { defer h.bg.Done(); h.beatLoop(bgctx) }()
	h.crossLoops(bgctx)
	h.bg.Add(2)
	go func() { defer h.bg.Done(); h.nofileLoop(bgctx) }()
	go func() { defer h.bg.Done(); h.departuresLoop(bgctx) }()
	h.kick()
	return h, nil
}

// bootstrapAdmin creates the admin user on first start and writes its token
// once; later starts only say where it was written. Hubs sharing the data
// directory take turns (the admin lock); hubs with their own directories
// on one database are decided by the check in the admin's write: the loser
// removes the token it wrote.
func (h *Hub) bootstrapAdmin(ctx context.Context) error {
	unlock, err := h.locks.lock(ctx, "admin")
	if err != nil {
		return fmt.Errorf("create admin user: %w", err)
	}
	defer unlock()
	exists, err := h.adminExists(ctx)
	if err != nil {
		return err
	}
	if exists {
		h.logAdminToken()
		return nil
	}
	token := auth.NewToken(auth.PrefixUser)
	path := h.AdminTokenPath()
	// Write the file first: a crash between the two steps leaves a token
	// file without a user (harmless, rewritten next start), never a user
	// whose token nobody has.
	if err := fsutil.WriteFileAtomic(path, []byte(token+"\n")); err != nil {
		return fmt.Errorf("write admin token: %w", err)
	}
	now := h.now()
	u := store.User{ID: ids.New("u"), Name: "admin", Admin: true, CreatedAt: now}
	err = h.store.Write(ctx, func(tx store.Tx) error {
		if v, err := tx.Meta(metaAdmin); err == nil && v != "" {
			return errAdminExists
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := tx.InsertUser(u); err != nil {
			return err
		}
		if err := tx.InsertToken(store.Token{Hash: auth.Hash(token), Kind: store.TokenUser, OwnerID: u.ID, CreatedAt: now}); err != nil {
			return err
		}
		return tx.SetMeta(metaAdmin, u.ID)
	})
	if errors.Is(err, errAdminExists) {
		return h.lostAdminRace(path, token)
	}
	if err != nil {
		return fmt.Errorf("create admin user: %w", err)
	}
	h.log.Info("created the admin user; its token is in a file readable only by you", "path", path)
	return nil
}

// recoverWhenSpace recovers, waiting out a full disk: a hub killed while
// its disk was full must come back once space is freed, not exit and need
// a person to start it again. The wait is logged once per interval and
// ends with ctx.
func (h *Hub) recoverWhenSpace(ctx context.Context) error {
	var logged time.Time
	for {
		err := h.recover(ctx)
		if err == nil || !fsutil.IsNoSpace(err) {
			return err
		}
		if now := h.now(); logged.IsZero() || now.Sub(logged) >= diskFullInterval {
			logged = now
			h.log.Error("the hub's disk is full: it starts once space is freed in its data directory",
				"dir", h.cfg.DataDir, "err", err)
		}
		if serr := retry.Sleep(ctx, time.Second); serr != nil {
			return fmt.Errorf("open hub: gave up waiting for space (%w): %w", serr, err)
		}
	}
}

// recover records this hub (its first heartbeat, which may make it the
// leader: see beat for the leases a new leader restarts) and rebuilds the
// in-memory view after a start.
func (h *Hub) recover(ctx context.Context) error {
	if err := h.beat(ctx, true); err != nil {
		return err
	}
	var active []store.Attempt
	err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		active, err = tx.ActiveAttempts()
		return err
	})
	if err != nil {
		return fmt.Errorf("recover active attempts: %w", err)
	}
	for _, a := range active {
		h.reg.addActive(a.RunnerID, a.ID)
	}
	if len(active) > 0 {
		h.log.Info("recovered active attempts", "count", len(active))
	}
	return nil
}

// AdminTokenPath is where the first start wrote the admin token.
func (h *Hub) AdminTokenPath() string { return filepath.Join(h.cfg.DataDir, "admin.token") }

// Handler serves /api/v1 (API and runner gateway), /git (smart HTTP),
// /metrics and the web pages.
func (h *Hub) Handler() http.Handler { return h.pacedReads(h.routes()) }

// Serve serves on ln until ctx is done, then closes runner connections
// (they reconnect to the next hub) and shuts the server down.
func (h *Hub) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           h.Handler(),
		ReadHeaderTimeout: h.cfg.ReadHeaderTimeout,
		ReadTimeout:       h.cfg.ReadTimeout, // made a bound on pauses by pacedReads
		IdleTimeout:       h.cfg.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
	}
	if h.cfg.MetricsListen != "" {
		mln, err := net.Listen("tcp", h.cfg.MetricsListen)
		if err != nil {
			return fmt.Errorf("listen for metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", h.MetricsHandler())
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: h.cfg.ReadHeaderTimeout, IdleTimeout: h.cfg.IdleTimeout,
			ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelWarn)}
		go func() { _ = msrv.Serve(mln) }()
		defer msrv.Close()
		h.log.Info("metrics listening", "addr", mln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	h.log.Info("hub listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serve hub: %w", err)
	case <-ctx.Done():
	}
	h.stopping.Store(true) // the load balancer's readiness probe fails from now
	start := time.Now()
	h.detachAll("hub shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	shut := time.Now()
	err := srv.Shutdown(sctx)
	// A supervisor waits so long for a stop: say where the time went.
	h.log.Info("hub server shut down", "runners in", shut.Sub(start).Round(time.Millisecond), "requests in", time.Since(shut).Round(time.Millisecond))
	if err != nil {
		return fmt.Errorf("shut down hub server: %w", err)
	}
	return nil
}

// Close stops background work, removes the hub's record (releasing its
// leader term) and closes the store.
func (h *Hub) Close() error {
	h.stopping.Store(true)
	if h.cancel != nil {
		h.cancel()
	}
	h.detachAll("hub shutting down")
	start := time.Now()
	h.bg.Wait()
	bg := time.Since(start)
	if h.publisher != nil {
		h.publisher.Wait()
	}
	if h.pipelines != nil {
		h.pipelines.Wait()
	}
	if h.evals != nil {
		h.evals.Wait()
	}
	if h.threads != nil {
		h.threads.Wait()
	}
	if h.forgework != nil {
		h.forgework.Wait()
	}
	if h.webhooks != nil {
		h.webhooks.Wait()
	}
	capabilities := time.Since(start) - bg
	h.leave()
	h.log.Info("hub closed", "background in", bg.Round(time.Millisecond), "capabilities in", capabilities.Round(time.Millisecond),
		"in", time.Since(start).Round(time.Millisecond))
	h.repos.Refs.Close()
	if h.scratch != nil {
		h.scratch.release()
	}
	return h.store.Close()
}

// kick wakes the dispatcher without blocking, and the other hubs' (a job
// may be offerable to a runner one of them holds).
func (h *Hub) kick() {
	h.kickLocal()
	h.hint(hintQueued)
}

// kickLocal wakes this hub's dispatcher only.
func (h *Hub) kickLocal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// waiter is the channel the followers of one job share, with how many
// hold it, so that the entry goes when the last of them leaves and the map
// does not keep one for every job ever followed.
type waiter struct {
	ch chan struct{}
	n  int
}

// anyChange is the waits key of those who wait for any job's or runner's
// change (the runners page).
const anyChange = ""

// notify wakes everyone waiting on a job (log followers), and those who
// wait for any change; notify(anyChange) wakes only the latter (a runner
// connected, reported or changed access). The other hubs' followers are
// woken by a hint.
func (h *Hub) notify(jobID string) {
	h.notifyLocal(jobID)
	h.hint(hintJob + jobID)
}

// notifyLocal is notify for this hub's followers only.
func (h *Hub) notifyLocal(jobID string) {
	h.mu.Lock()
	for _, k := range []string{jobID, anyChange} {
		if w, ok := h.waits[k]; ok {
			close(w.ch)
			delete(h.waits, k)
		}
	}
	h.mu.Unlock()
	for _, w := range h.watchers {
		w.JobChanged(jobID)
	}
}

// jobWatcher is a capability package that acts on jobs' changes: it is
// told which job changed and reads what it needs itself.
type jobWatcher interface {
	JobChanged(jobID string)
}

// waitChan returns a channel closed at the next change to the job, and the
// function to call once the caller stops waiting on it.
func (h *Hub) waitChan(jobID string) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, ok := h.waits[jobID]
	if !ok {
		w = &waiter{ch: make(chan struct{})}
		h.waits[jobID] = w
	}
	w.n++
	return w.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if w.n--; w.n == 0 && h.waits[jobID] == w {
			delete(h.waits, jobID)
		}
	}
}

// EnsureLocalRunner registers (or re-keys) a runner owned by the admin and
// returns its fresh token; `drover up` uses it for its in-process runner.
func (h *Hub) EnsureLocalRunner(ctx context.Context, name string) (string, error) {
	var adminID string
	if err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		adminID, err = tx.Meta(metaAdmin)
		return err
	}); err != nil {
		return "", fmt.Errorf("find admin user: %w", err)
	}
	token := auth.NewToken(auth.PrefixRunner)
	// Replace: the previous start's token is this same runner's, now stale.
	if _, _, err := h.approveRunner(ctx, adminID, name, auth.Hash(token), true); err != nil {
		return "", fmt.Errorf("register local runner %s: %w", name, err)
	}
	return token, nil
}
