package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// Questions, answers, deliveries and restarts, driven through the gateway
// by a scripted runner and through the HTTP API as people.

// reopen closes the hub and opens it again on the same data directory, as a
// restart of the hub process does. Runners must dial again.
func (th *testHub) reopen() {
	th.t.Helper()
	th.srv.CloseClientConnections()
	th.srv.Close()
	if err := th.h.Close(); err != nil {
		th.t.Fatal(err)
	}
	h, err := Open(context.Background(), th.cfg)
	if err != nil {
		th.t.Fatal(err)
	}
	th.h, th.srv = h, httptest.NewServer(h.Handler())
}

// submitTools submits, as the admin, an exec job whose agent has the tools.
func (th *testHub) submitTools(args ...string) apitypes.JobView {
	th.t.Helper()
	var v apitypes.JobView
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: args, Tools: true}, &v); code != http.StatusCreated {
		th.t.Fatalf("submit: %d %v", code, e)
	}
	return v
}

// finishAs finishes an attempt that sent no output.
func finishAs(sr *scriptRunner, ref protocol.AttemptRef, st job.AttemptState, session string) protocol.Reply {
	sr.t.Helper()
	return sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: ref, Session: session,
		Outcome: job.Outcome{State: st, Reason: job.ReasonExited, ExitCode: exit(0)}, LogSHA256: sum(nil)})
}

// askAndFinish accepts an offer, asks and finishes the attempt as asked,
// as a runner does when its agent called the ask tool. It returns the
// question's id.
func askAndFinish(t *testing.T, sr *scriptRunner, o protocol.Offer, question string, choices []string, session string) string {
	t.Helper()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	r := sr.request(protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: question, Choices: choices})
	wantOK(t, r)
	var ack protocol.AskAck
	if err := json.Unmarshal(r.Body, &ack); err != nil || !strings.HasPrefix(ack.QuestionID, "q-") {
		t.Fatalf("ask reply %s: %v", r.Body, err)
	}
	wantOK(t, finishAs(sr, o.AttemptRef, job.AttemptAsked, session))
	return ack.QuestionID
}

func contextOf(t *testing.T, sr *scriptRunner, ref protocol.AttemptRef) protocol.JobContext {
	t.Helper()
	r := sr.request(protocol.TypeContext, protocol.GetContext{AttemptRef: ref})
	wantOK(t, r)
	var jc protocol.JobContext
	if err := json.Unmarshal(r.Body, &jc); err != nil {
		t.Fatal(err)
	}
	return jc
}

func (th *testHub) questions(token string) []protocol.QuestionView {
	th.t.Helper()
	var l apitypes.QuestionList
	if code, e := th.call(token, "GET", "/questions", nil, &l); code != http.StatusOK {
		th.t.Fatalf("questions: %d %+v", code, e)
	}
	return l.Questions
}

func eventKinds(th *testHub, id string) []string {
	th.t.Helper()
	var v apitypes.JobView
	if code, e := th.call(th.admin, "GET", "/jobs/"+id+"?events=1", nil, &v); code != http.StatusOK {
		th.t.Fatalf("job with events: %d %+v", code, e)
	}
	var kinds []string
	var last int64
	for _, e := range v.Events {
		if e.Seq <= last {
			th.t.Fatalf("event sequence not increasing: %+v", v.Events)
		}
		last = e.Seq
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

func TestAskWaitsWithoutASlotThenResumesAndDelivers(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1})
	a := th.submitTools("fix", "the", "bug")
	o := sr.offer()
	if !o.Spec.Tools || o.Spec.Resume != nil {
		t.Fatalf("first offer: %+v", o.Spec)
	}
	qid := askAndFinish(t, sr, o, "Which database?", []string{"sqlite", "postgres"}, "sess-1")
	v := th.job(a.ID)
	if v.State != job.Waiting || v.Attempts[0].State != job.AttemptAsked || v.Attempts[0].Session != "sess-1" ||
		len(v.Questions) != 1 || v.Questions[0].ID != qid || v.Questions[0].Answer != nil || v.Questions[0].Attempt != 1 {
		t.Fatalf("waiting job: %+v", v)
	}

	// No slot is held while it waits: another job runs on the one slot.
	b := th.submit("true")
	ob := sr.offer()
	if ob.Job != b.ID {
		t.Fatalf("offer while waiting went to %s", ob.Job)
	}
	runToEnd(t, sr, ob, "ok\n", 0)

	qs := th.questions(th.admin)
	if len(qs) != 1 || qs[0].ID != qid || qs[0].Job != a.ID || qs[0].Requester != "admin" || len(qs[0].Choices) != 2 {
		t.Fatalf("questions: %+v", qs)
	}

	// The requester's answer is approved at once and requeues the job,
	// preferably on the runner that asked, resuming its session.
	if code, e := th.call(th.admin, "POST", "/jobs/"+a.ID+"/answer", apitypes.AnswerRequest{Choice: 2}, &v); code != http.StatusOK {
		t.Fatalf("answer: %d %+v", code, e)
	}
	if v.State != job.Queued && v.State != job.Offered {
		t.Fatalf("answered job is %s", v.State)
	}
	o2 := sr.offer()
	r := o2.Spec.Resume
	if o2.Job != a.ID || o2.Epoch != 2 || r == nil || r.Session != "sess-1" || !r.SameRunner || r.Attempt != 1 ||
		len(r.History) != 1 || r.History[0].ID != qid || r.History[0].Answer == nil {
		t.Fatalf("resumed offer: %+v resume %+v", o2, r)
	}
	if ans := r.History[0].Answer; ans.Text != "postgres" || ans.Choice != 2 || !ans.Approved || ans.By != "admin" {
		t.Fatalf("history answer: %+v", ans)
	}
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o2.AttemptRef}))

	jc := contextOf(t, sr, o2.AttemptRef)
	if jc.Job != a.ID || jc.Attempt != 2 || jc.Prompt != "fix the bug" || len(jc.Questions) != 1 ||
		jc.Questions[0].Answer == nil || jc.Questions[0].Answer.Text != "postgres" ||
		len(jc.Attempts) != 1 || jc.Attempts[0].State != job.AttemptAsked {
		t.Fatalf("context: %+v", jc)
	}

	deliver := protocol.Deliver{AttemptRef: o2.AttemptRef, Summary: "Moved to postgres.\nTests pass."}
	wantOK(t, sr.requestID(protocol.TypeDeliver, "dl-1", deliver))
	wantOK(t, sr.requestID(protocol.TypeDeliver, "dl-1", deliver)) // a resent id: the stored reply
	wantOK(t, finishAs(sr, o2.AttemptRef, job.AttemptCompleted, "sess-1"))
	v = th.job(a.ID)
	if v.State != job.Completed || v.Summary != deliver.Summary || v.Attempts[1].Summary != deliver.Summary || v.Runner != "r1" {
		t.Fatalf("delivered job: %+v", v)
	}
	kinds := eventKinds(th, a.ID)
	for _, k := range []string{"asked", "answered", "delivered"} {
		if n := strings.Count(strings.Join(kinds, " "), k); n != 1 {
			t.Fatalf("%d %s events: %v", n, k, kinds)
		}
	}
	if len(th.questions(th.admin)) != 0 {
		t.Fatal("an answered question still waits on the requester")
	}
}

func TestAnotherUsersAnswerWaitsForTheRequester(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	bob := th.addUser("bob")
	sr, _ := th.dial(th.registerRunnerOf(bob, "r1", "admin"), protocol.Hello{})
	j := th.submitTools("task")
	qid := askAndFinish(t, sr, sr.offer(), "Go ahead?", nil, "")

	var v apitypes.JobView
	if code, e := th.call(bob, "POST", "/jobs/"+j.ID+"/answer", apitypes.AnswerRequest{Text: "yes, use sqlite"}, &v); code != http.StatusOK {
		t.Fatalf("bob's answer: %d %+v", code, e)
	}
	if ans := v.Questions[0].Answer; v.State != job.Waiting || ans == nil || ans.Approved || ans.By != "bob" {
		t.Fatalf("job after bob's answer: %+v", v)
	}
	// bob sees it (his runner ran the job) with his answer awaiting approval.
	if qs := th.questions(bob); len(qs) != 1 || !qs[0].AwaitsApproval() || qs[0].Requester != "admin" {
		t.Fatalf("bob's questions: %+v", qs)
	}
	if qs := th.questions(th.admin); len(qs) != 1 || qs[0].ID != qid || !qs[0].AwaitsApproval() {
		t.Fatalf("admin's questions: %+v", qs)
	}

	// Refused, and nothing changes: bob approving, bob answering again.
	before := th.job(j.ID)
	if code, e := th.call(bob, "POST", "/jobs/"+j.ID+"/approve", nil, nil); code != http.StatusForbidden || !strings.Contains(e.Message, "admin") {
		t.Fatalf("approval by bob: %d %+v", code, e)
	}
	if code, e := th.call(bob, "POST", "/jobs/"+j.ID+"/answer", apitypes.AnswerRequest{Text: "no"}, nil); code != http.StatusConflict {
		t.Fatalf("second answer by bob: %d %+v", code, e)
	}
	if after := th.job(j.ID); !sameJob(before, after) {
		t.Fatalf("refusals changed the job: %+v → %+v", before, after)
	}

	if code, e := th.call(th.admin, "POST", "/jobs/"+j.ID+"/approve", nil, &v); code != http.StatusOK {
		t.Fatalf("approve: %d %+v", code, e)
	}
	o := sr.offer()
	if r := o.Spec.Resume; r == nil || len(r.History) != 1 || r.History[0].Answer.Text != "yes, use sqlite" ||
		r.History[0].Answer.By != "bob" || r.History[0].Answer.ApprovedBy != "admin" {
		t.Fatalf("resume after approval: %+v", o.Spec.Resume)
	}
	if code, _ := th.call(th.admin, "POST", "/jobs/"+j.ID+"/approve", nil, nil); code != http.StatusConflict {
		t.Fatalf("approval with nothing pending: %d", code)
	}
	if kinds := eventKinds(th, j.ID); !slices.Contains(kinds, "approved") || !slices.Contains(kinds, "answered") {
		t.Fatalf("events: %v", kinds)
	}
}

// sameJob compares what a refused request must not change.
func sameJob(a, b apitypes.JobView) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestUnapprovedAnswersNeverReachTheAgent(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	bob := th.addUser("bob")
	sr, _ := th.dial(th.registerRunnerOf(bob, "r1", "admin"), protocol.Hello{})
	j := th.submitTools("task")
	askAndFinish(t, sr, sr.offer(), "Which port?", nil, "sess-1")
	if code, e := th.call(bob, "POST", "/jobs/"+j.ID+"/answer", apitypes.AnswerRequest{Text: "rm -rf / first"}, nil); code != http.StatusOK {
		t.Fatalf("bob's answer: %d %+v", code, e)
	}
	// The requester starts over instead of approving: no approval needed,
	// no session resumed, and bob's answer stays unseen.
	var v apitypes.JobView
	if code, e := th.call(th.admin, "POST", "/jobs/"+j.ID+"/restart", nil, &v); code != http.StatusOK {
		t.Fatalf("restart: %d %+v", code, e)
	}
	o := sr.offer()
	if o.Spec.Resume != nil {
		t.Fatalf("restarted job resumes: %+v", o.Spec.Resume)
	}
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	jc := contextOf(t, sr, o.AttemptRef)
	if len(jc.Questions) != 1 || jc.Questions[0].Answer != nil {
		t.Fatalf("context shows an unapproved answer: %+v", jc.Questions)
	}
	if strings.Contains(mustJSON(t, jc), "rm -rf") {
		t.Fatal("the unapproved answer reached the agent")
	}
	if v = th.job(j.ID); v.Questions[0].Answer == nil || v.Questions[0].Answer.Approved {
		t.Fatalf("people still see bob's answer, unapproved: %+v", v.Questions)
	}
	if code, _ := th.call(th.admin, "POST", "/jobs/"+j.ID+"/approve", nil, nil); code != http.StatusConflict {
		t.Fatalf("approval after a restart: %d", code)
	}
	if kinds := eventKinds(th, j.ID); !slices.Contains(kinds, "restarted") {
		t.Fatalf("events: %v", kinds)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBadToolRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	j := th.submitTools("task")
	o := sr.offer()
	other, _ := th.dial(th.registerRunner("r2"), protocol.Hello{})
	// Before the accept the attempt has no turn.
	wantErr(t, sr.request(protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "?"}), rules.ErrFenced)
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))

	stale := o.AttemptRef
	stale.Epoch = 9
	big := strings.Repeat("x", rules.MaxQuestion+1)
	many := make([]string, rules.MaxChoices+1)
	for i := range many {
		many[i] = "c"
	}
	tests := []struct {
		name string
		c    *scriptRunner
		typ  string
		body any
		code string
	}{
		{"ask under a stale epoch", sr, protocol.TypeAsk, protocol.Ask{AttemptRef: stale, Question: "?"}, rules.ErrFenced},
		{"ask from another runner", other, protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "?"}, rules.ErrFenced},
		{"deliver under a stale epoch", sr, protocol.TypeDeliver, protocol.Deliver{AttemptRef: stale, Summary: "s"}, rules.ErrFenced},
		{"context of another runner's attempt", other, protocol.TypeContext, protocol.GetContext{AttemptRef: o.AttemptRef}, rules.ErrFenced},
		{"question too long", sr, protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: big}, rules.ErrTooLarge},
		{"too many choices", sr, protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "?", Choices: many}, rules.ErrTooLarge},
		{"choice too long", sr, protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "?", Choices: []string{strings.Repeat("c", rules.MaxChoice+1)}}, rules.ErrTooLarge},
		{"blank question", sr, protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: " \n"}, rules.ErrBadRequest},
		{"control character", sr, protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "a\x1b[2J"}, rules.ErrBadRequest},
		{"C1 control character", sr, protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "a\u009b2J"}, rules.ErrBadRequest},
		{"lone CR", sr, protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "safe?\rrm -rf"}, rules.ErrBadRequest},
		{"choice over two lines", sr, protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "?", Choices: []string{"a\n2. b"}}, rules.ErrBadRequest},
		{"choice with ESC", sr, protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "?", Choices: []string{"a\x1b[8m"}}, rules.ErrBadRequest},
		{"summary with ESC", sr, protocol.TypeDeliver, protocol.Deliver{AttemptRef: o.AttemptRef, Summary: "done\x1b]0;pwned\x07"}, rules.ErrBadRequest},
		{"summary with a C1 control", sr, protocol.TypeDeliver, protocol.Deliver{AttemptRef: o.AttemptRef, Summary: "done\u0085"}, rules.ErrBadRequest},
		{"session with a control character", sr, protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef, Session: "acc/s\x1b",
			Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)}, LogSHA256: sum(nil)}, rules.ErrBadRequest},
		{"negative expiry", sr, protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "?", ExpiresIn: protocol.Duration(-time.Second)}, rules.ErrBadRequest},
		{"summary too long", sr, protocol.TypeDeliver, protocol.Deliver{AttemptRef: o.AttemptRef, Summary: strings.Repeat("s", rules.MaxSummary+1)}, rules.ErrTooLarge},
		{"blank summary", sr, protocol.TypeDeliver, protocol.Deliver{AttemptRef: o.AttemptRef}, rules.ErrBadRequest},
		{"session too long", sr, protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef, Session: strings.Repeat("s", protocol.MaxSession+1),
			Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)}, LogSHA256: sum(nil)}, rules.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := th.job(j.ID)
			r := tt.c.request(tt.typ, tt.body)
			wantErr(t, r, tt.code)
			if r.Error.Message == "" {
				t.Fatal("refusal without a message")
			}
			if after := th.job(j.ID); !sameJob(before, after) {
				t.Fatalf("refused request changed the job: %+v → %+v", before, after)
			}
		})
	}

	// One question per attempt, and no delivery once it asked.
	wantOK(t, sr.request(protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "first?"}))
	before := th.job(j.ID)
	wantErr(t, sr.request(protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "second?"}), rules.ErrConflict)
	wantErr(t, sr.request(protocol.TypeDeliver, protocol.Deliver{AttemptRef: o.AttemptRef, Summary: "done"}), rules.ErrConflict)
	if after := th.job(j.ID); !sameJob(before, after) {
		t.Fatalf("refused requests changed the job: %+v → %+v", before, after)
	}
	// Once the attempt finished, it is fenced out.
	wantOK(t, finishAs(sr, o.AttemptRef, job.AttemptAsked, ""))
	before = th.job(j.ID)
	wantErr(t, sr.request(protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "again?"}), rules.ErrFenced)
	wantErr(t, sr.request(protocol.TypeDeliver, protocol.Deliver{AttemptRef: o.AttemptRef, Summary: "done"}), rules.ErrFenced)
	wantErr(t, sr.request(protocol.TypeContext, protocol.GetContext{AttemptRef: o.AttemptRef}), rules.ErrFenced)
	if after := th.job(j.ID); !sameJob(before, after) || after.State != job.Waiting {
		t.Fatalf("fenced requests changed the job: %+v → %+v", before, after)
	}
}

func TestBadAnswersChangeNothing(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	bob := th.addUser("bob")
	sr, _ := th.dial(th.registerRunnerOf(bob, "r1", "admin"), protocol.Hello{Slots: 2})
	running := th.submitTools("task")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	waiting := th.submitTools("other")
	qid := askAndFinish(t, sr, sr.offer(), "Pick one", []string{"a", "b"}, "")

	tests := []struct {
		name   string
		token  string
		path   string
		body   any
		status int
		code   string
	}{
		{"answer a job that waits on nothing", th.admin, "/jobs/" + running.ID + "/answer", apitypes.AnswerRequest{Text: "x"}, 409, rules.ErrConflict},
		{"answer an unknown job", th.admin, "/jobs/j-nope/answer", apitypes.AnswerRequest{Text: "x"}, 404, rules.ErrNotFound},
		{"choice out of range", th.admin, "/jobs/" + waiting.ID + "/answer", apitypes.AnswerRequest{Choice: 3}, 400, rules.ErrBadRequest},
		{"negative choice", th.admin, "/jobs/" + waiting.ID + "/answer", apitypes.AnswerRequest{Choice: -1}, 400, rules.ErrBadRequest},
		{"blank answer", th.admin, "/jobs/" + waiting.ID + "/answer", apitypes.AnswerRequest{Text: "  "}, 400, rules.ErrBadRequest},
		{"answer too long", th.admin, "/jobs/" + waiting.ID + "/answer", apitypes.AnswerRequest{Text: strings.Repeat("a", rules.MaxAnswer+1)}, 413, rules.ErrTooLarge},
		{"approval with nothing pending", th.admin, "/jobs/" + waiting.ID + "/approve", nil, 409, rules.ErrConflict},
		{"approval by someone else", bob, "/jobs/" + waiting.ID + "/approve", nil, 403, rules.ErrForbidden},
		{"restart by someone else", bob, "/jobs/" + waiting.ID + "/restart", nil, 403, rules.ErrForbidden},
		{"restart a running job", th.admin, "/jobs/" + running.ID + "/restart", nil, 409, rules.ErrConflict},
		{"retry a waiting job", th.admin, "/jobs/" + waiting.ID + "/retry", nil, 409, rules.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := th.job(waiting.ID)
			code, e := th.call(tt.token, "POST", tt.path, tt.body, nil)
			if code != tt.status || e.Code != tt.code || e.Message == "" {
				t.Fatalf("got %d %+v, want %d %s", code, e, tt.status, tt.code)
			}
			if after := th.job(waiting.ID); !sameJob(before, after) {
				t.Fatalf("refused call changed the job: %+v → %+v", before, after)
			}
		})
	}
	// Answered and approved: a second answer is refused.
	if code, e := th.call(th.admin, "POST", "/jobs/"+waiting.ID+"/answer", apitypes.AnswerRequest{Choice: 1}, nil); code != 200 {
		t.Fatalf("answer: %d %+v", code, e)
	}
	if code, e := th.call(bob, "POST", "/jobs/"+waiting.ID+"/answer", apitypes.AnswerRequest{Text: "late"}, nil); code != 409 {
		t.Fatalf("answer to an answered question: %d %+v", code, e)
	}
	if v := th.job(waiting.ID); v.Questions[0].ID != qid || v.Questions[0].Answer.Text != "a" || v.Questions[0].Answer.By != "admin" {
		t.Fatalf("answer was changed: %+v", v.Questions[0].Answer)
	}
}

// waitOnExpiringQuestion runs a tools job on a new runner of th until its
// agent asks a question that expires in the given time: the waiting job.
func (th *testHub) waitOnExpiringQuestion(in time.Duration) apitypes.JobView {
	th.t.Helper()
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	j := th.submitTools("task")
	o := sr.offer()
	wantOK(th.t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	wantOK(th.t, sr.request(protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "Quick?", ExpiresIn: protocol.Duration(in)}))
	wantOK(th.t, finishAs(sr, o.AttemptRef, job.AttemptAsked, ""))
	v := th.job(j.ID)
	if v.State != job.Waiting || v.Questions[0].ExpiresAt == nil {
		th.t.Fatalf("waiting job: %+v", v)
	}
	return v
}

func TestQuestionsExpire(t *testing.T) {
	th := startHub(t, Config{Sweep: time.Hour}) // only the expiry's own kick sweeps
	j := th.waitOnExpiringQuestion(300 * time.Millisecond)
	v := th.waitJob(j.ID, func(v apitypes.JobView) bool { return v.State != job.Waiting })
	if v.State != job.Failed || v.Reason != job.ReasonQuestionExpired || v.FinishedAt == nil {
		t.Fatalf("expired job: %+v", v)
	}
	if code, e := th.call(th.admin, "POST", "/jobs/"+j.ID+"/answer", apitypes.AnswerRequest{Text: "too late"}, nil); code != http.StatusConflict {
		t.Fatalf("answer after expiry: %d %+v", code, e)
	}
	if v := th.job(j.ID); v.Questions[0].Answer != nil {
		t.Fatalf("late answer stored: %+v", v.Questions[0])
	}
	if kinds := eventKinds(th, j.ID); !slices.Contains(kinds, "question_expired") {
		t.Fatalf("events: %v", kinds)
	}
	// An expired question is refused even before the sweep gets to it.
	th2 := startHub(t, Config{Sweep: time.Hour})
	sr2, _ := th2.dial(th2.registerRunner("r1"), protocol.Hello{})
	j2 := th2.submitTools("task")
	o2 := sr2.offer()
	wantOK(t, sr2.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o2.AttemptRef}))
	wantOK(t, sr2.request(protocol.TypeAsk, protocol.Ask{AttemptRef: o2.AttemptRef, Question: "Quick?", ExpiresIn: protocol.Duration(time.Millisecond)}))
	time.Sleep(5 * time.Millisecond)
	wantOK(t, finishAs(sr2, o2.AttemptRef, job.AttemptAsked, ""))
	if code, e := th2.call(th2.admin, "POST", "/jobs/"+j2.ID+"/answer", apitypes.AnswerRequest{Text: "x"}, nil); code != http.StatusConflict || !strings.Contains(e.Message, "expired") && !strings.Contains(e.Message, "failed") {
		t.Fatalf("answer to an expired question: %d %+v", code, e)
	}
}

func TestWaitingJobSurvivesAHubRestart(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	bob := th.addUser("bob")
	tok := th.registerRunnerOf(bob, "r1", "admin")
	sr, _ := th.dial(tok, protocol.Hello{})
	j := th.submitTools("task")
	qid := askAndFinish(t, sr, sr.offer(), "Which branch?", []string{"main", "dev"}, "sess-9")
	if code, e := th.call(bob, "POST", "/jobs/"+j.ID+"/answer", apitypes.AnswerRequest{Choice: 2}, nil); code != 200 {
		t.Fatalf("bob's answer: %d %+v", code, e)
	}
	sr.ws.CloseNow()
	th.reopen()

	v := th.job(j.ID)
	if q := v.Questions; v.State != job.Waiting || len(q) != 1 || q[0].ID != qid || q[0].Answer == nil ||
		q[0].Answer.Text != "dev" || q[0].Answer.Choice != 2 || q[0].Answer.Approved {
		t.Fatalf("after the restart: %+v", v)
	}
	if qs := th.questions(th.admin); len(qs) != 1 || !qs[0].AwaitsApproval() {
		t.Fatalf("questions after the restart: %+v", qs)
	}
	sr, _ = th.dial(tok, protocol.Hello{})
	if code, e := th.call(th.admin, "POST", "/jobs/"+j.ID+"/approve", nil, nil); code != 200 {
		t.Fatalf("approve: %d %+v", code, e)
	}
	o := sr.offer()
	if r := o.Spec.Resume; r == nil || r.Session != "sess-9" || !r.SameRunner || len(r.History) != 1 || r.History[0].Answer.Text != "dev" {
		t.Fatalf("resume after the restart: %+v", o.Spec.Resume)
	}
}

func TestToolJobCompletesOnlyByDeliver(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	j := th.submitTools("task")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	wantOK(t, finishAs(sr, o.AttemptRef, job.AttemptCompleted, ""))
	if v := th.job(j.ID); v.State != job.Failed || v.Reason != job.ReasonNotDelivered || v.Attempts[0].State != job.AttemptFailed {
		t.Fatalf("undelivered job: %+v", v)
	}
	// An attempt that says it asked but did not is failed too.
	if code, e := th.call(th.admin, "POST", "/jobs/"+j.ID+"/retry", nil, nil); code != 200 {
		t.Fatalf("retry: %d %+v", code, e)
	}
	o = sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	wantOK(t, finishAs(sr, o.AttemptRef, job.AttemptAsked, ""))
	if v := th.job(j.ID); v.State != job.Failed || v.Reason != job.ReasonAgentError {
		t.Fatalf("asked without a question: %+v", v)
	}
	// An exec job without tools completes on exit 0, as before.
	e := th.submit("true")
	runToEnd(t, sr, sr.offer(), "", 0)
	if v := th.job(e.ID); v.State != job.Completed {
		t.Fatalf("exec job: %+v", v)
	}
}

func TestRestartGoesBackToTheBase(t *testing.T) {
	t.Parallel()
	rs := startRepoJob(t, Config{})
	th, sr, o := rs.th, rs.sr, rs.o
	// A fix job on a repository publishes a checkpoint, then asks.
	c1 := commitOn(t, rs.dir, rs.base, "src/main.go", "package main // wip\n")
	if a := th.publish(rs.tok, o.AttemptRef, c1, bundle(t, rs.dir, c1, rs.base), "", true); a.code != http.StatusOK {
		t.Fatalf("checkpoint: %+v", a)
	}
	wantOK(t, sr.request(protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "Keep going?"}))
	wantOK(t, finishAs(sr, o.AttemptRef, job.AttemptAsked, "sess-1"))
	if v := th.job(o.Job); v.State != job.Waiting || v.Head != c1 {
		t.Fatalf("waiting job: %+v", v)
	}
	var v apitypes.JobView
	if code, e := th.call(th.admin, "POST", "/jobs/"+o.Job+"/restart", nil, &v); code != http.StatusOK {
		t.Fatalf("restart: %d %+v", code, e)
	}
	if v.Head != rs.base || th.jobRef("web", o.Job) != rs.base {
		t.Fatalf("restart left head %s, ref %s; base %s", v.Head, th.jobRef("web", o.Job), rs.base)
	}
	o2 := sr.offer()
	if o2.Spec.Resume != nil || o2.Spec.Repo == nil || o2.Spec.Repo.Head != rs.base || o2.Epoch != 2 {
		t.Fatalf("offer after restart: %+v", o2.Spec)
	}
	if kinds := eventKinds(th, o.Job); !slices.Contains(kinds, "checkpoint") || !slices.Contains(kinds, "restarted") {
		t.Fatalf("events: %v", kinds)
	}
}

func TestResumePrefersTheRunnerThatAsked(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok1 := th.registerRunner("r1")
	r1, _ := th.dial(tok1, protocol.Hello{Slots: 1})
	a := th.submitTools("a")
	b := th.submitTools("b")
	askAndFinish(t, r1, r1.offer(), "A?", nil, "sess-a")
	askAndFinish(t, r1, r1.offer(), "B?", nil, "sess-b")
	// r2 has more free slots, which the dispatcher would otherwise prefer.
	r2, _ := th.dial(th.registerRunner("r2"), protocol.Hello{Slots: 4})
	if code, e := th.call(th.admin, "POST", "/jobs/"+a.ID+"/answer", apitypes.AnswerRequest{Text: "go"}, nil); code != 200 {
		t.Fatalf("answer: %d %+v", code, e)
	}
	if o := r1.offer(); o.Job != a.ID || !o.Spec.Resume.SameRunner || o.Spec.Resume.Session != "sess-a" {
		t.Fatalf("resumed offer on r1: %+v", o)
	}
	// With r1 gone, any matching runner takes it, without its worktree.
	r1.ws.CloseNow()
	th.waitRunner("r1", false)
	if code, e := th.call(th.admin, "POST", "/jobs/"+b.ID+"/answer", apitypes.AnswerRequest{Text: "go"}, nil); code != 200 {
		t.Fatalf("answer: %d %+v", code, e)
	}
	for {
		o := r2.offer()
		if o.Job == b.ID {
			if r := o.Spec.Resume; r == nil || r.SameRunner || r.Session != "sess-b" {
				t.Fatalf("resumed offer on r2: %+v", r)
			}
			break
		}
	}
}

// waitRunner waits until the hub sees the runner connected (or not).
func (th *testHub) waitRunner(name string, connected bool) {
	th.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var l apitypes.RunnerList
		th.call(th.admin, "GET", "/runners", nil, &l)
		for _, r := range l.Runners {
			if r.Name == name && r.Connected == connected {
				return
			}
		}
		if time.Now().After(deadline) {
			th.t.Fatalf("runner %s never became connected=%v", name, connected)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRequesterMayAnswerInsteadOfApproving(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	bob := th.addUser("bob")
	sr, _ := th.dial(th.registerRunnerOf(bob, "r1", "admin"), protocol.Hello{})
	j := th.submitTools("task")
	askAndFinish(t, sr, sr.offer(), "Which port?", nil, "")
	if code, e := th.call(bob, "POST", "/jobs/"+j.ID+"/answer", apitypes.AnswerRequest{Text: "80"}, nil); code != 200 {
		t.Fatalf("bob's answer: %d %+v", code, e)
	}
	if code, e := th.call(th.admin, "POST", "/jobs/"+j.ID+"/answer", apitypes.AnswerRequest{Text: "8080"}, nil); code != 200 {
		t.Fatalf("requester's answer: %d %+v", code, e)
	}
	o := sr.offer()
	if h := o.Spec.Resume.History; len(h) != 1 || h[0].Answer.Text != "8080" || h[0].Answer.By != "admin" {
		t.Fatalf("history: %+v", h)
	}
}
