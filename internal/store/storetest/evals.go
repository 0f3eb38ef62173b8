package storetest

import (
	"testing"

	"drover/internal/store"
)

// evalRun has every field set; created is its CreatedAt.
func evalRun(id, requester string, state store.EvalState, created int64) store.Eval {
	return store.Eval{ID: id, RequesterID: requester, Key: "key-" + id, Agent: "native:acct", Name: "ünïcode-model",
		Params: `{"attempts":2}`, State: state, Reason: "why", CreatedAt: at(created), UpdatedAt: at(created + 1)}
}

// evalItem has every field set; created is its CreatedAt.
func evalItem(evalID, key string, line int, created int64) store.EvalItem {
	return store.EvalItem{EvalID: evalID, Key: key, InstanceID: "inst-" + key, Repeat: 2, Attempt: 3, Line: line,
		Instance: `{"instance_id":"x"}`, State: store.ItemGrading, AgentJob: "j-1", Head: "3333333333333333333333333333333333333333",
		Graded: "4444444444444444444444444444444444444444", GradeJob: "j-2", Patch: "diff --git a/ü b/ü\n", Reason: "r",
		CostUSD: 0.25, Tokens: 1 << 40, CreatedAt: at(created), UpdatedAt: at(created + 1)}
}

func testEvals(t *testing.T, s store.Store) {
	seed(t, s)
	one := func(id string) store.Eval {
		return get(t, s, func(tx store.Tx) (store.Eval, error) { return tx.Eval(id) })
	}
	list := func(state store.EvalState) []store.Eval {
		return get(t, s, func(tx store.Tx) ([]store.Eval, error) { return tx.Evals(state, 0) })
	}
	readErr(t, s, "Eval of a missing id", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.Eval("e-1"); return err })
	e1, e2 := evalRun("e-1", "u-1", store.EvalRunning, 10), evalRun("e-2", "u-1", store.EvalDone, 20)
	for _, e := range []store.Eval{e1, e2} {
		mustWrite(t, s, func(tx store.Tx) error { return tx.InsertEval(e) })
	}
	equal(t, "Eval", one("e-1"), e1)
	dup := evalRun("e-3", "u-1", store.EvalRunning, 30)
	dup.Key = e1.Key
	writeErr(t, s, "InsertEval of a requester's key again", store.ErrConflict, func(tx store.Tx) error { return tx.InsertEval(dup) })
	writeErr(t, s, "InsertEval of an existing id", store.ErrConflict, func(tx store.Tx) error { return tx.InsertEval(e1) })
	equal(t, "EvalByKey", get(t, s, func(tx store.Tx) (store.Eval, error) { return tx.EvalByKey("u-1", e2.Key) }), e2)
	equal(t, "Evals", list(""), []store.Eval{e2, e1})
	equal(t, "Evals running", list(store.EvalRunning), []store.Eval{e1})

	e1.State, e1.Reason, e1.UpdatedAt = store.EvalCancelled, "cancelled by alice", at(50)
	mustWrite(t, s, func(tx store.Tx) error { return tx.UpdateEval(e1) })
	equal(t, "Eval after UpdateEval", one("e-1"), e1)
	writeErr(t, s, "UpdateEval of a missing id", store.ErrNotFound, func(tx store.Tx) error { return tx.UpdateEval(dup) })

	items := func(id string) []store.EvalItem {
		return get(t, s, func(tx store.Tx) ([]store.EvalItem, error) { return tx.EvalItems(id) })
	}
	equal(t, "EvalItems of none", items("e-1"), nil)
	a, b, c := evalItem("e-1", "b#1#1", 2, 10), evalItem("e-1", "a#1#1", 2, 11), evalItem("e-1", "z#0#0", 1, 12)
	other := evalItem("e-2", "a#1#1", 1, 10)
	for _, i := range []store.EvalItem{a, b, c, other} {
		mustWrite(t, s, func(tx store.Tx) error { return tx.PutEvalItem(i) })
	}
	equal(t, "EvalItems", items("e-1"), []store.EvalItem{c, b, a})
	moved := a
	moved.State, moved.Reason, moved.CreatedAt, moved.UpdatedAt = store.ItemResolved, "", at(99), at(99)
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutEvalItem(moved) })
	moved.CreatedAt = a.CreatedAt
	equal(t, "EvalItems after a replacement", items("e-1"), []store.EvalItem{c, b, moved})
	testEvalLists(t, s, e1, e2)
	testEvalOpenItems(t, s)
}

// testEvalLists: EvalsOf keeps to a requester and its limit; EvalTallies
// sums an evaluation's items by state. e1 and e2 are u-1's, as
// testEvals left them.
func testEvalLists(t *testing.T, s store.Store, e1, e2 store.Eval) {
	bobs := evalRun("e-4", "u-2", store.EvalRunning, 40)
	mustWrite(t, s, func(tx store.Tx) error {
		if err := tx.InsertUser(user("u-2", "bob")); err != nil {
			return err
		}
		return tx.InsertEval(bobs)
	})
	of := func(requester string, limit int) []store.Eval {
		return get(t, s, func(tx store.Tx) ([]store.Eval, error) { return tx.EvalsOf(requester, limit) })
	}
	equal(t, "EvalsOf alice", of("u-1", 0), []store.Eval{e2, e1})
	equal(t, "EvalsOf alice, limit 1", of("u-1", 1), []store.Eval{e2})
	equal(t, "EvalsOf bob", of("u-2", 0), []store.Eval{bobs})
	equal(t, "EvalsOf everyone", of("", 0), []store.Eval{bobs, e2, e1})
	equal(t, "EvalsOf everyone, limit 2", of("", 2), []store.Eval{bobs, e2})
	equal(t, "EvalsOf nobody", of("u-9", 0), []store.Eval{})

	tallies := func(id string) []store.EvalTally {
		return get(t, s, func(tx store.Tx) ([]store.EvalTally, error) { return tx.EvalTallies(id) })
	}
	// e-1: two items grading and one resolved, each 0.25 USD and 2^40 tokens.
	equal(t, "EvalTallies", tallies("e-1"), []store.EvalTally{
		{State: store.ItemGrading, Items: 2, CostUSD: 0.5, Tokens: 2 << 40},
		{State: store.ItemResolved, Items: 1, CostUSD: 0.25, Tokens: 1 << 40}})
	equal(t, "EvalTallies of one without items", tallies("e-4"), []store.EvalTally{})
}

// testEvalOpenItems: EvalOpenItems reads the items at their agent or
// grading and the first queued ones, by line then key, of one evaluation.
func testEvalOpenItems(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertEval(evalRun("e-5", "u-2", store.EvalRunning, 60)) })
	item := func(key string, line int, state store.EvalItemState) store.EvalItem {
		i := evalItem("e-5", key, line, 60)
		i.State = state
		return i
	}
	q1, q2, q3 := item("q1", 1, store.ItemQueued), item("q2", 5, store.ItemQueued), item("q3", 6, store.ItemQueued)
	ag, gr := item("ag", 4, store.ItemAgent), item("gr", 2, store.ItemGrading)
	done, skip := item("done", 3, store.ItemResolved), item("skip", 0, store.ItemSkipped)
	for _, i := range []store.EvalItem{q3, q2, q1, ag, gr, done, skip} {
		mustWrite(t, s, func(tx store.Tx) error { return tx.PutEvalItem(i) })
	}
	open := func(queued int) []store.EvalItem {
		return get(t, s, func(tx store.Tx) ([]store.EvalItem, error) { return tx.EvalOpenItems("e-5", queued) })
	}
	equal(t, "EvalOpenItems, no queued", open(0), []store.EvalItem{gr, ag})
	equal(t, "EvalOpenItems, 2 queued", open(2), []store.EvalItem{q1, gr, ag, q2})
	equal(t, "EvalOpenItems, all queued", open(10), []store.EvalItem{q1, gr, ag, q2, q3})
	equal(t, "EvalOpenItems of none", get(t, s, func(tx store.Tx) ([]store.EvalItem, error) { return tx.EvalOpenItems("e-9", 5) }), nil)

	// EvalItem reads one by key; EvalRunning counts the running ones and
	// lists the first queued.
	equal(t, "EvalItem", get(t, s, func(tx store.Tx) (store.EvalItem, error) { return tx.EvalItem("e-5", "gr") }), gr)
	readErr(t, s, "EvalItem of a missing key", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.EvalItem("e-5", "nope"); return err })
	type room struct {
		N    int
		Next []store.EvalItem
	}
	running := func(id string, queued int) room {
		return get(t, s, func(tx store.Tx) (room, error) { n, next, err := tx.EvalRunning(id, queued); return room{n, next}, err })
	}
	equal(t, "EvalRunning, no queued", running("e-5", 0), room{2, nil})
	equal(t, "EvalRunning, 2 queued", running("e-5", 2), room{2, []store.EvalItem{q1, q2}})
	equal(t, "EvalRunning of none", running("e-9", 1), room{0, nil})

	// MoveEvalItem writes an item's progress and keeps the rest.
	moved := q1
	moved.State, moved.AgentJob, moved.Head, moved.Graded, moved.GradeJob = store.ItemUnresolved, "j-a", "h1", "h2", "j-g"
	moved.Patch, moved.Reason, moved.CostUSD, moved.Tokens = "diff", "tests failed", 1.5, 3<<40
	moved.UpdatedAt = at(70)
	kept := moved
	moved.Instance, moved.Line, moved.Repeat, moved.Attempt, moved.InstanceID = `{"changed":true}`, 99, 7, 9, "other"
	moved.CreatedAt = at(80)
	mustWrite(t, s, func(tx store.Tx) error { return tx.MoveEvalItem(moved) })
	equal(t, "EvalItem after MoveEvalItem", get(t, s, func(tx store.Tx) (store.EvalItem, error) { return tx.EvalItem("e-5", "q1") }), kept)
	missing := moved
	missing.Key = "nope"
	writeErr(t, s, "MoveEvalItem of a missing key", store.ErrNotFound, func(tx store.Tx) error { return tx.MoveEvalItem(missing) })
}
