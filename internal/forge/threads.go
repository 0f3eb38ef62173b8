package forge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"drover/internal/gitcmd"
	"drover/internal/rules"
)

// Issue is an issue or a pull request as drover reads it. Every text in it is the forge's,
// untrusted: bounded, never interpreted.
type Issue struct {
	Number                          int
	Title, Body, Author, State, URL string // State: open or closed (merged, for a pull request)
	IsPR                            bool
	Labels                          []string
	HeadSHA, HeadBranch, BaseBranch string // the Head/Base fields for a pull request only
}

// Comment is a comment in an issue's or a pull request's conversation, or of a review thread.
type Comment struct {
	ID                   int64
	Author, Body, URL    string
	CreatedAt, UpdatedAt time.Time
}

// Review is a pull request's review. State is ReviewApproved, ReviewChangesRequested or
// ReviewCommented.
type Review struct {
	ID                            int64
	Author, State, Body, CommitID string
	SubmittedAt                   time.Time
}

// Review states.
const (
	ReviewApproved         = "approved"
	ReviewChangesRequested = "changes_requested"
	ReviewCommented        = "commented"
)

// ReviewThread is a conversation on a line of a pull request's diff.
type ReviewThread struct {
	Path     string
	Line     int
	Resolved bool
	Comments []Comment
}

// Check is a check or commit status at a commit. Status is CheckQueued, CheckInProgress or
// CheckCompleted; Conclusion, once completed, CheckSuccess, CheckFailure, CheckNeutral,
// CheckCancelled or CheckSkipped (or another of GitHub's check run conclusions as it gives
// them: timed_out, action_required, stale, startup_failure).
type Check struct {
	Name, Status, Conclusion, URL string
}

// Check statuses and conclusions.
const (
	CheckQueued     = "queued"
	CheckInProgress = "in_progress"
	CheckCompleted  = "completed"
	CheckSuccess    = "success"
	CheckFailure    = "failure"
	CheckNeutral    = "neutral"
	CheckCancelled  = "cancelled"
	CheckSkipped    = "skipped"
)

// Permission is what a user may do in a repository.
type Permission string

// Permissions, most first. Write is what starting work from the forge takes.
const (
	PermAdmin Permission = "admin"
	PermWrite Permission = "write"
	PermRead  Permission = "read"
	PermNone  Permission = "none"
)

// NewHook is a repository webhook to make: the forge posts Events (HookIssues, HookComments,
// HookReviews) to URL as JSON, signed with Secret (GitHub's and Gitea's HMAC, GitLab's token).
type NewHook struct {
	URL, Secret string
	Events      []string
}

// Hook events, forge-neutral; each forge's client maps them to its own.
const (
	HookIssues   = "issues"   // opened, edited, labelled, assigned
	HookComments = "comments" // comments on issues and pull requests
	HookReviews  = "reviews"  // pull request reviews and their comments
)

// Threads is what drover reads and writes in an issue's or pull request's conversation.
// A number is an issue's or a pull request's (on GitLab an issue's iid, else a merge
// request's: see GitLabMergeRequest).
type Threads interface {
	Issue(ctx context.Context, repo Repo, number int) (Issue, error)
	// Comments is every comment, oldest first, at most 5,000 (more is an Error, never a
	// silent cut).
	Comments(ctx context.Context, repo Repo, number int) ([]Comment, error)
	Reviews(ctx context.Context, repo Repo, number int) ([]Review, error)
	// ReviewThreads is the unresolved review threads of a pull request.
	ReviewThreads(ctx context.Context, repo Repo, number int) ([]ReviewThread, error)
	Checks(ctx context.Context, repo Repo, sha string) ([]Check, error)
	// CommentOnce posts body in the thread exactly once per marker: a comment of the bot holding
	// marker (as an HTML comment) is answered instead of posting a second one after a lost reply.
	CommentOnce(ctx context.Context, repo Repo, number int, marker, body string) (Comment, error)
	// EditComment replaces a comment's body, keeping the drover marker it holds.
	EditComment(ctx context.Context, repo Repo, id int64, body string) error
	// Permission is login's on the repository; PermNone for a user the forge does not know.
	Permission(ctx context.Context, repo Repo, login string) (Permission, error)
}

// Hooks makes and removes the repository webhooks drover receives.
type Hooks interface {
	CreateHook(ctx context.Context, repo Repo, h NewHook) (id int64, err error) // exactly once per URL
	DeleteHook(ctx context.Context, repo Repo, id int64) error                  // a missing hook is no error
}

// Every forge's Client is also Threads and Hooks.
var (
	_ interface {
		Client
		Threads
		Hooks
	} = (*gitea)(nil)
	_ interface {
		Client
		Threads
		Hooks
	} = (*ghClient)(nil)
	_ interface {
		Client
		Threads
		Hooks
	} = (*gitlab)(nil)
)

// Bounds on what drover reads of a thread: texts are cut (marked), lists longer than
// maxItems are an Error.
const (
	maxText   = MaxBody // a title, body or comment
	maxField  = 1024    // a name, login, URL, path or state
	maxItems  = 5000    // comments, reviews, threads or checks
	maxMarker = 64
	// markerRoom is what a marker adds to a body: "\n\n" and its tag.
	markerRoom = len("\n\n<!-- drover: -->") + maxMarker
	maxLabels  = 100 // GitHub's most labels of an issue
	maxHookURL = 2048
	// MaxHookSecret bounds a hook's secret; the forges take far longer ones than drover makes.
	MaxHookSecret = 256
)

var (
	markerRE = regexp.MustCompile(`^[A-Za-z0-9:._-]+$`)
	loginRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*(\[bot\])?$`)
	// markerTagRE finds a drover marker in a comment's body.
	markerTagRE = regexp.MustCompile(`<!-- drover:[A-Za-z0-9:._-]{1,64} -->`)
)

// The checks of the Threads and Hooks arguments, made before any call.

func checkIssue(repo Repo, number int) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	if number <= 0 {
		return fmt.Errorf("forge: issue or pull request number %d, want 1 or more", number)
	}
	return nil
}

func checkSHA(repo Repo, sha string) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	if !gitcmd.ValidCommitID(sha) {
		return fmt.Errorf("forge: checks: %q is not a full lower-case commit id", clip(sha))
	}
	return nil
}

func checkCommentID(repo Repo, id int64) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	if id <= 0 {
		return fmt.Errorf("forge: comment id %d, want 1 or more", id)
	}
	return nil
}

// checkCommentBody refuses a comment drover would post that is blank, not plain text, or
// longer than room leaves of MaxBody (room: what drover adds, its marker).
func checkCommentBody(body string, room int) error {
	if err := rules.CheckText("comment", body, MaxBody-room); err != nil {
		return fmt.Errorf("forge: %w", err)
	}
	return nil
}

func checkMarker(marker string) error {
	switch {
	case marker == "":
		return errors.New("forge: a comment marker is required")
	case len(marker) > maxMarker:
		return fmt.Errorf("forge: comment marker: %d bytes, at most %d", len(marker), maxMarker)
	case !markerRE.MatchString(marker):
		return fmt.Errorf("forge: comment marker %q: letters, digits, ':', '.', '_' and '-' only", clip(marker))
	}
	return nil
}

func checkLogin(repo Repo, login string) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	switch {
	case login == "":
		return errors.New("forge: a login is required")
	case len(login) > 255:
		return fmt.Errorf("forge: login: %d bytes, at most 255", len(login))
	case !loginRE.MatchString(login):
		return fmt.Errorf("forge: login %q: letters, digits, '-', '_' and '.' only, starting with a letter or digit", clip(login))
	}
	return nil
}

// checkHook checks a hook to make and answers its URL as the forges will hold it: as given
// (the hub routes it as it is), https or http to a loopback address, without credentials or
// a fragment; a query may name the connection.
func checkHook(repo Repo, h NewHook) (string, error) {
	if err := repo.Validate(); err != nil {
		return "", err
	}
	if h.URL == "" {
		return "", errors.New("forge: a hook URL is required")
	}
	if len(h.URL) > maxHookURL {
		return "", fmt.Errorf("forge: hook URL: %d bytes, at most %d", len(h.URL), maxHookURL)
	}
	if err := rules.CheckPlainText("forge: hook URL", h.URL, false); err != nil || strings.ContainsAny(h.URL, " #") {
		return "", fmt.Errorf("forge: hook URL %q: no spaces, control characters or fragment", clip(h.URL))
	}
	base, query, _ := strings.Cut(h.URL, "?")
	if _, err := rules.CheckBaseURL(base); err != nil {
		return "", fmt.Errorf("forge: hook URL: %w", err)
	}
	if _, err := url.ParseQuery(query); err != nil {
		return "", fmt.Errorf("forge: hook URL %q: its query: %w", clip(h.URL), err)
	}
	switch {
	case h.Secret == "":
		return "", errors.New("forge: a hook secret is required")
	case len(h.Secret) > MaxHookSecret:
		return "", fmt.Errorf("forge: hook secret: %d bytes, at most %d", len(h.Secret), MaxHookSecret)
	case len(h.Events) == 0:
		return "", errors.New("forge: a hook needs one event or more")
	}
	if !printable(h.Secret) { // never quoted: a secret
		return "", errors.New("forge: the hook secret holds a space or a character that is not printable ASCII")
	}
	for _, e := range h.Events {
		if !slices.Contains([]string{HookIssues, HookComments, HookReviews}, e) {
			return "", fmt.Errorf("forge: hook event %q: want %s, %s or %s", clip(e), HookIssues, HookComments, HookReviews)
		}
	}
	return h.URL, nil
}

func checkHookID(repo Repo, id int64) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	if id <= 0 {
		return fmt.Errorf("forge: hook id %d, want 1 or more", id)
	}
	return nil
}

// markerTag is marker as the HTML comment a posted body ends with: unseen where the forge
// renders Markdown.
func markerTag(marker string) string { return "<!-- drover:" + marker + " -->" }

// withMarker is body with the marker tag of old (a comment's body before an edit) kept at its
// end, so a later CommentOnce still finds the comment.
func withMarker(old, body string) string {
	tag := markerTagRE.FindString(old)
	if tag == "" || strings.Contains(body, tag) {
		return body
	}
	return body + "\n\n" + tag
}

// commentOnce is every Client's CommentOnce: it looks for the bot's comment holding the
// marker, posts body with it when there is none, and, when the post is refused as a conflict
// or unanswered (the reply may be what was lost), looks again and answers the one found, as
// createOnce does for pull requests.
func commentOnce(ctx context.Context, repo Repo, number int, marker, body string,
	find func(ctx context.Context, tag string) (Comment, bool, error),
	post func(ctx context.Context, text string) (Comment, error)) (Comment, error) {
	if err := checkIssue(repo, number); err != nil {
		return Comment{}, err
	}
	if err := checkMarker(marker); err != nil {
		return Comment{}, err
	}
	if err := checkCommentBody(body, markerRoom); err != nil {
		return Comment{}, err
	}
	tag := markerTag(marker)
	if c, ok, err := find(ctx, tag); err != nil || ok {
		return c, err
	}
	c, err := post(ctx, body+"\n\n"+tag)
	if fe, ok := errors.AsType[*Error](err); ok && (fe.Code == CodeConflict || fe.Code == CodeUnavailable) {
		if found, ok, ferr := find(ctx, tag); ferr != nil || ok {
			return found, ferr
		}
	}
	return c, err
}

// hookOnce is every Client's CreateHook: the hook of the URL found is updated (its secret
// and events, which cannot be read back to compare; update answers its id, which may be a
// new one) and answered; else one is created and, when the create is refused as a conflict
// (then the one found is updated) or unanswered (then it is this create's), looked for again,
// so that neither a lost race nor a lost reply makes a second hook of a URL.
func hookOnce(ctx context.Context, find func(ctx context.Context) (int64, bool, error),
	update func(ctx context.Context, id int64) (int64, error), create func(ctx context.Context) (int64, error)) (int64, error) {
	id, ok, err := find(ctx)
	switch {
	case err != nil:
		return 0, err
	case ok:
		return update(ctx, id)
	}
	id, err = create(ctx)
	if fe, ok := errors.AsType[*Error](err); ok && (fe.Code == CodeConflict || fe.Code == CodeUnavailable) {
		switch found, ok, ferr := find(ctx); {
		case ferr != nil:
			return 0, ferr
		case ok && fe.Code == CodeConflict: // another's, since the look: given this secret too
			return update(ctx, found)
		case ok: // this create's, its reply lost
			return found, nil
		}
	}
	if err == nil && id <= 0 {
		return 0, &Error{Op: "create hook", Code: CodeBadReply, Msg: "a hook without an id"}
	}
	return id, err
}

// withPR is is, bounded, with its pull request's state, head and base when it is one.
func withPR(ctx context.Context, c Client, repo Repo, is Issue) (Issue, error) {
	if is.IsPR {
		pr, err := c.GetPR(ctx, repo, is.Number)
		if err != nil {
			return Issue{}, err
		}
		is.State, is.HeadSHA, is.HeadBranch, is.BaseBranch = pr.State, pr.HeadSHA, pr.HeadBranch, pr.Base
	}
	return is.bounded(), nil
}

// oldestFirst sorts comments by their creation, then their ids.
func oldestFirst(comments []Comment) []Comment {
	slices.SortStableFunc(comments, func(a, b Comment) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return comments
}

// reviewState is a submitted review's state as GitHub and Gitea name it; ok is false for a
// review not submitted (pending), dismissed, or a request for one.
func reviewState(s string) (state string, ok bool) {
	switch s {
	case "APPROVED":
		return ReviewApproved, true
	case "CHANGES_REQUESTED", "REQUEST_CHANGES":
		return ReviewChangesRequested, true
	case "COMMENTED", "COMMENT":
		return ReviewCommented, true
	}
	return "", false
}

// notFound tells an Error of something the forge does not have.
func notFound(err error) bool {
	fe, ok := errors.AsType[*Error](err)
	return ok && fe.Code == CodeNotFound
}

// mine finds, in comments, the first by self whose body holds tag.
func mine(comments []Comment, self, tag string) (Comment, bool) {
	for _, c := range comments {
		if strings.EqualFold(c.Author, self) && strings.Contains(c.Body, tag) {
			return c, true
		}
	}
	return Comment{}, false
}

// pages reads every page of a list, from page 1 until an empty page or the page list says
// is the last, at most maxPages and maxItems items: past them an Error, never a silent cut.
func pages[T any](ctx context.Context, op string, list func(ctx context.Context, page int) (items []T, last bool, err error)) ([]T, error) {
	var all []T
	for page := 1; page <= maxPages; page++ {
		items, last, err := list(ctx, page)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if len(all) > maxItems {
			return nil, &Error{Op: op, Code: CodeBadReply, Msg: fmt.Sprintf("more than %d items", maxItems)}
		}
		if last || len(items) == 0 {
			return all, nil
		}
	}
	return nil, &Error{Op: op, Code: CodeBadReply, Msg: fmt.Sprintf("more than %d pages", maxPages)}
}

// text bounds a text read from the forge; field a short one (a name, a URL, a state).
func clipText(s string) string  { return rules.Clip(s, maxText) }
func clipField(s string) string { return rules.Clip(s, maxField) }

// bounded is c with its texts bounded.
func (c Comment) bounded() Comment {
	c.Author, c.Body, c.URL = clipField(c.Author), clipText(c.Body), clipField(c.URL)
	return c
}

func (i Issue) bounded() Issue {
	i.Title, i.Body, i.Author, i.State, i.URL = clipText(i.Title), clipText(i.Body), clipField(i.Author), clipField(i.State), clipField(i.URL)
	i.HeadSHA, i.HeadBranch, i.BaseBranch = clipField(i.HeadSHA), clipField(i.HeadBranch), clipField(i.BaseBranch)
	if len(i.Labels) > maxLabels {
		i.Labels = i.Labels[:maxLabels]
	}
	for k, l := range i.Labels {
		i.Labels[k] = clipField(l)
	}
	return i
}

func (r Review) bounded() Review {
	r.Author, r.Body, r.CommitID, r.State = clipField(r.Author), clipText(r.Body), clipField(r.CommitID), clipField(r.State)
	return r
}

func (c Check) bounded() Check {
	c.Name, c.Status, c.Conclusion, c.URL = clipField(c.Name), clipField(c.Status), clipField(c.Conclusion), clipField(c.URL)
	return c
}

// statusCheck maps a commit status's state (GitHub's, Gitea's) to a Check's status and
// conclusion.
func statusCheck(name, state, url string) Check {
	c := Check{Name: name, Status: CheckCompleted, URL: url}
	switch state {
	case "pending":
		c.Status = CheckQueued
	case "success":
		c.Conclusion = CheckSuccess
	case "warning":
		c.Conclusion = CheckNeutral
	default: // failure, error
		c.Conclusion = CheckFailure
	}
	return c.bounded()
}

// permissionOf is the Permission of a role GitHub or Gitea names: admin, maintain, write,
// triage, read, none.
func permissionOf(role string) Permission {
	switch role {
	case "admin", "owner":
		return PermAdmin
	case "maintain", "write":
		return PermWrite
	case "triage", "read":
		return PermRead
	}
	return PermNone
}
