package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"drover/internal/rules"
)

const (
	// maxReply bounds an answer drover reads: a page of 50 pull requests with long bodies.
	maxReply = 8 << 20
	// pageSize is Gitea's default most items per page (MAX_RESPONSE_ITEMS).
	pageSize = 50
	// draftPrefix makes a Gitea pull request a work in progress (its default
	// WORK_IN_PROGRESS_PREFIXES); its API takes no draft flag.
	draftPrefix = "WIP: "
	// defaultTimeout bounds a call when the caller gives no client of its own.
	defaultTimeout = time.Minute
)

// gitea is the Client of a Gitea or Forgejo server, over its REST API v1.
type gitea struct {
	base  string // the server's root URL, no trailing slash
	token string
	http  *http.Client
}

// NewGitea is the Client of the Gitea or Forgejo server at baseURL (https, or http to a
// loopback address), acting with token (a personal access token with the repository scope).
// httpClient may be nil for one with a minute's timeout per call.
func NewGitea(baseURL, token string, httpClient *http.Client) (Client, error) {
	if strings.TrimSpace(baseURL) == "" {
		return nil, errors.New("forge: a Gitea base URL is required")
	}
	base, err := rules.CheckBaseURL(baseURL)
	if err != nil {
		return nil, fmt.Errorf("forge: Gitea %w", err)
	}
	if err := checkToken("Gitea", token); err != nil {
		return nil, err
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: defaultTimeout}
	}
	return &gitea{base: base, token: token, http: httpClient}, nil
}

// giteaPull is the part of Gitea's pull request drover reads.
type giteaPull struct {
	Number  int    `json:"number"`
	HTMLURL string `json:"html_url"`
	State   string `json:"state"`
	Draft   bool   `json:"draft"`
	Merged  bool   `json:"merged"`
	Head    *struct {
		Ref    string `json:"ref"`
		SHA    string `json:"sha"`
		RepoID int64  `json:"repo_id"`
	} `json:"head"`
	Base *struct {
		Ref    string `json:"ref"`
		RepoID int64  `json:"repo_id"`
	} `json:"base"`
}

func (p giteaPull) pr(op string) (PR, error) {
	if p.Number <= 0 || p.Head == nil || p.Base == nil {
		return PR{}, &Error{Op: op, Code: CodeBadReply, Msg: "a pull request without a number, head or base"}
	}
	state := p.State
	if p.Merged {
		state = "merged"
	}
	return PR{Number: p.Number, URL: p.HTMLURL, HeadBranch: p.Head.Ref, HeadSHA: p.Head.SHA,
		Base: p.Base.Ref, State: state, Draft: p.Draft}, nil
}

func (g *gitea) FindPR(ctx context.Context, repo Repo, head, base string) (PR, bool, error) {
	if err := checkFind(repo, head, base); err != nil {
		return PR{}, false, err
	}
	// One call on the happy path: Gitea's lookup by base and head (both in the repository).
	// It answers one pull request of the pair, which may be a closed one while another is
	// open: then, and for a base with a '/' (which its route cannot take), the open ones are
	// searched.
	if !strings.Contains(base, "/") {
		const op = "find pull request"
		var p giteaPull
		parts := []string{url.PathEscape(base)}
		for seg := range strings.SplitSeq(head, "/") {
			parts = append(parts, url.PathEscape(seg))
		}
		err := g.call(ctx, op, http.MethodGet, repoPath(repo, "pulls")+"/"+strings.Join(parts, "/"), nil, nil, &p)
		if notFound(err) {
			return PR{}, false, nil
		}
		if err != nil {
			return PR{}, false, err
		}
		if p.State == "open" && !p.Merged && p.Head != nil && p.Base != nil && p.Head.RepoID == p.Base.RepoID {
			pr, err := p.pr(op)
			return pr, err == nil, err
		}
	}
	// A head in the base's own repository: a fork's branch of the same name is another's.
	return g.findOpen(ctx, "find pull request", repo, base, func(p giteaPull) bool {
		return p.Head.Ref == head && p.Base.Ref == base && p.Head.RepoID == p.Base.RepoID
	})
}

func (g *gitea) FindPRByHeadSHA(ctx context.Context, repo Repo, sha string) (PR, bool, error) {
	if err := checkHeadSHA(repo, sha); err != nil {
		return PR{}, false, err
	}
	return g.findOpen(ctx, "find pull request by head", repo, "", func(p giteaPull) bool {
		return p.Head.SHA == sha
	})
}

// findOpen searches repo's open pull requests (into base, when given).
func (g *gitea) findOpen(ctx context.Context, op string, repo Repo, base string, match func(giteaPull) bool) (PR, bool, error) {
	q := url.Values{"state": {"open"}, "limit": {strconv.Itoa(pageSize)}}
	if base != "" {
		q.Set("base_branch", base)
	}
	list := func(ctx context.Context, page int) ([]giteaPull, error) {
		q.Set("page", strconv.Itoa(page))
		var pulls []giteaPull
		if err := g.call(ctx, op, http.MethodGet, repoPath(repo, "pulls"), q, nil, &pulls); err != nil {
			return nil, err
		}
		for _, p := range pulls {
			if p.Head == nil || p.Base == nil {
				return nil, &Error{Op: op, Code: CodeBadReply, Msg: "a pull request without a head or base"}
			}
		}
		return pulls, nil
	}
	return findOpen(ctx, op, pageSize, list, match, func(p giteaPull) (PR, error) { return p.pr(op) })
}

func (g *gitea) CreatePR(ctx context.Context, repo Repo, n NewPR) (PR, error) {
	return createOnce(ctx, g, repo, n, draftPrefix, func(ctx context.Context, title string) (PR, error) {
		const op = "create pull request"
		var p giteaPull
		if err := g.call(ctx, op, http.MethodPost, repoPath(repo, "pulls"), nil,
			map[string]string{"head": n.Head, "base": n.Base, "title": title, "body": n.Body}, &p); err != nil {
			return PR{}, err
		}
		return p.pr(op)
	})
}

func (g *gitea) GetPR(ctx context.Context, repo Repo, number int) (PR, error) {
	if err := checkNumber(repo, number); err != nil {
		return PR{}, err
	}
	const op = "get pull request"
	var p giteaPull
	if err := g.call(ctx, op, http.MethodGet, repoPath(repo, "pulls", strconv.Itoa(number)), nil, nil, &p); err != nil {
		return PR{}, err
	}
	return p.pr(op)
}

func (g *gitea) DefaultBranch(ctx context.Context, repo Repo) (string, error) {
	if err := repo.CheckKind(KindGitea); err != nil {
		return "", err
	}
	const op = "read repository"
	var r struct {
		DefaultBranch string `json:"default_branch"`
	}
	if err := g.call(ctx, op, http.MethodGet, repoPath(repo), nil, nil, &r); err != nil {
		return "", err
	}
	if err := CheckBranch("default", r.DefaultBranch); err != nil {
		return "", &Error{Op: op, Code: CodeBadReply, Msg: message(err.Error())}
	}
	return r.DefaultBranch, nil
}

// Remote is the repository's clone URL under the server's root, pushed to with the token as
// a bearer (Gitea's git over HTTP takes its API tokens so).
func (g *gitea) Remote(_ context.Context, repo Repo) (Remote, error) {
	if err := repo.CheckKind(KindGitea); err != nil {
		return Remote{}, err
	}
	return Remote{URL: g.base + "/" + url.PathEscape(repo.Owner) + "/" + url.PathEscape(repo.Name) + ".git",
		Header: "Bearer " + g.token}, nil
}

// repoPath is /repos/OWNER/REPO/parts..., each escaped.
func repoPath(repo Repo, parts ...string) string {
	p := "/repos/" + url.PathEscape(repo.Owner) + "/" + url.PathEscape(repo.Name)
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// call sends one request to the API (path after /api/v1) with in as its JSON body (nil for
// none) and decodes a 2xx answer into out (nil to drop it). It never retries.
func (g *gitea) call(ctx context.Context, op, method, path string, q url.Values, in, out any) error {
	u := g.base + "/api/v1" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("forge: %s: encode the request: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("forge: %s: %w", op, err)
	}
	req.Header.Set("Authorization", "token "+g.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return transportError(op, 0, err, g.token)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReply+1))
	if err != nil {
		return &Error{Op: op, Status: resp.StatusCode, Code: CodeUnavailable,
			Msg: message("reading the answer: " + redact(err.Error(), g.token)), err: err}
	}
	if len(b) > maxReply {
		return &Error{Op: op, Status: resp.StatusCode, Code: CodeBadReply,
			Msg: fmt.Sprintf("an answer over %d bytes", maxReply)}
	}
	if resp.StatusCode/100 != 2 {
		// Redacted before the message is cut, which could leave a part of the token.
		return statusError(op, resp, []byte(redact(string(b), g.token)), time.Now())
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &Error{Op: op, Status: resp.StatusCode, Code: CodeBadReply,
			Msg: message("not the JSON expected: " + redact(err.Error(), g.token))}
	}
	return nil
}
