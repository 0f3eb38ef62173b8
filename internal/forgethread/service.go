package forgethread

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"drover/internal/apitypes"
	"drover/internal/coalesce"
	"drover/internal/forge"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/retry"
	"drover/internal/store"
	"drover/internal/tick"
)

// Service keeps jobs' forge threads.
type Service struct {
	core Core
	cfg  Config
	log  *slog.Logger
	ctx  context.Context // lives as long as the hub
	wg   sync.WaitGroup
	// upd updates a job's thread, one update at a time.
	upd *coalesce.Runner

	mu sync.Mutex
	// known holds the jobs this hub knows to have a thread: only their
	// changes are worth a look (a job changes at every log chunk).
	known map[string]bool
	// failures counts a thread's failed updates in a row; until holds
	// when the sweep tries it again.
	failures map[string]int
	until    map[string]time.Time
}

// New is a Service over core, whose background work lives as long as ctx.
// It starts the leader's sweep, which also carries on the threads a
// stopped hub left unsettled.
func New(ctx context.Context, core Core, cfg Config) *Service {
	if cfg.Sweep == 0 {
		cfg.Sweep = DefaultSweep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Retry.Tries == 0 && cfg.Retry.MaxElapsed == 0 {
		cfg.Retry = DefaultRetry()
	}
	s := &Service{core: core, cfg: cfg, log: cfg.Logger, ctx: ctx, known: map[string]bool{},
		failures: map[string]int{}, until: map[string]time.Time{}}
	s.upd = coalesce.New(ctx, func(ctx context.Context, jobID string) { s.failed(jobID, s.update(ctx, jobID)) })
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.sweepLoop(ctx) }()
	return s
}

// Wait waits for the background work once the hub's context ended.
func (s *Service) Wait() {
	s.wg.Wait()
	s.upd.Wait()
}

// JobChanged updates the job's thread, if it has one: the hub calls it
// whenever a job changes.
func (s *Service) JobChanged(jobID string) {
	s.mu.Lock()
	ok := s.known[jobID]
	s.mu.Unlock()
	if ok {
		s.wake(jobID)
	}
}

// Attach ties job jobID to the issue or pull request t, once: attaching
// it again to the same target changes nothing, to another is a conflict.
// The bot's status comment follows from the leader.
func (s *Service) Attach(ctx context.Context, jobID string, t Target) error {
	if err := t.Repo.Validate(); err != nil {
		return fmt.Errorf("attach job %s to a thread: %w", jobID, err)
	}
	if t.Forge == "" || t.Number <= 0 {
		return fmt.Errorf("attach job %s to a thread: forge %q and number %d: want a forge and a number of 1 or more", jobID, t.Forge, t.Number)
	}
	v, err := s.core.Job(ctx, jobID)
	if err != nil {
		return fmt.Errorf("attach job %s to %s: %w", jobID, t, err)
	}
	now := s.cfg.Now()
	err = s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		old, err := tx.ForgeThread(jobID)
		switch {
		case err == nil:
			if targetOf(old) != t {
				return fmt.Errorf("job %s already works for %s, not %s: %w", jobID, targetOf(old), t, store.ErrConflict)
			}
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		return tx.PutForgeThread(store.ForgeThread{JobID: jobID, Project: v.Project, Forge: t.Forge, Repo: t.Repo.String(),
			Number: t.Number, IsPR: t.IsPR, CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		return fmt.Errorf("attach job %s to %s: %w", jobID, t, err)
	}
	s.mu.Lock()
	s.known[jobID] = true
	s.mu.Unlock()
	s.wake(jobID)
	return nil
}

func targetOf(f store.ForgeThread) Target {
	r, _ := forge.ParseRepo(f.Repo) // written by Attach from a valid one
	return Target{Forge: f.Forge, Repo: r, Number: f.Number, IsPR: f.IsPR}
}

// wake updates job jobID's thread in the background, once more if it is
// being updated now.
func (s *Service) wake(jobID string) {
	if s.core.Leading() {
		s.upd.Wake(jobID)
	}
}

// failed notes how an update went: after a failure the sweep waits longer
// each time before it tries that thread again.
func (s *Service) failed(jobID string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.failures, jobID)
		delete(s.until, jobID)
		return
	}
	if s.ctx.Err() != nil {
		return
	}
	n := s.failures[jobID] + 1
	s.failures[jobID] = n
	wait := Later(s.cfg.Sweep).Delay(n)
	s.until[jobID] = s.cfg.Now().Add(wait)
	s.log.Warn("could not update a job's forge thread; trying again later", "job", jobID, "failures", n, "wait", wait, "err", err)
}

// sweepLoop updates every unsettled thread now and then while this hub
// leads: at its start (a restarted hub or a new leader carries on), and
// for changes it was not told of.
func (s *Service) sweepLoop(ctx context.Context) {
	s.sweep(ctx)
	// On whole multiples of the interval (internal/tick), in the wakeup
	// the runners' heartbeats cause, not in one of its own.
	tick.Every(ctx, s.cfg.Sweep, func() bool { s.sweep(ctx); return true })
}

func (s *Service) sweep(ctx context.Context) {
	if !s.core.Leading() {
		return
	}
	var ts []store.ForgeThread
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		ts, err = tx.UnsettledForgeThreads()
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("could not list the unsettled forge threads", "err", err)
		}
		return
	}
	now := s.cfg.Now()
	for _, t := range ts {
		s.mu.Lock()
		s.known[t.JobID] = true
		wait := now.Before(s.until[t.JobID])
		s.mu.Unlock()
		if !wait {
			s.wake(t.JobID)
		}
	}
}

// update brings job jobID's thread up to date: its question posted, its
// status comment showing where the job is.
func (s *Service) update(ctx context.Context, jobID string) error {
	th, err := s.thread(ctx, jobID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	v, err := s.core.Job(ctx, jobID)
	if err != nil {
		return fmt.Errorf("read job %s: %w", jobID, err)
	}
	st := statusOf(v)
	q := pendingQuestion(v)
	_, posted := th.Questions[qid(q)]
	if st.key() == th.Shown && (q == nil || posted) {
		return nil
	}
	t := targetOf(th)
	f, kind, err := s.core.Forge(ctx, th.Forge)
	if err != nil {
		return fmt.Errorf("open forge %s for job %s: %w", th.Forge, jobID, err)
	}
	n := forge.ThreadNumber(kind, t.Number, t.IsPR)
	url := s.core.JobURL(jobID)
	if q != nil && !posted {
		var c Comment
		err := s.try(ctx, func(ctx context.Context) error {
			var err error
			c, err = f.CommentOnce(ctx, t.Repo, n, questionMarker(q.ID), renderQuestion(jobID, url, *q))
			return err
		})
		if err != nil {
			return fmt.Errorf("post question %s of job %s on %s: %w", q.ID, jobID, t, err)
		}
		if th.Questions == nil {
			th.Questions = map[string]int64{}
		}
		th.Questions[q.ID] = c.ID
		if err := s.save(ctx, th); err != nil {
			return err
		}
	}
	if st.key() == th.Shown {
		return nil
	}
	body := st.render(jobID, url)
	err = s.try(ctx, func(ctx context.Context) error {
		if th.StatusID != 0 {
			err := f.EditComment(ctx, t.Repo, th.StatusID, body)
			if fe, ok := errors.AsType[*forge.Error](err); !ok || fe.Code != forge.CodeNotFound {
				return err
			}
			th.StatusID = 0 // someone deleted it: post it again
		}
		// Posted once whatever is lost: a reply lost after the post finds
		// it, which may show an older state than body.
		c, err := f.CommentOnce(ctx, t.Repo, n, statusMarker(jobID), body)
		if err != nil {
			return err
		}
		th.StatusID = c.ID
		if !containsBody(c.Body, body) {
			return f.EditComment(ctx, t.Repo, th.StatusID, body)
		}
		return nil
	})
	if th.StatusID != 0 && err != nil {
		_ = s.save(ctx, th) // keep the comment's id for the next try
	}
	if err != nil {
		return fmt.Errorf("show job %s %s on %s: %w", jobID, st.kind, t, err)
	}
	th.Shown, th.Settled = st.key(), st.settled
	return s.save(ctx, th)
}

// pendingQuestion is the question a waiting job waits on, if any.
func pendingQuestion(v apitypes.JobView) *protocol.QuestionView {
	if v.State != job.Waiting || len(v.Questions) == 0 {
		return nil
	}
	return &v.Questions[len(v.Questions)-1]
}

func qid(q *protocol.QuestionView) string {
	if q == nil {
		return ""
	}
	return q.ID
}

func (s *Service) thread(ctx context.Context, jobID string) (store.ForgeThread, error) {
	var th store.ForgeThread
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		th, err = tx.ForgeThread(jobID)
		return err
	})
	return th, err
}

func (s *Service) save(ctx context.Context, th store.ForgeThread) error {
	th.UpdatedAt = s.cfg.Now()
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error { return tx.PutForgeThread(th) })
	if err != nil {
		return fmt.Errorf("record the forge thread of job %s: %w", th.JobID, err)
	}
	return nil
}

// try calls a forge with the Retry policy: again after a rate limit (when
// the forge says) or an outage, never after a refusal.
func (s *Service) try(ctx context.Context, fn func(context.Context) error) error {
	return retry.Do(ctx, s.cfg.Retry, func(ctx context.Context) error {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if fe, ok := errors.AsType[*forge.Error](err); ok {
			switch fe.Code {
			case forge.CodeRateLimited, forge.CodeUnavailable:
				if fe.RetryAfter > 0 {
					return retry.After(err, fe.RetryAfter)
				}
				return err
			}
		}
		return retry.Permanent(err)
	})
}

// containsBody says whether a comment found by its marker shows body.
func containsBody(comment, body string) bool { return strings.Contains(comment, body) }
