package forgethread

import (
	"strings"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// status is what a job's status comment shows: a kind and what it says.
type status struct {
	kind     string // queued, running, asked, published, done, failed, cancelled, unknown
	question *protocol.QuestionView
	pr       string // the pull request's URL (published)
	prNumber int
	reason   string // why it failed; what publishing said
	summary  string // what the agent delivered
	settled  bool   // nothing more changes it but a retry
}

// statusOf is what a job's status comment shows now.
func statusOf(v apitypes.JobView) status {
	switch v.State {
	case job.Queued, job.Offered:
		return status{kind: "queued"}
	case job.Running:
		return status{kind: "running"}
	case job.Waiting:
		s := status{kind: "asked"}
		if n := len(v.Questions); n > 0 {
			s.question = &v.Questions[n-1]
		}
		return s
	case job.Cancelled:
		return status{kind: "cancelled", settled: true}
	case job.Failed:
		return status{kind: "failed", reason: failure(v), settled: true}
	case job.Unknown:
		return status{kind: "unknown", settled: true}
	}
	s := status{kind: "done", summary: v.Summary, settled: true}
	if p := v.Publication; p != nil {
		switch store.PublicationState(p.State) {
		case store.PublicationDone:
			if p.URL != "" {
				s.kind, s.pr, s.prNumber = "published", p.URL, p.PR
			}
		case store.PublicationFailed:
			s.reason = "publishing failed: " + p.Reason
		default:
			s.settled = false // its pull request is on the way
		}
	}
	return s
}

// failure is why a job failed: its reason and its last attempt's message.
func failure(v apitypes.JobView) string {
	r := string(v.Reason)
	if n := len(v.Attempts); n > 0 && v.Attempts[n-1].Message != "" {
		r = strings.TrimSpace(r + ": " + v.Attempts[n-1].Message)
	}
	return r
}

// key is what a status comment records it shows: a change of key is a
// change worth an edit.
func (s status) key() string {
	switch {
	case s.question != nil:
		return s.kind + " " + s.question.ID
	case s.pr != "":
		return s.kind + " " + s.pr
	case s.kind == "done" && !s.settled:
		return "done publishing"
	case s.reason != "":
		return s.kind + " " + clean(s.reason, 200)
	}
	return s.kind
}

// statusMarker and questionMarker are how CommentOnce finds the bot's
// comment of a job and of a question again.
func statusMarker(jobID string) string { return "job:" + jobID }
func questionMarker(qID string) string { return "question:" + qID }

// jobRef names the job, linked to its page when the hub has one.
func jobRef(jobID, u string) string {
	if u == "" {
		return "job `" + jobID + "`"
	}
	return link("job "+jobID, u)
}

// render is the status comment's body.
func (s status) render(jobID, jobURL string) string {
	var b strings.Builder
	b.WriteString("**drover** · " + jobRef(jobID, jobURL) + " · ")
	switch s.kind {
	case "queued":
		b.WriteString("⏳ queued: waiting for a runner.")
	case "running":
		b.WriteString("🏃 running.")
	case "asked":
		b.WriteString("❓ the agent asked a question and waits for an answer: reply in this thread to answer it.")
		if s.question != nil {
			b.WriteString("\n\n" + block(s.question.Question))
		}
	case "published":
		b.WriteString("✅ done: the result is " + link("pull request #"+itoa(s.prNumber), s.pr) + ".")
	case "done":
		if s.settled {
			b.WriteString("✅ done.")
		} else {
			b.WriteString("✅ done; its pull request is being opened.")
		}
	case "failed":
		b.WriteString("❌ failed.")
	case "cancelled":
		b.WriteString("🚫 cancelled.")
	case "unknown":
		b.WriteString("⚠️ its outcome is unknown (its runner was lost); `drover retry " + jobID + "` runs it again.")
	}
	if s.kind != "asked" && s.reason != "" {
		b.WriteString("\n\n" + block(s.reason))
	}
	if s.summary != "" {
		b.WriteString("\n\nThe agent's summary:\n\n" + block(s.summary))
	}
	return b.String()
}

// renderQuestion is the comment of an agent's question.
func renderQuestion(jobID, jobURL string, q protocol.QuestionView) string {
	var b strings.Builder
	b.WriteString("**drover** · the agent of " + jobRef(jobID, jobURL) + " asks:\n\n" + block(q.Question))
	if len(q.Choices) > 0 {
		var cs strings.Builder
		for i, c := range q.Choices {
			cs.WriteString(itoa(i+1) + ". " + c + "\n")
		}
		b.WriteString("\n\nIts choices:\n\n" + block(cs.String()))
	}
	b.WriteString("\n\nReply in this thread to answer (as a drover user linked to your forge account). " +
		"An answer by anyone but the job's requester waits for the requester's approval.")
	return b.String()
}
