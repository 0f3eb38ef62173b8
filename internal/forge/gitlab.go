package forge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"drover/internal/rules"
)

const (
	// gitlabPageSize is the most merge requests GitLab answers a page.
	gitlabPageSize = 100
	// gitlabDraftPrefix makes a merge request a draft: GitLab's create takes no draft flag.
	gitlabDraftPrefix = "Draft: "
)

// gitlab is the Client of gitlab.com or a self-managed GitLab, over its REST API v4 through
// the official client. A Repo is the project OWNER/NAME; a pull request is a merge request,
// its Number the merge request's iid.
type gitlab struct {
	base  string // the instance's root URL, no trailing slash
	token string
	api   *gl.Client
}

// newGitLab is the Client of the GitLab instance at c.URL (https, or http to a loopback
// address), acting with c.Token: a personal, project or group access token with the api
// scope, sent as PRIVATE-TOKEN.
func newGitLab(c Conn, httpClient *http.Client) (Client, error) {
	base, err := rules.CheckBaseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("forge: GitLab %w", err)
	}
	if base == "" {
		return nil, errors.New("forge: a GitLab URL is required")
	}
	// The instance's root, also when given as its API's.
	base = strings.TrimSuffix(base, "/api/v4")
	if err := checkToken("GitLab", c.Token); err != nil {
		return nil, err
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: defaultTimeout}
	}
	bounded := *httpClient
	bounded.Transport = boundReplies{next: httpClient.Transport}
	api, err := gl.NewClient(c.Token,
		gl.WithBaseURL(base+"/api/v4"),
		gl.WithHTTPClient(&bounded),
		// Callers retry, honouring Error.RetryAfter; the client must neither retry nor wait.
		gl.WithoutRetries(),
		gl.WithCustomLimiter(noWait{}),
		gl.WithUserAgent("drover"))
	if err != nil {
		return nil, fmt.Errorf("forge: GitLab client: %w", err)
	}
	return &gitlab{base: base, token: c.Token, api: api}, nil
}

// noWait is a rate limiter that never waits: the client's own would sleep inside a call.
type noWait struct{}

func (noWait) Wait(context.Context) error { return nil }

// project is the project's id as the API takes it: its path (GROUP/SUB/NAME in a subgroup),
// escaped whole by the client.
func project(repo Repo) string { return repo.String() }

// mr is a merge request as drover reads it.
func (g *gitlab) mr(op string, m *gl.BasicMergeRequest) (PR, error) {
	if m == nil || m.IID <= 0 || m.SourceBranch == "" || m.TargetBranch == "" {
		return PR{}, &Error{Op: op, Code: CodeBadReply, Msg: "a merge request without an iid, source or target branch"}
	}
	var state string
	switch m.State {
	case "opened", "locked": // locked: being merged, still open
		state = "open"
	case "closed", "merged":
		state = m.State
	default:
		return PR{}, &Error{Op: op, Code: CodeBadReply, Msg: message("a merge request in state " + m.State)}
	}
	return PR{Number: int(m.IID), URL: m.WebURL, HeadBranch: m.SourceBranch, HeadSHA: m.SHA,
		Base: m.TargetBranch, State: state, Draft: m.Draft}, nil
}

func (g *gitlab) FindPR(ctx context.Context, repo Repo, head, base string) (PR, bool, error) {
	if err := checkFind(repo, head, base); err != nil {
		return PR{}, false, err
	}
	opt := &gl.ListProjectMergeRequestsOptions{SourceBranch: gl.Ptr(head), TargetBranch: gl.Ptr(base)}
	// From the project itself: a fork's branch of the same name is another's.
	return g.findOpen(ctx, "find pull request", repo, opt, func(m *gl.BasicMergeRequest) bool {
		return m.SourceBranch == head && m.TargetBranch == base && m.SourceProjectID == m.TargetProjectID
	})
}

func (g *gitlab) FindPRByHeadSHA(ctx context.Context, repo Repo, sha string) (PR, bool, error) {
	if err := checkHeadSHA(repo, sha); err != nil {
		return PR{}, false, err
	}
	return g.findOpen(ctx, "find pull request by head", repo, &gl.ListProjectMergeRequestsOptions{},
		func(m *gl.BasicMergeRequest) bool { return m.SHA == sha })
}

// findOpen searches repo's open merge requests, filtered by opt.
func (g *gitlab) findOpen(ctx context.Context, op string, repo Repo, opt *gl.ListProjectMergeRequestsOptions,
	match func(*gl.BasicMergeRequest) bool) (PR, bool, error) {
	opt.State = gl.Ptr("opened")
	opt.PerPage = gitlabPageSize
	list := func(ctx context.Context, page int) ([]*gl.BasicMergeRequest, error) {
		opt.Page = int64(page)
		mrs, resp, err := g.api.MergeRequests.ListProjectMergeRequests(project(repo), opt, gl.WithContext(ctx))
		if err != nil {
			return nil, g.fail(op, resp, err)
		}
		if slices.Contains(mrs, nil) {
			return nil, &Error{Op: op, Code: CodeBadReply, Msg: "a null merge request"}
		}
		return mrs, nil
	}
	return findOpen(ctx, op, gitlabPageSize, list, match, func(m *gl.BasicMergeRequest) (PR, error) { return g.mr(op, m) })
}

func (g *gitlab) CreatePR(ctx context.Context, repo Repo, n NewPR) (PR, error) {
	return createOnce(ctx, g, repo, n, gitlabDraftPrefix, func(ctx context.Context, title string) (PR, error) {
		const op = "create pull request"
		opt := &gl.CreateMergeRequestOptions{Title: gl.Ptr(title), Description: gl.Ptr(n.Body),
			SourceBranch: gl.Ptr(n.Head), TargetBranch: gl.Ptr(n.Base)}
		m, resp, err := g.api.MergeRequests.CreateMergeRequest(project(repo), opt, gl.WithContext(ctx))
		if err != nil {
			return PR{}, gitlabNotReady(g.fail(op, resp, err))
		}
		return g.mr(op, &m.BasicMergeRequest)
	})
}

// noSourceBranch is how GitLab refuses a merge request whose source branch it does not have:
// {"message": {"source_branch": ["does not exist"]}}, or `Source branch "B" does not exist`.
var noSourceBranch = regexp.MustCompile(`(?i)\bsource[ _]branch\b.*\bdoes not exist`)

// gitlabNotReady makes a refusal of the source branch not_ready: drover pushes it just before,
// and GitLab may not see a push for a moment.
func gitlabNotReady(err error) error {
	fe, ok := errors.AsType[*Error](err)
	if ok && (fe.Code == CodeConflict || fe.Code == CodeRefused || fe.Code == CodeNotFound) && noSourceBranch.MatchString(fe.Msg) {
		fe.Code = CodeNotReady
	}
	return err
}

func (g *gitlab) GetPR(ctx context.Context, repo Repo, number int) (PR, error) {
	if err := checkNumber(repo, number); err != nil {
		return PR{}, err
	}
	const op = "get pull request"
	m, resp, err := g.api.MergeRequests.GetMergeRequest(project(repo), int64(number), nil, gl.WithContext(ctx))
	if err != nil {
		return PR{}, g.fail(op, resp, err)
	}
	return g.mr(op, &m.BasicMergeRequest)
}

func (g *gitlab) DefaultBranch(ctx context.Context, repo Repo) (string, error) {
	if err := repo.Validate(); err != nil {
		return "", err
	}
	const op = "read repository"
	p, resp, err := g.api.Projects.GetProject(project(repo), nil, gl.WithContext(ctx))
	if err != nil {
		return "", g.fail(op, resp, err)
	}
	if err := CheckBranch("default", p.DefaultBranch); err != nil {
		return "", &Error{Op: op, Code: CodeBadReply, Msg: message(err.Error())}
	}
	return p.DefaultBranch, nil
}

// Remote is the project's clone URL under the instance's root, pushed to with the token as
// the password of the user "oauth2" (GitLab's git over HTTP takes its access tokens so).
func (g *gitlab) Remote(_ context.Context, repo Repo) (Remote, error) {
	if err := repo.Validate(); err != nil {
		return Remote{}, err
	}
	return Remote{URL: g.base + "/" + repo.escapedPath() + ".git",
		Header: "Basic " + base64.StdEncoding.EncodeToString([]byte("oauth2:"+g.token))}, nil
}

// fail is the *Error of a failed call: an answer's by statusError, else an answer drover
// cannot read, else no answer.
func (g *gitlab) fail(op string, resp *gl.Response, err error) error {
	var er *gl.ErrorResponse
	var hr *http.Response
	if resp != nil {
		hr = resp.Response
	}
	switch {
	case hr != nil && errors.As(err, &er):
		// Redacted before the message is cut, which could leave a part of the token. A 404's
		// body is not kept by the client.
		return statusError(op, hr, []byte(redact(string(er.Body), g.token)), time.Now())
	case errors.Is(err, errReplyTooLarge):
		return &Error{Op: op, Status: statusOf(hr), Code: CodeBadReply, Msg: errReplyTooLarge.Error()}
	case hr != nil && isJSONError(err):
		return &Error{Op: op, Status: hr.StatusCode, Code: CodeBadReply,
			Msg: message("not the JSON expected: " + redact(err.Error(), g.token))}
	}
	return transportError(op, statusOf(hr), err, g.token)
}

func statusOf(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}

func isJSONError(err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &te)
}
