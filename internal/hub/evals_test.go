package hub

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/eval"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// startRefusedEval starts, as token, an evaluation of one instance of a
// project that does not exist: the line is refused and the evaluation
// ends, a record to list without a runner.
func (th *testHub) startRefusedEval(token, dataset string) apitypes.EvalView {
	th.t.Helper()
	var v apitypes.EvalView
	req := apitypes.EvalRunRequest{Agent: "claude", Dataset: dataset, Lines: []apitypes.EvalLine{{Line: 1, InstanceID: "x-1",
		Instance: &apitypes.EvalInstance{InstanceID: "x-1", Repo: "nosuch", BaseCommit: strings.Repeat("a", 40), ProblemStatement: "fix", TestCmd: "true"}}}}
	if code, e := th.call(token, "POST", "/evals", req, &v); code != http.StatusCreated {
		th.t.Fatalf("start an evaluation: %d %+v", code, e)
	}
	return v
}

// The evaluations list keeps to what its caller may see (a user's own,
// everyone's for an admin) in the API and on the dashboard alike, and
// another user's evaluation reads as not found: its report, its page and
// its page's stream.
func TestEvalListAndPagesKeepToTheirUser(t *testing.T) {
	th := startHub(t, Config{})
	alice, bob := th.addUser("alice"), th.addUser("bob")
	a := th.startRefusedEval(alice, "alice-set.jsonl")
	b := th.startRefusedEval(bob, "bob-set.jsonl")
	list := func(token, query string) []string {
		t.Helper()
		var l apitypes.EvalList
		if code, e := th.call(token, "GET", "/evals"+query, nil, &l); code != http.StatusOK {
			t.Fatalf("list evaluations: %d %+v", code, e)
		}
		var ids []string
		for _, v := range l.Evals {
			ids = append(ids, v.ID)
			if v.Total != 1 || v.Counts["refused"] != 1 || v.Items != nil {
				t.Errorf("listed %+v: want its one refused item counted, no items", v)
			}
		}
		return ids
	}
	for _, tc := range []struct {
		who, token, query string
		want              []string
	}{
		{"alice", alice, "", []string{a.ID}},
		{"bob", bob, "", []string{b.ID}},
		{"the admin", th.admin, "", []string{b.ID, a.ID}},
		{"the admin, limit 1", th.admin, "?limit=1", []string{b.ID}},
	} {
		if got := list(tc.token, tc.query); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s's list: %v, want %v", tc.who, got, tc.want)
		}
	}
	if code, _ := th.call(bob, "GET", "/evals/"+a.ID+"/report", nil, nil); code != http.StatusNotFound {
		t.Errorf("bob reads alice's report: %d", code)
	}

	br := th.browser()
	br.signIn(bob)
	if resp, body := br.do("GET", "/evals", nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "bob-set.jsonl") ||
		strings.Contains(body, a.ID) || strings.Contains(body, "alice-set") {
		t.Errorf("bob's evaluations page: %d\n%s", resp.StatusCode, body)
	}
	if resp, body := br.do("GET", "/evals/"+b.ID, nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "x-1") {
		t.Errorf("bob's evaluation's page: %d\n%s", resp.StatusCode, body)
	}
	for _, path := range []string{"/evals/" + a.ID, "/evals/" + a.ID + "/live", "/evals/e_nope"} {
		if resp, body := br.do("GET", path, nil, nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no evaluation") ||
			strings.Contains(body, "alice-set") {
			t.Errorf("bob GET %s: %d\n%s", path, resp.StatusCode, body)
		}
	}
}

// What a pass reads of its jobs in one read (evalCore.Jobs) is what their
// whole views say of them: state, reason, exit code, head, the attempts'
// messages and what they spent; a job that does not exist reads empty.
func TestEvalJobsReadAsTheirViews(t *testing.T) {
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1})
	failed := th.submit("false")
	// A label no runner offers keeps the second job queued: offered to r1
	// once the first ended, its view and the read below could differ.
	queued, code, e := th.submitRepo(apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Labels: map[string]string{"gpu": "none"}})
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %v", code, e)
	}
	o := sr.offerFor(failed.ID)
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	wantOK(t, sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef,
		Outcome:   job.Outcome{State: job.AttemptFailed, Reason: job.ReasonExited, ExitCode: exit(3), Message: "it broke"},
		LogSHA256: sum(nil), Usage: &protocol.Usage{InputTokens: 10, OutputTokens: 20, CostUSD: 0.5}}))
	ids := []string{failed.ID, "j_nosuch", queued.ID}
	got, err := evalCore{pipelineCore{th.h}}.Jobs(t.Context(), ids)
	if err != nil || len(got) != 3 {
		t.Fatalf("%d jobs read, %v", len(got), err)
	}
	if got[1].ID != "" {
		t.Errorf("a job that does not exist read as %+v", got[1])
	}
	for _, i := range []int{0, 2} {
		want, err := pipelineCore{th.h}.Job(t.Context(), ids[i])
		if err != nil {
			t.Fatal(err)
		}
		seen := func(v apitypes.JobView) string {
			cost, tokens := v.Spent()
			msg := ""
			if n := len(v.Attempts); n > 0 {
				msg = v.Attempts[n-1].Message
			}
			code := -1
			if v.ExitCode != nil {
				code = *v.ExitCode
			}
			return fmt.Sprintf("%s %s %s %d %q %d %.2f %d", v.ID, v.State, v.Reason, code, v.Head, len(v.Attempts), cost, tokens) + " " + msg
		}
		if g, w := seen(got[i]), seen(want); g != w {
			t.Errorf("job %d read as %s, its view says %s", i, g, w)
		}
	}
	if got[0].State != job.Failed || got[0].Attempts[0].Message != "it broke" {
		t.Errorf("the failed job read as %+v", got[0])
	}
	// A hand-off's view of the job its finish ended (evalEnding.Job) is
	// built from the finished attempt when that is the job's first, and
	// read when an attempt came before it.
	err = th.h.store.Read(t.Context(), func(tx store.Tx) error {
		j, err := tx.Job(failed.ID)
		if err != nil {
			return err
		}
		atts, err := tx.Attempts(j.ID)
		if err != nil || len(atts) != 1 {
			return fmt.Errorf("%d attempts, %v", len(atts), err)
		}
		first := atts[0]
		first.Message = "as the write holds it"
		v, err := evalEnding{th.h, tx, j, first}.Job()
		if err != nil || len(v.Attempts) != 1 || v.Attempts[0].Message != first.Message || v.State != job.Failed {
			t.Errorf("the hand-off's view from its first attempt: %+v, %v", v, err)
		}
		if cost, tokens := v.Spent(); cost != 0.5 || tokens != 30 {
			t.Errorf("the hand-off's view spent %.2f USD, %d tokens; want 0.50, 30", cost, tokens)
		}
		later := atts[0]
		later.Epoch, later.Message = 2, "a later attempt"
		v, err = evalEnding{th.h, tx, j, later}.Job()
		if err != nil || len(v.Attempts) != 1 || v.Attempts[0].Message != "it broke" {
			t.Errorf("the hand-off's view after a later attempt was not read: %+v, %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// jobItemStore notes, of each committed write, the evaluation jobs it
// inserted, how many of them the same write did not record in their
// items, and how many went in with a finish (an attempt ended).
type jobItemStore struct {
	store.Store
	mu                      sync.Mutex
	jobs, alone, withFinish int
}

type jobItemTx struct {
	store.Tx
	inserted []string
	items    map[string]bool
	finish   bool
}

func (t *jobItemTx) UpdateAttempt(a store.Attempt) error {
	t.finish = t.finish || a.FinishedAt != nil
	return t.Tx.UpdateAttempt(a)
}

func (s *jobItemStore) Write(ctx context.Context, fn func(store.Tx) error) error {
	var w *jobItemTx
	err := s.Store.Write(ctx, func(tx store.Tx) error {
		w = &jobItemTx{Tx: tx, items: map[string]bool{}}
		return fn(w)
	})
	if err == nil {
		s.mu.Lock()
		for _, id := range w.inserted {
			s.jobs++
			if !w.items[id] {
				s.alone++
			}
			if w.finish {
				s.withFinish++
			}
		}
		s.mu.Unlock()
	}
	return err
}

func (t *jobItemTx) InsertJob(j store.Job) error {
	if eval.OwnsKey(j.Key) {
		t.inserted = append(t.inserted, j.ID)
	}
	return t.Tx.InsertJob(j)
}

func (t *jobItemTx) PutEvalItem(it store.EvalItem) error {
	t.items[it.AgentJob], t.items[it.GradeJob] = true, true
	return t.Tx.PutEvalItem(it)
}

func (t *jobItemTx) MoveEvalItem(it store.EvalItem) error {
	t.items[it.AgentJob], t.items[it.GradeJob] = true, true
	return t.Tx.MoveEvalItem(it)
}

// An evaluation's job goes in in the commit that records its item: a
// job's end is taken up by a pass of one commit, not one commit per job
// submitted and another for the items (the pass, and every job end
// waiting on it, several commits long: BenchmarkEvalOverhead). A hub
// that dies between the two has neither, and a job found by its key is
// not submitted again.
//
// And it goes in with the finish of the job before it (a hand-off,
// eval.Evals.JobEnded): an agent job that left the base as it was is
// followed by its grading job, a grading job by the next sample's agent
// job, in the commit that ends it, with no pass to wait for. Only the
// first max_parallel agent jobs are a pass's.
func TestEvalJobGoesInWithItsItem(t *testing.T) {
	t.Parallel()
	var st *jobItemStore
	pb := newPipeBenchOn(t, 2, func(s store.Store) store.Store { st = &jobItemStore{Store: s}; return st })
	const n = 4
	lines := make([]apitypes.EvalLine, n)
	for i := range lines {
		lines[i] = apitypes.EvalLine{Line: i + 1, Instance: &apitypes.EvalInstance{InstanceID: fmt.Sprintf("i-%d", i),
			Repo: "bench", BaseCommit: pb.base, ProblemStatement: "fix", TestCmd: "true"}}
	}
	done := pb.fl.finished()
	v, _, err := pb.th.h.evals.StartEval(t.Context(), pb.c, apitypes.EvalRunRequest{Agent: "exec", Exec: "true", MaxParallel: 2, Lines: lines})
	if err != nil {
		t.Fatal(err)
	}
	pb.waitEval(t, v.ID, done+2*n)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.jobs != 2*n || st.alone != 0 {
		t.Fatalf("%d evaluation jobs inserted, %d of them in a write that did not record their item; want %d, none", st.jobs, st.alone, 2*n)
	}
	if st.withFinish != 2*n-2 {
		t.Fatalf("%d of %d evaluation jobs inserted with the finish of the job before them; want all but the first 2", st.withFinish, st.jobs)
	}
}
