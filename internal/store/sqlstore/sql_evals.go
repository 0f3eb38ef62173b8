package sqlstore

import (
	"cmp"
	"slices"
	"strings"

	"drover/internal/store"
)

// Evals and EvalItems are the tables of evaluations (internal/eval).
var (
	Evals = Table{"evals", []string{
		"id", "requester_id", "key", "agent", "name", "params", "state", "reason", "created_at", "updated_at"}}
	EvalItems = Table{"eval_items", []string{
		"eval_id", "key", "instance_id", "repeat", "attempt", "line", "instance", "state", "agent_job", "head",
		"graded", "grade_job", "patch", "reason", "cost_usd", "tokens", "created_at", "updated_at"}}
)

var (
	evals       = newTable(Evals)
	evalItems   = newTable(EvalItems)
	putEvalItem = evalItems.upsertOn(2, "created_at")
)

func scanEval(s Scanner) (e store.Eval, err error) {
	err = s.Scan(&e.ID, &e.RequesterID, &e.Key, &e.Agent, &e.Name, &e.Params, &e.State, &e.Reason,
		TimeCol{&e.CreatedAt}, TimeCol{&e.UpdatedAt})
	return e, err
}

func (t *tx) InsertEval(e store.Eval) error {
	return t.insert(evals, "evaluation "+e.ID, []any{
		e.ID, e.RequesterID, e.Key, e.Agent, e.Name, e.Params, string(e.State), e.Reason, Millis(e.CreatedAt), Millis(e.UpdatedAt)})
}

func (t *tx) Eval(id string) (store.Eval, error) {
	return one(t, "evaluation "+id, scanEval, evals.query("WHERE id = ?"), id)
}

func (t *tx) EvalByKey(requesterID, key string) (store.Eval, error) {
	return one(t, "evaluation with key "+key+" of "+requesterID, scanEval,
		evals.query("WHERE requester_id = ? AND key = ? AND key != ''"), requesterID, key)
}

func (t *tx) UpdateEval(e store.Eval) error {
	what := "update evaluation " + e.ID
	res, err := t.exec(what, `UPDATE evals SET state = ?, reason = ?, updated_at = ? WHERE id = ?`,
		string(e.State), e.Reason, Millis(e.UpdatedAt), e.ID)
	if err != nil {
		return err
	}
	return affected(what, res)
}

func (t *tx) Evals(state store.EvalState, limit int) ([]store.Eval, error) {
	if state == "" {
		return t.EvalsOf("", limit)
	}
	return all(t, "evaluations", scanEval, evals.query("WHERE state = ? ORDER BY created_at DESC, id DESC LIMIT ?"),
		string(state), noLimit(limit))
}

func scanEvalItem(s Scanner) (i store.EvalItem, err error) {
	err = s.Scan(&i.EvalID, &i.Key, &i.InstanceID, &i.Repeat, &i.Attempt, &i.Line, &i.Instance, &i.State, &i.AgentJob,
		&i.Head, &i.Graded, &i.GradeJob, &i.Patch, &i.Reason, &i.CostUSD, &i.Tokens, TimeCol{&i.CreatedAt}, TimeCol{&i.UpdatedAt})
	return i, err
}

func (t *tx) PutEvalItem(i store.EvalItem) error {
	_, err := t.exec("put item "+i.Key+" of evaluation "+i.EvalID, putEvalItem,
		i.EvalID, i.Key, i.InstanceID, i.Repeat, i.Attempt, i.Line, i.Instance, string(i.State), i.AgentJob,
		i.Head, i.Graded, i.GradeJob, i.Patch, i.Reason, i.CostUSD, i.Tokens, Millis(i.CreatedAt), Millis(i.UpdatedAt))
	return err
}

func (t *tx) EvalItems(evalID string) ([]store.EvalItem, error) {
	return all(t, "items of evaluation "+evalID, scanEvalItem, evalItems.query("WHERE eval_id = ? ORDER BY line, key"), evalID)
}

func (t *tx) EvalOpenItems(evalID string, queued int) ([]store.EvalItem, error) {
	// Two reads, each narrowed by the (eval_id, state, line, key) index: the
	// pass that reads these runs at every change of an evaluation's jobs,
	// and reading every item (its patch too) made it cost the dataset's
	// size each time.
	what := "open items of evaluation " + evalID
	busy, err := all(t, what, scanEvalItem, evalItems.query("WHERE eval_id = ? AND state IN (?, ?) ORDER BY line, key"),
		evalID, string(store.ItemAgent), string(store.ItemGrading))
	if err != nil || queued <= 0 {
		return busy, err
	}
	next, err := all(t, what, scanEvalItem, evalItems.query("WHERE eval_id = ? AND state = ? ORDER BY line, key LIMIT ?"),
		evalID, string(store.ItemQueued), queued)
	if err != nil {
		return nil, err
	}
	out := append(busy, next...)
	slices.SortStableFunc(out, func(a, b store.EvalItem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), strings.Compare(a.Key, b.Key))
	})
	return out, nil
}

func (t *tx) EvalsOf(requesterID string, limit int) ([]store.Eval, error) {
	if requesterID == "" {
		return all(t, "evaluations", scanEval, evals.query("ORDER BY created_at DESC, id DESC LIMIT ?"), noLimit(limit))
	}
	// No index of its own: a hub holds few evaluations (each one a whole
	// dataset's run), and the rows are small.
	return all(t, "evaluations of "+requesterID, scanEval,
		evals.query("WHERE requester_id = ? ORDER BY created_at DESC, id DESC LIMIT ?"), requesterID, noLimit(limit))
}

func (t *tx) EvalTallies(evalID string) ([]store.EvalTally, error) {
	// SUM of a BIGINT is a NUMERIC on Postgres: cast back.
	return all(t, "tallies of evaluation "+evalID, func(s Scanner) (c store.EvalTally, err error) {
		err = s.Scan(&c.State, &c.Items, &c.CostUSD, &c.Tokens)
		return c, err
	}, `SELECT state, COUNT(*), COALESCE(SUM(cost_usd), 0), CAST(COALESCE(SUM(tokens), 0) AS BIGINT)
		FROM eval_items WHERE eval_id = ? GROUP BY state ORDER BY state`, evalID)
}
