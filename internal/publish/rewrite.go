package publish

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/rules"
	"drover/internal/store"
)

// AuthorRequester is ProjectConfig.PublishAuthor for commits authored by
// the job's requester.
const AuthorRequester = "requester"

// CodeRewrite is a publication whose commits could not be rewritten as
// its project asks (no signing key, one others may read, a name that
// cannot be an author).
const CodeRewrite = "rewrite_failed"

// PublishedRefPrefix holds a job's rewritten head in the hub's repository
// (refs/drover/published/JOB), so that no gc drops it before its push.
const PublishedRefPrefix = "refs/drover/published/"

// maxEmail bounds a project's PublishEmail.
const maxEmail = 200

// trailerRE is a line of a message's trailer block ("Key: value").
var trailerRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*: `)

// encodingRE is a commit's encoding header git may be told to keep.
var encodingRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,40}$`)

// checkAuthoring is the rule of a project's PublishAuthor and
// PublishEmail.
func checkAuthoring(cfg store.ProjectConfig) error {
	if cfg.PublishAuthor != "" && cfg.PublishAuthor != AuthorRequester {
		return call.BadRequest("publish author %q: want requester, or nothing for the commits as the agent made them",
			rules.Escape(call.Truncate(cfg.PublishAuthor, 40), false))
	}
	if e := cfg.PublishEmail; e != "" && (len(e) > maxEmail || !strings.Contains(e, "@") || strings.ContainsAny(e, "<> \t\r\n\x00")) {
		return call.BadRequest("publish email %q: an address of at most %d bytes, {user} standing for the requester's name",
			rules.Escape(call.Truncate(e, 80), false), maxEmail)
	}
	return nil
}

// CheckSigningKey is the rule of the hub's signing key: a regular file
// that only its owner may read (0600). Its content is never read here:
// only ssh-keygen, called by git, reads it.
func CheckSigningKey(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("signing key %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("signing key %s is mode %#o, readable by others: make it 0600 (chmod 600 %s)", path, perm, path)
	}
	return nil
}

// rewrites reports whether a project's publications carry rewritten
// commits rather than the job's own.
func rewrites(cfg store.ProjectConfig) bool { return cfg.PublishAuthor != "" || cfg.PublishSign }

// commitFor is the commit a publication of j pushes: the job's head, or
// its commits base..head rewritten as the project asks (rewrite).
func (s *Service) commitFor(ctx context.Context, j Job, forgeName string) (string, error) {
	if !rewrites(j.Config) {
		return j.View.Head, nil
	}
	var f store.Forge
	if err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		f, err = tx.Forge(forgeName)
		return err
	}); errors.Is(err, store.ErrNotFound) {
		return "", failf(CodeNotMapped, "the project's forge %s is gone; an admin adds it again (drover forges add %s)", forgeName, forgeName)
	} else if err != nil {
		return "", fmt.Errorf("read forge %s: %w", forgeName, err)
	}
	host := f.URL
	if u, err := url.Parse(f.URL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	return s.rewrite(ctx, j, host)
}

// rewrite writes the job's commits base..head again in the hub's
// repository with git commit-tree: the same trees, parents rewritten,
// the requester as author (when the project asks), drover as committer,
// the agent in a Co-authored-by trailer, and the hub's SSH signature
// (when it asks). The original dates are kept and SSH (Ed25519)
// signatures are deterministic, so a job rewritten again, by a resumed
// publication, gives the same commit: what keeps the push exactly once.
// The head is kept on PublishedRefPrefix+JOB. No hook or filter runs
// (gitcmd); the key is only named, by its path, to git.
func (s *Service) rewrite(ctx context.Context, j Job, forgeHost string) (string, error) {
	cfg, v := j.Config, j.View
	var pre []string
	sign := "--no-gpg-sign"
	if cfg.PublishSign {
		if s.cfg.SigningKey == "" {
			return "", failf(CodeRewrite, "the project asks for signed commits and the hub has no signing key; its operator names one (signing_key in the hub's config)")
		}
		if err := CheckSigningKey(s.cfg.SigningKey); err != nil {
			return "", failf(CodeRewrite, "%v", err)
		}
		pre, sign = []string{"-c", "gpg.format=ssh", "-c", "user.signingKey=" + s.cfg.SigningKey}, "-S"
	}
	var author *ident
	var trailer string
	if cfg.PublishAuthor == AuthorRequester {
		if !identOK(v.Requester) || !identOK(v.Agent) {
			return "", failf(CodeRewrite, "job %s's requester %q or agent %q cannot name a commit's author", v.ID,
				rules.Escape(call.Truncate(v.Requester, 40), false), rules.Escape(call.Truncate(v.Agent, 40), false))
		}
		email := v.Requester + "@users.noreply." + forgeHost
		if cfg.PublishEmail != "" {
			email = strings.ReplaceAll(cfg.PublishEmail, "{user}", v.Requester)
		}
		author = &ident{name: v.Requester, email: email}
		trailer = fmt.Sprintf("Co-authored-by: %s <%s@agents.drover.invalid>", v.Agent, v.Agent)
	}
	revs, err := s.cfg.Git.Out(ctx, j.RepoDir, "rev-list", "--reverse", "--topo-order", v.Base+".."+v.Head)
	if err != nil {
		return "", failf(CodeRewrite, "list job %s's commits: %v", v.ID, err)
	}
	mapped := map[string]string{}
	for old := range strings.FieldsSeq(revs) {
		raw, err := s.cfg.Git.Run(ctx, gitcmd.Cmd{Dir: j.RepoDir, Args: []string{"cat-file", "commit", old}})
		if err != nil {
			return "", failf(CodeRewrite, "read commit %s: %v", short(old), err)
		}
		c, err := parseCommit(string(raw))
		if err != nil {
			return "", failf(CodeRewrite, "commit %s: %v", short(old), err)
		}
		args := append([]string{}, pre...)
		if c.encoding != "" {
			args = append(args, "-c", "i18n.commitEncoding="+c.encoding)
		}
		args = append(args, "commit-tree", sign, c.tree)
		for _, p := range c.parents {
			if n, ok := mapped[p]; ok {
				p = n
			}
			args = append(args, "-p", p)
		}
		a, msg := c.author, c.message
		if author != nil {
			a.name, a.email = author.name, author.email
			msg = withTrailer(msg, trailer)
		}
		env := []string{"GIT_AUTHOR_NAME=" + a.name, "GIT_AUTHOR_EMAIL=" + a.email, "GIT_AUTHOR_DATE=" + a.date,
			"GIT_COMMITTER_NAME=drover", "GIT_COMMITTER_EMAIL=drover@localhost", "GIT_COMMITTER_DATE=" + c.committer.date}
		out, err := s.cfg.Git.Run(ctx, gitcmd.Cmd{Dir: j.RepoDir, Args: args, Env: env, Stdin: strings.NewReader(msg)})
		if err != nil {
			return "", failf(CodeRewrite, "rewrite commit %s: %v", short(old), err)
		}
		mapped[old] = strings.TrimSpace(string(out))
	}
	head, ok := mapped[v.Head]
	if !ok || !gitcmd.ValidCommitID(head) {
		return "", failf(CodeRewrite, "job %s's head %s is not among its commits since its base", v.ID, short(v.Head))
	}
	if _, err := s.cfg.Git.Out(ctx, j.RepoDir, "update-ref", PublishedRefPrefix+v.ID, head); err != nil {
		return "", failf(CodeRewrite, "keep job %s's rewritten head: %v", v.ID, err)
	}
	return head, nil
}

// ident is a commit's author or committer: name, email and date (git's
// raw "SECONDS ZONE").
type ident struct{ name, email, date string }

// identOK: s can stand in a commit's identity line.
func identOK(s string) bool {
	return strings.TrimSpace(s) != "" && !strings.ContainsAny(s, "<>\r\n\x00")
}

type commit struct {
	tree              string
	parents           []string
	author, committer ident
	encoding          string
	message           string
}

// parseCommit reads a raw commit object (git cat-file commit). Headers
// drover does not write again (an old signature, a merge tag) are
// dropped.
func parseCommit(raw string) (commit, error) {
	var c commit
	head, msg, _ := strings.Cut(raw, "\n\n")
	c.message = msg
	for line := range strings.SplitSeq(head, "\n") {
		k, val, _ := strings.Cut(line, " ")
		var err error
		switch k {
		case "tree":
			c.tree = val
		case "parent":
			c.parents = append(c.parents, val)
		case "author":
			c.author, err = parseIdent(val)
		case "committer":
			c.committer, err = parseIdent(val)
		case "encoding":
			if !encodingRE.MatchString(val) {
				err = fmt.Errorf("encoding %q", rules.Escape(call.Truncate(val, 40), false))
			}
			c.encoding = val
		}
		if err != nil {
			return commit{}, err
		}
	}
	if !gitcmd.ValidCommitID(c.tree) || c.author.date == "" || c.committer.date == "" {
		return commit{}, errors.New("not a commit object git wrote")
	}
	return c, nil
}

// parseIdent reads "NAME <EMAIL> SECONDS ZONE".
func parseIdent(s string) (ident, error) {
	i, j := strings.LastIndexByte(s, '<'), strings.LastIndexByte(s, '>')
	if i < 0 || j < i {
		return ident{}, errors.New("an identity without an email")
	}
	return ident{name: strings.TrimSpace(s[:i]), email: s[i+1 : j], date: strings.TrimSpace(s[j+1:])}, nil
}

// withTrailer is msg with trailer last in its trailer block (a new
// paragraph when it has none), unless it holds it already.
func withTrailer(msg, trailer string) string {
	msg = strings.TrimRight(msg, "\n")
	lines := strings.Split(msg, "\n")
	last := len(lines)
	for last > 0 && lines[last-1] != "" {
		last--
	}
	block := last > 0
	for _, l := range lines[last:] {
		if l == trailer {
			return msg + "\n"
		}
		block = block && trailerRE.MatchString(l)
	}
	switch {
	case msg == "":
		return trailer + "\n"
	case block:
		return msg + "\n" + trailer + "\n"
	}
	return msg + "\n\n" + trailer + "\n"
}
