package forgehook

import (
	"strings"
)

// The payloads' parts drover reads, as the forges document them.

type login struct {
	Login    string `json:"login"`    // GitHub, Gitea
	Username string `json:"username"` // GitLab, and Gitea besides login
}

func (l *login) name() string {
	if l == nil {
		return ""
	}
	if l.Login != "" {
		return l.Login
	}
	return l.Username
}

type ghLabel struct {
	Name string `json:"name"`
}

type ghRepo struct {
	FullName string `json:"full_name"`
}

type ghIssue struct {
	Number      int       `json:"number"`
	Title       string    `json:"title"`
	User        *login    `json:"user"`
	Labels      []ghLabel `json:"labels"`
	PullRequest *struct{} `json:"pull_request"` // present on a pull request's issue
	Assignee    *login    `json:"assignee"`
}

func (i *ghIssue) assignee() string { return i.Assignee.name() }

type ghComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User *login `json:"user"`
}

type ghPR struct {
	Number   int       `json:"number"`
	Title    string    `json:"title"`
	Labels   []ghLabel `json:"labels"`
	Assignee *login    `json:"assignee"`
	Head     struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
}

func (p *ghPR) assignee() string { return p.Assignee.name() }

// ghPayload is GitHub's issues, issue_comment, pull_request,
// pull_request_review and pull_request_review_comment events.
type ghPayload struct {
	Action      string     `json:"action"`
	Issue       *ghIssue   `json:"issue"`
	PullRequest *ghPR      `json:"pull_request"`
	Comment     *ghComment `json:"comment"`
	Label       *ghLabel   `json:"label"`
	Assignee    *login     `json:"assignee"`
	Review      *struct {
		ID    int64  `json:"id"`
		Body  string `json:"body"`
		State string `json:"state"`
	} `json:"review"`
	Repository *ghRepo `json:"repository"`
	Sender     *login  `json:"sender"`
}

func names(ls []ghLabel) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

func (p *ghPayload) common(ev *Event) {
	if p.Repository != nil {
		ev.Repo = p.Repository.FullName
	}
	ev.Actor = p.Sender.name()
	if p.Issue != nil {
		ev.Number, ev.Title, ev.IsPR, ev.Labels = p.Issue.Number, p.Issue.Title, p.Issue.PullRequest != nil, names(p.Issue.Labels)
	}
	if p.PullRequest != nil {
		ev.Number, ev.Title, ev.IsPR = p.PullRequest.Number, p.PullRequest.Title, true
		ev.Labels = names(p.PullRequest.Labels)
		ev.HeadSHA, ev.HeadBranch = p.PullRequest.Head.SHA, p.PullRequest.Head.Ref
	}
}

func parseGitHub(event string, body []byte, ev *Event) error {
	ev.Type = Ignored
	if event == "ping" {
		ev.Type = Ping
		return nil
	}
	switch event {
	case "issues", "issue_comment", "pull_request", "pull_request_review", "pull_request_review_comment":
	default:
		return nil
	}
	var p ghPayload
	if err := decode(body, &p); err != nil {
		return err
	}
	p.common(ev)
	switch {
	case (event == "issues" || event == "pull_request") && p.Action == "labeled" && p.Label != nil:
		ev.Type, ev.Label = Labeled, p.Label.Name
	case (event == "issues" || event == "pull_request") && p.Action == "assigned" && p.Assignee != nil:
		ev.Type, ev.Assignee = Assigned, p.Assignee.name()
	case event == "issue_comment" && p.Action == "created" && p.Comment != nil:
		ev.Type, ev.CommentID, ev.Body = Commented, p.Comment.ID, p.Comment.Body
	case event == "pull_request_review_comment" && p.Action == "created" && p.Comment != nil:
		ev.Type, ev.CommentID, ev.Body = ReviewComment, p.Comment.ID, p.Comment.Body
	case event == "pull_request_review" && p.Action == "submitted" && p.Review != nil:
		ev.Type, ev.CommentID, ev.Body = Reviewed, p.Review.ID, p.Review.Body
		ev.ReviewState = reviewState(p.Review.State)
	}
	return nil
}

// reviewState maps a forge's review state to the neutral one.
func reviewState(s string) string {
	switch strings.ToLower(s) {
	case "approved", "pull_request_review_approved":
		return ReviewApproved
	case "changes_requested", "request_changes", "pull_request_review_rejected":
		return ReviewChangesRequested
	}
	return ReviewCommentOnly
}

// giteaPayload is Gitea's (and Forgejo's) IssuePayload, IssueCommentPayload
// and PullRequestPayload.
type giteaPayload struct {
	Action      string     `json:"action"`
	Number      int        `json:"number"`
	Issue       *ghIssue   `json:"issue"`
	PullRequest *ghPR      `json:"pull_request"`
	Comment     *ghComment `json:"comment"`
	IsPull      bool       `json:"is_pull"`
	Review      *struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	} `json:"review"`
	Repository *ghRepo `json:"repository"`
	Sender     *login  `json:"sender"`
}

// parseGitea reads by X-Gitea-Event-Type, the specific event (issue_label,
// issue_assign, issue_comment, pull_request_review_rejected, ...);
// X-Gitea-Event names only the family.
func parseGitea(family, event string, body []byte, ev *Event) error {
	ev.Type = Ignored
	if event == "" {
		event = family
	}
	switch event {
	case "issue_label", "pull_request_label", "issue_assign", "pull_request_assign", "issue_comment",
		"pull_request_comment", "pull_request_review_approved", "pull_request_review_rejected",
		"pull_request_review_comment":
	default:
		return nil
	}
	var p giteaPayload
	if err := decode(body, &p); err != nil {
		return err
	}
	gh := ghPayload{Issue: p.Issue, PullRequest: p.PullRequest, Repository: p.Repository, Sender: p.Sender}
	gh.common(ev)
	if ev.Number == 0 {
		ev.Number = p.Number
	}
	ev.IsPR = ev.IsPR || p.IsPull || strings.HasPrefix(event, "pull_request")
	switch {
	case strings.HasSuffix(event, "_label") && p.Action == "label_updated":
		ev.Type = Labeled // Gitea sends the labels after the change, not the one added
	case strings.HasSuffix(event, "_assign") && p.Action == "assigned":
		ev.Type = Assigned
		if p.Issue != nil && p.Issue.assignee() != "" {
			ev.Assignee = p.Issue.assignee()
		} else if p.PullRequest != nil {
			ev.Assignee = p.PullRequest.assignee()
		}
	case (event == "issue_comment" || event == "pull_request_comment") && p.Action == "created" && p.Comment != nil:
		ev.Type, ev.CommentID, ev.Body = Commented, p.Comment.ID, p.Comment.Body
	case strings.HasPrefix(event, "pull_request_review_") && p.Review != nil:
		ev.Type, ev.Body = Reviewed, p.Review.Content
		if event == "pull_request_review_comment" {
			ev.Type = ReviewComment
		}
		ev.ReviewState = reviewState(event)
	}
	return nil
}

// glPayload is GitLab's Issue Hook, Note Hook and Merge Request Hook.
type glPayload struct {
	User    *login `json:"user"`
	Project *struct {
		Path string `json:"path_with_namespace"`
	} `json:"project"`
	Attrs *struct {
		ID           int64  `json:"id"`
		IID          int    `json:"iid"`
		Title        string `json:"title"`
		Action       string `json:"action"`
		Note         string `json:"note"`
		NoteableType string `json:"noteable_type"`
		Type         string `json:"type"` // a note's: DiffNote on a merge request's diff, a review comment
		LastCommit   *struct {
			ID string `json:"id"`
		} `json:"last_commit"`
		SourceBranch string `json:"source_branch"`
	} `json:"object_attributes"`
	Issue *struct {
		IID   int    `json:"iid"`
		Title string `json:"title"`
	} `json:"issue"`
	MergeRequest *struct {
		IID          int    `json:"iid"`
		Title        string `json:"title"`
		SourceBranch string `json:"source_branch"`
		LastCommit   *struct {
			ID string `json:"id"`
		} `json:"last_commit"`
	} `json:"merge_request"`
	Labels  []struct{ Title string } `json:"labels"`
	Changes *struct {
		Labels *struct {
			Previous []struct{ Title string } `json:"previous"`
			Current  []struct{ Title string } `json:"current"`
		} `json:"labels"`
		Assignees *struct {
			Previous []login `json:"previous"`
			Current  []login `json:"current"`
		} `json:"assignees"`
	} `json:"changes"`
}

func parseGitLab(event string, body []byte, ev *Event) error {
	ev.Type = Ignored
	switch event {
	case "Issue Hook", "Note Hook", "Merge Request Hook":
	default:
		return nil
	}
	var p glPayload
	if err := decode(body, &p); err != nil {
		return err
	}
	if p.Project != nil {
		ev.Repo = p.Project.Path
	}
	ev.Actor = p.User.name()
	if p.Attrs == nil {
		return nil
	}
	for _, l := range p.Labels {
		ev.Labels = append(ev.Labels, l.Title)
	}
	switch event {
	case "Note Hook":
		switch {
		case p.Attrs.NoteableType == "Issue" && p.Issue != nil:
			ev.Number, ev.Title = p.Issue.IID, p.Issue.Title
		case p.Attrs.NoteableType == "MergeRequest" && p.MergeRequest != nil:
			ev.Number, ev.Title, ev.IsPR, ev.HeadBranch = p.MergeRequest.IID, p.MergeRequest.Title, true, p.MergeRequest.SourceBranch
			if p.MergeRequest.LastCommit != nil {
				ev.HeadSHA = p.MergeRequest.LastCommit.ID
			}
		default:
			return nil
		}
		ev.Type, ev.CommentID, ev.Body = Commented, p.Attrs.ID, p.Attrs.Note
		if p.Attrs.Type == "DiffNote" {
			ev.Type = ReviewComment
		}
		return nil
	case "Merge Request Hook":
		ev.IsPR, ev.HeadBranch = true, p.Attrs.SourceBranch
		if p.Attrs.LastCommit != nil {
			ev.HeadSHA = p.Attrs.LastCommit.ID
		}
	}
	ev.Number, ev.Title = p.Attrs.IID, p.Attrs.Title
	if p.Attrs.Action != "update" || p.Changes == nil {
		return nil
	}
	// GitLab sends the labels and assignees before and after the change:
	// the first one added is the event.
	if c := p.Changes.Labels; c != nil {
		for _, l := range c.Current {
			if !containsTitle(c.Previous, l.Title) {
				ev.Type, ev.Label = Labeled, l.Title
				return nil
			}
		}
	}
	if c := p.Changes.Assignees; c != nil {
		for _, a := range c.Current {
			if !containsLogin(c.Previous, a.name()) {
				ev.Type, ev.Assignee = Assigned, a.name()
				return nil
			}
		}
	}
	return nil
}

func containsTitle(ls []struct{ Title string }, t string) bool {
	for _, l := range ls {
		if l.Title == t {
			return true
		}
	}
	return false
}

func containsLogin(ls []login, n string) bool {
	for _, l := range ls {
		if l.name() == n {
			return true
		}
	}
	return false
}
