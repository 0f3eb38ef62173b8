package forge

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// Gitea's side of Threads and Hooks, over its REST API v1.

type giteaUser struct {
	Login string `json:"login"`
}

type giteaComment struct {
	ID        int64      `json:"id"`
	User      *giteaUser `json:"user"`
	Body      string     `json:"body"`
	HTMLURL   string     `json:"html_url"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
}

func (u *giteaUser) login() string {
	if u == nil {
		return ""
	}
	return u.Login
}

func (c giteaComment) comment() Comment {
	return Comment{ID: c.ID, Author: c.User.login(), Body: c.Body, URL: c.HTMLURL,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}.bounded()
}

func (g *gitea) Issue(ctx context.Context, repo Repo, number int) (Issue, error) {
	if err := checkIssue(repo, number); err != nil {
		return Issue{}, err
	}
	const op = "read issue"
	var in struct {
		Number  int        `json:"number"`
		Title   string     `json:"title"`
		Body    string     `json:"body"`
		User    *giteaUser `json:"user"`
		State   string     `json:"state"`
		HTMLURL string     `json:"html_url"`
		Labels  []struct {
			Name string `json:"name"`
		} `json:"labels"`
		PullRequest *struct{} `json:"pull_request"`
	}
	if err := g.call(ctx, op, http.MethodGet, repoPath(repo, "issues", strconv.Itoa(number)), nil, nil, &in); err != nil {
		return Issue{}, err
	}
	is := Issue{Number: in.Number, Title: in.Title, Body: in.Body, Author: in.User.login(), State: in.State,
		URL: in.HTMLURL, IsPR: in.PullRequest != nil}
	for _, l := range in.Labels {
		is.Labels = append(is.Labels, l.Name)
	}
	return withPR(ctx, g, repo, is)
}

// Comments reads the conversation in one answer: Gitea's list of an issue's comments has no
// pages (it answers them all; maxReply and maxItems bound them).
func (g *gitea) Comments(ctx context.Context, repo Repo, number int) ([]Comment, error) {
	if err := checkIssue(repo, number); err != nil {
		return nil, err
	}
	const op = "list comments"
	var list []giteaComment
	if err := g.call(ctx, op, http.MethodGet, repoPath(repo, "issues", strconv.Itoa(number), "comments"), nil, nil, &list); err != nil {
		return nil, err
	}
	if len(list) > maxItems {
		return nil, &Error{Op: op, Code: CodeBadReply, Msg: "more than " + strconv.Itoa(maxItems) + " comments"}
	}
	out := make([]Comment, 0, len(list))
	for _, c := range list {
		out = append(out, c.comment())
	}
	return oldestFirst(out), nil
}

type giteaReview struct {
	ID          int64      `json:"id"`
	User        *giteaUser `json:"user"`
	State       string     `json:"state"`
	Body        string     `json:"body"`
	CommitID    string     `json:"commit_id"`
	SubmittedAt time.Time  `json:"submitted_at"`
}

// reviews is every review of pull request number, pending ones (a reviewer's draft) too.
func (g *gitea) reviews(ctx context.Context, op string, repo Repo, number int) ([]giteaReview, error) {
	return pages(ctx, op, func(ctx context.Context, page int) ([]giteaReview, bool, error) {
		var list []giteaReview
		q := url.Values{"page": {strconv.Itoa(page)}, "limit": {strconv.Itoa(pageSize)}}
		err := g.call(ctx, op, http.MethodGet, repoPath(repo, "pulls", strconv.Itoa(number), "reviews"), q, nil, &list)
		return list, false, err
	})
}

func (g *gitea) Reviews(ctx context.Context, repo Repo, number int) ([]Review, error) {
	if err := checkIssue(repo, number); err != nil {
		return nil, err
	}
	list, err := g.reviews(ctx, "list reviews", repo, number)
	if err != nil {
		return nil, err
	}
	var out []Review
	for _, r := range list {
		state, ok := reviewState(r.State)
		if !ok {
			continue
		}
		out = append(out, Review{ID: r.ID, Author: r.User.login(), State: state, Body: r.Body,
			CommitID: r.CommitID, SubmittedAt: r.SubmittedAt}.bounded())
	}
	return out, nil
}

// ReviewThreads groups the review comments of submitted reviews by their place (path and
// line, new side or old): a Gitea conversation. It is resolved when one of its comments has a
// resolver.
func (g *gitea) ReviewThreads(ctx context.Context, repo Repo, number int) ([]ReviewThread, error) {
	if err := checkIssue(repo, number); err != nil {
		return nil, err
	}
	const op = "list review threads"
	reviews, err := g.reviews(ctx, op, repo, number)
	if err != nil {
		return nil, err
	}
	type place struct {
		path      string
		line, old int
	}
	var order []place
	threads := map[place]*ReviewThread{}
	total := 0
	for _, r := range reviews {
		if r.State == "PENDING" || r.State == "REQUEST_REVIEW" {
			continue
		}
		var list []struct {
			giteaComment
			Path             string     `json:"path"`
			Position         int        `json:"position"`
			OriginalPosition int        `json:"original_position"`
			Resolver         *giteaUser `json:"resolver"`
		}
		p := repoPath(repo, "pulls", strconv.Itoa(number), "reviews", strconv.FormatInt(r.ID, 10), "comments")
		if err := g.call(ctx, op, http.MethodGet, p, nil, nil, &list); err != nil {
			return nil, err
		}
		if total += len(list); total > maxItems {
			return nil, &Error{Op: op, Code: CodeBadReply, Msg: "more than " + strconv.Itoa(maxItems) + " review comments"}
		}
		for _, c := range list {
			k := place{c.Path, c.Position, c.OriginalPosition}
			t := threads[k]
			if t == nil {
				line := c.Position
				if line == 0 {
					line = c.OriginalPosition
				}
				t = &ReviewThread{Path: clipField(c.Path), Line: line}
				threads[k] = t
				order = append(order, k)
			}
			t.Resolved = t.Resolved || c.Resolver != nil
			t.Comments = append(t.Comments, c.comment())
		}
	}
	var out []ReviewThread
	for _, k := range order {
		if t := threads[k]; !t.Resolved {
			slices.SortStableFunc(t.Comments, func(a, b Comment) int { return a.CreatedAt.Compare(b.CreatedAt) })
			out = append(out, *t)
		}
	}
	return out, nil
}

// Checks is the latest commit status of each context at sha.
func (g *gitea) Checks(ctx context.Context, repo Repo, sha string) ([]Check, error) {
	if err := checkSHA(repo, sha); err != nil {
		return nil, err
	}
	const op = "list checks"
	type status struct {
		Context   string `json:"context"`
		State     string `json:"status"`
		TargetURL string `json:"target_url"`
	}
	list, err := pages(ctx, op, func(ctx context.Context, page int) ([]status, bool, error) {
		var combined struct {
			Statuses []status `json:"statuses"`
		}
		q := url.Values{"page": {strconv.Itoa(page)}, "limit": {strconv.Itoa(pageSize)}}
		err := g.call(ctx, op, http.MethodGet, repoPath(repo, "commits", sha, "status"), q, nil, &combined)
		return combined.Statuses, false, err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Check, 0, len(list))
	for _, s := range list {
		out = append(out, statusCheck(s.Context, s.State, s.TargetURL))
	}
	return out, nil
}

// self is the login of the token's user.
func (g *gitea) self(ctx context.Context) (string, error) {
	var u giteaUser
	if err := g.call(ctx, "read the token's user", http.MethodGet, "/user", nil, nil, &u); err != nil {
		return "", err
	}
	if u.Login == "" {
		return "", &Error{Op: "read the token's user", Code: CodeBadReply, Msg: "a user without a login"}
	}
	return u.Login, nil
}

func (g *gitea) CommentOnce(ctx context.Context, repo Repo, number int, marker, body string) (Comment, error) {
	find := func(ctx context.Context, tag string) (Comment, bool, error) {
		self, err := g.self(ctx)
		if err != nil {
			return Comment{}, false, err
		}
		list, err := g.Comments(ctx, repo, number)
		if err != nil {
			return Comment{}, false, err
		}
		c, ok := mine(list, self, tag)
		return c, ok, nil
	}
	return commentOnce(ctx, repo, number, marker, body, find, func(ctx context.Context, text string) (Comment, error) {
		var c giteaComment
		err := g.call(ctx, "post comment", http.MethodPost, repoPath(repo, "issues", strconv.Itoa(number), "comments"), nil,
			map[string]string{"body": text}, &c)
		return c.comment(), err
	})
}

func (g *gitea) EditComment(ctx context.Context, repo Repo, id int64, body string) error {
	if err := checkCommentID(repo, id); err != nil {
		return err
	}
	if err := checkCommentBody(body, markerRoom); err != nil {
		return err
	}
	const op = "edit comment"
	p := repoPath(repo, "issues", "comments", strconv.FormatInt(id, 10))
	var old giteaComment
	if err := g.call(ctx, op, http.MethodGet, p, nil, nil, &old); err != nil {
		return err
	}
	var c giteaComment
	return g.call(ctx, op, http.MethodPatch, p, nil, map[string]string{"body": withMarker(old.Body, body)}, &c)
}

func (g *gitea) Permission(ctx context.Context, repo Repo, login string) (Permission, error) {
	if err := checkLogin(repo, login); err != nil {
		return "", err
	}
	var p struct {
		Permission string `json:"permission"`
	}
	err := g.call(ctx, "read permission", http.MethodGet, repoPath(repo, "collaborators", login, "permission"), nil, nil, &p)
	if notFound(err) {
		// A user Gitea does not know; the repository's absence shows on every other call.
		return PermNone, nil
	}
	if err != nil {
		return "", err
	}
	return permissionOf(p.Permission), nil
}

// giteaEvents are Gitea's hook events of each of drover's.
var giteaEvents = map[string][]string{
	HookIssues:   {"issues_only", "issue_assign", "issue_label"},
	HookComments: {"issue_comment", "pull_request_comment"},
	HookReviews:  {"pull_request_review"},
}

func hookEvents(m map[string][]string, events []string) []string {
	var out []string
	for _, e := range events {
		for _, fe := range m[e] {
			if !slices.Contains(out, fe) {
				out = append(out, fe)
			}
		}
	}
	return out
}

func (g *gitea) CreateHook(ctx context.Context, repo Repo, h NewHook) (int64, error) {
	u, err := checkHook(repo, h)
	if err != nil {
		return 0, err
	}
	type hook struct {
		ID     int64             `json:"id"`
		Config map[string]string `json:"config"`
	}
	find := func(ctx context.Context) (int64, bool, error) {
		list, err := pages(ctx, "list hooks", func(ctx context.Context, page int) ([]hook, bool, error) {
			var list []hook
			q := url.Values{"page": {strconv.Itoa(page)}, "limit": {strconv.Itoa(pageSize)}}
			err := g.call(ctx, "list hooks", http.MethodGet, repoPath(repo, "hooks"), q, nil, &list)
			return list, false, err
		})
		for _, x := range list {
			if x.Config["url"] == u {
				return x.ID, true, nil
			}
		}
		return 0, false, err
	}
	create := func(ctx context.Context) (int64, error) {
		var x hook
		err := g.call(ctx, "create hook", http.MethodPost, repoPath(repo, "hooks"), nil, map[string]any{"type": "gitea",
			"config": map[string]string{"url": u, "content_type": "json", "secret": h.Secret},
			"events": hookEvents(giteaEvents, h.Events), "active": true}, &x)
		return x.ID, err
	}
	// Gitea's edit of a hook keeps its secret: the hook found is replaced.
	replace := func(ctx context.Context, id int64) (int64, error) {
		if err := g.DeleteHook(ctx, repo, id); err != nil {
			return 0, err
		}
		return create(ctx)
	}
	return hookOnce(ctx, find, replace, create)
}

func (g *gitea) DeleteHook(ctx context.Context, repo Repo, id int64) error {
	if err := checkHookID(repo, id); err != nil {
		return err
	}
	err := g.call(ctx, "delete hook", http.MethodDelete, repoPath(repo, "hooks", strconv.FormatInt(id, 10)), nil, nil, nil)
	if notFound(err) {
		return nil
	}
	return err
}
