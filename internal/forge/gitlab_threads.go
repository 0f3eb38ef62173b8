package forge

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// GitLab's side of Threads and Hooks. GitLab numbers a project's issues and merge requests
// apart: issue #5 and merge request !5 may both be. A number Threads takes is an issue's iid,
// or, when the project has no such issue, a merge request's; GitLabMergeRequest(iid) names a
// merge request without that guess (as a caller that knows it has one should: a
// merge_request hook, a published pull request). Reviews and ReviewThreads take either, and
// read merge requests only. A comment is a note (system notes left out); Reviews are the
// merge request's approvals (GitLab has no review state to read over REST); a review thread is
// a resolvable discussion.

// gitlabMRBase marks a number as a merge request's: GitLabMergeRequest(iid) is iid past it.
const gitlabMRBase = 1 << 40

// GitLabMergeRequest is the number Threads takes on GitLab for merge request iid.
func GitLabMergeRequest(iid int) int { return gitlabMRBase + iid }

// ThreadNumber is the number Threads takes, on a forge of kind, for issue
// or pull request number (isPR): on GitLab a merge request's is
// GitLabMergeRequest's, as an issue may have the same iid; elsewhere they
// share one numbering.
func ThreadNumber(kind string, number int, isPR bool) int {
	if kind == KindGitLab && isPR && number < gitlabMRBase {
		return GitLabMergeRequest(number)
	}
	return number
}

// glList reads every page of a list of the GitLab client.
func glList[T any](ctx context.Context, g *gitlab, op string, list func(o gl.ListOptions) ([]T, *gl.Response, error)) ([]T, error) {
	return pages(ctx, op, func(ctx context.Context, page int) ([]T, bool, error) {
		items, resp, err := list(gl.ListOptions{Page: int64(page), PerPage: gitlabPageSize})
		if err != nil {
			return nil, false, g.fail(op, resp, err)
		}
		return items, resp.NextPage == 0, nil
	})
}

func glTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// thread is the iid number names and whether it is a merge request's.
func (g *gitlab) thread(ctx context.Context, op string, repo Repo, number int) (int64, bool, error) {
	if number > gitlabMRBase {
		return int64(number - gitlabMRBase), true, nil
	}
	_, resp, err := g.api.Issues.GetIssue(project(repo), int64(number), gl.WithContext(ctx))
	if err == nil {
		return int64(number), false, nil
	}
	if err := g.fail(op, resp, err); !notFound(err) {
		return 0, false, err
	}
	return int64(number), true, nil
}

func (g *gitlab) Issue(ctx context.Context, repo Repo, number int) (Issue, error) {
	if err := checkIssue(repo, number); err != nil {
		return Issue{}, err
	}
	const op = "read issue"
	if number <= gitlabMRBase {
		in, resp, err := g.api.Issues.GetIssue(project(repo), int64(number), gl.WithContext(ctx))
		if err == nil {
			is := Issue{Number: number, Title: in.Title, Body: in.Description, State: in.State, URL: in.WebURL, Labels: in.Labels}
			if in.Author != nil {
				is.Author = in.Author.Username
			}
			if is.State == "opened" {
				is.State = "open"
			}
			return is.bounded(), nil
		}
		if err := g.fail(op, resp, err); !notFound(err) {
			return Issue{}, err
		}
	}
	iid := int64(number % gitlabMRBase)
	m, resp, err := g.api.MergeRequests.GetMergeRequest(project(repo), iid, nil, gl.WithContext(ctx))
	if err != nil {
		return Issue{}, g.fail(op, resp, err)
	}
	pr, err := g.mr(op, &m.BasicMergeRequest)
	if err != nil {
		return Issue{}, err
	}
	is := Issue{Number: number, Title: m.Title, Body: m.Description, State: pr.State, URL: m.WebURL, IsPR: true,
		Labels: m.Labels, HeadSHA: pr.HeadSHA, HeadBranch: pr.HeadBranch, BaseBranch: pr.Base}
	if m.Author != nil {
		is.Author = m.Author.Username
	}
	return is.bounded(), nil
}

// glComment is note n of the issue or merge request whose page is at page.
func glComment(n *gl.Note, page string) Comment {
	return Comment{ID: n.ID, Author: n.Author.Username, Body: n.Body, URL: page + "#note_" + strconv.FormatInt(n.ID, 10),
		CreatedAt: glTime(n.CreatedAt), UpdatedAt: glTime(n.UpdatedAt)}.bounded()
}

// page is the web page of issue or merge request iid.
func (g *gitlab) page(repo Repo, iid int64, isMR bool) string {
	kind := "issues"
	if isMR {
		kind = "merge_requests"
	}
	return g.base + "/" + repo.escapedPath() + "/-/" + kind + "/" + strconv.FormatInt(iid, 10)
}

func (g *gitlab) Comments(ctx context.Context, repo Repo, number int) ([]Comment, error) {
	if err := checkIssue(repo, number); err != nil {
		return nil, err
	}
	const op = "list comments"
	iid, isMR, err := g.thread(ctx, op, repo, number)
	if err != nil {
		return nil, err
	}
	asc, created := gl.Ptr("asc"), gl.Ptr("created_at")
	notes, err := glList(ctx, g, op, func(o gl.ListOptions) ([]*gl.Note, *gl.Response, error) {
		if isMR {
			return g.api.Notes.ListMergeRequestNotes(project(repo), iid,
				&gl.ListMergeRequestNotesOptions{ListOptions: o, OrderBy: created, Sort: asc}, gl.WithContext(ctx))
		}
		return g.api.Notes.ListIssueNotes(project(repo), iid,
			&gl.ListIssueNotesOptions{ListOptions: o, OrderBy: created, Sort: asc}, gl.WithContext(ctx))
	})
	if err != nil {
		return nil, err
	}
	var out []Comment
	for _, n := range notes {
		if n != nil && !n.System {
			out = append(out, glComment(n, g.page(repo, iid, isMR)))
		}
	}
	return oldestFirst(out), nil
}

func (g *gitlab) Reviews(ctx context.Context, repo Repo, number int) ([]Review, error) {
	if err := checkIssue(repo, number); err != nil {
		return nil, err
	}
	a, resp, err := g.api.MergeRequestApprovals.GetConfiguration(project(repo), int64(number%gitlabMRBase), gl.WithContext(ctx))
	if err != nil {
		return nil, g.fail("list reviews", resp, err)
	}
	var out []Review
	for _, u := range a.ApprovedBy {
		if u == nil || u.User == nil {
			continue
		}
		out = append(out, Review{ID: u.User.ID, Author: u.User.Username, State: ReviewApproved, SubmittedAt: glTime(u.ApprovedAt)}.bounded())
	}
	return out, nil
}

func (g *gitlab) ReviewThreads(ctx context.Context, repo Repo, number int) ([]ReviewThread, error) {
	if err := checkIssue(repo, number); err != nil {
		return nil, err
	}
	const op = "list review threads"
	list, err := glList(ctx, g, op, func(o gl.ListOptions) ([]*gl.Discussion, *gl.Response, error) {
		return g.api.Discussions.ListMergeRequestDiscussions(project(repo), int64(number%gitlabMRBase),
			&gl.ListMergeRequestDiscussionsOptions{ListOptions: o}, gl.WithContext(ctx))
	})
	if err != nil {
		return nil, err
	}
	var out []ReviewThread
	total := 0
	for _, d := range list {
		if d == nil {
			continue
		}
		if total += len(d.Notes); total > maxItems {
			return nil, &Error{Op: op, Code: CodeBadReply, Msg: "too many review comments"}
		}
		// A discussion is resolved when each of its resolvable notes is.
		var t ReviewThread
		resolvable, resolved := false, true
		for _, n := range d.Notes {
			if n == nil || n.System {
				continue
			}
			if n.Resolvable {
				resolvable, resolved = true, resolved && n.Resolved
			}
			if p := n.Position; p != nil && t.Path == "" {
				t.Path, t.Line = clipField(p.NewPath), int(p.NewLine)
				if t.Path == "" || t.Line == 0 {
					t.Path, t.Line = clipField(p.OldPath), int(p.OldLine)
				}
			}
			t.Comments = append(t.Comments, glComment(n, g.page(repo, int64(number%gitlabMRBase), true)))
		}
		if resolvable && !resolved {
			out = append(out, t)
		}
	}
	return out, nil
}

func (g *gitlab) Checks(ctx context.Context, repo Repo, sha string) ([]Check, error) {
	if err := checkSHA(repo, sha); err != nil {
		return nil, err
	}
	list, err := glList(ctx, g, "list checks", func(o gl.ListOptions) ([]*gl.CommitStatus, *gl.Response, error) {
		return g.api.Commits.GetCommitStatuses(project(repo), sha, &gl.GetCommitStatusesOptions{ListOptions: o}, gl.WithContext(ctx))
	})
	if err != nil {
		return nil, err
	}
	var out []Check
	for _, s := range list {
		if s == nil {
			continue
		}
		c := Check{Name: s.Name, Status: CheckCompleted, URL: s.TargetURL}
		switch s.Status {
		case "running":
			c.Status = CheckInProgress
		case "success":
			c.Conclusion = CheckSuccess
		case "failed":
			c.Conclusion = CheckFailure
		case "canceled", "canceling":
			c.Conclusion = CheckCancelled
		case "skipped":
			c.Conclusion = CheckSkipped
		default: // created, waiting_for_resource, preparing, pending, scheduled, manual
			c.Status = CheckQueued
		}
		out = append(out, c.bounded())
	}
	return out, nil
}

func (g *gitlab) self(ctx context.Context) (string, error) {
	const op = "read the token's user"
	u, resp, err := g.api.Users.CurrentUser(gl.WithContext(ctx))
	if err != nil {
		return "", g.fail(op, resp, err)
	}
	if u.Username == "" {
		return "", &Error{Op: op, Code: CodeBadReply, Msg: "a user without a username"}
	}
	return u.Username, nil
}

func (g *gitlab) CommentOnce(ctx context.Context, repo Repo, number int, marker, body string) (Comment, error) {
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
		const op = "post comment"
		iid, isMR, err := g.thread(ctx, op, repo, number)
		if err != nil {
			return Comment{}, err
		}
		var n *gl.Note
		var resp *gl.Response
		if isMR {
			n, resp, err = g.api.Notes.CreateMergeRequestNote(project(repo), iid, &gl.CreateMergeRequestNoteOptions{Body: &text}, gl.WithContext(ctx))
		} else {
			n, resp, err = g.api.Notes.CreateIssueNote(project(repo), iid, &gl.CreateIssueNoteOptions{Body: &text}, gl.WithContext(ctx))
		}
		if err != nil {
			return Comment{}, g.fail(op, resp, err)
		}
		return glComment(n, g.page(repo, iid, isMR)), nil
	})
}

// EditComment edits the note through GraphQL: REST reaches a note only through its issue or
// merge request, which an id alone does not tell.
func (g *gitlab) EditComment(ctx context.Context, repo Repo, id int64, body string) error {
	if err := checkCommentID(repo, id); err != nil {
		return err
	}
	if err := checkCommentBody(body, markerRoom); err != nil {
		return err
	}
	const op = "edit comment"
	gid := "gid://gitlab/Note/" + strconv.FormatInt(id, 10)
	var read struct {
		Note *struct {
			Body string `json:"body"`
		} `json:"note"`
	}
	if err := g.graphQL(ctx, op, `query($id: NoteID!) { note(id: $id) { body } }`, map[string]any{"id": gid}, &read); err != nil {
		return err
	}
	if read.Note == nil {
		return &Error{Op: op, Code: CodeNotFound, Msg: "no such comment"}
	}
	var wrote struct {
		UpdateNote *struct {
			Errors []string `json:"errors"`
		} `json:"updateNote"`
	}
	if err := g.graphQL(ctx, op, `mutation($id: NoteID!, $body: String!) { updateNote(input: {id: $id, body: $body}) { errors } }`,
		map[string]any{"id": gid, "body": withMarker(read.Note.Body, body)}, &wrote); err != nil {
		return err
	}
	if wrote.UpdateNote == nil {
		return &Error{Op: op, Code: CodeBadReply, Msg: "an answer without updateNote"}
	}
	if len(wrote.UpdateNote.Errors) > 0 {
		return &Error{Op: op, Code: CodeRefused, Msg: message(wrote.UpdateNote.Errors[0])}
	}
	return nil
}

// graphQL runs a query through the client's GraphQL endpoint and decodes its data into out;
// an answer with errors is an Error of the first.
func (g *gitlab) graphQL(ctx context.Context, op, query string, vars map[string]any, out any) error {
	var reply struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	resp, err := g.api.GraphQL.Do(gl.GraphQLQuery{Query: query, Variables: vars}, &reply, gl.WithContext(ctx))
	if gre, ok := errors.AsType[*gl.GraphQLResponseError](err); ok {
		err = gre.Err
	}
	if err != nil {
		return g.fail(op, resp, err)
	}
	if len(reply.Errors) > 0 {
		return &Error{Op: op, Code: CodeRefused, Msg: message(redact(reply.Errors[0].Message, g.token))}
	}
	if err := json.Unmarshal(reply.Data, out); err != nil || len(reply.Data) == 0 {
		return &Error{Op: op, Code: CodeBadReply, Msg: "an answer without its data"}
	}
	return nil
}

func (g *gitlab) Permission(ctx context.Context, repo Repo, login string) (Permission, error) {
	if err := checkLogin(repo, login); err != nil {
		return "", err
	}
	const op = "read permission"
	users, resp, err := g.api.Users.ListUsers(&gl.ListUsersOptions{Username: &login}, gl.WithContext(ctx))
	if err != nil {
		return "", g.fail(op, resp, err)
	}
	var id int64
	for _, u := range users {
		if u != nil && u.Username == login {
			id = u.ID
		}
	}
	if id == 0 {
		return PermNone, nil
	}
	m, resp, err := g.api.ProjectMembers.GetInheritedProjectMember(project(repo), id, gl.WithContext(ctx))
	if err != nil {
		if err := g.fail(op, resp, err); !notFound(err) {
			return "", err
		}
		// Not a member (a public project's reader is not told apart).
		return PermNone, nil
	}
	switch {
	case m.AccessLevel >= gl.MaintainerPermissions:
		return PermAdmin, nil
	case m.AccessLevel >= gl.DeveloperPermissions:
		return PermWrite, nil
	case m.AccessLevel >= gl.GuestPermissions:
		return PermRead, nil
	}
	return PermNone, nil
}

func (g *gitlab) CreateHook(ctx context.Context, repo Repo, h NewHook) (int64, error) {
	u, err := checkHook(repo, h)
	if err != nil {
		return 0, err
	}
	find := func(ctx context.Context) (int64, bool, error) {
		list, err := glList(ctx, g, "list hooks", func(o gl.ListOptions) ([]*gl.ProjectHook, *gl.Response, error) {
			return g.api.Projects.ListProjectHooks(project(repo), &gl.ListProjectHooksOptions{ListOptions: o}, gl.WithContext(ctx))
		})
		for _, x := range list {
			if x != nil && x.URL == u {
				return x.ID, true, nil
			}
		}
		return 0, false, err
	}
	// Issues carry labels and assignments; notes are comments on issues and merge requests,
	// review comments among them; an approval is a merge request event.
	issues := gl.Ptr(slices.Contains(h.Events, HookIssues))
	notes := gl.Ptr(slices.Contains(h.Events, HookComments) || slices.Contains(h.Events, HookReviews))
	mrs := gl.Ptr(slices.Contains(h.Events, HookReviews))
	return hookOnce(ctx, find,
		func(ctx context.Context, id int64) (int64, error) {
			_, resp, err := g.api.Projects.EditProjectHook(project(repo), id, &gl.EditProjectHookOptions{URL: &u, Token: &h.Secret,
				IssuesEvents: issues, NoteEvents: notes, MergeRequestsEvents: mrs, PushEvents: gl.Ptr(false),
				EnableSSLVerification: gl.Ptr(true)}, gl.WithContext(ctx))
			if err != nil {
				return 0, g.fail("update hook", resp, err)
			}
			return id, nil
		},
		func(ctx context.Context) (int64, error) {
			x, resp, err := g.api.Projects.AddProjectHook(project(repo), &gl.AddProjectHookOptions{URL: &u, Token: &h.Secret,
				IssuesEvents: issues, NoteEvents: notes, MergeRequestsEvents: mrs, PushEvents: gl.Ptr(false),
				EnableSSLVerification: gl.Ptr(true)}, gl.WithContext(ctx))
			if err != nil {
				return 0, g.fail("create hook", resp, err)
			}
			return x.ID, nil
		})
}

func (g *gitlab) DeleteHook(ctx context.Context, repo Repo, id int64) error {
	if err := checkHookID(repo, id); err != nil {
		return err
	}
	resp, err := g.api.Projects.DeleteProjectHook(project(repo), id, gl.WithContext(ctx))
	if err == nil {
		return nil
	}
	if err := g.fail("delete hook", resp, err); !notFound(err) {
		return err
	}
	return nil
}
