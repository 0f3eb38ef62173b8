package forge

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"

	"drover/internal/gitcmd"
	"drover/internal/rules"
)

const (
	// githubWeb is github.com's root; its API is at githubAPI. Any other root is a GitHub
	// Enterprise Server's, with its API under /api/v3/.
	githubWeb = "https://github.com"
	githubAPI = "https://api.github.com/"
	// githubPageSize is the most pull requests GitHub lists per page.
	githubPageSize = 100
	// githubAgent names drover to GitHub, which refuses requests without a User-Agent.
	githubAgent = "drover"
)

// githubSecret is what GitHub's tokens and JWTs look like: redacted from every error, whether
// drover holds it (a personal token) or minted it (an App's installation token, its JWT).
var githubSecret = regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9_]{16,}|github_pat_[A-Za-z0-9_]{16,}|eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)`)

// ghClient is the Client of GitHub or a GitHub Enterprise Server, over go-github.
type ghClient struct {
	web       string       // the web root, for clone URLs
	apiRoot   string       // the API's root, with a trailing slash
	uploads   string       // the uploads root; "" on github.com
	http      *http.Client // replies bounded, no credential
	token     string       // a personal access token; "" with an App
	withToken *github.Client
	app       *ghApp // nil with a token
}

// ghApp is a GitHub App's credential: its JWT finds a repository's installation, whose
// tokens ghinstallation mints and renews by their expiry.
type ghApp struct {
	id  int64
	key *rsa.PrivateKey
	jwt *github.Client // as the App: installation lookups

	mu       sync.Mutex
	installs map[Repo]*ghInstall
}

// ghInstall is a repository's installation of the App: its token source, and a client
// acting with its tokens.
type ghInstall struct {
	tokens *ghinstallation.Transport
	api    *github.Client
}

// newGitHub is the Client of GitHub (c.URL https://github.com) or of a GitHub Enterprise
// Server at c.URL (https, or http to a loopback address), acting with c's token or App.
func newGitHub(c Conn, httpClient *http.Client) (Client, error) {
	root, err := rules.CheckBaseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("forge: GitHub %w", err)
	}
	if root == "" {
		return nil, errors.New("forge: a GitHub URL is required")
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: defaultTimeout}
	}
	plain := *httpClient
	plain.Transport = boundReplies{next: httpClient.Transport}
	g := &ghClient{web: root, apiRoot: root + "/api/v3/", uploads: root + "/api/uploads/", http: &plain}
	if u, _ := url.Parse(root); u.Scheme == "https" && strings.EqualFold(u.Host, "github.com") {
		g.web, g.apiRoot, g.uploads = githubWeb, githubAPI, ""
	}
	if c.Token != "" {
		if err := checkToken("GitHub", c.Token); err != nil {
			return nil, err
		}
		g.token = c.Token
		if g.withToken, err = g.client(plain.Transport, github.WithAuthToken(c.Token)); err != nil {
			return nil, err
		}
		return g, nil
	}
	key, err := parseAppKey(c.PrivateKey)
	if err != nil {
		return nil, err
	}
	if c.AppID <= 0 {
		return nil, errors.New("forge: a GitHub App needs its id")
	}
	g.app = &ghApp{id: c.AppID, key: key, installs: map[Repo]*ghInstall{}}
	if g.app.jwt, err = g.client(g.appTransport()); err != nil {
		return nil, err
	}
	return g, nil
}

// parseAppKey reads a GitHub App's private key: RSA, in PEM (PKCS #1, as GitHub hands it
// out, or PKCS #8). Its errors quote nothing of it.
func parseAppKey(b []byte) (*rsa.PrivateKey, error) {
	const want = "forge: the GitHub App's private key: want an RSA key in PEM (PKCS #1 or #8)"
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New(want)
	}
	if k, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if rk, ok := k.(*rsa.PrivateKey); err == nil && ok {
		return rk, nil
	}
	return nil, errors.New(want)
}

// client is a go-github client of the server over rt. Its own rate-limit bookkeeping is off:
// every answer, a rate limit's too, comes from the server and maps to an Error here.
func (g *ghClient) client(rt http.RoundTripper, auth ...github.ClientOptionsFunc) (*github.Client, error) {
	hc := *g.http
	hc.Transport = rt
	opts := append([]github.ClientOptionsFunc{github.WithHTTPClient(&hc), github.WithDisableRateLimitCheck(),
		github.WithUserAgent(githubAgent)}, auth...)
	if g.uploads != "" {
		opts = append(opts, github.WithEnterpriseURLs(g.apiRoot, g.uploads))
	}
	c, err := github.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("forge: GitHub client: %w", err)
	}
	return c, nil
}

// appTransport signs requests as the App. Each user has its own: an installation's
// Transport writes to its AppsTransport when it mints.
func (g *ghClient) appTransport() *ghinstallation.AppsTransport {
	t := ghinstallation.NewAppsTransportFromPrivateKey(g.http.Transport, g.app.id, g.app.key)
	t.BaseURL = strings.TrimSuffix(g.apiRoot, "/")
	return t
}

// install is repo's installation of the App, found with the App's JWT once per repository
// and client value.
func (g *ghClient) install(ctx context.Context, repo Repo) (*ghInstall, error) {
	a := g.app
	a.mu.Lock()
	in := a.installs[repo]
	a.mu.Unlock()
	if in != nil {
		return in, nil
	}
	const op = "find the GitHub App's installation"
	inst, resp, err := a.jwt.Apps.GetRepositoryInstallation(ctx, repo.Owner, repo.Name)
	if err != nil {
		return nil, g.fail(op, resp, err)
	}
	if inst.GetID() <= 0 {
		return nil, &Error{Op: op, Code: CodeBadReply, Msg: "an installation without an id"}
	}
	tokens := ghinstallation.NewFromAppsTransport(g.appTransport(), inst.GetID())
	tokens.Client = &http.Client{Transport: g.http.Transport, Timeout: g.http.Timeout}
	api, err := g.client(tokens)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if in := a.installs[repo]; in != nil { // found meanwhile by a concurrent call
		return in, nil
	}
	in = &ghInstall{tokens: tokens, api: api}
	a.installs[repo] = in
	return in, nil
}

// forget drops repo's installation, unless another call already did and found it again.
func (a *ghApp) forget(repo Repo, in *ghInstall) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.installs[repo] == in {
		delete(a.installs, repo)
	}
}

// do runs call with the client acting on repo and maps its failure to an Error. An
// installation token GitHub refuses (401: revoked, or expired early) is the one failure tried
// again, once, with the installation found and a token minted anew: nothing was done with it.
func (g *ghClient) do(ctx context.Context, op string, repo Repo, call func(*github.Client) (*github.Response, error)) error {
	for try := 0; ; try++ {
		api, in := g.withToken, (*ghInstall)(nil)
		if g.app != nil {
			var err error
			if in, err = g.install(ctx, repo); err != nil {
				return err
			}
			api = in.api
		}
		resp, err := call(api)
		if err == nil {
			return nil
		}
		if in != nil && try == 0 && resp != nil && resp.StatusCode == http.StatusUnauthorized {
			g.app.forget(repo, in)
			continue
		}
		return g.fail(op, resp, err)
	}
}

// fail maps a go-github failure to an Error, from the server's answer when there is one (the
// API's, or the token mint's).
func (g *ghClient) fail(op string, resp *github.Response, err error) *Error {
	var hr *http.Response
	if resp != nil {
		hr = resp.Response
	}
	if he, ok := errors.AsType[*ghinstallation.HTTPError](err); ok && he.Response != nil {
		op, hr = op+": mint an installation token", he.Response
	}
	switch {
	case hr == nil:
		return transportError(op, err, g.redact)
	case hr.StatusCode/100 == 2: // the answer's body failed
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.Is(err, errReplyTooLarge):
			return &Error{Op: op, Status: hr.StatusCode, Code: CodeBadReply, Msg: fmt.Sprintf("an answer over %d bytes", maxReply)}
		case errors.As(err, &se) || errors.As(err, &te):
			return &Error{Op: op, Status: hr.StatusCode, Code: CodeBadReply,
				Msg: message("not the JSON expected: " + g.redact(err.Error()))}
		}
		e := transportError(op, err, g.redact)
		e.Status = hr.StatusCode
		return e
	}
	// go-github read the body and put it back; the mint's is unread.
	body, _ := io.ReadAll(io.LimitReader(hr.Body, maxReply))
	hr.Body.Close()
	e := statusError(op, hr, []byte(g.redact(string(body))), time.Now())
	if er, ok := errors.AsType[*github.ErrorResponse](err); ok && e.Status == http.StatusUnprocessableEntity && notReady(er) {
		e.Code = CodeNotReady
	}
	return e
}

// notReady tells GitHub's 422s of a head it does not know yet, right after a push: its
// commits not yet compared ("No commits between main and drover/job-1"), or the branch not
// yet seen (head invalid).
func notReady(er *github.ErrorResponse) bool {
	for _, e := range er.Errors {
		if strings.HasPrefix(e.Message, "No commits between") || e.Field == "head" && e.Code == "invalid" {
			return true
		}
	}
	return false
}

// redact takes secrets out of s, should a server or a proxy echo them.
func (g *ghClient) redact(s string) string {
	if g.token != "" {
		s = strings.ReplaceAll(s, g.token, "[redacted]")
	}
	return githubSecret.ReplaceAllString(s, "[redacted]")
}

func ghPR(op string, p *github.PullRequest) (PR, error) {
	if p == nil || p.GetNumber() <= 0 || p.Head == nil || p.Base == nil {
		return PR{}, &Error{Op: op, Code: CodeBadReply, Msg: "a pull request without a number, head or base"}
	}
	state := p.GetState()
	if p.GetMerged() || p.MergedAt != nil {
		state = "merged"
	}
	return PR{Number: p.GetNumber(), URL: p.GetHTMLURL(), HeadBranch: p.Head.GetRef(), HeadSHA: p.Head.GetSHA(),
		Base: p.Base.GetRef(), State: state, Draft: p.GetDraft()}, nil
}

func (g *ghClient) FindPR(ctx context.Context, repo Repo, head, base string) (PR, bool, error) {
	if err := checkFind(repo, head, base); err != nil {
		return PR{}, false, err
	}
	// GitHub filters by OWNER:BRANCH; the same repository is checked too, as on Gitea.
	return g.findOpen(ctx, "find pull request", repo, github.PullRequestListOptions{Head: repo.Owner + ":" + head, Base: base},
		func(p *github.PullRequest) bool {
			id := p.Head.GetRepo().GetID()
			return p.Head.GetRef() == head && p.Base.GetRef() == base && id != 0 && id == p.Base.GetRepo().GetID()
		})
}

func (g *ghClient) FindPRByHeadSHA(ctx context.Context, repo Repo, sha string) (PR, bool, error) {
	if err := repo.Validate(); err != nil {
		return PR{}, false, err
	}
	if !gitcmd.ValidCommitID(sha) {
		return PR{}, false, fmt.Errorf("find pull request by head: %q is not a full lower-case commit id", clip(sha))
	}
	return g.findOpen(ctx, "find pull request by head", repo, github.PullRequestListOptions{},
		func(p *github.PullRequest) bool { return p.Head.GetSHA() == sha })
}

// findOpen pages through repo's open pull requests as opts filter them for the first that
// match takes.
func (g *ghClient) findOpen(ctx context.Context, op string, repo Repo, opts github.PullRequestListOptions, match func(*github.PullRequest) bool) (PR, bool, error) {
	opts.State = "open"
	opts.PerPage = githubPageSize
	for page := 1; page <= maxPages; page++ {
		opts.Page = page
		var pulls []*github.PullRequest
		var next int
		err := g.do(ctx, op, repo, func(c *github.Client) (*github.Response, error) {
			var resp *github.Response
			var err error
			pulls, resp, err = c.PullRequests.List(ctx, repo.Owner, repo.Name, &opts)
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return PR{}, false, err
		}
		for _, p := range pulls {
			if p == nil || p.Head == nil || p.Base == nil {
				return PR{}, false, &Error{Op: op, Code: CodeBadReply, Msg: "a pull request without a head or base"}
			}
			if match(p) {
				pr, err := ghPR(op, p)
				return pr, err == nil, err
			}
		}
		if next == 0 || len(pulls) == 0 {
			return PR{}, false, nil
		}
	}
	return PR{}, false, &Error{Op: op, Code: CodeUnavailable,
		Msg: fmt.Sprintf("more than %d open pull requests to search", maxPages*githubPageSize)}
}

func (g *ghClient) CreatePR(ctx context.Context, repo Repo, n NewPR) (PR, error) {
	return createOnce(ctx, g, repo, n, func() (PR, error) {
		const op = "create pull request"
		var p *github.PullRequest
		if err := g.do(ctx, op, repo, func(c *github.Client) (resp *github.Response, err error) {
			p, resp, err = c.PullRequests.Create(ctx, repo.Owner, repo.Name, &github.NewPullRequest{
				Title: &n.Title, Head: &n.Head, Base: &n.Base, Body: &n.Body, Draft: &n.Draft})
			return resp, err
		}); err != nil {
			return PR{}, err
		}
		return ghPR(op, p)
	})
}

func (g *ghClient) GetPR(ctx context.Context, repo Repo, number int) (PR, error) {
	if err := repo.Validate(); err != nil {
		return PR{}, err
	}
	if number <= 0 {
		return PR{}, fmt.Errorf("get pull request: number %d, want 1 or more", number)
	}
	const op = "get pull request"
	var p *github.PullRequest
	if err := g.do(ctx, op, repo, func(c *github.Client) (resp *github.Response, err error) {
		p, resp, err = c.PullRequests.Get(ctx, repo.Owner, repo.Name, number)
		return resp, err
	}); err != nil {
		return PR{}, err
	}
	return ghPR(op, p)
}

func (g *ghClient) DefaultBranch(ctx context.Context, repo Repo) (string, error) {
	if err := repo.Validate(); err != nil {
		return "", err
	}
	const op = "read repository"
	var r *github.Repository
	if err := g.do(ctx, op, repo, func(c *github.Client) (resp *github.Response, err error) {
		r, resp, err = c.Repositories.Get(ctx, repo.Owner, repo.Name)
		return resp, err
	}); err != nil {
		return "", err
	}
	if err := CheckBranch("default", r.GetDefaultBranch()); err != nil {
		return "", &Error{Op: op, Code: CodeBadReply, Msg: message(err.Error())}
	}
	return r.GetDefaultBranch(), nil
}

// Remote is the repository's clone URL under the web root, pushed to with the token (an
// App's: one of its installation's, valid for a minute at least) as GitHub's git over HTTP
// takes it: basic authentication as x-access-token.
func (g *ghClient) Remote(ctx context.Context, repo Repo) (Remote, error) {
	if err := repo.Validate(); err != nil {
		return Remote{}, err
	}
	token := g.token
	if g.app != nil {
		in, err := g.install(ctx, repo)
		if err != nil {
			return Remote{}, err
		}
		if token, err = in.tokens.Token(ctx); err != nil {
			return Remote{}, g.fail("git remote", nil, err)
		}
	}
	return Remote{URL: g.web + "/" + url.PathEscape(repo.Owner) + "/" + url.PathEscape(repo.Name) + ".git",
		Header: "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))}, nil
}

// errReplyTooLarge is an answer over maxReply bytes, which boundReplies stops reading.
var errReplyTooLarge = fmt.Errorf("an answer over %d bytes", maxReply)

// boundReplies stops reading an answer at maxReply bytes.
type boundReplies struct{ next http.RoundTripper }

func (b boundReplies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := orDefault(b.next).RoundTrip(req)
	if err == nil {
		resp.Body = &boundBody{ReadCloser: resp.Body}
	}
	return resp, err
}

type boundBody struct {
	io.ReadCloser
	read int64
}

func (b *boundBody) Read(p []byte) (int, error) {
	if b.read > maxReply {
		return 0, errReplyTooLarge
	}
	// At most one byte past the bound, which tells a longer answer from one of maxReply
	// bytes, and which the reader never sees.
	p = p[:min(int64(len(p)), maxReply+1-b.read)]
	n, err := b.ReadCloser.Read(p)
	if b.read += int64(n); b.read > maxReply {
		return n - 1, errReplyTooLarge
	}
	return n, err
}

func orDefault(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		return http.DefaultTransport
	}
	return rt
}
