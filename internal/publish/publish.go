// Package publish carries a completed job's result from the hub's
// repository to its project's forge, as a branch or a pull request, exactly
// once. It is a capability over the hub's core: it declares what it needs of
// the core (Core: who may publish which job, its events, the data
// directory's locks), keeps its own records in the store (forge connections
// and publications), and the hub mounts its operations beside the API's.
//
// Exactly once rests on three rules. The intent is recorded before any
// forge call, so a hub that dies carries it on at its next start (Resume).
// The push is a compare-and-swap on the remote commit drover last saw
// (git push --force-with-lease=REF:EXPECTED), and a rejected lease is
// success only when the remote already holds the job's commit: a branch
// moved by someone else ends as remote_moved, never a force-push. A pull
// request is looked for before it is created (forge.Client.CreatePR), so a
// retry after a lost reply or a crash finds the one made before.
package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/retry"
	"drover/internal/store"
)

// Core is what publishing needs of the hub's core.
type Core interface {
	// Job reads the job c asks to publish. A job c may not see is a
	// not-found refusal; one c may see but not publish (c is not its
	// requester, its project's owner or an admin) is forbidden.
	Job(ctx context.Context, c call.Caller, id string) (Job, error)
	// JobByID reads a job for the hub itself: resuming a publication, or
	// a project's default on completion.
	JobByID(ctx context.Context, id string) (Job, error)
	// Event records an event of the job, by actor.
	Event(ctx context.Context, jobID, kind, actor, text string) error
	// Lock takes the lock of name that every hub on the data directory
	// shares, and returns its release.
	Lock(ctx context.Context, name string) (func(), error)
}

// Job is a job as publishing reads it.
type Job struct {
	View    apitypes.JobView
	Config  store.ProjectConfig // its project's
	RepoDir string              // the hub's bare repository of its project
	Issue   int                 // the issue of its project's forge repository it was started from (Issue); 0 for none
	URL     string              // its page on the hub; "" when the hub has no public URL
}

// Config is what a Service needs besides the core.
type Config struct {
	Store  store.Store
	Git    gitcmd.Git
	Logger *slog.Logger
	// HTTP is the forges' client; nil for one with a minute's timeout per
	// call.
	HTTP *http.Client
	// Retry is how a publication waits out a forge that is down, rate
	// limited or not caught up with a push; the zero value is
	// DefaultRetry.
	Retry retry.Policy
	// Metrics counts forge requests and publications; nil counts nothing.
	Metrics *Metrics
	// SigningKey is the path of the SSH private key (0600) that signs
	// the commits of projects that ask (ProjectConfig.PublishSign); ""
	// for none.
	SigningKey string
	Now        func() time.Time
}

// DefaultRetry gives a publication about five minutes before it ends as
// failed with the forge's reason.
func DefaultRetry() retry.Policy {
	return retry.Policy{First: time.Second, Max: time.Minute, Jitter: retry.EqualJitter, Tries: 8, MaxElapsed: 5 * time.Minute}
}

// gitTimeout bounds one git call to a forge.
const gitTimeout = 2 * time.Minute

// Service publishes jobs' results and keeps the hub's forge connections.
type Service struct {
	core Core
	cfg  Config
	// ctx lives as long as the hub: a publication goes on after the
	// request that asked for it gives up waiting.
	ctx context.Context
	wg  sync.WaitGroup
}

// New is a Service over core, whose background publications live as long
// as ctx.
func New(ctx context.Context, core Core, cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Retry.First == 0 {
		cfg.Retry = DefaultRetry()
	}
	return &Service{core: core, cfg: cfg, ctx: ctx}
}

// Wait waits for the background publications, once the hub's context
// ended.
func (s *Service) Wait() { s.wg.Wait() }

// Outcome codes of a publication that failed, besides "forge_" and a
// forge.Error's code.
const (
	CodeOK             = "ok"
	CodeRemoteMoved    = "remote_moved"     // the branch moved since drover last saw it
	CodeNotFastForward = "not_fast_forward" // the job's commit does not descend from the pull request's head
	CodePRClosed       = "pr_closed"        // the pull request pushed to is closed or merged
	CodeProtected      = "protected_branch" // a push to the default branch or the base, which the project does not allow
	CodePushRefused    = "push_refused"     // the forge refused the push (a protected branch, a hook)
	CodeUnavailable    = "forge_unavailable"
	CodeNotMapped      = "not_mapped" // the project maps to no forge, or to one that is gone
	CodeNothing        = "nothing_to_publish"
)

// failure is a publication's end without success, with its code.
type failure struct {
	code string
	msg  string
}

func (f *failure) Error() string { return f.code + ": " + f.msg }

func failf(code, format string, args ...any) error {
	return retry.Permanent(&failure{code: code, msg: fmt.Sprintf(format, args...)})
}

// outcome is err as a publication records it: its code and reason.
func outcome(err error) (code, reason string) {
	if f, ok := errors.AsType[*failure](err); ok {
		return f.code, f.msg
	}
	if fe, ok := errors.AsType[*forge.Error](err); ok {
		return "forge_" + fe.Code, fe.Error()
	}
	return CodeUnavailable, err.Error()
}

// retryable marks what waiting may cure: a forge that is down, rate
// limited or not caught up with a push, and a git transport failure.
func retryable(err error) error {
	if fe, ok := errors.AsType[*forge.Error](err); ok {
		switch fe.Code {
		case forge.CodeRateLimited, forge.CodeUnavailable, forge.CodeNotReady:
			if fe.RetryAfter > 0 {
				return retry.After(err, fe.RetryAfter)
			}
			return err
		}
		return retry.Permanent(err)
	}
	if _, ok := errors.AsType[*transportError](err); ok {
		return err
	}
	if retry.IsPermanent(err) {
		return err
	}
	return retry.Permanent(err)
}

// View is a publication as the API shows it.
func View(p store.Publication) apitypes.PublicationView {
	return apitypes.PublicationView{Job: p.JobID, Forge: p.Forge, Repo: p.Repo, Mode: p.Mode,
		Branch: p.Branch, Base: p.Base, Commit: p.Commit, Pushed: p.Pushed, PR: p.PRNumber, URL: p.PRURL,
		State: string(p.State), Code: p.Code, Reason: p.Reason, Tries: p.Tries, UpdatedAt: p.UpdatedAt}
}

// PublishJob publishes job id's result as req asks, for c, and answers
// its outcome; a publication still retrying when ctx ends goes on in the
// background (State pending). Publishing again what was published is
// answered from the record, with no forge call.
func (s *Service) PublishJob(ctx context.Context, c call.Caller, id string, req apitypes.PublishRequest) (apitypes.PublicationView, error) {
	j, err := s.core.Job(ctx, c, id)
	if err != nil {
		return apitypes.PublicationView{}, err
	}
	intent, err := s.plan(j, req, c.UserID)
	if err != nil {
		return apitypes.PublicationView{}, err
	}
	// Rewritten before the record, so that asking again finds it done.
	if intent.Commit, err = s.commitFor(ctx, j, intent.Forge); err != nil {
		return apitypes.PublicationView{}, asRefusal(err)
	}
	return s.start(ctx, j, intent, c.Name)
}

// Intent records, in the transaction that completes job j, the
// publication its project's default asks for (Config.Publish), so that a
// hub that dies right after the completion still publishes it (Resume).
// It records nothing for a project without a default or a job without a
// commit of its own.
func Intent(tx store.Tx, j store.Job, now time.Time) (bool, error) {
	if j.State != job.Completed || j.Project == "" || j.Mode != protocol.ModeFix {
		return false, nil
	}
	// A job started from a pull request publishes back onto it (FromPR).
	if old, err := tx.Publication(j.ID); err == nil {
		if old.State != store.PublicationPlanned {
			return false, nil
		}
		old.UpdatedAt = now
		if j.Head == j.Base {
			old.State, old.Code, old.Reason = store.PublicationFailed, CodeNothing, "the job made no commit"
			return false, tx.PutPublication(old)
		}
		old.State, old.Commit = store.PublicationPending, j.Head
		return true, tx.PutPublication(old)
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	if j.Head == j.Base {
		return false, nil
	}
	prj, err := tx.Project(j.Project)
	if err != nil {
		return false, fmt.Errorf("read project %s: %w", j.Project, err)
	}
	c := prj.Config
	if c.Forge == "" || c.ForgeRepo == "" {
		return false, nil
	}
	mode := c.Publish
	if mode == apitypes.PublishNone {
		return false, nil
	}
	if mode != apitypes.PublishPR && mode != apitypes.PublishBranch {
		// A job started from an issue on the forge ends as a pull request
		// that closes it (body), though the project sets no default (an
		// explicit none is kept): the issue's thread is where its
		// requester looks for it.
		n, err := Issue(tx, j.ID, c)
		if err != nil || n == 0 {
			return false, err
		}
		mode = apitypes.PublishPR
	}
	// The title is made from the prompt when it runs (run).
	p := store.Publication{JobID: j.ID, Forge: c.Forge, Repo: c.ForgeRepo, Mode: mode, Branch: BranchPrefix + j.ID,
		Commit: j.Head, State: store.PublicationPending, CreatedAt: now, UpdatedAt: now}
	return true, tx.PutPublication(p)
}

// Issue is the issue of the project's forge repository that job jobID was
// started from (its thread, as internal/forgethread records it), 0 for
// none: the pull request of its result closes that issue.
func Issue(tx store.Tx, jobID string, cfg store.ProjectConfig) (int, error) {
	t, err := tx.ForgeThread(jobID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("read job %s's forge thread: %w", jobID, err)
	}
	if t.IsPR || t.Forge != cfg.Forge || !strings.EqualFold(t.Repo, cfg.ForgeRepo) {
		return 0, nil
	}
	return t.Number, nil
}

// JobCompleted carries on the publication Intent recorded for job id. The
// hub calls it once the completion is committed.
func (s *Service) JobCompleted(ctx context.Context, id string) {
	var p store.Publication
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		p, err = tx.Publication(id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	if err != nil {
		s.cfg.Logger.Warn("could not read a completed job's publication", "job", id, "err", err)
		return
	}
	if p.State != store.PublicationPending {
		return
	}
	j, err := s.core.JobByID(ctx, id)
	if err != nil {
		s.cfg.Logger.Warn("could not read a completed job to publish it", "job", id, "err", err)
		return
	}
	s.background(j, p, "hub")
}

// Resume carries on the publications a hub left pending (it stopped, or
// its request gave up waiting while the forge was retried).
func (s *Service) Resume(ctx context.Context) error {
	var pending []store.Publication
	if err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		pending, err = tx.Publications(store.PublicationPending)
		return err
	}); err != nil {
		return fmt.Errorf("read pending publications: %w", err)
	}
	for _, p := range pending {
		j, err := s.core.JobByID(ctx, p.JobID)
		if err != nil {
			s.cfg.Logger.Warn("could not read a job whose publication is pending", "job", p.JobID, "err", err)
			continue
		}
		s.cfg.Logger.Info("resuming a pending publication", "job", p.JobID, "mode", p.Mode, "branch", p.Branch)
		s.background(j, p, "hub")
	}
	return nil
}

// start records the intent and publishes in the background, waiting for
// the outcome as long as ctx lasts.
func (s *Service) start(ctx context.Context, j Job, intent store.Publication, actor string) (apitypes.PublicationView, error) {
	done, err := s.record(ctx, j, intent)
	if err != nil || done != nil {
		if done != nil {
			return View(*done), nil
		}
		return apitypes.PublicationView{}, err
	}
	res := s.background(j, intent, actor)
	select {
	case p := <-res:
		return View(p), nil
	case <-ctx.Done():
		intent.State = store.PublicationPending
		return View(intent), nil
	}
}

// background runs a publication under the hub's context; its outcome
// arrives on the channel returned.
func (s *Service) background(j Job, p store.Publication, actor string) <-chan store.Publication {
	res := make(chan store.Publication, 1)
	s.wg.Go(func() {
		res <- s.run(s.ctx, j, p, actor)
	})
	return res
}

// record stores the intent before any forge call, unless the job's
// publication is one already done for the same head and target (then it
// is the answer) or one still under way (then it is refused).
func (s *Service) record(ctx context.Context, j Job, intent store.Publication) (*store.Publication, error) {
	unlock, err := s.core.Lock(ctx, "publish:"+j.View.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var done *store.Publication
	err = s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		done = nil
		old, err := tx.Publication(j.View.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		case old.State == store.PublicationPending:
			return call.Conflict("job %s's publication to %s (%s) is under way; see drover show %s", j.View.ID, old.Repo, old.Mode, j.View.ID)
		case old.State == store.PublicationDone && sameTarget(old, intent):
			done = &old
			return nil
		default:
			intent.CreatedAt, intent.Tries = old.CreatedAt, old.Tries
			if old.Branch == intent.Branch && old.Repo == intent.Repo && old.Pushed != "" {
				// The branch holds what drover pushed before: the lease names it.
				intent.Expect = old.Pushed
			}
		}
		return tx.PutPublication(intent)
	})
	if err != nil {
		return nil, fmt.Errorf("record job %s's publication: %w", j.View.ID, err)
	}
	return done, nil
}

// sameTarget: a new request for what is published already.
func sameTarget(old, p store.Publication) bool {
	return old.Commit == p.Commit && old.Repo == p.Repo && old.Mode == p.Mode && old.ToPR == p.ToPR &&
		(p.Branch == "" || old.Branch == p.Branch) && (p.Base == "" || old.Base == p.Base)
}

// save stores a publication's progress; a failure is logged (the next try
// or start repairs it from the forge).
func (s *Service) save(ctx context.Context, p *store.Publication) {
	p.UpdatedAt = s.cfg.Now()
	if err := s.cfg.Store.Write(ctx, func(tx store.Tx) error { return tx.PutPublication(*p) }); err != nil {
		s.cfg.Logger.Error("could not record a publication's progress; the next try repairs it from the forge",
			"job", p.JobID, "err", err)
	}
}
