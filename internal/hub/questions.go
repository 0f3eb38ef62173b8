package hub

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/ids"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// The agent's tools (ask, deliver, context, relayed by the runner) and the
// person in the loop (answer, approve; restart is rerunJob). A question
// belongs to the attempt that asked it; the job waits once that attempt
// finishes "asked", so a waiting job never holds a runner slot. Only an
// approved answer requeues it, and only approved answers reach an agent.

// argError answers a tool argument or an answer that breaks the limits:
// too_large for a size, bad_request for the rest.
func argError(what string, err error) error {
	var le *rules.LimitError
	if errors.As(err, &le) {
		return call.Errf(http.StatusRequestEntityTooLarge, rules.ErrTooLarge, "%s: %v", what, err)
	}
	return call.BadRequest("%s: %v", what, err)
}

// inTurn checks that an attempt may still use its tools: it is running and
// is its job's current attempt.
func inTurn(a store.Attempt, j store.Job, tool string) error {
	if a.State != job.AttemptRunning || j.AttemptID != a.ID || j.State != job.Running {
		return call.Fenced("attempt %s is %s and can no longer %s", a.ID, a.State, tool)
	}
	return nil
}

// questionOf returns the question an attempt asked, or nil.
func questionOf(tx store.Tx, jobID, attemptID string) (*store.Question, error) {
	qs, err := tx.Questions(jobID)
	if err != nil {
		return nil, err
	}
	for i := range qs {
		if qs[i].AttemptID == attemptID {
			return &qs[i], nil
		}
	}
	return nil, nil
}

// excerpt is the first line of s, short enough for an event message.
func excerpt(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// toolRequest applies a ledgered tool request of a running attempt: fn
// runs with the attempt and its job, fenced, in the request's transaction.
func toolRequest[T any](ctx context.Context, h *Hub, c *runnerSession, reqID, tool string, ref protocol.AttemptRef,
	fn func(tx store.Tx, a store.Attempt, j store.Job) (T, error)) (T, error) {
	rep, replay, err := ledgered(ctx, h, c.runnerID, reqID, func(tx store.Tx) (T, error) {
		var zero T
		a, j, err := loadFenced(tx, c.runnerID, ref)
		if err != nil {
			return zero, err
		}
		if err := inTurn(a, j, tool); err != nil {
			return zero, err
		}
		return fn(tx, a, j)
	})
	if err == nil && !replay {
		h.notify(ref.Job)
	}
	return rep, err
}

func (h *Hub) ask(ctx context.Context, c *runnerSession, reqID string, m protocol.Ask) (protocol.AskAck, error) {
	if err := m.Validate(); err != nil {
		return protocol.AskAck{}, argError("ask", err)
	}
	ack, err := toolRequest(ctx, h, c, reqID, "ask", m.AttemptRef, func(tx store.Tx, a store.Attempt, j store.Job) (protocol.AskAck, error) {
		switch prev, err := questionOf(tx, j.ID, a.ID); {
		case err != nil:
			return protocol.AskAck{}, err
		case prev != nil:
			return protocol.AskAck{}, call.Conflict("attempt %d already asked question %s: end the turn and finish with outcome asked", a.Epoch, prev.ID)
		case a.Summary != "":
			return protocol.AskAck{}, call.Conflict("attempt %d already delivered; it cannot ask", a.Epoch)
		case j.Cancelling:
			return protocol.AskAck{}, call.Conflict("job %s is being cancelled; nobody will answer", j.ID)
		}
		now := h.now()
		q := store.Question{ID: ids.New("q"), JobID: j.ID, AttemptID: a.ID, Text: m.Question, Choices: m.Choices, AskedAt: now}
		if m.ExpiresIn > 0 {
			exp := now.Add(m.ExpiresIn.D())
			q.ExpiresAt = &exp
		}
		if err := tx.InsertQuestion(q); err != nil {
			return protocol.AskAck{}, err
		}
		return protocol.AskAck{QuestionID: q.ID}, h.event(tx, j.ID, "asked", c.name, "attempt %d asked %s: %s", a.Epoch, q.ID, excerpt(q.Text))
	})
	if err == nil && m.ExpiresIn > 0 {
		// The leader expires it, maybe on another hub: tell them all.
		time.AfterFunc(m.ExpiresIn.D()+50*time.Millisecond, func() { h.kickSweep(); h.hint(hintDeadline) })
	}
	return ack, err
}

func (h *Hub) deliver(ctx context.Context, c *runnerSession, reqID string, m protocol.Deliver) error {
	if err := rules.CheckSummary(m.Summary); err != nil {
		return argError("deliver", err)
	}
	_, err := toolRequest(ctx, h, c, reqID, "deliver", m.AttemptRef, func(tx store.Tx, a store.Attempt, j store.Job) (struct{}, error) {
		if q, err := questionOf(tx, j.ID, a.ID); err != nil {
			return struct{}{}, err
		} else if q != nil {
			return struct{}{}, call.Conflict("attempt %d asked question %s and waits for its answer; it cannot deliver", a.Epoch, q.ID)
		}
		switch a.Summary {
		case m.Summary:
			return struct{}{}, nil // delivered before with a lost reply
		case "":
		default:
			return struct{}{}, call.Conflict("attempt %d already delivered", a.Epoch)
		}
		a.Summary = m.Summary
		if err := tx.UpdateAttempt(a); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, h.event(tx, j.ID, "delivered", c.name, "attempt %d delivered: %s", a.Epoch, excerpt(m.Summary))
	})
	return err
}

// jobContext reads what the agent of a running attempt may know, live.
func (h *Hub) jobContext(ctx context.Context, c *runnerSession, ref protocol.AttemptRef) (protocol.JobContext, error) {
	var jc protocol.JobContext
	err := h.store.Read(ctx, func(tx store.Tx) error {
		a, j, err := loadFenced(tx, c.runnerID, ref)
		if err != nil {
			return err
		}
		if err := inTurn(a, j, "read its context"); err != nil {
			return err
		}
		jc, err = newNamer(tx).jobContext(j, a)
		return err
	})
	if err == nil {
		// Read from the forge outside the transaction, for the fenced
		// attempt's own job only.
		h.forgeContext(ctx, &jc)
	}
	return jc, err
}

func (n *namer) jobContext(j store.Job, cur store.Attempt) (protocol.JobContext, error) {
	jc := protocol.JobContext{
		Job: j.ID, Attempt: cur.Epoch, Agent: j.Agent, Prompt: strings.Join(j.Args, " "), Args: j.Args,
		Project: j.Project, Base: j.Base, Head: j.Head, Mode: j.Mode,
	}
	files, err := n.tx.ContextFiles(j.ID, false)
	if err != nil {
		return jc, err
	}
	for _, f := range files {
		jc.Context = append(jc.Context, protocol.ContextFile{Name: f.Name, Size: f.Size})
	}
	atts, err := n.tx.Attempts(j.ID)
	if err != nil {
		return jc, err
	}
	for _, a := range atts {
		if a.Epoch < cur.Epoch {
			jc.Attempts = append(jc.Attempts, protocol.AttemptOutcome{Number: a.Epoch, State: a.State, Reason: a.Reason,
				ExitCode: a.ExitCode, Message: a.Message, Summary: a.Summary})
		}
	}
	qs, err := n.questionViews(j, true)
	if err != nil {
		return jc, err
	}
	jc.Questions, jc.Omitted = protocol.FitHistory(qs, protocol.HistoryBudget)
	return jc, nil
}

// questionViews lists a job's questions, oldest first. With approvedOnly
// an answer is shown only once approved: that is what agents get.
func (n *namer) questionViews(j store.Job, approvedOnly bool) ([]protocol.QuestionView, error) {
	qs, err := n.tx.Questions(j.ID)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.QuestionView, 0, len(qs))
	for _, q := range qs {
		v, err := n.questionView(q)
		if err != nil {
			return nil, err
		}
		if approvedOnly && v.AwaitsApproval() {
			v.Answer = nil
		}
		out = append(out, v)
	}
	return out, nil
}

func (n *namer) questionView(q store.Question) (protocol.QuestionView, error) {
	a, err := n.tx.Attempt(q.AttemptID)
	if err != nil {
		return protocol.QuestionView{}, err
	}
	v := protocol.QuestionView{ID: q.ID, Job: q.JobID, Attempt: a.Epoch, Question: q.Text, Choices: q.Choices,
		AskedAt: q.AskedAt.UTC(), ExpiresAt: utcPtr(q.ExpiresAt)}
	if q.AnsweredBy != "" {
		v.Answer = &protocol.Answer{Text: q.Answer, By: n.user(q.AnsweredBy), AnsweredAt: q.AnsweredAt.UTC(),
			Approved: q.ApprovedAt != nil, ApprovedAt: utcPtr(q.ApprovedAt)}
		if q.Choice != nil {
			v.Answer.Choice = *q.Choice
		}
		if q.ApprovedBy != "" {
			v.Answer.ApprovedBy = n.user(q.ApprovedBy)
		}
	}
	return v, nil
}

// resumeSpec tells the runner of the next attempt which conversation it
// continues: the asking attempt's session and every approved answer.
func (n *namer) resumeSpec(j store.Job, runnerID string) (*protocol.ResumeSpec, error) {
	prev, err := n.tx.Attempt(j.ResumeAttempt)
	if err != nil {
		return nil, err
	}
	qs, err := n.questionViews(j, true)
	if err != nil {
		return nil, err
	}
	history := []protocol.QuestionView{}
	for _, q := range qs {
		if q.Answer != nil {
			history = append(history, q)
		}
	}
	r := &protocol.ResumeSpec{Attempt: prev.Epoch, Session: prev.Session, SameRunner: prev.RunnerID == runnerID}
	r.History, r.Omitted = protocol.FitHistory(history, protocol.HistoryBudget)
	return r, nil
}

// toolOutcome applies the tool rule (job.ToolOutcome) with what the hub
// recorded, whatever the runner says: its question and its delivery. A job
// without tools has neither, and can only be caught claiming it asked.
func toolOutcome(q *store.Question, a store.Attempt, j store.Job, o job.Outcome) job.Outcome {
	if !toolFinish(j, o) {
		return o
	}
	was := o.State
	o = job.ToolOutcome(o, q != nil, a.Summary != "")
	if q != nil && o.State == job.AttemptAsked && was != job.AttemptAsked {
		msg := "asked " + q.ID
		if o.Message != "" {
			msg += "; " + o.Message
		}
		o.Message = msg
	}
	o.Message = call.Truncate(o.Message, 4096)
	return o
}

// toolFinish says whether a finish of j with o is a tool job's (whose
// outcome its question decides, toolOutcome): only then is the question
// read.
func toolFinish(j store.Job, o job.Outcome) bool { return j.Tools || o.State == job.AttemptAsked }

// pendingQuestion is the question a waiting job waits on: the one its
// current attempt asked.
func pendingQuestion(tx store.Tx, j store.Job) (store.Question, error) {
	if j.State != job.Waiting {
		return store.Question{}, call.Conflict("job %s is %s, not waiting for an answer", j.ID, j.State)
	}
	q, err := questionOf(tx, j.ID, j.AttemptID)
	if err != nil {
		return store.Question{}, err
	}
	if q == nil {
		return store.Question{}, call.Conflict("job %s waits on no question", j.ID)
	}
	return *q, nil
}

func expired(q store.Question, now time.Time) bool {
	return q.ExpiresAt != nil && !now.Before(*q.ExpiresAt)
}

// answerJob records an answer to the question a waiting job asked. The
// requester's own answer is approved at once and requeues the job (in place
// of another user's answer awaiting approval, if any); anyone else's waits
// for the requester's approval.
func (h *Hub) answerJob(ctx context.Context, p call.Caller, id string, req apitypes.AnswerRequest) error {
	var requeued bool
	err := h.store.Write(ctx, func(tx store.Tx) error {
		requeued = false
		j, err := visibleJob(tx, p, id)
		if err != nil {
			return err
		}
		q, err := pendingQuestion(tx, j)
		if err != nil {
			return err
		}
		now := h.now()
		if expired(q, now) {
			return call.Conflict("question %s expired at %s; nothing changed", q.ID, q.ExpiresAt.UTC().Format(time.RFC3339))
		}
		text, err := req.Resolve(q.Choices)
		if err != nil {
			return argError("answer", err)
		}
		mine := p.UserID == j.RequesterID
		n := newNamer(tx)
		if q.AnsweredBy != "" && !mine {
			return call.Conflict("question %s already has an answer by %s awaiting approval by the requester, %s",
				q.ID, n.user(q.AnsweredBy), n.user(j.RequesterID))
		}
		q.Answer, q.Choice, q.AnsweredBy, q.AnsweredAt = text, nil, p.UserID, &now
		if req.Choice > 0 {
			q.Choice = &req.Choice
		}
		if !mine {
			if err := tx.UpdateQuestion(q); err != nil {
				return err
			}
			return h.event(tx, j.ID, "answered", p.Name, "%s answered %s: %s; awaits approval by %s",
				p.Name, q.ID, excerpt(text), n.user(j.RequesterID))
		}
		q.ApprovedBy, q.ApprovedAt = p.UserID, &now
		requeued = true
		if err := h.requeueAnswered(tx, &j, q); err != nil {
			return err
		}
		return h.event(tx, j.ID, "answered", p.Name, "%s answered %s: %s; back in the queue", p.Name, q.ID, excerpt(text))
	})
	if err != nil {
		return err
	}
	h.notify(id)
	if requeued {
		h.kick()
	}
	return nil
}

// approveAnswer approves another user's answer; only the requester may.
func (h *Hub) approveAnswer(ctx context.Context, p call.Caller, id string) error {
	err := h.store.Write(ctx, func(tx store.Tx) error {
		j, err := visibleJob(tx, p, id)
		if err != nil {
			return err
		}
		n := newNamer(tx)
		if p.UserID != j.RequesterID {
			return call.Forbidden("only the job's requester, %s, can approve an answer", n.user(j.RequesterID))
		}
		q, err := pendingQuestion(tx, j)
		if err != nil {
			return err
		}
		now := h.now()
		switch {
		case q.AnsweredBy == "":
			return call.Conflict("question %s has no answer awaiting approval; answer it with drover answer %s", q.ID, j.ID)
		case expired(q, now):
			return call.Conflict("question %s expired at %s; nothing changed", q.ID, q.ExpiresAt.UTC().Format(time.RFC3339))
		}
		q.ApprovedBy, q.ApprovedAt = p.UserID, &now
		if err := h.requeueAnswered(tx, &j, q); err != nil {
			return err
		}
		return h.event(tx, j.ID, "approved", p.Name, "%s approved %s's answer to %s; back in the queue",
			p.Name, n.user(q.AnsweredBy), q.ID)
	})
	if err != nil {
		return err
	}
	h.notify(id)
	h.kick()
	return nil
}

// requeueAnswered stores an approved answer and queues its job; the next
// offer resumes the asking attempt's session (j.ResumeAttempt).
func (h *Hub) requeueAnswered(tx store.Tx, j *store.Job, q store.Question) error {
	if err := tx.UpdateQuestion(q); err != nil {
		return err
	}
	next, err := job.Next(j.State, job.EvAnswer)
	if err != nil {
		return call.Conflict("%v", err)
	}
	j.State, j.Reason, j.UpdatedAt = next, job.ReasonNone, h.now()
	return tx.UpdateJob(*j)
}

// expireQuestions fails the waiting jobs whose question expired without an
// approved answer.
func (h *Hub) expireQuestions(ctx context.Context) error {
	var due []store.Question
	if err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		due, err = tx.OpenQuestions(store.QuestionFilter{ExpiredBefore: h.now()})
		return err
	}); err != nil {
		return err
	}
	for _, q := range due {
		var changed bool
		err := h.store.Write(ctx, func(tx store.Tx) error {
			changed = false
			j, err := tx.Job(q.JobID)
			if err != nil || j.State != job.Waiting {
				return err // answered, restarted or cancelled since the read
			}
			cur, err := pendingQuestion(tx, j)
			if err != nil {
				return err
			}
			now := h.now()
			if cur.ID != q.ID || cur.ApprovedAt != nil || !expired(cur, now) {
				return nil
			}
			next, err := job.Next(j.State, job.EvExpire)
			if err != nil {
				return err
			}
			j.State, j.Reason, j.FinishedAt, j.UpdatedAt = next, job.ReasonQuestionExpired, &now, now
			if err := tx.UpdateJob(j); err != nil {
				return err
			}
			changed = true
			return h.event(tx, j.ID, "question_expired", "", "question %s expired without an approved answer; the job failed", q.ID)
		})
		if err != nil {
			return err
		}
		if changed {
			h.log.Info("question expired", "job", q.JobID, "question", q.ID)
			h.notify(q.JobID)
		}
	}
	return nil
}

// openQuestions lists the open questions of the jobs p may see.
func (h *Hub) openQuestions(ctx context.Context, p call.Caller) ([]protocol.QuestionView, error) {
	out := []protocol.QuestionView{}
	err := h.store.Read(ctx, func(tx store.Tx) error {
		f := store.QuestionFilter{VisibleTo: p.UserID}
		if p.Admin {
			f.VisibleTo = "" // as GET /jobs: an admin sees every job
		}
		qs, err := tx.OpenQuestions(f)
		if err != nil {
			return err
		}
		n := newNamer(tx)
		for _, q := range qs {
			v, err := n.questionView(q)
			if err != nil {
				return err
			}
			j, err := tx.Job(q.JobID)
			if err != nil {
				return err
			}
			v.Requester = n.user(j.RequesterID)
			out = append(out, v)
		}
		return nil
	})
	return out, err
}
