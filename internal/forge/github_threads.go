package forge

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v88/github"
)

// GitHub's side of Threads and Hooks, over go-github, and its GraphQL API for review threads
// (REST has no resolved flag).

// ghList reads every page of a go-github list.
func ghList[T any](ctx context.Context, g *ghClient, op string, repo Repo,
	list func(c *github.Client, opts github.ListOptions) ([]T, *github.Response, error)) ([]T, error) {
	return pages(ctx, op, func(ctx context.Context, page int) ([]T, bool, error) {
		var items []T
		last := true
		err := g.do(ctx, op, repo, func(c *github.Client) (*github.Response, error) {
			var resp *github.Response
			var err error
			items, resp, err = list(c, github.ListOptions{Page: page, PerPage: githubPageSize})
			if resp != nil {
				last = resp.NextPage == 0
			}
			return resp, err
		})
		return items, last, err
	})
}

func ghTime(t *github.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

func ghComment(c *github.IssueComment) Comment {
	return Comment{ID: c.GetID(), Author: c.GetUser().GetLogin(), Body: c.GetBody(), URL: c.GetHTMLURL(),
		CreatedAt: ghTime(c.CreatedAt), UpdatedAt: ghTime(c.UpdatedAt)}.bounded()
}

func (g *ghClient) Issue(ctx context.Context, repo Repo, number int) (Issue, error) {
	if err := checkIssue(repo, number); err != nil {
		return Issue{}, err
	}
	const op = "read issue"
	var in *github.Issue
	if err := g.do(ctx, op, repo, func(c *github.Client) (resp *github.Response, err error) {
		in, resp, err = c.Issues.Get(ctx, repo.Owner, repo.Name, number)
		return resp, err
	}); err != nil {
		return Issue{}, err
	}
	is := Issue{Number: in.GetNumber(), Title: in.GetTitle(), Body: in.GetBody(), Author: in.GetUser().GetLogin(),
		State: in.GetState(), URL: in.GetHTMLURL(), IsPR: in.IsPullRequest()}
	for _, l := range in.Labels {
		is.Labels = append(is.Labels, l.GetName())
	}
	return withPR(ctx, g, repo, is)
}

func (g *ghClient) Comments(ctx context.Context, repo Repo, number int) ([]Comment, error) {
	if err := checkIssue(repo, number); err != nil {
		return nil, err
	}
	list, err := ghList(ctx, g, "list comments", repo, func(c *github.Client, o github.ListOptions) ([]*github.IssueComment, *github.Response, error) {
		return c.Issues.ListComments(ctx, repo.Owner, repo.Name, number, &github.IssueListCommentsOptions{ListOptions: o})
	})
	if err != nil {
		return nil, err
	}
	out := make([]Comment, 0, len(list))
	for _, c := range list {
		if c != nil {
			out = append(out, ghComment(c))
		}
	}
	return oldestFirst(out), nil
}

func (g *ghClient) Reviews(ctx context.Context, repo Repo, number int) ([]Review, error) {
	if err := checkIssue(repo, number); err != nil {
		return nil, err
	}
	list, err := ghList(ctx, g, "list reviews", repo, func(c *github.Client, o github.ListOptions) ([]*github.PullRequestReview, *github.Response, error) {
		return c.PullRequests.ListReviews(ctx, repo.Owner, repo.Name, number, &o)
	})
	if err != nil {
		return nil, err
	}
	var out []Review
	for _, r := range list {
		state, ok := reviewState(r.GetState())
		if !ok {
			continue
		}
		out = append(out, Review{ID: r.GetID(), Author: r.GetUser().GetLogin(), State: state, Body: r.GetBody(),
			CommitID: r.GetCommitID(), SubmittedAt: ghTime(r.SubmittedAt)}.bounded())
	}
	return out, nil
}

// ghThreadsQuery reads a page of a pull request's review threads, each with its first page of
// comments; ghThreadCommentsQuery the next pages of a thread's comments.
const (
	ghCommentFields  = `totalCount pageInfo { hasNextPage endCursor } nodes { databaseId author { login } body url createdAt updatedAt }`
	ghThreadsQuery   = `query($owner: String!, $name: String!, $number: Int!, $after: String) { repository(owner: $owner, name: $name) { pullRequest(number: $number) { reviewThreads(first: 100, after: $after) { pageInfo { hasNextPage endCursor } nodes { id isResolved path line originalLine comments(first: 100) { ` + ghCommentFields + ` } } } } } }`
	ghThreadComments = `query($id: ID!, $after: String) { node(id: $id) { ... on PullRequestReviewThread { comments(first: 100, after: $after) { ` + ghCommentFields + ` } } } }`
)

type ghPageInfo struct {
	HasNextPage bool   `json:"hasNextPage"`
	EndCursor   string `json:"endCursor"`
}

type ghGQLComments struct {
	PageInfo ghPageInfo `json:"pageInfo"`
	Nodes    []struct {
		DatabaseID int64 `json:"databaseId"`
		Author     *struct {
			Login string `json:"login"`
		} `json:"author"`
		Body      string    `json:"body"`
		URL       string    `json:"url"`
		CreatedAt time.Time `json:"createdAt"`
		UpdatedAt time.Time `json:"updatedAt"`
	} `json:"nodes"`
}

func (cs ghGQLComments) comments() []Comment {
	var out []Comment
	for _, n := range cs.Nodes {
		c := Comment{ID: n.DatabaseID, Body: n.Body, URL: n.URL, CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt}
		if n.Author != nil { // a deleted account ("ghost")
			c.Author = n.Author.Login
		}
		out = append(out, c.bounded())
	}
	return out
}

func (g *ghClient) ReviewThreads(ctx context.Context, repo Repo, number int) ([]ReviewThread, error) {
	if err := checkIssue(repo, number); err != nil {
		return nil, err
	}
	const op = "list review threads"
	after, total := "", 0
	var out []ReviewThread
	for range maxPages {
		var data struct {
			Repository *struct {
				PullRequest *struct {
					ReviewThreads struct {
						PageInfo ghPageInfo `json:"pageInfo"`
						Nodes    []struct {
							ID           string        `json:"id"`
							IsResolved   bool          `json:"isResolved"`
							Path         string        `json:"path"`
							Line         *int          `json:"line"`
							OriginalLine *int          `json:"originalLine"`
							Comments     ghGQLComments `json:"comments"`
						} `json:"nodes"`
					} `json:"reviewThreads"`
				} `json:"pullRequest"`
			} `json:"repository"`
		}
		vars := map[string]any{"owner": repo.Owner, "name": repo.Name, "number": number, "after": nullable(after)}
		if err := g.graphQL(ctx, op, repo, ghThreadsQuery, vars, &data); err != nil {
			return nil, err
		}
		if data.Repository == nil || data.Repository.PullRequest == nil {
			return nil, &Error{Op: op, Code: CodeNotFound, Msg: "no such pull request"}
		}
		rt := data.Repository.PullRequest.ReviewThreads
		for _, n := range rt.Nodes {
			if total += len(n.Comments.Nodes); total > maxItems {
				return nil, &Error{Op: op, Code: CodeBadReply, Msg: "too many review comments"}
			}
			if n.IsResolved {
				continue
			}
			t := ReviewThread{Path: clipField(n.Path), Line: cmp.Or(deref(n.Line), deref(n.OriginalLine)), Comments: n.Comments.comments()}
			more, err := g.threadComments(ctx, op, repo, n.ID, n.Comments.PageInfo, &total)
			if err != nil {
				return nil, err
			}
			t.Comments = append(t.Comments, more...)
			out = append(out, t)
		}
		if !rt.PageInfo.HasNextPage || rt.PageInfo.EndCursor == "" {
			return out, nil
		}
		after = rt.PageInfo.EndCursor
	}
	return nil, &Error{Op: op, Code: CodeBadReply, Msg: "too many pages of review threads"}
}

// threadComments reads a thread's comments after its first page.
func (g *ghClient) threadComments(ctx context.Context, op string, repo Repo, id string, pi ghPageInfo, total *int) ([]Comment, error) {
	var out []Comment
	for page := 0; pi.HasNextPage && pi.EndCursor != ""; page++ {
		if page == maxPages {
			return nil, &Error{Op: op, Code: CodeBadReply, Msg: "too many pages of a thread's comments"}
		}
		var data struct {
			Node *struct {
				Comments ghGQLComments `json:"comments"`
			} `json:"node"`
		}
		if err := g.graphQL(ctx, op, repo, ghThreadComments, map[string]any{"id": id, "after": pi.EndCursor}, &data); err != nil {
			return nil, err
		}
		if data.Node == nil {
			return nil, &Error{Op: op, Code: CodeNotFound, Msg: "a review thread gone"}
		}
		if *total += len(data.Node.Comments.Nodes); *total > maxItems {
			return nil, &Error{Op: op, Code: CodeBadReply, Msg: "too many review comments"}
		}
		out = append(out, data.Node.Comments.comments()...)
		pi = data.Node.Comments.PageInfo
	}
	return out, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// graphQL posts a query to the GraphQL API through the REST client (its credential, bounds and
// errors) and decodes its data into out. An answer with errors is an Error of the first.
func (g *ghClient) graphQL(ctx context.Context, op string, repo Repo, query string, vars map[string]any, out any) error {
	var reply struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	err := g.do(ctx, op, repo, func(c *github.Client) (*github.Response, error) {
		req, err := c.NewRequest(ctx, http.MethodPost, g.graphQLURL(), map[string]any{"query": query, "variables": vars})
		if err != nil {
			return nil, err
		}
		return c.Do(req, &reply)
	})
	if err != nil {
		return err
	}
	if len(reply.Errors) > 0 {
		e := &Error{Op: op, Code: CodeRefused, Msg: message(redact(reply.Errors[0].Message, g.token))}
		switch reply.Errors[0].Type {
		case "NOT_FOUND":
			e.Code = CodeNotFound
		case "RATE_LIMITED":
			e.Code, e.RetryAfter = CodeRateLimited, secondaryWait
		}
		return e
	}
	if len(reply.Data) == 0 || string(reply.Data) == "null" {
		return &Error{Op: op, Code: CodeBadReply, Msg: "an answer without data"}
	}
	if err := json.Unmarshal(reply.Data, out); err != nil {
		return &Error{Op: op, Code: CodeBadReply, Msg: message("not the JSON expected: " + err.Error())}
	}
	return nil
}

// graphQLURL is the GraphQL endpoint beside the REST API: api.github.com/graphql, or an
// Enterprise Server's /api/graphql.
func (g *ghClient) graphQLURL() string {
	if g.apiRoot == githubAPI {
		return githubAPI + "graphql"
	}
	return strings.TrimSuffix(g.apiRoot, "v3/") + "graphql"
}

func (g *ghClient) Checks(ctx context.Context, repo Repo, sha string) ([]Check, error) {
	if err := checkSHA(repo, sha); err != nil {
		return nil, err
	}
	const op = "list checks"
	runs, err := ghList(ctx, g, op, repo, func(c *github.Client, o github.ListOptions) ([]*github.CheckRun, *github.Response, error) {
		res, resp, err := c.Checks.ListCheckRunsForRef(ctx, repo.Owner, repo.Name, sha, &github.ListCheckRunsOptions{ListOptions: o})
		return res.GetCheckRuns(), resp, err
	})
	if err != nil {
		return nil, err
	}
	statuses, err := ghList(ctx, g, op, repo, func(c *github.Client, o github.ListOptions) ([]*github.RepoStatus, *github.Response, error) {
		res, resp, err := c.Repositories.GetCombinedStatus(ctx, repo.Owner, repo.Name, sha, &o)
		if res == nil {
			return nil, resp, err
		}
		return res.Statuses, resp, err
	})
	if err != nil {
		return nil, err
	}
	if len(runs)+len(statuses) > maxItems {
		return nil, &Error{Op: op, Code: CodeBadReply, Msg: "too many checks"}
	}
	var out []Check
	for _, r := range runs {
		c := Check{Name: r.GetName(), Status: r.GetStatus(), Conclusion: r.GetConclusion(), URL: r.GetHTMLURL()}
		if c.Status != CheckInProgress && c.Status != CheckCompleted { // waiting, requested, pending
			c.Status = CheckQueued
		}
		out = append(out, c.bounded())
	}
	for _, s := range statuses {
		out = append(out, statusCheck(s.GetContext(), s.GetState(), s.GetTargetURL()))
	}
	return out, nil
}

// self is the login drover comments as: the token's user, or the App's bot.
func (g *ghClient) self(ctx context.Context, repo Repo) (string, error) {
	const op = "read the token's user"
	if g.app != nil {
		a, resp, err := g.app.jwt.Apps.Get(ctx, "")
		if err != nil {
			return "", g.fail(op, resp, err)
		}
		if a.GetSlug() == "" {
			return "", &Error{Op: op, Code: CodeBadReply, Msg: "an App without a slug"}
		}
		return a.GetSlug() + "[bot]", nil
	}
	var u *github.User
	if err := g.do(ctx, op, repo, func(c *github.Client) (resp *github.Response, err error) {
		u, resp, err = c.Users.Get(ctx, "")
		return resp, err
	}); err != nil {
		return "", err
	}
	if u.GetLogin() == "" {
		return "", &Error{Op: op, Code: CodeBadReply, Msg: "a user without a login"}
	}
	return u.GetLogin(), nil
}

func (g *ghClient) CommentOnce(ctx context.Context, repo Repo, number int, marker, body string) (Comment, error) {
	find := func(ctx context.Context, tag string) (Comment, bool, error) {
		self, err := g.self(ctx, repo)
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
		var c *github.IssueComment
		err := g.do(ctx, "post comment", repo, func(api *github.Client) (resp *github.Response, err error) {
			c, resp, err = api.Issues.CreateComment(ctx, repo.Owner, repo.Name, number, &github.IssueComment{Body: &text})
			return resp, err
		})
		if err != nil {
			return Comment{}, err
		}
		return ghComment(c), nil
	})
}

func (g *ghClient) EditComment(ctx context.Context, repo Repo, id int64, body string) error {
	if err := checkCommentID(repo, id); err != nil {
		return err
	}
	if err := checkCommentBody(body, markerRoom); err != nil {
		return err
	}
	return g.do(ctx, "edit comment", repo, func(c *github.Client) (*github.Response, error) {
		old, resp, err := c.Issues.GetComment(ctx, repo.Owner, repo.Name, id)
		if err != nil {
			return resp, err
		}
		text := withMarker(old.GetBody(), body)
		_, resp, err = c.Issues.EditComment(ctx, repo.Owner, repo.Name, id, &github.IssueComment{Body: &text})
		return resp, err
	})
}

func (g *ghClient) Permission(ctx context.Context, repo Repo, login string) (Permission, error) {
	if err := checkLogin(repo, login); err != nil {
		return "", err
	}
	var p *github.RepositoryPermissionLevel
	err := g.do(ctx, "read permission", repo, func(c *github.Client) (resp *github.Response, err error) {
		p, resp, err = c.Repositories.GetPermissionLevel(ctx, repo.Owner, repo.Name, login)
		return resp, err
	})
	if notFound(err) {
		return PermNone, nil
	}
	if err != nil {
		return "", err
	}
	// role_name tells maintain and triage, which permission folds into write and read.
	if perm := permissionOf(p.GetRoleName()); perm != PermNone {
		return perm, nil
	}
	return permissionOf(p.GetPermission()), nil
}

// githubEvents are GitHub's hook events of each of drover's.
var githubEvents = map[string][]string{
	HookIssues:   {"issues"},
	HookComments: {"issue_comment"},
	HookReviews:  {"pull_request_review", "pull_request_review_comment"},
}

func (g *ghClient) CreateHook(ctx context.Context, repo Repo, h NewHook) (int64, error) {
	u, err := checkHook(repo, h)
	if err != nil {
		return 0, err
	}
	find := func(ctx context.Context) (int64, bool, error) {
		list, err := ghList(ctx, g, "list hooks", repo, func(c *github.Client, o github.ListOptions) ([]*github.Hook, *github.Response, error) {
			return c.Repositories.ListHooks(ctx, repo.Owner, repo.Name, &o)
		})
		for _, x := range list {
			if x.GetConfig().GetURL() == u {
				return x.GetID(), true, nil
			}
		}
		return 0, false, err
	}
	hook := &github.Hook{Config: &github.HookConfig{URL: &u, ContentType: github.Ptr("json"), Secret: &h.Secret,
		InsecureSSL: github.Ptr("0")}, Events: hookEvents(githubEvents, h.Events), Active: github.Ptr(true)}
	return hookOnce(ctx, find,
		func(ctx context.Context, id int64) (int64, error) {
			return id, g.do(ctx, "update hook", repo, func(c *github.Client) (resp *github.Response, err error) {
				_, resp, err = c.Repositories.EditHook(ctx, repo.Owner, repo.Name, id, hook)
				return resp, err
			})
		},
		func(ctx context.Context) (int64, error) {
			var x *github.Hook
			err := g.do(ctx, "create hook", repo, func(c *github.Client) (resp *github.Response, err error) {
				x, resp, err = c.Repositories.CreateHook(ctx, repo.Owner, repo.Name, hook)
				return resp, err
			})
			return x.GetID(), err
		})
}

func (g *ghClient) DeleteHook(ctx context.Context, repo Repo, id int64) error {
	if err := checkHookID(repo, id); err != nil {
		return err
	}
	err := g.do(ctx, "delete hook", repo, func(c *github.Client) (*github.Response, error) {
		return c.Repositories.DeleteHook(ctx, repo.Owner, repo.Name, id)
	})
	if notFound(err) {
		return nil
	}
	return err
}
