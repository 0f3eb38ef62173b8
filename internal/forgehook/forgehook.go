// Package forgehook reads the webhooks forges send (GitHub, Gitea and
// Forgejo, GitLab): Verify checks a delivery's signature or token in
// constant time, before anything of it is parsed, and Parse reads a
// verified delivery into a forge-neutral Event. It does no I/O and keeps
// nothing: what an event starts is internal/forgework's.
//
// Everything in an Event is untrusted text from the forge's users.
package forgehook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"drover/internal/forge"
	"drover/internal/rules"
)

// MaxBody bounds a delivery's body: GitHub caps its payloads at 25 MB, but
// the events drover acts on are far smaller (a comment is at most 65536
// characters); a larger body is refused unread.
const MaxBody = 1 << 20

// Bounds on the fields an Event keeps.
const (
	maxDelivery = 128
	maxRepo     = forge.MaxRepoPath // GitLab's path_with_namespace may hold subgroups
	maxLogin    = 255
	maxLabels   = 100
	// MaxText bounds a comment's or a review's body (GitHub's own limit).
	MaxText = 65536
	// MaxTitle bounds an issue's title (Gitea and GitLab keep 255
	// characters).
	MaxTitle = 1024
)

// ErrSignature is a delivery whose signature or token is wrong or missing.
var ErrSignature = errors.New("the delivery's signature is wrong or missing")

// Verify checks that body came with the secret the hook was registered
// with: an HMAC-SHA256 of the body (GitHub's X-Hub-Signature-256
// "sha256=HEX"; Gitea's X-Gitea-Signature "HEX", or the GitHub header it
// also sends), or GitLab's X-Gitlab-Token equal to it. Every comparison
// takes constant time. Its error is ErrSignature, never saying which part
// was wrong.
func Verify(kind string, secret []byte, h http.Header, body []byte) error {
	if len(secret) == 0 {
		return ErrSignature // a hook without a secret accepts nothing
	}
	switch kind {
	case forge.KindGitHub:
		return verifyHMAC(secret, body, strings.TrimPrefix(h.Get("X-Hub-Signature-256"), "sha256="), h.Get("X-Hub-Signature-256") != "")
	case forge.KindGitea:
		if sig := h.Get("X-Gitea-Signature"); sig != "" {
			return verifyHMAC(secret, body, sig, true)
		}
		sig := h.Get("X-Hub-Signature-256")
		return verifyHMAC(secret, body, strings.TrimPrefix(sig, "sha256="), strings.HasPrefix(sig, "sha256="))
	case forge.KindGitLab:
		// Hash both so the comparison takes the same time whatever the
		// lengths: ConstantTimeCompare returns early on a length mismatch.
		got := sha256.Sum256([]byte(h.Get("X-Gitlab-Token")))
		want := sha256.Sum256(secret)
		if h.Get("X-Gitlab-Token") == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return ErrSignature
		}
		return nil
	}
	return fmt.Errorf("forge kind %q: want one of %s", rules.Clip(rules.Escape(kind, false), 40), strings.Join(forge.Kinds(), ", "))
}

func verifyHMAC(secret, body []byte, sigHex string, present bool) error {
	if !present {
		return ErrSignature
	}
	got, err := hex.DecodeString(sigHex)
	if err != nil || len(got) != sha256.Size {
		return ErrSignature
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return ErrSignature
	}
	return nil
}

// Sign is the X-Hub-Signature-256 value of body (tests and fakes of the
// forges use it).
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Type is what happened, forge-neutral.
type Type string

const (
	// Ping: the forge checks the hook (GitHub's ping when it is made).
	Ping Type = "ping"
	// Labeled: a label was added to an issue or a pull request. Label is
	// the one added; "" when the forge does not say (Gitea sends the
	// labels after the change): then Labels holds them.
	Labeled Type = "labeled"
	// Assigned: an issue or pull request was assigned to Assignee.
	Assigned Type = "assigned"
	// Commented: a comment was made in an issue's or a pull request's
	// conversation.
	Commented Type = "commented"
	// Reviewed: a pull request review was submitted, in ReviewState.
	Reviewed Type = "reviewed"
	// ReviewComment: a comment was made on a pull request's diff.
	ReviewComment Type = "review_commented"
	// Ignored: anything else; nothing acts on it.
	Ignored Type = "ignored"
)

// Review states, forge-neutral.
const (
	ReviewApproved         = "approved"
	ReviewChangesRequested = "changes_requested"
	ReviewCommentOnly      = "commented"
)

// Event is a delivery as drover reads it. Every string is the forge
// users' text: untrusted.
type Event struct {
	Delivery string // the forge's id of the delivery, the same when it is sent again
	Type     Type
	Repo     string // OWNER/NAME (GitLab: the project's full path)
	Number   int    // the or pull request's number (GitLab: its iid)
	IsPR     bool
	Title    string
	Actor    string // the login of who acted
	Label    string
	Labels   []string
	Assignee string
	// CommentID and Body are the comment's (Commented, ReviewComment)
	// or the review's (Reviewed).
	CommentID   int64
	Body        string
	ReviewState string
	// HeadSHA and HeadBranch are a pull request's head, when the event
	// carries them.
	HeadSHA    string
	HeadBranch string
}

// Parse reads a delivery of a forge of kind, verified first (Verify). An
// event drover does not act on is Ignored, never an error; a body that is
// not the event it claims to be, or over a bound, is an error.
func Parse(kind string, h http.Header, body []byte) (Event, error) {
	if len(body) > MaxBody {
		return Event{}, &rules.LimitError{What: "webhook body", Size: len(body), Limit: MaxBody}
	}
	var (
		ev  Event
		err error
	)
	switch kind {
	case forge.KindGitHub:
		ev.Delivery = h.Get("X-GitHub-Delivery")
		err = parseGitHub(h.Get("X-GitHub-Event"), body, &ev)
	case forge.KindGitea:
		ev.Delivery = h.Get("X-Gitea-Delivery")
		err = parseGitea(h.Get("X-Gitea-Event"), h.Get("X-Gitea-Event-Type"), body, &ev)
	case forge.KindGitLab:
		ev.Delivery = h.Get("X-Gitlab-Event-UUID")
		if ev.Delivery == "" {
			ev.Delivery = h.Get("Idempotency-Key")
		}
		err = parseGitLab(h.Get("X-Gitlab-Event"), body, &ev)
	default:
		return Event{}, fmt.Errorf("forge kind %q: want one of %s", rules.Clip(rules.Escape(kind, false), 40), strings.Join(forge.Kinds(), ", "))
	}
	if err != nil {
		return Event{}, fmt.Errorf("read the %s webhook: %w", kind, err)
	}
	if err := ev.check(); err != nil {
		return Event{}, fmt.Errorf("read the %s webhook: %w", kind, err)
	}
	return ev, nil
}

// check bounds what an event keeps, and refuses an actionable one that
// lacks what acting on it needs.
func (ev *Event) check() error {
	if err := checkLine("delivery id", ev.Delivery, maxDelivery, true); err != nil {
		return err
	}
	if ev.Type == Ignored || ev.Type == Ping {
		return nil
	}
	for _, f := range []struct {
		what, s string
		max     int
		need    bool
	}{
		{"repository", ev.Repo, maxRepo, true},
		{"actor", ev.Actor, maxLogin, true},
		{"label", ev.Label, rules.MaxLabelLen * 2, false},
		{"assignee", ev.Assignee, maxLogin, ev.Type == Assigned},
		{"review state", ev.ReviewState, 32, ev.Type == Reviewed},
		{"head commit", ev.HeadSHA, 64, false},
		{"head branch", ev.HeadBranch, forge.MaxBranch, false},
	} {
		if err := checkLine(f.what, f.s, f.max, f.need); err != nil {
			return err
		}
	}
	if ev.Number <= 0 {
		return fmt.Errorf("issue number %d: want 1 or more", ev.Number)
	}
	if len(ev.Labels) > maxLabels {
		return &rules.LimitError{What: "labels", Size: len(ev.Labels), Limit: maxLabels}
	}
	for _, l := range ev.Labels {
		if err := checkLine("label", l, rules.MaxLabelLen*2, true); err != nil {
			return err
		}
	}
	if len(ev.Title) > MaxTitle {
		return &rules.LimitError{What: "title", Size: len(ev.Title), Limit: MaxTitle}
	}
	if len(ev.Body) > MaxText {
		return &rules.LimitError{What: "comment", Size: len(ev.Body), Limit: MaxText}
	}
	if err := rules.CheckPlainText("title", ev.Title, false); err != nil {
		ev.Title = rules.Escape(ev.Title, false) // shown, never acted on
	}
	return nil
}

func checkLine(what, s string, max int, need bool) error {
	switch {
	case s == "" && need:
		return fmt.Errorf("no %s", what)
	case len(s) > max:
		return &rules.LimitError{What: what, Size: len(s), Limit: max}
	}
	return rules.CheckPlainText(what, s, false)
}

// decode reads body as one JSON value into v, refusing what CheckJSON
// refuses (a key given twice, data after the value, deep nesting).
func decode(body []byte, v any) error {
	if err := rules.CheckJSON(body); err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(body))
	return d.Decode(v)
}
