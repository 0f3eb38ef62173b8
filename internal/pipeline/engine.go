package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"drover/internal/apitypes"
	"drover/internal/coalesce"
	"drover/internal/hub/call"
	"drover/internal/ids"
	"drover/internal/pipeline/spec"
	"drover/internal/rules"
	"drover/internal/store"
	"drover/internal/tick"
)

// Engine runs the hub's pipelines and answers the API's calls on them.
type Engine struct {
	core Core
	cfg  Config
	log  *slog.Logger
	// ctx lives as long as the hub.
	ctx context.Context
	wg  sync.WaitGroup

	// adv advances a pipeline, one pass at a time.
	adv *coalesce.Runner

	mu sync.Mutex
	// watch maps the jobs of running steps to their pipelines, so a job's
	// change wakes its pipeline at once.
	watch map[string]string
	// changed holds, by pipeline, the jobs whose change woke it: its next
	// pass reads only those; full marks pipelines whose next pass reads
	// every running step's job (a sweep, a start, a retry).
	changed map[string]map[string]bool
	full    map[string]bool
}

// New is an Engine over core, whose background work lives as long as ctx.
// It starts the leader's sweep, which also carries on the pipelines a
// stopped hub left running.
func New(ctx context.Context, core Core, cfg Config) *Engine {
	if cfg.Sweep == 0 {
		cfg.Sweep = DefaultSweep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{core: core, cfg: cfg, log: cfg.Logger, ctx: ctx,
		watch: map[string]string{}, changed: map[string]map[string]bool{}, full: map[string]bool{}}
	e.adv = coalesce.New(ctx, func(ctx context.Context, id string) {
		if err := e.advance(ctx, id); err != nil && ctx.Err() == nil {
			e.log.Warn("could not advance a pipeline; the sweep tries again", "pipeline", id, "err", err)
		}
	})
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.sweepLoop(ctx) }()
	return e
}

// Wait waits for the background work once the hub's context ended.
func (e *Engine) Wait() {
	e.wg.Wait()
	e.adv.Wait()
}

// JobChanged wakes the pipeline a job belongs to, if any: the hub calls it
// whenever a job changes.
func (e *Engine) JobChanged(jobID string) {
	e.mu.Lock()
	id, ok := e.watch[jobID]
	if ok {
		if e.changed[id] == nil {
			e.changed[id] = map[string]bool{}
		}
		e.changed[id][jobID] = true
	}
	e.mu.Unlock()
	if ok {
		e.wake(id)
	}
}

// poke advances pipeline id in the background, reading every running
// step's job, once more if it is being advanced now.
func (e *Engine) poke(id string) {
	e.mu.Lock()
	e.full[id] = true
	e.mu.Unlock()
	e.wake(id)
}

// taken returns the jobs whose change woke pipeline id since its last
// pass, nil for all of them.
func (e *Engine) taken(id string) map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	only := e.changed[id]
	if e.full[id] || only == nil {
		only = nil
	}
	delete(e.changed, id)
	delete(e.full, id)
	return only
}

// wake advances pipeline id in the background, once more if it is being
// advanced now.
func (e *Engine) wake(id string) {
	if e.core.Leading() {
		e.adv.Wake(id)
	}
}

// sweepLoop advances every running pipeline now and then while this hub
// leads: at its start (a restarted hub or a new leader carries on), and
// for changes it was not told of.
func (e *Engine) sweepLoop(ctx context.Context) {
	e.sweep(ctx)
	// On whole multiples of the interval (internal/tick), in the wakeup
	// the runners' heartbeats cause, not in one of its own.
	tick.Every(ctx, e.cfg.Sweep, func() bool { e.sweep(ctx); return true })
}

func (e *Engine) sweep(ctx context.Context) {
	if !e.core.Leading() {
		return
	}
	var ps []store.Pipeline
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		ps, err = tx.Pipelines(store.PipelineFilter{State: store.PipelineRunning})
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("could not list the running pipelines", "err", err)
		}
		return
	}
	for _, p := range ps {
		e.poke(p.ID)
	}
}

// Limits on what a caller sends.
const (
	maxFiles = 64
	// maxListScan is how many of the newest pipelines a user's list looks
	// through for those they may see.
	maxListScan = 5000
	// KeyPrefix starts the idempotency keys of the jobs pipelines submit;
	// such a job publishes nothing on its own (the pipeline's publish step
	// does).
	KeyPrefix = "pipeline:"
)

// OwnsKey says whether a job's idempotency key is a pipeline step's.
func OwnsKey(key string) bool { return strings.HasPrefix(key, KeyPrefix) }

// RunPipeline checks a pipeline file whole and starts it: nothing is
// queued when anything in it is wrong.
func (e *Engine) RunPipeline(ctx context.Context, c call.Caller, req apitypes.PipelineRunRequest) (apitypes.PipelineView, bool, error) {
	pl, params, err := e.check(req)
	if err != nil {
		return apitypes.PipelineView{}, false, err
	}
	if req.Key != "" {
		if err := rules.CheckText("key", req.Key, 200); err != nil {
			return apitypes.PipelineView{}, false, call.BadRequest("%v", err)
		}
		var old store.Pipeline
		err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
			var err error
			old, err = tx.PipelineByKey(c.UserID, req.Key)
			return err
		})
		if err == nil {
			v, err := e.view(ctx, old, true)
			return v, false, err
		} else if !errors.Is(err, store.ErrNotFound) {
			return apitypes.PipelineView{}, false, fmt.Errorf("look up pipeline key: %w", err)
		}
	}
	if _, err := e.core.Source(ctx, c, req.Project, req.Base); err != nil {
		return apitypes.PipelineView{}, false, err
	}
	specJSON, err := json.Marshal(pl)
	if err != nil {
		return apitypes.PipelineView{}, false, fmt.Errorf("encode pipeline: %w", err)
	}
	paramsJSON, err := json.Marshal(params)
	if err != nil {
		return apitypes.PipelineView{}, false, fmt.Errorf("encode params: %w", err)
	}
	now := e.cfg.Now()
	p := store.Pipeline{
		ID: ids.New("p"), Name: pl.Name, File: req.File, Project: req.Project, Base: req.Base, RequesterID: c.UserID,
		Key: req.Key, Spec: string(specJSON), Params: string(paramsJSON), Staged: req.Staged,
		State: store.PipelineRunning, CreatedAt: now, UpdatedAt: now,
	}
	msg := fmt.Sprintf("pipeline %s started on %s at %s with %d steps", pl.Name, p.Project, p.Base, len(pl.Steps))
	if p.Staged {
		msg += " (staged: it publishes nothing)"
	}
	started := true
	err = e.cfg.Store.Write(ctx, func(tx store.Tx) error {
		if err := tx.InsertPipeline(p); errors.Is(err, store.ErrConflict) && req.Key != "" {
			old, err := tx.PipelineByKey(c.UserID, req.Key)
			p, started = old, false
			return err
		} else if err != nil {
			return err
		}
		_, err := tx.AddPipelineEvent(store.PipelineEvent{PipelineID: p.ID, At: now, Kind: "started", Actor: c.Name, Message: msg})
		return err
	})
	if err != nil {
		return apitypes.PipelineView{}, false, fmt.Errorf("start pipeline: %w", err)
	}
	if started {
		e.log.Info("pipeline started", "pipeline", p.ID, "name", p.Name, "requester", c.Name)
		e.poke(p.ID)
	}
	v, err := e.view(ctx, p, true)
	return v, started, err
}

// check parses and checks a run request whole, and returns the pipeline
// and the params' values (defaults filled in).
func (e *Engine) check(req apitypes.PipelineRunRequest) (*spec.Pipeline, map[string]string, error) {
	switch {
	case len(req.Source) > spec.MaxFile:
		return nil, nil, call.BadRequest("%s: %d bytes; the limit is %d", req.File, len(req.Source), spec.MaxFile)
	case len(req.Files) > maxFiles:
		return nil, nil, call.BadRequest("%d prompt files; the limit is %d", len(req.Files), maxFiles)
	case req.Project == "" || req.Base == "":
		return nil, nil, call.BadRequest("a pipeline runs on a project at a base commit (drover pipeline run --repo pushes it)")
	}
	if err := rules.CheckPlainText("file name", req.File, false); err != nil || req.File == "" {
		return nil, nil, call.BadRequest("the file's name must be plain text, not empty")
	}
	read := func(path string) ([]byte, error) {
		text, ok := req.Files[path]
		if !ok {
			return nil, fmt.Errorf("%s was not sent with the pipeline", path)
		}
		// The rule of context files: no .git, no secrets.
		if err := rules.CheckContextFile(path, []byte(text)); err != nil {
			return nil, err
		}
		return []byte(text), nil
	}
	pl, err := spec.Parse(req.File, []byte(req.Source), read)
	if err != nil {
		return nil, nil, call.BadRequest("%v", err)
	}
	params, err := pl.Bind(req.Params)
	if err != nil {
		return nil, nil, call.BadRequest("%v", err)
	}
	return pl, params, nil
}

// load reads a pipeline c may see; one c may not reads as not found.
func (e *Engine) load(ctx context.Context, c call.Caller, id string) (store.Pipeline, error) {
	var p store.Pipeline
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		p, err = tx.Pipeline(id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return p, call.NotFound("no pipeline %q", id)
	} else if err != nil {
		return p, fmt.Errorf("read pipeline %s: %w", id, err)
	}
	ok, err := e.core.MaySee(ctx, c, p.Project, p.RequesterID)
	if err != nil {
		return p, err
	}
	if !ok {
		return p, call.NotFound("no pipeline %q", id)
	}
	return p, nil
}

// mayControl says whether c may cancel or retry p: its requester or an
// admin, as with jobs.
func mayControl(c call.Caller, p store.Pipeline) error {
	if c.Admin || c.UserID == p.RequesterID {
		return nil
	}
	return call.Forbidden("only pipeline %s's requester or an admin may change it", p.ID)
}

func (e *Engine) ListPipelines(ctx context.Context, c call.Caller, limit int) (apitypes.PipelineList, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	var ps []store.Pipeline
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		// An admin sees every pipeline; anyone else theirs and their
		// projects', found among the newest (a bound on the reading).
		f := store.PipelineFilter{Limit: limit}
		if !c.Admin {
			f.Limit = maxListScan
		}
		ps, err = tx.Pipelines(f)
		return err
	})
	if err != nil {
		return apitypes.PipelineList{}, fmt.Errorf("list pipelines: %w", err)
	}
	out := apitypes.PipelineList{Pipelines: []apitypes.PipelineView{}}
	seen := map[string]bool{}
	for _, p := range ps {
		if len(out.Pipelines) == limit {
			break
		}
		k := p.Project + "\x00" + p.RequesterID
		ok, cached := seen[k]
		if !cached {
			var err error
			if ok, err = e.core.MaySee(ctx, c, p.Project, p.RequesterID); err != nil {
				return out, err
			}
			seen[k] = ok
		}
		if !ok {
			continue
		}
		v, err := e.view(ctx, p, false)
		if err != nil {
			return out, err
		}
		out.Pipelines = append(out.Pipelines, v)
	}
	return out, nil
}

func (e *Engine) ShowPipeline(ctx context.Context, c call.Caller, id string) (apitypes.PipelineView, error) {
	p, err := e.load(ctx, c, id)
	if err != nil {
		return apitypes.PipelineView{}, err
	}
	return e.view(ctx, p, true)
}

// CancelPipeline stops a pipeline and cancels its running steps' jobs,
// fenced as every cancel is.
func (e *Engine) CancelPipeline(ctx context.Context, c call.Caller, id string) (apitypes.PipelineView, error) {
	p, err := e.load(ctx, c, id)
	if err != nil {
		return apitypes.PipelineView{}, err
	}
	if err := mayControl(c, p); err != nil {
		return apitypes.PipelineView{}, err
	}
	if !p.State.Terminal() {
		if err := e.finish(ctx, p.ID, store.PipelineCancelled, "cancelled by "+c.Name, "", c.Name); err != nil {
			return apitypes.PipelineView{}, err
		}
	}
	if err := e.stopRuns(ctx, c, p.ID, "the pipeline was cancelled by "+c.Name); err != nil {
		return apitypes.PipelineView{}, err
	}
	return e.ShowPipeline(ctx, c, id)
}

// stopRuns cancels the jobs of a pipeline's running steps, and records
// their runs as stopped for why (a retry of the pipeline starts them
// again).
func (e *Engine) stopRuns(ctx context.Context, c call.Caller, id, why string) error {
	var runs []store.PipelineRun
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		runs, err = tx.PipelineRuns(id)
		return err
	})
	if err != nil {
		return fmt.Errorf("read pipeline %s's steps: %w", id, err)
	}
	var errs []error
	for _, r := range runs {
		if r.State != store.RunRunning || r.JobID == "" {
			continue
		}
		if err := e.core.Cancel(ctx, c, r.JobID); err != nil && !isRefusal(err) {
			errs = append(errs, fmt.Errorf("cancel step %s's job %s: %w", r.Key, r.JobID, err))
			continue
		}
		r.State, r.Reason, r.UpdatedAt = store.RunFailed, stoppedPrefix+why, e.cfg.Now()
		err := e.cfg.Store.Write(ctx, func(tx store.Tx) error {
			if err := tx.PutPipelineRun(r); err != nil {
				return err
			}
			_, err := tx.AddPipelineEvent(store.PipelineEvent{PipelineID: id, At: r.UpdatedAt, Kind: "stopped", Step: r.Key, Actor: c.Name,
				Message: fmt.Sprintf("step %s's job %s cancelled: %s", r.Key, r.JobID, why)})
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("record step %s stopped: %w", r.Key, err))
		}
		e.mu.Lock()
		delete(e.watch, r.JobID)
		e.mu.Unlock()
	}
	return errors.Join(errs...)
}

// stoppedPrefix starts the reason of a run whose job the pipeline itself
// cancelled.
const stoppedPrefix = "stopped: "

func isRefusal(err error) bool {
	var r *call.Refusal
	return errors.As(err, &r)
}

// finish moves a pipeline that is not over to state, with an event.
func (e *Engine) finish(ctx context.Context, id string, state store.PipelineState, reason, result, actor string) error {
	changed := false
	err := e.cfg.Store.Write(ctx, func(tx store.Tx) error {
		changed = false
		p, err := tx.Pipeline(id)
		if err != nil {
			return err
		}
		if p.State.Terminal() || (p.State == state && p.Reason == reason) {
			return nil
		}
		now := e.cfg.Now()
		p.State, p.Reason, p.Result, p.UpdatedAt = state, reason, result, now
		if err := tx.UpdatePipeline(p); err != nil {
			return err
		}
		changed = true
		msg := "pipeline " + string(state)
		if reason != "" {
			msg += ": " + reason
		}
		_, err = tx.AddPipelineEvent(store.PipelineEvent{PipelineID: id, At: now, Kind: string(state), Actor: actor, Message: msg})
		return err
	})
	if err != nil {
		return fmt.Errorf("end pipeline %s: %w", id, err)
	}
	if changed {
		e.log.Info("pipeline "+string(state), "pipeline", id, "reason", reason)
	}
	return nil
}

func (e *Engine) PipelineEvents(ctx context.Context, c call.Caller, id string, after int64) (apitypes.PipelineEventList, error) {
	if _, err := e.load(ctx, c, id); err != nil {
		return apitypes.PipelineEventList{}, err
	}
	var evs []store.PipelineEvent
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		evs, err = tx.PipelineEvents(id, after, 1000)
		return err
	})
	out := apitypes.PipelineEventList{Events: []apitypes.PipelineEventView{}}
	for _, ev := range evs {
		out.Events = append(out.Events, apitypes.PipelineEventView{Seq: ev.Seq, At: ev.At.UTC(), Kind: ev.Kind, Step: ev.Step, Actor: ev.Actor, Message: ev.Message})
	}
	return out, err
}
