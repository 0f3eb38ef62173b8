package sqlstore

import (
	"fmt"

	"drover/internal/store"
)

func (t *tx) EvalItem(evalID, key string) (store.EvalItem, error) {
	return one(t, "item "+key+" of evaluation "+evalID, scanEvalItem, evalItems.query("WHERE eval_id = ? AND key = ?"), evalID, key)
}

func (t *tx) EvalRunning(evalID string, queued int) (int, []store.EvalItem, error) {
	// Both narrowed by the (eval_id, state, line, key) index; the count
	// reads no row.
	what := "running items of evaluation " + evalID
	var n int
	if err := t.queryRow(`SELECT COUNT(*) FROM eval_items WHERE eval_id = ? AND state IN (?, ?)`,
		evalID, string(store.ItemAgent), string(store.ItemGrading)).Scan(&n); err != nil {
		t.retryable(err)
		return 0, nil, fmt.Errorf("%s: %w", what, t.d.Err(err))
	}
	if queued <= 0 {
		return n, nil, nil
	}
	next, err := all(t, what, scanEvalItem, evalItems.query("WHERE eval_id = ? AND state = ? ORDER BY line, key LIMIT ?"),
		evalID, string(store.ItemQueued), queued)
	return n, next, err
}

func (t *tx) MoveEvalItem(i store.EvalItem) error {
	// A narrow update: the upsert of the whole row (PutEvalItem) bound and
	// wrote the instance too, twice in a hand-off that starts a sample.
	what := "move item " + i.Key + " of evaluation " + i.EvalID
	res, err := t.exec(what, `UPDATE eval_items SET state = ?, agent_job = ?, head = ?, graded = ?, grade_job = ?, patch = ?,
		reason = ?, cost_usd = ?, tokens = ?, updated_at = ? WHERE eval_id = ? AND key = ?`,
		string(i.State), i.AgentJob, i.Head, i.Graded, i.GradeJob, i.Patch, i.Reason, i.CostUSD, i.Tokens, Millis(i.UpdatedAt),
		i.EvalID, i.Key)
	if err != nil {
		return err
	}
	return affected(what, res)
}
