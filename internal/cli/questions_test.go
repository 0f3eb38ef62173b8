package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
)

// waitingJob puts a waiting job with one question into the fake hub.
func waitingJob(h *fakeHub, answer *protocol.Answer) protocol.QuestionView {
	now := time.Now()
	exp := now.Add(2 * time.Hour)
	q := protocol.QuestionView{ID: "q-1", Job: "j-1", Attempt: 1, Question: "Which database?\nWe need one.",
		Choices: []string{"sqlite", "postgres"}, AskedAt: now.Add(-5 * time.Minute), ExpiresAt: &exp, Requester: "admin", Answer: answer}
	h.jobs = []apitypes.JobView{{ID: "j-1", State: job.Waiting, Agent: "exec", Args: []string{"x"}, Requester: "admin",
		Tools: true, CreatedAt: now, Questions: []protocol.QuestionView{q},
		Attempts: []apitypes.AttemptView{{Number: 1, State: job.AttemptAsked, Runner: "r1", OfferedAt: now}}}}
	h.questions = []protocol.QuestionView{q}
	h.events["j-1"] = []apitypes.EventView{{Seq: 4, Job: "j-1", At: now, Kind: "asked", Actor: "r1", Message: "attempt 1 asked q-1: Which database?"}}
	return q
}

func TestQuestionsAndAnswers(t *testing.T) {
	h := newFakeHub(t)
	waitingJob(h, nil)
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}

	r := runCLI(t, env, "", "questions")
	for _, want := range []string{"job j-1 question q-1 (attempt 1, asked 5m ago, expires in 1h", "  Which database?\n  We need one.\n",
		"  2) postgres\n", "drover answer j-1 --choice N"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("questions printed %q, want %q in it", r.stdout, want)
		}
	}
	r = runCLI(t, env, "", "questions", "--json")
	var l apitypes.QuestionList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Questions) != 1 || l.Questions[0].ID != "q-1" {
		t.Errorf("questions --json printed %q: %v", r.stdout, err)
	}

	if r := runCLI(t, env, "", "answer", "j-1"); r.code != 2 || !strings.Contains(r.stderr, "give an answer") {
		t.Errorf("answer without an answer: %d %q", r.code, r.stderr)
	}
	if r := runCLI(t, env, "", "answer", "j-1", "--choice", "2"); r.code != 0 || r.stdout != "job j-1 answered and queued again\n" {
		t.Errorf("answer --choice: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, env, "", "answer", "j-1", "use", "sqlite"); r.code != 0 {
		t.Errorf("answer TEXT: %d %q", r.code, r.stderr)
	}
	if r := runCLI(t, env, "line one\nline two\n", "answer", "j-1", "-"); r.code != 0 {
		t.Errorf("answer -: %d %q", r.code, r.stderr)
	}
	want := []apitypes.AnswerRequest{{Choice: 2}, {Text: "use sqlite"}, {Text: "line one\nline two"}}
	if len(h.answers) != len(want) {
		t.Fatalf("answers sent: %+v", h.answers)
	}
	for i := range want {
		if h.answers[i] != want[i] {
			t.Errorf("answer %d sent %+v, want %+v", i, h.answers[i], want[i])
		}
	}

	// Another user's answer is recorded and waits for the requester.
	h.jobs[0].State, h.who.Name = job.Waiting, "bob"
	if r := runCLI(t, env, "", "answer", "j-1", "yes"); r.code != 0 || !strings.Contains(r.stdout, "waits for approval by admin") {
		t.Errorf("bob's answer: %d %q %q", r.code, r.stdout, r.stderr)
	}
	h.who.Name = "admin"
	if r := runCLI(t, env, "", "approve", "j-1"); r.code != 0 || r.stdout != "job j-1 queued\n" {
		t.Errorf("approve: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, env, "", "restart", "j-1"); r.code != 0 || r.stdout != "job j-1 queued\n" {
		t.Errorf("restart: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if strings.Join(h.actions, ",") != "approve j-1,restart j-1" {
		t.Errorf("actions: %v", h.actions)
	}
}

func TestShowPrintsQuestionsAnswersAndDelivery(t *testing.T) {
	h := newFakeHub(t)
	waitingJob(h, &protocol.Answer{Text: "postgres", Choice: 2, By: "bob", AnsweredAt: time.Now()})
	h.jobs[0].Summary = "Switched to postgres.\nAll tests pass."
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	r := runCLI(t, env, "", "show", "j-1")
	for _, want := range []string{"Tools:", "question q-1 (attempt 1", "  1) sqlite\n", "answer by bob (choice 2), awaiting approval by the requester:\n    postgres\n",
		"Delivered:\n  Switched to postgres.\n  All tests pass.\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show printed %q, want %q in it", r.stdout, want)
		}
	}
	r = runCLI(t, env, "", "show", "--json", "j-1")
	var v apitypes.JobView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.Questions) != 1 || v.Questions[0].Answer.Approved {
		t.Errorf("show --json printed %q: %v", r.stdout, err)
	}
}

func TestLogsFollowPrintsEvents(t *testing.T) {
	h := newFakeHub(t)
	now := time.Now()
	h.jobs = []apitypes.JobView{{ID: "j-1", State: job.Completed, Agent: "exec", Requester: "admin", CreatedAt: now,
		Attempts: []apitypes.AttemptView{{Number: 1, State: job.AttemptCompleted, Runner: "r1", OfferedAt: now}}}}
	h.logs["j-1"] = "working\n"
	h.events["j-1"] = []apitypes.EventView{{Seq: 1, Job: "j-1", At: now, Kind: "submitted", Message: "old news"}}
	h.onLog = func(id string) {
		if len(h.events[id]) == 1 {
			h.events[id] = append(h.events[id], apitypes.EventView{Seq: 2, Job: id, At: now, Kind: "delivered", Actor: "r1", Message: "attempt 1 delivered: done"})
		}
	}
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	r := runCLI(t, env, "", "logs", "-f", "j-1")
	if r.code != 0 || r.stdout != "working\n" {
		t.Fatalf("logs -f: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "delivered (r1): attempt 1 delivered: done") || strings.Contains(r.stderr, "old news") {
		t.Errorf("logs -f events on stderr: %q", r.stderr)
	}
}

// logs -f ends when the job waits for an answer after an attempt, and says
// what to do, instead of following a job that cannot move on by itself.
func TestLogsFollowEndsWhenTheJobWaits(t *testing.T) {
	h := newFakeHub(t)
	waitingJob(h, nil)
	h.logs["j-1"] = "asking\n"
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	r := runCLI(t, env, "", "logs", "-f", "j-1")
	if r.code != 0 || r.stdout != "asking\n" || !strings.Contains(r.stderr, "job j-1 waits for an answer: drover questions, then drover answer j-1 TEXT") {
		t.Fatalf("logs -f: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
