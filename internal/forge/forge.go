// Package forge is drover's client of code forges (GitHub and GitHub Enterprise Server, Gitea
// and Forgejo, GitLab): the forge-neutral types of a repository and its pull requests, the
// Client the hub publishes results through, and its errors. It never retries (callers wait
// through internal/retry, honouring Error.RetryAfter; a GitHub App's installation token the
// server refused is the one exception: minted again once), and the token it holds goes in a
// header only: never in a URL, an error or a log line.
package forge

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"drover/internal/gitcmd"
	"drover/internal/rules"
)

// Client is the pull request operations drover needs of a forge. A repository's pull
// requests are those whose base is in it; a head is a branch of that same repository.
type Client interface {
	// FindPR finds the open pull request from branch head into branch base.
	FindPR(ctx context.Context, repo Repo, head, base string) (PR, bool, error)
	// CreatePR opens a pull request, exactly once: when one from n.Head into n.Base is
	// already open, from an earlier call or a concurrent one, it answers that one.
	CreatePR(ctx context.Context, repo Repo, n NewPR) (PR, error)
	// GetPR reads pull request number, open or not.
	GetPR(ctx context.Context, repo Repo, number int) (PR, error)
	// FindPRByHeadSHA finds the open pull request whose head is commit sha: an AGit pull
	// request (pushed to refs/for/BASE) has no branch to find it by.
	FindPRByHeadSHA(ctx context.Context, repo Repo, sha string) (PR, bool, error)
	// DefaultBranch is the repository's default branch: the base when none is given.
	DefaultBranch(ctx context.Context, repo Repo) (string, error)
	// Remote is how git reaches the repository to fetch and push. Its Header is a secret,
	// minted for this use where the forge's tokens are short-lived (a GitHub App's).
	Remote(ctx context.Context, repo Repo) (Remote, error)
}

// The checks every Client makes of its arguments before it calls out.

func checkFind(repo Repo, head, base string) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	if err := CheckBranch("head", head); err != nil {
		return err
	}
	return CheckBranch("base", base)
}

func checkHeadSHA(repo Repo, sha string) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	if !gitcmd.ValidCommitID(sha) {
		return fmt.Errorf("find pull request by head: %q is not a full lower-case commit id", clip(sha))
	}
	return nil
}

func checkNumber(repo Repo, number int) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	if number <= 0 {
		return fmt.Errorf("get pull request: number %d, want 1 or more", number)
	}
	return nil
}

// createOnce is how every Client's CreatePR opens a pull request exactly once: it looks
// first, creates (titled with draftPrefix for a draft), and when the create is refused as a
// conflict (Gitea and GitLab refuse a second open pull request of a head and base: one was
// opened since the look) or is unavailable (the reply may be what was lost), it looks again
// and answers the one found. So neither a lost race nor a lost reply makes a second one.
func createOnce(ctx context.Context, c Client, repo Repo, n NewPR, draftPrefix string,
	create func(ctx context.Context, title string) (PR, error)) (PR, error) {
	if err := repo.Validate(); err != nil {
		return PR{}, err
	}
	if err := n.Validate(); err != nil {
		return PR{}, err
	}
	if pr, ok, err := c.FindPR(ctx, repo, n.Head, n.Base); err != nil || ok {
		return pr, err
	}
	title := n.Title
	if n.Draft {
		title = draftPrefix + title
	}
	pr, err := create(ctx, title)
	if fe, ok := errors.AsType[*Error](err); ok && (fe.Code == CodeConflict || fe.Code == CodeUnavailable) {
		if found, ok, ferr := c.FindPR(ctx, repo, n.Head, n.Base); ferr != nil || ok {
			return found, ferr
		}
	}
	return pr, err
}

// maxPages bounds a search through open pull requests.
const maxPages = 100

// findOpen pages through open pull requests, from page 1 until an empty page (a server whose
// pages are smaller than asked still ends), for the first that match takes. list reads a
// page of at most pageSize; pr reads the one found.
func findOpen[T any](ctx context.Context, op string, pageSize int, list func(ctx context.Context, page int) ([]T, error),
	match func(T) bool, pr func(T) (PR, error)) (PR, bool, error) {
	for page := 1; page <= maxPages; page++ {
		items, err := list(ctx, page)
		if err != nil {
			return PR{}, false, err
		}
		if len(items) == 0 {
			return PR{}, false, nil
		}
		for _, it := range items {
			if match(it) {
				p, err := pr(it)
				return p, err == nil, err
			}
		}
	}
	return PR{}, false, &Error{Op: op, Code: CodeUnavailable,
		Msg: fmt.Sprintf("more than %d open pull requests to search", maxPages*pageSize)}
}

// Remote is a repository as git reaches it over HTTPS.
type Remote struct {
	URL string // the clone URL, without credentials
	// Header is the Authorization header's value ("Bearer ...", "Basic ..."): a secret that
	// goes to git only through its environment (gitcmd.AuthEnv), never its argv or a log line.
	Header string
}

// Kinds of forge.
const (
	KindGitea  = "gitea" // Gitea and Forgejo
	KindGitHub = "github"
	KindGitLab = "gitlab"
)

// Kinds lists them, in the order users read them.
func Kinds() []string { return []string{KindGitHub, KindGitea, KindGitLab} }

// Repo is a repository on a forge: OWNER/NAME. On GitLab the owner may be a group's path
// with its subgroups, GROUP/SUB/NAME.
type Repo struct {
	Owner, Name string
}

func (r Repo) String() string { return r.Owner + "/" + r.Name }

// Nested reports an owner of more than one level: a GitLab subgroup.
func (r Repo) Nested() bool { return strings.Contains(r.Owner, "/") }

// Name bounds: Gitea's user and organization names are at most 40 characters (GitHub's 39),
// repository names at most 100 (both). GitLab nests groups at most 20 levels deep; each level
// is held to the owner's bound.
const (
	MaxOwner    = 40
	MaxRepoName = 100
	MaxNesting  = 20
	// MaxRepoPath bounds a whole OWNER/NAME (every level at its longest).
	MaxRepoPath = MaxNesting*(MaxOwner+1) + MaxRepoName
)

var (
	ownerRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	repoNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// ParseRepo reads "OWNER/REPO" as Gitea and GitHub name them: letters, digits, '-', '_' and
// '.', an owner starting with a letter or digit, no "..", and no ".git" (a clone URL's tail).
// The name is after the last '/': a GitLab project in a subgroup is "GROUP/SUB/REPO", each
// level of its owner by the owner's rules (CheckKind refuses it on other forges).
func ParseRepo(s string) (Repo, error) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return Repo{}, fmt.Errorf("forge repository %q: want OWNER/REPO", clip(s))
	}
	r := Repo{Owner: s[:i], Name: s[i+1:]}
	if err := r.Validate(); err != nil {
		return Repo{}, err
	}
	return r, nil
}

// Validate checks both names by ParseRepo's rules.
func (r Repo) Validate() error {
	if r.Owner == "" || r.Name == "" {
		return fmt.Errorf("forge repository %q: want OWNER/REPO, both non-empty", clip(r.String()))
	}
	levels := strings.Split(r.Owner, "/")
	if len(levels) > MaxNesting {
		return fmt.Errorf("forge repository owner: %d levels, at most %d", len(levels), MaxNesting)
	}
	for _, o := range levels {
		switch {
		case len(o) > MaxOwner:
			return fmt.Errorf("forge repository owner: %d bytes, at most %d", len(o), MaxOwner)
		case !ownerRE.MatchString(o):
			return fmt.Errorf("forge repository owner %q: letters, digits, '-', '_' and '.' only, starting with a letter or digit", clip(o))
		}
	}
	switch {
	case len(r.Name) > MaxRepoName:
		return fmt.Errorf("forge repository name: %d bytes, at most %d", len(r.Name), MaxRepoName)
	case !repoNameRE.MatchString(r.Name):
		return fmt.Errorf("forge repository name %q: letters, digits, '-', '_' and '.' only", clip(r.Name))
	case strings.Contains(r.String(), "..") || r.Name == ".":
		return fmt.Errorf("forge repository %q: no \"..\" and no name \".\"", clip(r.String()))
	case strings.HasSuffix(strings.ToLower(r.Name), ".git"):
		return fmt.Errorf("forge repository %q: name it without \".git\"", clip(r.String()))
	}
	return nil
}

// CheckKind is Validate for a forge of that kind: only GitLab has subgroups.
func (r Repo) CheckKind(kind string) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Nested() && kind != KindGitLab {
		return fmt.Errorf("forge repository %q: a %s repository is OWNER/REPO (only GitLab has subgroups)", clip(r.String()), kind)
	}
	return nil
}

// escapedPath is the repository's path in a web or clone URL, each level escaped.
func (r Repo) escapedPath() string {
	levels := strings.Split(r.String(), "/")
	for i, l := range levels {
		levels[i] = url.PathEscape(l)
	}
	return strings.Join(levels, "/")
}

// PR is a pull request as drover reads it.
type PR struct {
	Number     int
	URL        string // the page people open
	HeadBranch string // the head's ref: a branch, or refs/pull/N/head for an AGit pull request
	HeadSHA    string
	Base       string // the base branch
	State      string // open, closed or merged
	Draft      bool
}

// NewPR is a pull request to open.
type NewPR struct {
	Head, Base  string // branches of the repository
	Title, Body string
	// Draft opens it as a work in progress (by the title prefix "WIP: " on Gitea, "Draft: " on
	// GitLab).
	Draft bool
}

// Text bounds: Gitea and GitLab keep at most 255 characters of a title, and room is left for
// a draft's longest prefix (GitLab's "Draft: "); GitHub refuses a body over 65536 characters.
const (
	MaxTitle = 255 - len(gitlabDraftPrefix)
	MaxBody  = 65536
)

// Validate checks the branches by git's ref rules, a title of one line of plain text and a
// body (which may be empty) of plain text, each within its bound.
func (n NewPR) Validate() error {
	if err := CheckBranch("head", n.Head); err != nil {
		return err
	}
	if err := CheckBranch("base", n.Base); err != nil {
		return err
	}
	if n.Head == n.Base {
		return fmt.Errorf("pull request: head and base are both %q", n.Head)
	}
	if err := rules.CheckText("pull request title", n.Title, MaxTitle); err != nil {
		return err
	}
	if err := rules.CheckPlainText("pull request title", n.Title, false); err != nil {
		return err
	}
	if len(n.Body) > MaxBody {
		return &rules.LimitError{What: "pull request body", Size: len(n.Body), Limit: MaxBody}
	}
	return rules.CheckPlainText("pull request body", n.Body, true)
}

// MaxBranch bounds a branch name (git's own limit is the file system's, often 255 bytes).
const MaxBranch = 255

// CheckBranch refuses what `git check-ref-format --branch` refuses, and more: names that are
// not printable ASCII, and names starting with '-' (an option to git). what names the field.
func CheckBranch(what, name string) error {
	bad := func(why string) error { return fmt.Errorf("%s branch %q: %s", what, clip(name), why) }
	switch {
	case name == "":
		return fmt.Errorf("%s branch is required", what)
	case len(name) > MaxBranch:
		return fmt.Errorf("%s branch: %d bytes, at most %d", what, len(name), MaxBranch)
	case strings.HasPrefix(name, "-"):
		return bad("must not start with '-'")
	case name == "@" || name == "HEAD":
		return bad("not a branch name")
	case strings.Contains(name, "..") || strings.Contains(name, "@{"):
		return bad(`must not hold ".." or "@{"`)
	case strings.HasSuffix(name, "."):
		return bad("must not end with '.'")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`~^:?*[\`, c) >= 0 {
			return bad(`printable ASCII only, without space, ~ ^ : ? * [ \`)
		}
	}
	for part := range strings.SplitSeq(name, "/") {
		switch {
		case part == "":
			return bad("no empty part (a leading, trailing or double '/')")
		case strings.HasPrefix(part, "."):
			return bad("no part may start with '.'")
		case strings.HasSuffix(part, ".lock"):
			return bad(`no part may end with ".lock"`)
		}
	}
	return nil
}

// checkToken refuses a token that cannot go in a header as it is. It never quotes the token:
// an error must not carry it, even a wrong one. forge names the forge.
func checkToken(forge, token string) error {
	if token == "" {
		return fmt.Errorf("forge: a %s token is required", forge)
	}
	if !printable(token) {
		return fmt.Errorf("forge: the %s token holds a space or a character that is not printable ASCII", forge)
	}
	return nil
}

// printable tells a secret that can go in a header or a form as it is: printable ASCII, no
// space.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// clip bounds what an error quotes of bad input.
func clip(s string) string { return cut(escape(s), 80) }
