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
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"

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
// go-github puts the owner into the path as it is: a nested one never gets that far.
func (g *ghClient) do(ctx context.Context, op string, repo Repo, call func(*github.Client) (*github.Response, error)) error {
	if err := repo.CheckKind(KindGitHub); err != nil {
		return err
	}
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
		return transportError(op, 0, err, g.token)
	case hr.StatusCode/100 == 2: // the answer's body failed
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.Is(err, errReplyTooLarge):
			return &Error{Op: op, Status: hr.StatusCode, Code: CodeBadReply, Msg: fmt.Sprintf("an answer over %d bytes", maxReply)}
		case errors.As(err, &se) || errors.As(err, &te):
			return &Error{Op: op, Status: hr.StatusCode, Code: CodeBadReply,
				Msg: message("not the JSON expected: " + redact(err.Error(), g.token))}
		}
		return transportError(op, hr.StatusCode, err, g.token)
	}
	// go-github read the body and put it back; the mint's is unread.
	body, _ := io.ReadAll(io.LimitReader(hr.Body, maxReply))
	hr.Body.Close()
	e := statusError(op, hr, []byte(redact(string(body), g.token)), time.Now())
	if er, ok := errors.AsType[*github.ErrorResponse](err); ok && e.Status == http.StatusUnprocessableEntity && ghNotReady(er) {
		e.Code = CodeNotReady
	}
	return e
}

// ghNotReady tells GitHub's 422s of a head it does not know yet, right after a push: its
// commits not yet compared ("No commits between main and drover/job-1"), or the branch not
// yet seen (head invalid).
func ghNotReady(er *github.ErrorResponse) bool {
	for _, e := range er.Errors {
		if strings.HasPrefix(e.Message, "No commits between") || e.Field == "head" && e.Code == "invalid" {
			return true
		}
	}
	return false
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
	if err := checkHeadSHA(repo, sha); err != nil {
		return PR{}, false, err
	}
	return g.findOpen(ctx, "find pull request by head", repo, github.PullRequestListOptions{},
		func(p *github.PullRequest) bool { return p.Head.GetSHA() == sha })
}

// findOpen searches repo's open pull requests as opts filter them. A page GitHub says is
// the last ends the search as an empty one would, without another call.
func (g *ghClient) findOpen(ctx context.Context, op string, repo Repo, opts github.PullRequestListOptions, match func(*github.PullRequest) bool) (PR, bool, error) {
	opts.State = "open"
	opts.PerPage = githubPageSize
	last := false
	list := func(ctx context.Context, page int) ([]*github.PullRequest, error) {
		if last {
			return nil, nil
		}
		opts.Page = page
		var pulls []*github.PullRequest
		err := g.do(ctx, op, repo, func(c *github.Client) (*github.Response, error) {
			var resp *github.Response
			var err error
			pulls, resp, err = c.PullRequests.List(ctx, repo.Owner, repo.Name, &opts)
			if resp != nil {
				last = resp.NextPage == 0
			}
			return resp, err
		})
		if err != nil {
			return nil, err
		}
		for _, p := range pulls {
			if p == nil || p.Head == nil || p.Base == nil {
				return nil, &Error{Op: op, Code: CodeBadReply, Msg: "a pull request without a head or base"}
			}
		}
		return pulls, nil
	}
	return findOpen(ctx, op, githubPageSize, list, match, func(p *github.PullRequest) (PR, error) { return ghPR(op, p) })
}

func (g *ghClient) CreatePR(ctx context.Context, repo Repo, n NewPR) (PR, error) {
	// GitHub takes a draft flag: no title prefix.
	return createOnce(ctx, g, repo, n, "", func(ctx context.Context, title string) (PR, error) {
		const op = "create pull request"
		var p *github.PullRequest
		if err := g.do(ctx, op, repo, func(c *github.Client) (resp *github.Response, err error) {
			p, resp, err = c.PullRequests.Create(ctx, repo.Owner, repo.Name, &github.NewPullRequest{
				Title: &title, Head: &n.Head, Base: &n.Base, Body: &n.Body, Draft: &n.Draft})
			return resp, err
		}); err != nil {
			return PR{}, err
		}
		return ghPR(op, p)
	})
}

func (g *ghClient) GetPR(ctx context.Context, repo Repo, number int) (PR, error) {
	if err := checkNumber(repo, number); err != nil {
		return PR{}, err
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
	if err := repo.CheckKind(KindGitHub); err != nil {
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
	if err := repo.CheckKind(KindGitHub); err != nil {
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
