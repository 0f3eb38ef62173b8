// Package forgework turns forge events into jobs: a project's triggers (a
// label on an issue, a comment command, a review asking for changes, an
// assignment to the bot) with the webhook drover registers for them on
// the project's forge repository, the links of forge logins to the users
// they act as, and the deliveries of that webhook.
//
// A delivery is verified and read (internal/forgehook), recorded once per
// hook and delivery id (a redelivery starts nothing), and answered at
// once; the hub that leads acts on the recorded ones in the background, a
// stopped hub's left over too. The job it starts is submitted with the
// key forge:HOOK:DELIVERY, so acting twice starts it once. Its requester is
// the user the acting login is linked to, who must have write access on
// the forge and may use the project: anyone else starts nothing, and the
// bot says so once in the thread.
package forgework

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/forgethread"
	"drover/internal/hub/call"
	"drover/internal/store"
	"drover/internal/tick"
)

// Core is what forge triggers need of the hub's core.
type Core interface {
	// Caller is user userID as a caller: the requester of the jobs a
	// login linked to it starts.
	Caller(ctx context.Context, userID string) (call.Caller, error)
	// Project reads a project c may use; with manage, one c may also
	// configure (its owner or an admin).
	Project(ctx context.Context, c call.Caller, name string, manage bool) (store.Project, error)
	// Base is the commit a job from an issue starts at: the head of the
	// project's forge repository's default branch.
	Base(ctx context.Context, project string) (string, error)
	// Submit queues a job for c, or finds the one of the same req.Key;
	// the project's access rules apply as for a CLI submission.
	Submit(ctx context.Context, c call.Caller, req apitypes.SubmitRequest) (apitypes.JobView, error)
	Cancel(ctx context.Context, c call.Caller, id string) error
	Retry(ctx context.Context, c call.Caller, id string) error
	// Forge is forge connection name's client.
	Forge(ctx context.Context, name string) (Forge, error)
	// PublicURL is the hub's URL as the forge reaches it; "" when the
	// operator gave none.
	PublicURL() string
	// Leading says whether this hub runs the hub-wide duties now.
	Leading() bool
	// Attach ties job jobID to the thread it was started from, once
	// (again to the same thread changes nothing): its conversation on the
	// forge is internal/forgethread's, and so is the record of which jobs
	// a thread has (forge_threads).
	Attach(ctx context.Context, jobID string, t forgethread.Target) error
	// Reply answers, as user userID, with comment commentID of thread t,
	// the question a job of t waits on; handled false when none does.
	Reply(ctx context.Context, t forgethread.Target, userID string, commentID int64, body string) (handled bool, err error)
}

// Forge is what forge triggers do on a forge (forge.Threads and
// forge.Hooks, in part).
type Forge interface {
	CreateHook(ctx context.Context, repo forge.Repo, h forge.NewHook) (id int64, err error)
	DeleteHook(ctx context.Context, repo forge.Repo, id int64) error
	CommentOnce(ctx context.Context, repo forge.Repo, number int, marker, body string) (forge.Comment, error)
	Permission(ctx context.Context, repo forge.Repo, login string) (forge.Permission, error)
}

// Config is what a Triggers needs besides the core.
type Config struct {
	Store   store.Store
	Logger  *slog.Logger
	Now     func() time.Time
	Metrics *Metrics
	// Sweep is how often the leader looks for deliveries left pending;
	// 0 is DefaultSweep.
	Sweep time.Duration
	// Keep is how long finished deliveries are kept (their ids refuse a
	// redelivery that long); 0 is DefaultKeep.
	Keep time.Duration
}

// Defaults.
const (
	DefaultSweep = 5 * time.Second
	DefaultKeep  = 7 * 24 * time.Hour
	// KeyPrefix starts the idempotency keys of the jobs deliveries start.
	KeyPrefix = "forge:"
	// maxTries bounds how often a delivery the forge could not be reached
	// for is tried before it is refused.
	maxTries = 20
	// batch bounds the pending deliveries one sweep reads.
	batch = 100
	// pruneEvery is how often the leader removes the deliveries past Keep.
	pruneEvery = 10 * time.Minute
)

// Triggers is the forge triggers of the hub.
type Triggers struct {
	core Core
	cfg  Config
	log  *slog.Logger
	ctx  context.Context
	wg   sync.WaitGroup
	wake chan struct{}
}

// New is a Triggers over core whose background work lives as long as ctx.
func New(ctx context.Context, core Core, cfg Config) *Triggers {
	if cfg.Sweep == 0 {
		cfg.Sweep = DefaultSweep
	}
	if cfg.Keep == 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Triggers{core: core, cfg: cfg, log: cfg.Logger, ctx: ctx, wake: make(chan struct{}, 1)}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.loop(ctx) }()
	return s
}

// Wait waits for the background work once the hub's context ended.
func (s *Triggers) Wait() { s.wg.Wait() }

// poke makes the leader act on the pending deliveries now.
func (s *Triggers) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop acts on the pending deliveries while this hub leads: when one is
// recorded here, and now and then for those recorded elsewhere or left
// by a stopped hub; it prunes the finished ones too.
// Its sweeps fall on whole seconds (internal/tick) and prune every
// pruneEvery, not at each sweep: an idle leader on Postgres made a write
// transaction every 5 s for nothing.
func (s *Triggers) loop(ctx context.Context) {
	t := time.NewTimer(tick.Next(time.Now(), s.cfg.Sweep)) // the hub's clock may be a fake one
	defer t.Stop()
	var pruned time.Time
	for {
		if s.core.Leading() {
			s.drain(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
			t.Reset(tick.Next(time.Now(), s.cfg.Sweep))
			if now := s.cfg.Now(); now.Sub(pruned) >= pruneEvery && s.prune(ctx, now) {
				pruned = now
			}
		}
	}
}

// prune removes the deliveries finished more than Keep before now, if this
// hub leads, and says whether it did.
func (s *Triggers) prune(ctx context.Context, now time.Time) bool {
	if !s.core.Leading() {
		return false
	}
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		_, err := tx.PruneForgeDeliveries(now.Add(-s.cfg.Keep))
		return err
	})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("could not prune the forge deliveries", "err", err)
	}
	return err == nil
}

// drain acts on the pending deliveries, oldest first.
func (s *Triggers) drain(ctx context.Context) {
	for ctx.Err() == nil {
		var ds []store.ForgeDelivery
		err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
			var err error
			ds, err = tx.ForgeDeliveries(store.DeliveryPending, batch)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("could not list the pending forge deliveries", "err", err)
			}
			return
		}
		progress := false
		for _, d := range ds {
			if s.handle(ctx, d) {
				progress = true
			}
		}
		if len(ds) < batch || !progress {
			return
		}
	}
}

// Metrics are forge triggers' Prometheus metrics.
type Metrics struct {
	deliveries *prometheus.CounterVec
}

// NewMetrics registers forge triggers' metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "drover_forge_deliveries_total",
		Help: "Webhook deliveries from forges, by outcome: accepted, duplicate, ignored, ping, unknown_hook, bad_signature, malformed, unmapped, too_large, error (the store failed: the forge sends it again), and once acted on: started, acted, refused.",
	}, []string{"outcome"})}
	reg.MustRegister(m.deliveries)
	return m
}

func (m *Metrics) count(outcome string) {
	if m != nil {
		m.deliveries.WithLabelValues(outcome).Inc()
	}
}
