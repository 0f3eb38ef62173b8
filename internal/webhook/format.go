package webhook

import (
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"time"
)

// Payload is the event a delivery carries, kept in the outbox as JSON and
// sent as it is (format json) or as a chat message's text (slack, matrix).
// It holds what the hook's owner may see of the job.
type Payload struct {
	Event    string     `json:"event"`
	Delivery string     `json:"delivery"`
	At       time.Time  `json:"at"` // when the job changed
	Job      PayloadJob `json:"job"`
}

// PayloadJob is the job as the event saw it.
type PayloadJob struct {
	ID        string     `json:"id"`
	State     string     `json:"state"`
	Agent     string     `json:"agent"`
	Project   string     `json:"project,omitempty"`
	Requester string     `json:"requester"`
	Reason    string     `json:"reason,omitempty"`    // a finished job's
	ExitCode  *int       `json:"exit_code,omitempty"` // a finished job's
	Question  string     `json:"question,omitempty"`  // an asked job's: the agent's text, untrusted
	URL       string     `json:"url,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	Finished  *time.Time `json:"finished_at,omitempty"`
}

// maxQuestion bounds the question a payload quotes.
const maxQuestion = 2000

// render is a delivery's body in a hook's format.
func render(format, payload string) ([]byte, error) {
	if format == "json" || format == "" {
		return []byte(payload), nil
	}
	var p Payload
	if err := json.Unmarshal([]byte(payload), &p); err != nil {
		return nil, fmt.Errorf("read the payload: %w", err)
	}
	text := summary(p)
	switch format {
	case "slack":
		return json.Marshal(map[string]string{"text": slackEscape(text)})
	case "matrix":
		return json.Marshal(map[string]string{"msgtype": "m.notice", "body": text,
			"format": "org.matrix.custom.html", "formatted_body": strings.ReplaceAll(html.EscapeString(text), "\n", "<br>")})
	}
	return nil, fmt.Errorf("unknown format %q", format)
}

// summary is the event in a line or two of plain text (escaped by each
// format for its target: the question is the agent's, untrusted).
func summary(p Payload) string {
	j := p.Job
	where := ""
	if j.Project != "" {
		where = " on " + j.Project
	}
	var what string
	switch p.Event {
	case EventQueued:
		what = "is queued"
	case EventStarted:
		what = "started"
	case EventAsked:
		what = "asks a question"
	case EventFinished:
		what = "finished: " + j.State
		if j.ExitCode != nil && j.State != "completed" {
			what += fmt.Sprintf(" (exit %d)", *j.ExitCode)
		} else if j.Reason != "" && j.Reason != "exited" {
			what += " (" + j.Reason + ")"
		}
	default:
		what = p.Event
	}
	s := fmt.Sprintf("drover: job %s (%s%s, by %s) %s", j.ID, j.Agent, where, j.Requester, what)
	if j.Question != "" {
		s += "\n" + j.Question
	}
	if j.URL != "" {
		s += "\n" + j.URL
	}
	return s
}

// slackEscape escapes what Slack reads as markup in a message's text
// (links, mentions): &, < and >.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
