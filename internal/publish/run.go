package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/gitcmd"
	"drover/internal/retry"
	"drover/internal/rules"
	"drover/internal/store"
)

// run carries a recorded publication to its end, trying again what
// waiting may cure, and records the outcome. Every step is safe to repeat:
// this is also how a hub resumes one it left pending.
func (s *Service) run(ctx context.Context, j Job, p store.Publication, actor string) store.Publication {
	unlock, err := s.core.Lock(ctx, "publish:"+p.JobID)
	if err != nil {
		return p // the hub is stopping; the next start resumes it
	}
	defer unlock()
	// Another run (a resume, another hub) may have ended it meanwhile.
	var cur store.Publication
	if err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		cur, err = tx.Publication(p.JobID)
		return err
	}); err != nil {
		s.cfg.Logger.Warn("could not read a publication to carry it on", "job", p.JobID, "err", err)
		return p
	}
	if cur.State != store.PublicationPending {
		return cur
	}
	p = cur
	if p.Title == "" {
		p.Title = defaultTitle(j.View)
	}
	p.Tries++
	s.save(ctx, &p)
	policy := s.cfg.Retry
	policy.OnRetry = func(try int, err error, wait time.Duration) {
		s.cfg.Logger.Info("publication retried", "job", p.JobID, "try", try, "wait", wait, "err", err)
	}
	err = retry.Do(ctx, policy, func(ctx context.Context) error {
		return retryable(s.once(ctx, j, &p))
	})
	if ctx.Err() != nil {
		return p // stopped with the hub: still pending
	}
	if err != nil {
		p.State = store.PublicationFailed
		p.Code, p.Reason = outcome(err)
	} else {
		p.State, p.Code, p.Reason = store.PublicationDone, CodeOK, ""
	}
	s.save(ctx, &p)
	s.cfg.Metrics.outcome(p.Code)
	text := fmt.Sprintf("published %s to %s %s", short(p.Commit), p.Repo, target(p))
	if err != nil {
		text = fmt.Sprintf("publication to %s failed: %s", p.Repo, p.Reason)
	}
	if err := s.core.Event(ctx, p.JobID, "publish", actor, text); err != nil {
		s.cfg.Logger.Warn("could not record a publication's event", "job", p.JobID, "err", err)
	}
	s.cfg.Logger.Info("publication ended", "job", p.JobID, "state", p.State, "code", p.Code, "pr", p.PRNumber)
	return p
}

// target says where a publication went, for its event.
func target(p store.Publication) string {
	switch {
	case p.PRNumber != 0:
		return fmt.Sprintf("pull request %d (%s)", p.PRNumber, p.PRURL)
	case p.Branch != "":
		return "branch " + p.Branch
	}
	return "base " + p.Base
}

func short(sha string) string { return sha[:min(len(sha), 12)] }

// once is one pass of a publication: where to push, the push, the pull
// request. Progress is recorded as it is made.
func (s *Service) once(ctx context.Context, j Job, p *store.Publication) error {
	cl, err := s.client(ctx, p.Forge)
	if err != nil {
		return err
	}
	repo, err := forge.ParseRepo(p.Repo)
	if err != nil {
		return failf(CodeNotMapped, "%v", err)
	}
	remote, err := cl.Remote(ctx, repo)
	if err != nil {
		return err
	}
	g := remoteGit{git: s.cfg.Git, dir: j.RepoDir, remote: remote}
	if p.Commit == j.View.Head && p.Pushed == "" && rewrites(j.Config) {
		// A publication its completion recorded (Intent); the rewrite is
		// recorded before the push, and is the same if repeated.
		if p.Commit, err = s.commitFor(ctx, j, p.Forge); err != nil {
			return err
		}
		s.save(ctx, p)
	}
	switch p.Mode {
	case apitypes.PublishToPR:
		return s.toPR(ctx, cl, g, repo, p)
	case apitypes.PublishAGit:
		return s.agit(ctx, cl, g, repo, p)
	}
	if p.Base == "" {
		if p.Base, err = cl.DefaultBranch(ctx, repo); err != nil {
			return err
		}
		s.save(ctx, p)
	}
	if p.Mode == apitypes.PublishBranch && !j.Config.DirectPush && p.Branch == p.Base {
		return failf(CodeProtected, "branch %s is the repository's base; the project does not allow direct pushes to it", p.Branch)
	}
	if p.Branch == p.Base {
		return failf(CodeProtected, "a pull request from %s into itself", p.Branch)
	}
	if err := s.push(ctx, g, p, p.Branch); err != nil {
		return err
	}
	if p.Mode == apitypes.PublishBranch {
		return nil
	}
	pr, err := cl.CreatePR(ctx, repo, forge.NewPR{Head: p.Branch, Base: p.Base, Title: p.Title, Body: body(j), Draft: p.Draft})
	if err != nil {
		return err
	}
	p.PRNumber, p.PRURL = pr.Number, pr.URL
	return nil
}

// push moves branch to the job's commit, a compare-and-swap on p.Expect.
// A rejected lease is success when the remote holds the commit already (a
// reply lost, a hub killed after its push): never a second push.
func (s *Service) push(ctx context.Context, g remoteGit, p *store.Publication, branch string) error {
	if p.Pushed == p.Commit {
		return nil
	}
	ref := "refs/heads/" + branch
	err := g.push(ctx, p.Commit, ref, p.Expect)
	if errors.Is(err, errStale) {
		cur, lerr := g.lsRemote(ctx, ref)
		if lerr != nil {
			return lerr
		}
		if cur != p.Commit {
			return failf(CodeRemoteMoved, "branch %s of %s is at %s, not at %s where drover last saw it; nothing was pushed (publish to another branch, or ask its owner)",
				branch, p.Repo, orNone(cur), orNone(p.Expect))
		}
	} else if err != nil {
		return err
	}
	p.Pushed = p.Commit
	s.save(ctx, p)
	return nil
}

func orNone(sha string) string {
	if sha == "" {
		return "nothing (no such branch)"
	}
	return short(sha)
}

// toPR pushes onto an open pull request's head branch, fast-forward only;
// the base is the pull request's.
func (s *Service) toPR(ctx context.Context, cl forge.Client, g remoteGit, repo forge.Repo, p *store.Publication) error {
	pr, err := cl.GetPR(ctx, repo, p.ToPR)
	if err != nil {
		return err
	}
	switch {
	case pr.State != "open" && pr.HeadSHA != p.Commit:
		return failf(CodePRClosed, "pull request %d is %s", pr.Number, pr.State)
	case strings.HasPrefix(pr.HeadBranch, "refs/"):
		return failf(CodeNotFastForward, "pull request %d has no branch to push to (an AGit pull request: publish with --agit)", pr.Number)
	}
	if err := forge.CheckBranch("head", pr.HeadBranch); err != nil {
		return failf(CodeNotFastForward, "pull request %d: %v", pr.Number, err)
	}
	p.Branch, p.Base, p.PRNumber, p.PRURL = pr.HeadBranch, pr.Base, pr.Number, pr.URL
	if p.Pushed != p.Commit && pr.HeadSHA != p.Commit {
		ok, err := g.descends(ctx, pr.HeadSHA, p.Commit, "refs/heads/"+pr.HeadBranch)
		if err != nil {
			return err
		}
		if !ok {
			return failf(CodeNotFastForward, "job's commit %s does not descend from pull request %d's head %s; nothing was pushed",
				short(p.Commit), pr.Number, short(pr.HeadSHA))
		}
		p.Expect = pr.HeadSHA
	}
	s.save(ctx, p)
	return s.push(ctx, g, p, pr.HeadBranch)
}

// agit opens (or updates) a Gitea/Forgejo pull request by pushing to
// refs/for/BASE with the job's topic: no branch, no write access to one.
// The topic is the job's, so a repeated push updates the same pull
// request; it is looked for by the job's commit first.
func (s *Service) agit(ctx context.Context, cl forge.Client, g remoteGit, repo forge.Repo, p *store.Publication) error {
	var err error
	if p.Base == "" {
		if p.Base, err = cl.DefaultBranch(ctx, repo); err != nil {
			return err
		}
		s.save(ctx, p)
	}
	if p.Pushed != p.Commit {
		if pr, ok, err := cl.FindPRByHeadSHA(ctx, repo, p.Commit); err != nil {
			return err
		} else if !ok {
			title := p.Title
			if p.Draft {
				title = "WIP: " + title
			}
			opts := []string{"topic=" + agitTopic(p.JobID), "title=" + title, "force-push"}
			if err := g.pushAGit(ctx, p.Commit, "refs/for/"+p.Base, opts); err != nil {
				return err
			}
		} else {
			p.PRNumber, p.PRURL = pr.Number, pr.URL
		}
		p.Pushed = p.Commit
		s.save(ctx, p)
	}
	if p.PRNumber != 0 {
		return nil
	}
	pr, ok, err := cl.FindPRByHeadSHA(ctx, repo, p.Commit)
	if err != nil {
		return err
	}
	if !ok {
		return &forge.Error{Op: "find the AGit pull request", Code: forge.CodeNotReady, Msg: "not listed yet"}
	}
	p.PRNumber, p.PRURL = pr.Number, pr.URL
	return nil
}

// agitTopic is a job's AGit topic.
func agitTopic(jobID string) string { return "drover-" + jobID }

// transportError is a git call to a forge that failed on the way (no
// answer, a 5xx): worth another try.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// errStale is a push whose lease was refused: the branch is not where
// drover expected it.
var errStale = errors.New("the remote branch is not at the expected commit")

// remoteGit runs git against a forge's repository from the hub's bare
// repository, its Authorization header passed through the environment.
type remoteGit struct {
	git    gitcmd.Git
	dir    string
	remote forge.Remote
}

func (g remoteGit) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	out, err := g.git.Run(ctx, gitcmd.Cmd{Dir: g.dir, Args: args, Env: gitcmd.AuthEnv(g.remote.Header)})
	if err != nil {
		return string(out), classify(err)
	}
	return string(out), nil
}

// classify tells a transport failure (worth another try) from a refusal.
func classify(err error) error {
	var ge *gitcmd.Error
	if !errors.As(err, &ge) || gitcmd.Unreachable(err) {
		return &transportError{err: err}
	}
	msg := strings.ToLower(ge.Stderr)
	for _, w := range []string{"returned error: 401", "returned error: 403", "authentication failed", "could not read username"} {
		if strings.Contains(msg, w) {
			return failf("forge_"+forge.CodeUnauthorized, "git was refused by the forge: %s", gitcmdMessage(ge))
		}
	}
	return failf(CodePushRefused, "%s", gitcmdMessage(ge))
}

// gitcmdMessage is what git said, as a publication's reason may carry it:
// one line of plain text, bounded.
func gitcmdMessage(ge *gitcmd.Error) string {
	line := rules.Escape(strings.TrimSpace(ge.Stderr), false)
	return fmt.Sprintf("git %s: %s", ge.Args[0], rules.Clip(line, 300))
}

// push moves ref to commit if it is at expect ("": absent).
func (g remoteGit) push(ctx context.Context, commit, ref, expect string) error {
	out, err := g.run(ctx, "push", "--porcelain", "--no-verify", "--force-with-lease="+ref+":"+expect,
		g.remote.URL, commit+":"+ref)
	if err != nil && (strings.Contains(out, "(stale info)") || strings.Contains(out, "(fetch first)") ||
		strings.Contains(out, "(non-fast-forward)") || strings.Contains(out, "(already exists)")) {
		return errStale
	}
	return err
}

// pushAGit pushes commit to an AGit ref with push options.
func (g remoteGit) pushAGit(ctx context.Context, commit, ref string, opts []string) error {
	args := []string{"push", "--porcelain", "--no-verify"}
	for _, o := range opts {
		args = append(args, "-o", o)
	}
	_, err := g.run(ctx, append(args, g.remote.URL, commit+":"+ref)...)
	return err
}

// lsRemote is the commit ref is at on the forge ("" when it does not
// exist).
func (g remoteGit) lsRemote(ctx context.Context, ref string) (string, error) {
	out, err := g.run(ctx, "ls-remote", g.remote.URL, ref)
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if sha, name, ok := strings.Cut(line, "\t"); ok && name == ref && gitcmd.ValidCommitID(sha) {
			return sha, nil
		}
	}
	return "", nil
}

// descends reports whether commit descends from base, fetching ref from
// the forge first when the hub's repository lacks base.
func (g remoteGit) descends(ctx context.Context, base, commit, ref string) (bool, error) {
	if _, err := g.git.Out(ctx, g.dir, "cat-file", "-e", base+"^{commit}"); err != nil {
		if _, err := g.run(ctx, "fetch", "--no-tags", "--no-write-fetch-head", g.remote.URL, ref); err != nil {
			return false, err
		}
	}
	_, err := g.git.Out(ctx, g.dir, "merge-base", "--is-ancestor", base, commit)
	if ge, ok := errors.AsType[*gitcmd.Error](err); ok && ge.Code == 1 {
		return false, nil
	}
	return err == nil, err
}
