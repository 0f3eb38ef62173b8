package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/attemptgroup/request"
	"drover/internal/eval/dataset"
	"drover/internal/hub/call"
	"drover/internal/ids"
	"drover/internal/rules"
	"drover/internal/store"
)

// Params are an evaluation's settings, kept with it as JSON.
type Params struct {
	Exec        string  `json:"exec,omitempty"`
	Model       string  `json:"model,omitempty"`
	Attempts    int     `json:"attempts"`
	Repeats     int     `json:"repeats"`
	MaxParallel int     `json:"max_parallel"`
	MaxCostUSD  float64 `json:"max_cost_usd,omitempty"`
	GradeWallS  int     `json:"grade_wall_s"`
	Dataset     string  `json:"dataset,omitempty"`
}

// Limits and defaults of a run's settings.
const (
	MaxAttempts        = 16
	MaxRepeats         = 20
	DefaultMaxParallel = 8
	MaxParallel        = 500
	DefaultGradeWallS  = 600
	MaxGradeWallS      = 6 * 3600
	// MaxPatch is the largest model_patch kept; a larger one is graded
	// but not kept.
	MaxPatch = 4 << 20
)

// params checks a request's settings and fills in the defaults.
func params(req apitypes.EvalRunRequest) (Params, error) {
	p := Params{Exec: req.Exec, Model: req.Model, Attempts: req.Attempts, Repeats: req.Repeats,
		MaxParallel: req.MaxParallel, MaxCostUSD: req.MaxCostUSD, GradeWallS: req.GradeWallS, Dataset: req.Dataset}
	p.Attempts, p.Repeats = max(p.Attempts, 1), max(p.Repeats, 1)
	if p.MaxParallel == 0 {
		p.MaxParallel = DefaultMaxParallel
	}
	if p.GradeWallS == 0 {
		p.GradeWallS = DefaultGradeWallS
	}
	switch {
	case req.Agent == "" || rules.CheckPlainText("agent", req.Agent, false) != nil || len(req.Agent) > 200:
		return p, call.BadRequest("an evaluation needs an agent (--agent)")
	case req.Agent == "exec" && strings.TrimSpace(req.Exec) == "":
		return p, call.BadRequest("an exec agent needs its command (--exec CMD, run with the problem statement as $1)")
	case req.Agent != "exec" && req.Exec != "":
		return p, call.BadRequest("--exec is the command of an exec agent (--agent exec)")
	case req.Agent != "exec" && agentErr(req.Agent) != nil:
		return p, agentErr(req.Agent)
	case p.Attempts > MaxAttempts || p.Repeats > MaxRepeats:
		return p, call.BadRequest("attempts 1-%d and repeats 1-%d", MaxAttempts, MaxRepeats)
	case p.MaxParallel < 1 || p.MaxParallel > MaxParallel:
		return p, call.BadRequest("max parallel 1-%d", MaxParallel)
	case p.MaxCostUSD < 0:
		return p, call.BadRequest("max cost must not be negative")
	case p.GradeWallS < 1 || p.GradeWallS > MaxGradeWallS:
		return p, call.BadRequest("grading wall limit 1-%d seconds", MaxGradeWallS)
	case len(req.Lines) == 0 || len(req.Lines) > dataset.MaxInstances:
		return p, call.BadRequest("a dataset of 1-%d lines", dataset.MaxInstances)
	}
	if req.Key != "" {
		if err := rules.CheckText("key", req.Key, 200); err != nil {
			return p, call.BadRequest("%v", err)
		}
	}
	for _, f := range []struct{ name, v string }{{"name", req.Name}, {"dataset", req.Dataset}} {
		if err := rules.CheckPlainText(f.name, f.v, false); err != nil || len(f.v) > 200 {
			return p, call.BadRequest("%s: plain text of up to 200 bytes", f.name)
		}
	}
	return p, nil
}

// agentErr says why an evaluation's agent other than exec is not one
// (AGENT or AGENT:ACCOUNT, taking the problem statement as its prompt).
func agentErr(agent string) error {
	if _, err := request.ParseAgent(agent); err != nil {
		return err
	}
	return nil
}

// itemKey names a sample of an instance.
func itemKey(instanceID string, repeat, attempt int) string {
	return fmt.Sprintf("%s#%d#%d", instanceID, repeat, attempt)
}

// StartEval checks a dataset line by line and starts the evaluation of
// its good instances; each bad one is kept refused, with its reason, and
// never runs. The bool says whether it started one (false: the same key's
// evaluation).
func (e *Evals) StartEval(ctx context.Context, c call.Caller, req apitypes.EvalRunRequest) (apitypes.EvalView, bool, error) {
	p, err := params(req)
	if err != nil {
		return apitypes.EvalView{}, false, err
	}
	if req.Key != "" {
		var old store.Eval
		err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
			var err error
			old, err = tx.EvalByKey(c.UserID, req.Key)
			return err
		})
		if err == nil {
			v, err := e.view(ctx, old)
			return v, false, err
		} else if !errors.Is(err, store.ErrNotFound) {
			return apitypes.EvalView{}, false, fmt.Errorf("look up evaluation key: %w", err)
		}
	}
	now := e.cfg.Now()
	ev := store.Eval{ID: ids.New("e"), RequesterID: c.UserID, Key: req.Key, Agent: req.Agent, Name: req.Name,
		State: store.EvalRunning, CreatedAt: now, UpdatedAt: now}
	if ev.Name == "" {
		ev.Name = req.Agent
		if p.Model != "" {
			ev.Name += "/" + p.Model
		}
	}
	pj, err := json.Marshal(p)
	if err != nil {
		return apitypes.EvalView{}, false, fmt.Errorf("encode evaluation settings: %w", err)
	}
	ev.Params = string(pj)
	var items []store.EvalItem
	for _, l := range dataset.Check(req.Lines) {
		if l.Refused == "" {
			// A base the project lacks, or a project c may not use,
			// refuses the instance as a submission would.
			if _, err := e.core.Source(ctx, c, l.Instance.Repo, l.Instance.BaseCommit); err != nil {
				var r *call.Refusal
				if !errors.As(err, &r) {
					return apitypes.EvalView{}, false, fmt.Errorf("check instance %s: %w", l.InstanceID, err)
				}
				l.Refused = rules.Clip(r.Msg, 500)
			}
		}
		if l.Refused != "" {
			items = append(items, store.EvalItem{EvalID: ev.ID, Key: fmt.Sprintf("line %d", l.Line), InstanceID: l.InstanceID, Line: l.Line,
				State: store.ItemRefused, Reason: l.Refused, CreatedAt: now, UpdatedAt: now})
			continue
		}
		inst, err := json.Marshal(l.Instance)
		if err != nil {
			return apitypes.EvalView{}, false, fmt.Errorf("encode instance %s: %w", l.InstanceID, err)
		}
		for r := 1; r <= p.Repeats; r++ {
			for a := 1; a <= p.Attempts; a++ {
				items = append(items, store.EvalItem{EvalID: ev.ID, Key: itemKey(l.InstanceID, r, a), InstanceID: l.InstanceID,
					Repeat: r, Attempt: a, Line: l.Line, Instance: string(inst), State: store.ItemQueued, CreatedAt: now, UpdatedAt: now})
			}
		}
	}
	started := true
	err = e.cfg.Store.Write(ctx, func(tx store.Tx) error {
		if err := tx.InsertEval(ev); errors.Is(err, store.ErrConflict) && req.Key != "" {
			old, err := tx.EvalByKey(c.UserID, req.Key)
			ev, started = old, false
			return err
		} else if err != nil {
			return err
		}
		for _, it := range items {
			if err := tx.PutEvalItem(it); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return apitypes.EvalView{}, false, fmt.Errorf("start evaluation: %w", err)
	}
	if started {
		e.log.Info("evaluation started", "eval", ev.ID, "agent", ev.Agent, "items", len(items), "requester", c.Name)
		e.wake(ev.ID)
	}
	v, err := e.view(ctx, ev)
	return v, started, err
}

// scope is the requester whose evaluations c may see: c itself, or
// everyone ("") for an admin. It is the one rule of who sees an
// evaluation; another reads as not found.
func scope(c call.Caller) string {
	if c.Admin {
		return ""
	}
	return c.UserID
}

func maySee(c call.Caller, ev store.Eval) bool {
	s := scope(c)
	return s == "" || s == ev.RequesterID
}

// load reads an evaluation c may see (scope).
func (e *Evals) load(ctx context.Context, c call.Caller, id string) (store.Eval, []store.EvalItem, error) {
	var ev store.Eval
	var items []store.EvalItem
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		if ev, err = tx.Eval(id); err != nil {
			return err
		}
		items, err = tx.EvalItems(id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) || (err == nil && !maySee(c, ev)) {
		return ev, nil, call.NotFound("no evaluation %q", id)
	} else if err != nil {
		return ev, nil, fmt.Errorf("read evaluation %s: %w", id, err)
	}
	return ev, items, nil
}

func (e *Evals) ShowEval(ctx context.Context, c call.Caller, id string) (apitypes.EvalView, error) {
	ev, items, err := e.load(ctx, c, id)
	if err != nil {
		return apitypes.EvalView{}, err
	}
	return viewOf(ev, items), nil
}

func (e *Evals) view(ctx context.Context, ev store.Eval) (apitypes.EvalView, error) {
	var items []store.EvalItem
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		items, err = tx.EvalItems(ev.ID)
		return err
	})
	if err != nil {
		return apitypes.EvalView{}, fmt.Errorf("read evaluation %s: %w", ev.ID, err)
	}
	return viewOf(ev, items), nil
}

// viewOf is an evaluation with its items (its list's summary and them).
func viewOf(ev store.Eval, items []store.EvalItem) apitypes.EvalView {
	v := summary(ev, tallies(items))
	for _, it := range items {
		v.Items = append(v.Items, apitypes.EvalItemView{InstanceID: it.InstanceID, Line: it.Line, Repeat: it.Repeat, Attempt: it.Attempt,
			State: string(it.State), Reason: it.Reason, AgentJob: it.AgentJob, GradeJob: it.GradeJob, Graded: it.Graded,
			CostUSD: it.CostUSD, Tokens: it.Tokens, PatchBytes: len(it.Patch)})
	}
	return v
}

// tallies counts items as the store's EvalTallies does.
func tallies(items []store.EvalItem) []store.EvalTally {
	at := map[store.EvalItemState]int{}
	var out []store.EvalTally
	for _, it := range items {
		i, ok := at[it.State]
		if !ok {
			i = len(out)
			at[it.State] = i
			out = append(out, store.EvalTally{State: it.State})
		}
		t := &out[i]
		t.Items++
		t.CostUSD += it.CostUSD
		t.Tokens += it.Tokens
	}
	return out
}

// summary is an evaluation without its items: the counts of its items'
// tallies.
func summary(ev store.Eval, ts []store.EvalTally) apitypes.EvalView {
	var p Params
	_ = json.Unmarshal([]byte(ev.Params), &p) // written by params
	v := apitypes.EvalView{ID: ev.ID, State: string(ev.State), Reason: ev.Reason, Agent: ev.Agent, Name: ev.Name,
		Dataset: p.Dataset, Attempts: p.Attempts, Repeats: p.Repeats, CreatedAt: ev.CreatedAt.UTC(), Counts: map[string]int{}}
	for _, t := range ts {
		v.Counts[string(t.State)] += t.Items
		v.Total += t.Items
		v.CostUSD += t.CostUSD
		v.Tokens += t.Tokens
		if t.State.Terminal() {
			v.Done += t.Items
		}
		switch t.State {
		case store.ItemResolved:
			v.Resolved += t.Items
			v.Graded += t.Items
		case store.ItemUnresolved:
			v.Graded += t.Items
		}
	}
	return v
}

// ListEvals lists the evaluations c may see (scope), newest first, at
// most limit (1-1000, default 100).
func (e *Evals) ListEvals(ctx context.Context, c call.Caller, limit int) (apitypes.EvalList, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	out := apitypes.EvalList{Evals: []apitypes.EvalView{}}
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		evs, err := tx.EvalsOf(scope(c), limit)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			ts, err := tx.EvalTallies(ev.ID)
			if err != nil {
				return err
			}
			out.Evals = append(out.Evals, summary(ev, ts))
		}
		return nil
	})
	if err != nil {
		return apitypes.EvalList{Evals: []apitypes.EvalView{}}, fmt.Errorf("list evaluations: %w", err)
	}
	return out, nil
}

// CancelEval stops an evaluation: its running jobs are cancelled and the
// items not graded are skipped.
func (e *Evals) CancelEval(ctx context.Context, c call.Caller, id string) (apitypes.EvalView, error) {
	ev, items, err := e.load(ctx, c, id)
	if err != nil {
		return apitypes.EvalView{}, err
	}
	if ev.State != store.EvalRunning {
		return viewOf(ev, items), nil
	}
	ev.State, ev.Reason, ev.UpdatedAt = store.EvalCancelled, "cancelled by "+c.Name, e.cfg.Now()
	err = e.skip(ctx, c, id, "the evaluation was "+ev.Reason, true, func(tx store.Tx) error {
		if cur, err := tx.Eval(id); err != nil {
			return err
		} else if cur.State != store.EvalRunning {
			return errEnded
		}
		return tx.UpdateEval(ev)
	})
	// A pass under way may record a sample it started after that write:
	// the next pass, which finds the evaluation cancelled, stops it.
	e.wake(id)
	if err != nil && !errors.Is(err, errEnded) {
		return apitypes.EvalView{}, fmt.Errorf("cancel evaluation %s: %w", id, err)
	}
	return e.ShowEval(ctx, c, id)
}

// errEnded: an evaluation ended before the write that would have changed it.
var errEnded = errors.New("the evaluation has ended")
