package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/pipeline/spec"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// A pass is one advance of a pipeline: it reads the pipeline and its runs,
// follows the runs' jobs, and starts what is ready, in the graph's order.
// Every action it takes is idempotent (a job is submitted under a key made
// of the pipeline, the run and its try; a merge is the same commit every
// time; a publication is one per job), so a pass cut short by a crash is
// simply made again.
type pass struct {
	e      *Engine
	p      store.Pipeline
	pl     *spec.Pipeline
	params map[string]string
	c      call.Caller
	dir    string
	runs   map[string]*store.PipelineRun
	byID   map[string]*spec.Step
	out    map[string]*output // the steps that are done
	// delivers are the steps whose delivery another reads (a loop's
	// verdict, feedback, for_each from): their jobs get drover's tools
	// and complete only by delivering.
	delivers map[string]bool
	human    string // why the pipeline needs a person, once a step says so
	failed   string // why it failed
	// only are the jobs to read, those whose change woke the pass; nil
	// for every running step's.
	only map[string]bool
	// moved says a run's state followed its job's this pass.
	moved bool
	// replays counts the runs the pass replayed.
	replays int
	// mu guards the pass's records while it starts a fan-out's items at
	// once.
	mu sync.Mutex
	// What the pass changed, written in one transaction at its end
	// (flush): the runs by key, the results to replay, the events.
	dirty   map[string]bool
	results []store.StepResult
	events  []store.PipelineEvent
}

// output is what a finished step left.
type output struct {
	commit  string
	summary string
	items   []string // a for_each step's items' commits, in item order
	// failed: an optional step that failed, or a step skipped for one;
	// the steps that depend on it are skipped.
	failed bool
}

// runKey names a run: "ID#ROUND", or "ID[ITEM]#ROUND".
func runKey(step string, item, round int) string {
	if item < 0 {
		return step + "#" + strconv.Itoa(round)
	}
	return fmt.Sprintf("%s[%d]#%d", step, item, round)
}

// advance makes one pass over pipeline id.
func (e *Engine) advance(ctx context.Context, id string) error {
	var (
		p    store.Pipeline
		runs []store.PipelineRun
	)
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		if p, err = tx.Pipeline(id); err != nil {
			return err
		}
		runs, err = tx.PipelineRuns(id)
		return err
	})
	if err != nil {
		return fmt.Errorf("read pipeline %s: %w", id, err)
	}
	if p.State != store.PipelineRunning {
		e.unwatch(runs)
		if p.State == store.PipelineCancelled || p.State == store.PipelineFailed {
			// A pass that raced the end may have started a job after it.
			return e.stopRuns(ctx, call.Caller{Admin: true, Name: "hub"}, id, "the pipeline is "+string(p.State))
		}
		return nil
	}
	only := e.taken(id)
	ps := &pass{e: e, p: p, only: only, runs: map[string]*store.PipelineRun{}, out: map[string]*output{}, byID: map[string]*spec.Step{},
		delivers: map[string]bool{}, dirty: map[string]bool{}}
	if err := json.Unmarshal([]byte(p.Spec), &ps.pl); err != nil {
		return e.finish(ctx, id, store.PipelineFailed, "its recorded definition cannot be read: "+err.Error(), "", "hub")
	}
	if err := json.Unmarshal([]byte(p.Params), &ps.params); err != nil {
		return e.finish(ctx, id, store.PipelineFailed, "its recorded params cannot be read: "+err.Error(), "", "hub")
	}
	ps.c, err = e.core.Caller(ctx, p.RequesterID)
	if isRefusal(err) {
		return e.finish(ctx, id, store.PipelineFailed, "its requester cannot run it any more: "+err.Error(), "", "hub")
	} else if err != nil {
		return err
	}
	ps.dir, err = e.core.Repo(ctx, ps.c, p.Project)
	if isRefusal(err) {
		return e.finish(ctx, id, store.PipelineFailed, "its project cannot be used any more: "+err.Error(), "", "hub")
	} else if err != nil {
		return err
	}
	for i := range runs {
		ps.runs[runs[i].Key] = &runs[i]
	}
	for i := range ps.pl.Steps {
		s := &ps.pl.Steps[i]
		ps.byID[s.ID] = s
	}
	ps.findDeliveries()
	// Every action of the pass is idempotent, so its records can wait for
	// its end: a pass cut short is made again, and finds the same jobs.
	err = ps.walk(ctx, runs)
	if ferr := ps.flush(ctx); ferr != nil {
		return errors.Join(err, ferr)
	}
	if err != nil {
		return err
	}
	switch {
	case ps.failed != "":
		if err := e.finish(ctx, id, store.PipelineFailed, ps.failed, "", "hub"); err != nil {
			return err
		}
		return e.stopRuns(ctx, ps.c, id, "another step failed")
	case ps.human != "":
		return e.finish(ctx, id, store.PipelineNeedsHuman, ps.human, "", "hub")
	case len(ps.out) == len(ps.pl.Steps):
		// What its maker does with the steps' results comes before the
		// pipeline's end: an error leaves it running, settled again by
		// the next pass.
		if err := e.core.Settle(ctx, ps.c, id, p.File); err != nil {
			return fmt.Errorf("settle pipeline %s: %w", id, err)
		}
		last := ps.pl.Steps[len(ps.pl.Steps)-1].ID
		return e.finish(ctx, id, store.PipelineDone, "", ps.out[last].commit, "hub")
	}
	return nil
}

// walk follows the runs' jobs, then the steps in the graph's order.
func (ps *pass) walk(ctx context.Context, runs []store.PipelineRun) error {
	for _, r := range runs {
		// A done run's job completed, and a completed job changes no
		// more: reading it again on every pass made a fan-out's passes
		// grow with its items.
		if r.JobID != "" && r.State != store.RunDone && ps.followsJob(r) && (ps.only == nil || ps.only[r.JobID]) {
			if err := ps.refresh(ctx, ps.runs[r.Key]); err != nil {
				return err
			}
		}
	}
	if ps.only != nil && !ps.moved {
		// Woken by jobs that changed without ending (offered, started,
		// logging): nothing is ready that was not before.
		return nil
	}
	if err := ps.overtime(ctx); err != nil {
		return err
	}
	// A replayed run wakes nothing (it has no job): the walk goes on
	// while one makes another step ready, a loop's next round among them.
	for range maxWalks {
		before := ps.replays + len(ps.out)
		for _, id := range ps.order() {
			if ps.human != "" || ps.failed != "" {
				return nil
			}
			if err := ps.step(ctx, ps.byID[id]); err != nil {
				return err
			}
		}
		if ps.replays+len(ps.out) == before {
			break
		}
	}
	return nil
}

// maxWalks bounds the walks of one pass (a pipeline replayed whole takes
// one per loop round); a longer chain goes on at the next pass.
const maxWalks = 2*spec.MaxRoundsCap + 2

// flush writes what the pass changed, in one transaction.
func (ps *pass) flush(ctx context.Context) error {
	if len(ps.dirty) == 0 && len(ps.events) == 0 && len(ps.results) == 0 {
		return nil
	}
	err := ps.e.cfg.Store.Write(ctx, func(tx store.Tx) error {
		for _, res := range ps.results {
			if err := tx.PutStepResult(res); err != nil {
				return err
			}
		}
		for key := range ps.dirty {
			if err := tx.PutPipelineRun(*ps.runs[key]); err != nil {
				return err
			}
		}
		for _, ev := range ps.events {
			if _, err := tx.AddPipelineEvent(ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record pipeline %s's steps: %w", ps.p.ID, err)
	}
	ps.dirty, ps.results, ps.events = map[string]bool{}, nil, nil
	return nil
}

// unwatch forgets the jobs of a pipeline that stopped.
func (e *Engine) unwatch(runs []store.PipelineRun) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range runs {
		delete(e.watch, r.JobID)
	}
}

// followsJob says whether a run's state is its job's: an agent's or exec's
// run (a merge or a publication is the hub's own).
func (ps *pass) followsJob(r store.PipelineRun) bool {
	s := ps.byID[r.Step]
	return s != nil && s.Kind != spec.KindIntegrate && s.Kind != spec.KindPublish
}

// findDeliveries marks the steps whose delivery another step reads.
func (ps *pass) findDeliveries() {
	for _, s := range ps.pl.Steps {
		if s.Loop != nil {
			ps.delivers[s.ID] = true
		}
		if s.ForEach != nil && s.ForEach.From != "" {
			ps.delivers[s.ForEach.From] = true
		}
		texts := append([]string{s.Prompt}, s.Command...)
		for _, t := range texts {
			spec.Expand(t, func(name string) string {
				parts := strings.Split(name, ".")
				if len(parts) == 3 && parts[0] == "steps" && parts[2] != "commit" {
					ps.delivers[parts[1]] = true
				}
				return ""
			})
		}
	}
}

// order is the steps' ids in an order where each comes after those it
// depends on, the file's order otherwise.
func (ps *pass) order() []string {
	done := map[string]bool{}
	var out []string
	for len(out) < len(ps.pl.Steps) {
		for _, s := range ps.pl.Steps {
			if done[s.ID] {
				continue
			}
			ready := true
			for _, d := range s.After() {
				ready = ready && done[d]
			}
			if ready {
				done[s.ID] = true
				out = append(out, s.ID)
			}
		}
	}
	return out
}

// step advances one step whose inputs may be ready.
func (ps *pass) step(ctx context.Context, s *spec.Step) error {
	for _, d := range s.After() {
		if ps.out[d] == nil {
			return nil
		}
	}
	for _, d := range s.DependsOn {
		if ps.out[d].failed {
			return ps.skip(ctx, s, d)
		}
	}
	switch {
	case s.Kind == spec.KindIntegrate:
		return ps.integrate(ctx, s)
	case s.Kind == spec.KindPublish:
		return ps.publish(ctx, s)
	case s.ForEach != nil:
		return ps.fanOut(ctx, s)
	case s.Loop != nil:
		return ps.loop(ctx, s)
	}
	in, err := ps.input(ctx, s, nil)
	if err != nil || in == "" {
		return err
	}
	if _, err := ps.ensure(ctx, s, -1, "", 1, in, ""); err != nil {
		return err
	}
	// A loop's repeated step may have later rounds: its output is its
	// latest round's, once that is done.
	r := ps.latestRun(s.ID)
	// An optional step that failed or ended unknown did not succeed: only
	// what depends on it is skipped, and no person is waited for.
	if r != nil && (r.State == store.RunFailed || r.State == store.RunUnknown) && s.Optional {
		ps.out[s.ID] = &output{failed: true}
		return nil
	}
	if r == nil || !ps.settled(s, r) {
		return nil
	}
	if s.Kind == spec.KindGate {
		if v, err := spec.ParseVerdict([]byte(r.Summary)); err != nil || !v.Approved {
			ps.failed = fmt.Sprintf("step %s: the gate was not approved (job %s)", s.ID, r.JobID)
			return nil
		}
	}
	ps.out[s.ID] = &output{commit: r.Commit, summary: r.Summary}
	return nil
}

// skip records step s skipped because dep, which it depends on, failed
// (an optional step) or was skipped itself.
func (ps *pass) skip(ctx context.Context, s *spec.Step, dep string) error {
	ps.out[s.ID] = &output{failed: true}
	key := runKey(s.ID, -1, 1)
	if r := ps.runs[key]; r != nil && r.State == store.RunSkipped {
		return nil
	}
	now := ps.e.cfg.Now()
	r := &store.PipelineRun{PipelineID: ps.p.ID, Key: key, Step: s.ID, Round: 1, Item: -1, State: store.RunSkipped,
		Reason: fmt.Sprintf("step %s did not succeed", dep), CreatedAt: now, UpdatedAt: now}
	return ps.save(ctx, r, "step_skipped", fmt.Sprintf("step %s skipped: step %s did not succeed", key, dep))
}

// gateScript is a gate step's job: it asks its question through drover's
// questions (the job waits for the answer, approved by the requester, then
// runs again and finds it) and delivers the answer as a verdict.
const gateScript = `a=$(drover tool ask "$1" --choice approve --choice reject) || exit $?
if [ "$a" = approve ]; then
	exec drover tool deliver '{"approved": true, "findings": []}'
fi
exec drover tool deliver '{"approved": false, "findings": [{"text": "rejected at the gate"}]}'`

// latestRun is a step's run of the highest round (outside a for_each).
func (ps *pass) latestRun(step string) *store.PipelineRun {
	var last *store.PipelineRun
	for _, r := range ps.runs {
		if r.Step == step && r.Item < 0 && (last == nil || r.Round > last.Round) {
			last = r
		}
	}
	return last
}

// settled says whether run r of s is done, and otherwise records why the
// pipeline cannot go on without a person or failed.
func (ps *pass) settled(s *spec.Step, r *store.PipelineRun) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	switch r.State {
	case store.RunDone, store.RunSkipped:
		return true
	case store.RunFailed:
		if s.Optional {
			return false // the step's own walk records it failed
		}
		ps.failed = fmt.Sprintf("step %s (%s) failed: %s", s.ID, r.Key, r.Reason)
	case store.RunUnknown:
		if s.Optional {
			return false // as a failure: the step's own walk records it
		}
		ps.human = fmt.Sprintf("step %s's job %s ended unknown: it may have run; check it, then drover pipeline retry %s %s", s.ID, r.JobID, ps.p.ID, s.ID)
	case store.RunNeedsHuman:
		ps.human = fmt.Sprintf("step %s: %s", s.ID, r.Reason)
	}
	return false
}

// input is the commit step s starts at: its dependencies' commits (those
// given in over, for a loop's later round), which must be one commit or
// one line of history; the pipeline's base for a step with none. "" when
// it cannot start (the pass then records why).
func (ps *pass) input(ctx context.Context, s *spec.Step, over map[string]string) (string, error) {
	var commits []string
	for _, d := range s.DependsOn {
		if c, ok := over[d]; ok {
			commits = append(commits, c)
			continue
		}
		o := ps.out[d]
		commits = append(commits, o.commit)
		commits = append(commits, o.items...)
	}
	if len(commits) == 0 {
		return ps.p.Base, nil
	}
	commits = slices.Compact(commits)
	head := commits[0]
	for _, c := range commits[1:] {
		if c == head {
			continue
		}
		if ok, err := ps.ancestor(ctx, head, c); err != nil {
			return "", err
		} else if ok {
			head = c
			continue
		}
		if ok, err := ps.ancestor(ctx, c, head); err != nil {
			return "", err
		} else if !ok {
			ps.failed = fmt.Sprintf("step %s depends on steps that left diverging commits (%s and %s): merge them with an integrate step first", s.ID, short(head), short(c))
			return "", nil
		}
	}
	return head, nil
}

func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// lookup gives the template variables of step s.
func (ps *pass) lookup(item string) func(string) string {
	return func(name string) string {
		if name == "item" {
			return item
		}
		parts := strings.Split(name, ".")
		switch {
		case len(parts) == 2 && parts[0] == "params":
			return ps.params[parts[1]]
		case len(parts) == 3 && parts[0] == "steps":
			o := ps.out[parts[1]]
			if o == nil {
				return ""
			}
			switch parts[2] {
			case "commit":
				return o.commit
			case "verdict":
				if _, err := spec.ParseVerdict([]byte(o.summary)); err == nil {
					return o.summary
				}
				return ""
			case "feedback":
				return o.summary
			}
		}
		return ""
	}
}

// ensure returns the run of s for item (-1 for none) and round, starting
// its job at input when it has none: a recorded result of the same step
// on the same inputs is replayed instead, at no cost. feedback is what the
// loop's last round delivered, for a repeated step. nil when the run could
// not start (the pass records why).
func (ps *pass) ensure(ctx context.Context, s *spec.Step, item int, itemValue string, round int, input, feedback string) (*store.PipelineRun, error) {
	return ps.start(ctx, s, item, itemValue, round, input, feedback, true)
}

// start is ensure; without submit, it only replays (nil when it cannot).
// Runs of a fan-out start at once: it guards the pass's records.
func (ps *pass) start(ctx context.Context, s *spec.Step, item int, itemValue string, round int, input, feedback string, submit bool) (*store.PipelineRun, error) {
	key := runKey(s.ID, item, round)
	ps.mu.Lock()
	r := ps.runs[key]
	ps.mu.Unlock()
	if r != nil && (r.JobID != "" || r.State != store.RunWaiting) {
		return r, nil
	}
	now := ps.e.cfg.Now()
	if r == nil {
		r = &store.PipelineRun{PipelineID: ps.p.ID, Key: key, Step: s.ID, Round: round, Item: item, ItemValue: itemValue, CreatedAt: now}
	}
	req, text := ps.request(s, itemValue, input, feedback)
	reads := ps.readOutcomes(s)
	inputs := []string{"input=" + input, "text=" + text, "feedback=" + feedback}
	for _, o := range reads {
		// The diffs a step is given follow from these.
		inputs = append(inputs, fmt.Sprintf("read:%s=%s:%s..%s", o.Step, o.State, o.from, o.Commit))
	}
	r.Input, r.Tries = input, max(r.Tries, 1)
	r.Hash = s.Hash(inputs...)
	var res store.StepResult
	err := ps.e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		if s.Fresh {
			return store.ErrNotFound // a fresh step runs its own job
		}
		var err error
		res, err = tx.StepResult(ps.p.Project, r.Hash)
		return err
	})
	switch {
	case err == nil:
		r.State, r.Replayed, r.JobID, r.Commit, r.Summary, r.UpdatedAt = store.RunDone, true, res.JobID, res.Commit, res.Summary, now
		ps.mu.Lock()
		ps.replays++
		ps.mu.Unlock()
		return r, ps.save(ctx, r, "replayed", fmt.Sprintf("step %s replayed the result of job %s (%s), at no cost", key, res.JobID, short(res.Commit)))
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("look up step %s's recorded result: %w", key, err)
	case !submit:
		return nil, nil
	}
	if len(reads) > 0 {
		files, err := ps.readFiles(ctx, reads)
		if err != nil {
			return nil, err
		}
		req.Context = append(req.Context, files...)
	}
	req.Key = fmt.Sprintf("%s%s:%s:%d", KeyPrefix, ps.p.ID, key, r.Tries)
	v, err := ps.e.core.Submit(ctx, ps.c, req)
	if isRefusal(err) {
		r.State, r.Reason, r.UpdatedAt = store.RunFailed, "its job was refused: "+err.Error(), now
		if err := ps.save(ctx, r, "failed", fmt.Sprintf("step %s could not start: %v", key, err)); err != nil {
			return nil, err
		}
		ps.settled(s, r)
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("submit step %s's job: %w", key, err)
	}
	r.JobID, r.State, r.UpdatedAt = v.ID, store.RunRunning, now
	ps.e.mu.Lock()
	ps.e.watch[v.ID] = ps.p.ID
	// The job may have ended before it was watched (a runner that was
	// waiting for it): the pass after this one reads it once.
	if ps.e.changed[ps.p.ID] == nil {
		ps.e.changed[ps.p.ID] = map[string]bool{}
	}
	ps.e.changed[ps.p.ID][v.ID] = true
	ps.e.mu.Unlock()
	ps.e.adv.Wake(ps.p.ID) // in a pass: the one after it
	return r, ps.save(ctx, r, "step_started", fmt.Sprintf("step %s started: job %s at %s", key, v.ID, short(input)))
}

// request is the job of a run of s, and the text that identifies it (its
// prompt or command, templates filled in).
func (ps *pass) request(s *spec.Step, item, input, feedback string) (apitypes.SubmitRequest, string) {
	look := ps.lookup(item)
	req := apitypes.SubmitRequest{Repo: &apitypes.SubmitRepo{Project: ps.p.Project, Base: input}}
	var text string
	switch s.Kind {
	case spec.KindExec:
		req.Agent = "exec"
		for _, a := range s.Command {
			req.Args = append(req.Args, spec.Expand(a, look))
		}
		req.Tools = ps.delivers[s.ID]
		text = strings.Join(req.Args, "\x00")
	case spec.KindGate:
		req.Agent, req.Mode, req.Tools = "exec", protocol.ModeObserve, true
		text = spec.Expand(s.Prompt, look)
		req.Args = []string{"sh", "-c", gateScript, "drover-gate", text}
	default:
		req.Agent, req.Model, req.Mode, req.Tools = s.Agent, s.Model, s.Mode, s.Tools || ps.delivers[s.ID]
		req.Account = s.Account
		text = spec.Expand(s.Prompt, look)
		if feedback != "" {
			text += "\n\nThe review of your last round found the following (JSON); address every finding:\n\n" + feedback
		}
		req.Args = []string{text}
	}
	if feedback != "" {
		req.Context = []rules.ContextUpload{{Name: "feedback.json", Data: []byte(feedback)}}
	}
	return req, text
}

// save records a run, with an event of the pipeline, at the pass's end.
func (ps *pass) save(_ context.Context, r *store.PipelineRun, kind, msg string) error {
	return ps.saveWith(nil, r, kind, msg, nil)
}

// saveWith is save that also records a done run's result (when not nil).
func (ps *pass) saveWith(_ context.Context, r *store.PipelineRun, kind, msg string, result *store.StepResult) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.runs[r.Key] = r
	ps.dirty[r.Key] = true
	if result != nil {
		ps.results = append(ps.results, *result)
	}
	ps.events = append(ps.events, store.PipelineEvent{PipelineID: ps.p.ID, At: ps.e.cfg.Now(), Kind: kind, Step: r.Key, Actor: "hub", Message: msg})
	return nil
}

// refresh brings a run up to date with its job: done when it completed
// (its result recorded for replays), failed, unknown, or running again
// after someone retried it.
func (ps *pass) refresh(ctx context.Context, r *store.PipelineRun) error {
	v, err := ps.e.core.Job(ctx, r.JobID)
	if err != nil {
		return fmt.Errorf("read step %s's job %s: %w", r.Key, r.JobID, err)
	}
	next, reason := r.State, ""
	switch v.State {
	case job.Completed:
		next = store.RunDone
	case job.Failed, job.Cancelled:
		next = store.RunFailed
		reason = fmt.Sprintf("job %s %s", v.ID, v.State)
		if v.Reason != "" {
			reason += " (" + string(v.Reason) + ")"
		}
		if n := len(v.Attempts); n > 0 && v.Attempts[n-1].Message != "" {
			reason += ": " + rules.Clip(v.Attempts[n-1].Message, 300)
		}
	case job.Unknown:
		next = store.RunUnknown
	default:
		next = store.RunRunning
	}
	if next == r.State || (r.Replayed && next == store.RunDone) || r.State == store.RunNeedsHuman {
		return nil
	}
	ps.moved = true
	r.State, r.Reason, r.UpdatedAt = next, reason, ps.e.cfg.Now()
	r.CostUSD, r.Tokens = v.Spent()
	msg := fmt.Sprintf("step %s: job %s is %s", r.Key, v.ID, v.State)
	var result *store.StepResult // recorded for replays in the run's own write
	if next == store.RunDone {
		r.Commit, r.Summary = v.Head, v.Summary
		if r.Commit == "" {
			r.Commit = r.Input
		}
		if v.Mode == protocol.ModeObserve {
			r.Commit = r.Input
		}
		msg = fmt.Sprintf("step %s done: job %s left %s, cost $%.4f, %d tokens", r.Key, v.ID, short(r.Commit), r.CostUSD, r.Tokens)
		if s := ps.byID[r.Step]; s == nil || !s.Fresh {
			result = &store.StepResult{Project: ps.p.Project, Hash: r.Hash, JobID: v.ID, Commit: r.Commit,
				Summary: r.Summary, CostUSD: r.CostUSD, Tokens: r.Tokens, CreatedAt: r.UpdatedAt}
		}
	} else if reason != "" {
		msg += ": " + reason
	}
	if next != store.RunRunning {
		ps.e.mu.Lock()
		delete(ps.e.watch, r.JobID)
		ps.e.mu.Unlock()
	} else {
		ps.e.mu.Lock()
		ps.e.watch[r.JobID] = ps.p.ID
		ps.e.mu.Unlock()
	}
	return ps.saveWith(ctx, r, "step_"+string(next), msg, result)
}

// overtime cancels the jobs of runs past their step's max_wall, or past
// their loop's: the step fails, or the loop stops for a person.
func (ps *pass) overtime(ctx context.Context) error {
	now := ps.e.cfg.Now()
	for _, r := range ps.runs {
		s := ps.byID[r.Step]
		if r.State != store.RunRunning || r.JobID == "" || s == nil || !ps.followsJob(*r) {
			continue
		}
		why := ""
		if w := s.Limits.MaxWall; w > 0 && now.Sub(r.UpdatedAt) >= w {
			why = fmt.Sprintf("ran past its max_wall of %s", w)
		}
		for _, l := range ps.pl.Steps {
			if l.Loop == nil || l.Loop.MaxWall <= 0 || (l.ID != r.Step && !slices.Contains(l.Loop.Repeat, r.Step)) {
				continue
			}
			if first := ps.runs[runKey(l.ID, -1, 1)]; first != nil && now.Sub(first.CreatedAt) >= l.Loop.MaxWall && (r.Round > 1 || r.Step == l.ID) {
				why = fmt.Sprintf("loop %s ran past its max_wall of %s", l.ID, l.Loop.MaxWall)
			}
		}
		if why == "" {
			continue
		}
		if err := ps.e.core.Cancel(ctx, ps.c, r.JobID); err != nil && !isRefusal(err) {
			return fmt.Errorf("cancel step %s's job %s: %w", r.Key, r.JobID, err)
		}
		r.State, r.Reason, r.UpdatedAt = store.RunNeedsHuman, why, now
		if err := ps.save(ctx, r, "overtime", fmt.Sprintf("step %s: %s; job %s cancelled", r.Key, why, r.JobID)); err != nil {
			return err
		}
	}
	return nil
}
