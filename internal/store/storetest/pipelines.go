package storetest

import (
	"errors"
	"fmt"
	"testing"

	"drover/internal/store"
)

// pipeline has every field set; created is its CreatedAt.
func pipeline(id, requester, project string, state store.PipelineState, created int64) store.Pipeline {
	return store.Pipeline{
		ID: id, Name: "review-loop", File: ".drover/review.yaml", Project: project,
		Base: "1111111111111111111111111111111111111111", RequesterID: requester, Key: "key-" + id,
		Spec: `{"name":"review-loop","steps":[{"id":"fix"}]}`, Params: `{"issue":"ünïcode"}`, Staged: true,
		State: state, Reason: "max_rounds", Result: "2222222222222222222222222222222222222222",
		CreatedAt: at(created), UpdatedAt: at(created + 1),
	}
}

// pipelineRun has every field set; created is its CreatedAt.
func pipelineRun(pipelineID, key, jobID string, created int64) store.PipelineRun {
	return store.PipelineRun{
		PipelineID: pipelineID, Key: key, Step: "fix", Round: 2, Item: 3, ItemValue: "src/ünïcode.go",
		Hash: "hash-" + key, Input: "1111111111111111111111111111111111111111", JobID: jobID, Tries: 2,
		State: store.RunDone, Replayed: false, Commit: "3333333333333333333333333333333333333333",
		Summary: `{"verdict":"pass"}`, Reason: "merged", CostUSD: 0.125, Tokens: 1 << 40,
		CreatedAt: at(created), UpdatedAt: at(created + 1),
	}
}

func testPipelines(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertUser(user("u-2", "bob")) })
	one := func(id string) store.Pipeline {
		return get(t, s, func(tx store.Tx) (store.Pipeline, error) { return tx.Pipeline(id) })
	}
	list := func(f store.PipelineFilter) []store.Pipeline {
		return get(t, s, func(tx store.Tx) ([]store.Pipeline, error) { return tx.Pipelines(f) })
	}
	equal(t, "Pipelines of none", list(store.PipelineFilter{}), nil)
	readErr(t, s, "Pipeline of a missing id", store.ErrNotFound, func(tx store.Tx) error {
		_, err := tx.Pipeline("p-1")
		return err
	})

	p1 := pipeline("p-1", "u-1", "web", store.PipelineRunning, 10)
	p2 := pipeline("p-2", "u-2", "web", store.PipelineDone, 20)
	p3 := pipeline("p-3", "u-1", "api", store.PipelineRunning, 20) // p-2's time: the id breaks the tie
	p4 := pipeline("p-4", "u-1", "web", store.PipelineNeedsHuman, 30)
	p4.Key, p4.Staged = "", false
	for _, p := range []store.Pipeline{p2, p4, p1, p3} {
		mustWrite(t, s, func(tx store.Tx) error { return tx.InsertPipeline(p) })
	}
	equal(t, "Pipeline", one("p-1"), p1)
	equal(t, "Pipeline without key nor staging", one("p-4"), p4)

	dup := pipeline("p-1", "u-2", "other", store.PipelineFailed, 99)
	dup.Key = "fresh"
	writeErr(t, s, "InsertPipeline of an existing id", store.ErrConflict, func(tx store.Tx) error { return tx.InsertPipeline(dup) })
	sameKey := pipeline("p-5", "u-1", "web", store.PipelineRunning, 40)
	sameKey.Key = p1.Key
	writeErr(t, s, "InsertPipeline of a requester's key again", store.ErrConflict, func(tx store.Tx) error {
		return tx.InsertPipeline(sameKey)
	})
	equal(t, "Pipeline after the refused inserts", one("p-1"), p1)

	// A key is unique per requester, and only when set.
	p6 := pipeline("p-6", "u-2", "web", store.PipelineRunning, 5)
	p6.Key = p1.Key
	p7 := pipeline("p-7", "u-1", "web", store.PipelineRunning, 6)
	p7.Key = ""
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertPipeline(p6) })
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertPipeline(p7) })
	byKey := func(requester, key string) (store.Pipeline, error) {
		var p store.Pipeline
		err := s.Read(ctx(t), func(tx store.Tx) (err error) { p, err = tx.PipelineByKey(requester, key); return err })
		return p, err
	}
	for _, tc := range []struct {
		requester, key string
		want           store.Pipeline
		err            error
	}{
		{"u-1", p1.Key, p1, nil},
		{"u-2", p1.Key, p6, nil},
		{"u-1", p2.Key, store.Pipeline{}, store.ErrNotFound}, // another requester's
		{"u-1", "", store.Pipeline{}, store.ErrNotFound},     // no key is no key
		{"u-1", "nope", store.Pipeline{}, store.ErrNotFound},
	} {
		what := fmt.Sprintf("PipelineByKey(%s, %q)", tc.requester, tc.key)
		got, err := byKey(tc.requester, tc.key)
		wantErr(t, what, err, tc.err)
		if tc.err == nil {
			equal(t, what, got, tc.want)
		}
	}

	// UpdatePipeline writes State, Reason, Result and UpdatedAt only.
	changed := store.Pipeline{ID: "p-1", Name: "x", File: "x", Project: "x", Base: "x", RequesterID: "u-2", Key: "x",
		Spec: "{}", Params: "{}", State: store.PipelineFailed, Reason: "step fix failed", Result: "",
		CreatedAt: at(500), UpdatedAt: at(600)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.UpdatePipeline(changed) })
	want := p1
	want.State, want.Reason, want.Result, want.UpdatedAt = changed.State, changed.Reason, changed.Result, changed.UpdatedAt
	equal(t, "Pipeline updated", one("p-1"), want)
	p1 = want
	writeErr(t, s, "UpdatePipeline of a missing id", store.ErrNotFound, func(tx store.Tx) error {
		return tx.UpdatePipeline(pipeline("p-9", "u-1", "web", store.PipelineDone, 0))
	})

	all := []store.Pipeline{p4, p3, p2, p1, p7, p6}
	for _, tc := range []struct {
		name string
		f    store.PipelineFilter
		want []store.Pipeline
	}{
		{"all, newest first", store.PipelineFilter{}, all},
		{"limited", store.PipelineFilter{Limit: 3}, all[:3]},
		{"by requester", store.PipelineFilter{RequesterID: "u-1"}, []store.Pipeline{p4, p3, p1, p7}},
		{"by project", store.PipelineFilter{Project: "api"}, []store.Pipeline{p3}},
		{"by state", store.PipelineFilter{State: store.PipelineRunning}, []store.Pipeline{p3, p7, p6}},
		{"by all three, limited", store.PipelineFilter{RequesterID: "u-1", Project: "web", State: store.PipelineRunning, Limit: 5},
			[]store.Pipeline{p7}},
		{"none", store.PipelineFilter{Project: "nope"}, nil},
	} {
		equal(t, "Pipelines "+tc.name, list(tc.f), tc.want)
	}
}

func testPipelineRuns(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertPipeline(pipeline("p-1", "u-1", "web", store.PipelineRunning, 0)),
			tx.InsertPipeline(pipeline("p-2", "u-1", "web", store.PipelineRunning, 0)))
	})
	runs := func(pipelineID string) []store.PipelineRun {
		return get(t, s, func(tx store.Tx) ([]store.PipelineRun, error) { return tx.PipelineRuns(pipelineID) })
	}
	byJob := func(jobID string) (store.PipelineRun, error) {
		var r store.PipelineRun
		err := s.Read(ctx(t), func(tx store.Tx) (err error) { r, err = tx.PipelineRunByJob(jobID); return err })
		return r, err
	}
	equal(t, "PipelineRuns of none", runs("p-1"), nil)

	// Listed by CreatedAt, then key; another pipeline's apart.
	fix1 := pipelineRun("p-1", "fix#1", "j-1", 10)
	review := pipelineRun("p-1", "review#1", "", 20)
	review.State, review.Item, review.ItemValue, review.CostUSD, review.Tokens = store.RunWaiting, -1, "", 0, 0
	each := pipelineRun("p-1", "each[0]#1", "j-3", 20)
	other := pipelineRun("p-2", "fix#1", "j-4", 5)
	for _, r := range []store.PipelineRun{review, other, each, fix1} {
		mustWrite(t, s, func(tx store.Tx) error { return tx.PutPipelineRun(r) })
	}
	equal(t, "PipelineRuns", runs("p-1"), []store.PipelineRun{fix1, each, review})
	equal(t, "PipelineRuns of the other", runs("p-2"), []store.PipelineRun{other})

	// Put again: replaced, its CreatedAt kept.
	retried := pipelineRun("p-1", "fix#1", "j-2", 90)
	retried.Tries, retried.State, retried.Replayed, retried.Commit, retried.CostUSD = 3, store.RunRunning, true, "", 1.5
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutPipelineRun(retried) })
	retried.CreatedAt = fix1.CreatedAt
	equal(t, "PipelineRuns after a replacement", runs("p-1"), []store.PipelineRun{retried, each, review})

	// A replay names the job of the result it replays: not that job's run.
	for _, r := range []store.PipelineRun{pipelineRun("p-2", "each[0]#1", "j-3", 50), pipelineRun("p-2", "fix#2", "j-1", 60)} {
		r.Replayed = true
		mustWrite(t, s, func(tx store.Tx) error { return tx.PutPipelineRun(r) })
	}
	for _, tc := range []struct {
		jobID string
		want  store.PipelineRun
		err   error
	}{
		{"j-3", each, nil},
		{"j-4", other, nil},
		{"j-1", store.PipelineRun{}, store.ErrNotFound}, // its run was retried as j-2; only a replay names it
		{"", store.PipelineRun{}, store.ErrNotFound},
		{"j-9", store.PipelineRun{}, store.ErrNotFound},
	} {
		what := fmt.Sprintf("PipelineRunByJob(%q)", tc.jobID)
		got, err := byJob(tc.jobID)
		wantErr(t, what, err, tc.err)
		if tc.err == nil {
			equal(t, what, got, tc.want)
		}
	}
}

func testStepResults(t *testing.T, s store.Store) {
	one := func(project, hash string) store.StepResult {
		return get(t, s, func(tx store.Tx) (store.StepResult, error) { return tx.StepResult(project, hash) })
	}
	readErr(t, s, "StepResult of none", store.ErrNotFound, func(tx store.Tx) error {
		_, err := tx.StepResult("web", "h-1")
		return err
	})
	first := store.StepResult{Project: "web", Hash: "h-1", JobID: "j-1", Commit: "3333333333333333333333333333333333333333",
		Summary: `{"verdict":"pass"}`, CostUSD: 0.75, Tokens: 1 << 40, CreatedAt: at(1)}
	api := first
	api.Project, api.JobID, api.CostUSD = "api", "", 0
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutStepResult(first) })
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutStepResult(api) })
	// A second result of the same step is a no-op, not an error.
	second := store.StepResult{Project: "web", Hash: "h-1", JobID: "j-2", Commit: "4444", Summary: "later",
		CostUSD: 2, Tokens: 9, CreatedAt: at(2)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutStepResult(second) })
	equal(t, "StepResult: the first stays", one("web", "h-1"), first)
	equal(t, "StepResult of another project", one("api", "h-1"), api)
	readErr(t, s, "StepResult of another hash", store.ErrNotFound, func(tx store.Tx) error {
		_, err := tx.StepResult("web", "h-2")
		return err
	})
}

func testPipelineEvents(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertPipeline(pipeline("p-1", "u-1", "web", store.PipelineRunning, 0)),
			tx.InsertPipeline(pipeline("p-2", "u-1", "web", store.PipelineRunning, 0)))
	})
	// Events of two pipelines interleaved.
	want := addNumbered(t, s, "AddPipelineEvent", []string{"p-1", "p-2", "p-1", "p-1", "p-2"},
		func(tx store.Tx, i int, id string) (e store.PipelineEvent, err error) {
			e = store.PipelineEvent{PipelineID: id, At: at(int64(i)), Kind: fmt.Sprintf("kind-%d", i),
				Step: fmt.Sprintf("fix#%d", i), Actor: "u-1", Message: "msg ünïcode " + id}
			e.Seq, err = tx.AddPipelineEvent(e)
			return e, err
		}, func(e store.PipelineEvent) int64 { return e.Seq })
	events := func(id string, afterSeq int64, limit int) []store.PipelineEvent {
		return get(t, s, func(tx store.Tx) ([]store.PipelineEvent, error) { return tx.PipelineEvents(id, afterSeq, limit) })
	}
	equal(t, "PipelineEvents(p-1, 0, 0)", events("p-1", 0, 0), want)
	equal(t, "PipelineEvents(p-1, 0, 2)", events("p-1", 0, 2), want[:2])
	equal(t, "PipelineEvents(p-1, after first, 1)", events("p-1", want[0].Seq, 1), want[1:2])
	equal(t, "PipelineEvents(p-1, after first)", events("p-1", want[0].Seq, 0), want[1:])
	equal(t, "PipelineEvents(p-1, after last)", events("p-1", want[2].Seq, 10), nil)
	equal(t, "PipelineEvents(missing pipeline)", events("p-9", 0, 0), nil)
}
