package publish

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// BranchPrefix names a job's branch: drover/JOB, the same on every try and
// every forge, which is what finds its pull request again.
const BranchPrefix = "drover/"

// defaultTitleLen bounds a title made from the job's prompt.
const defaultTitleLen = 72

// Modes are the publication modes, the first the default.
func Modes() []string {
	return []string{apitypes.PublishPR, apitypes.PublishBranch, apitypes.PublishToPR, apitypes.PublishAGit}
}

// plan checks a request against the job and its project and makes the
// intent to record. by is the user who asks ("" for the project's
// default).
func (s *Service) plan(j Job, req apitypes.PublishRequest, by string) (store.Publication, error) {
	v := j.View
	switch {
	case v.Project == "":
		return store.Publication{}, call.BadRequest("job %s has no repository: nothing to publish", v.ID)
	case v.Mode != protocol.ModeFix:
		return store.Publication{}, call.Conflict("job %s is in %s mode and made no commit to publish", v.ID, v.Mode)
	case v.State != job.Completed:
		return store.Publication{}, call.Conflict("job %s is %s: only a completed job's result publishes", v.ID, v.State)
	case v.Head == "" || v.Head == v.Base:
		return store.Publication{}, call.Conflict("job %s made no commit: nothing to publish", v.ID)
	case j.Config.Forge == "" || j.Config.ForgeRepo == "":
		return store.Publication{}, call.Errf(409, CodeNotMapped,
			"project %s is mapped to no forge; its owner or an admin maps it: drover projects config %s --forge NAME --forge-repo OWNER/REPO",
			v.Project, v.Project)
	}
	mode := req.Mode
	if mode == "" {
		mode = apitypes.PublishPR
	}
	if !slices.Contains(Modes(), mode) {
		return store.Publication{}, call.BadRequest("publication mode %q: want one of %s", rules.Escape(mode, false), strings.Join(Modes(), ", "))
	}
	p := store.Publication{JobID: v.ID, Forge: j.Config.Forge, Repo: j.Config.ForgeRepo, Mode: mode,
		Base: req.Base, ToPR: req.ToPR, Draft: req.Draft, Commit: v.Head, State: store.PublicationPending, By: by}
	switch {
	case mode == apitypes.PublishToPR && req.ToPR <= 0:
		return store.Publication{}, call.BadRequest("to_pr needs the pull request's number (--to-pr N)")
	case mode != apitypes.PublishToPR && req.ToPR != 0:
		return store.Publication{}, call.BadRequest("a pull request's number goes with mode to_pr only")
	case mode == apitypes.PublishToPR && (req.Base != "" || req.Branch != ""):
		return store.Publication{}, call.BadRequest("a push to pull request %d takes its branch and base from it: give neither", req.ToPR)
	case mode == apitypes.PublishAGit && req.Branch != "":
		return store.Publication{}, call.BadRequest("an AGit pull request has no branch: give none (its topic is drover-%s)", v.ID)
	case req.Draft && mode != apitypes.PublishPR && mode != apitypes.PublishAGit:
		return store.Publication{}, call.BadRequest("only a new pull request can be a draft")
	}
	if mode == apitypes.PublishPR || mode == apitypes.PublishBranch {
		p.Branch = req.Branch
		if p.Branch == "" {
			p.Branch = BranchPrefix + v.ID
		}
		if err := forge.CheckBranch("head", p.Branch); err != nil {
			return store.Publication{}, call.BadRequest("%v", err)
		}
	}
	if p.Base != "" {
		if err := forge.CheckBranch("base", p.Base); err != nil {
			return store.Publication{}, call.BadRequest("%v", err)
		}
		if p.Base == p.Branch {
			return store.Publication{}, call.BadRequest("the branch and the base are both %q", p.Base)
		}
	}
	p.Title = req.Title
	if p.Title == "" {
		p.Title = defaultTitle(v)
	} else if err := checkTitle(p.Title); err != nil {
		return store.Publication{}, call.BadRequest("%v", err)
	}
	if _, err := forge.ParseRepo(p.Repo); err != nil {
		return store.Publication{}, call.Conflict("project %s's forge repository: %v", v.Project, err)
	}
	return p, nil
}

func checkTitle(t string) error {
	if err := rules.CheckText("pull request title", t, forge.MaxTitle); err != nil {
		return err
	}
	return rules.CheckPlainText("pull request title", t, false)
}

// defaultTitle is the first line of the job's prompt, as plain text, cut.
func defaultTitle(v apitypes.JobView) string {
	line, _, _ := strings.Cut(strings.TrimSpace(strings.Join(v.Args, " ")), "\n")
	line = strings.TrimSpace(rules.Escape(line, false))
	line = rules.Clip(line, defaultTitleLen)
	if line == "" {
		return "drover job " + v.ID
	}
	return line
}

// body is a pull request's description: what the job was asked, by whom,
// the issue it closes, its agent, attempts and cost, its page, and what
// the agent said it did.
// The prompt and the agent's words go in code blocks (a fence longer than
// any run of tildes in them), escaped as plain text: nothing from them is
// rendered as markdown or HTML.
func body(j Job) string {
	v := j.View
	var b strings.Builder
	if j.URL != "" {
		fmt.Fprintf(&b, "drover job [%s](%s) by %s.\n\n", v.ID, j.URL, mdText(v.Requester))
	} else {
		fmt.Fprintf(&b, "drover job %s by %s.\n\n", v.ID, mdText(v.Requester))
	}
	if j.Issue > 0 {
		// The forges' closing keyword: the issue links the pull request,
		// and merging it closes the issue.
		fmt.Fprintf(&b, "Closes #%d.\n\n", j.Issue)
	}
	b.WriteString("Asked:\n\n")
	writeBlock(&b, strings.Join(v.Args, " "))
	var cost float64
	var tokens int64
	for _, a := range v.Attempts {
		if a.Usage != nil {
			cost += a.Usage.CostUSD
			tokens += a.Usage.InputTokens + a.Usage.OutputTokens
		}
	}
	fmt.Fprintf(&b, "\n| agent | attempts | tokens | cost |\n|---|---|---|---|\n| %s | %d | %d | $%.2f |\n",
		mdText(v.Agent), len(v.Attempts), tokens, cost)
	if v.Summary != "" {
		b.WriteString("\nThe agent's summary:\n\n")
		writeBlock(&b, v.Summary)
	}
	fmt.Fprintf(&b, "\nBase %s, head %s.\n", v.Base, v.Head)
	out := b.String()
	out = rules.Clip(out, forge.MaxBody)
	return out
}

// writeBlock writes text as a fenced code block that nothing in it ends.
func writeBlock(b *strings.Builder, text string) {
	text = rules.Escape(strings.TrimRight(text, "\n"), true)
	longest, run := 0, 0
	for _, r := range text {
		if r == '~' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("~", max(3, longest+1))
	fmt.Fprintf(b, "%stext\n%s\n%s\n", fence, text, fence)
}

// mdText is a short value of a table or sentence: one line, its markdown
// and HTML characters escaped.
func mdText(s string) string {
	s = rules.Escape(s, false)
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_{}[]()<>#+-.!|~&", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// FromPR resolves pull request n of a project's forge repository for a
// job that starts at its head: the head's commit, fetched into the hub's
// repository of the project (repoDir; "" for a project whose runners fetch
// from its remote), and the publication back onto the pull request that
// the job's completion carries out (Intent).
func (s *Service) FromPR(ctx context.Context, cfg store.ProjectConfig, repoDir string, n int) (string, store.Publication, error) {
	if cfg.Forge == "" || cfg.ForgeRepo == "" {
		return "", store.Publication{}, call.Errf(409, CodeNotMapped,
			"the project is mapped to no forge, so it has no pull requests; its owner or an admin maps it (drover projects config P --forge NAME --forge-repo OWNER/REPO)")
	}
	if n <= 0 {
		return "", store.Publication{}, call.BadRequest("pull request %d: want its number", n)
	}
	cl, err := s.client(ctx, cfg.Forge)
	if err != nil {
		return "", store.Publication{}, asRefusal(err)
	}
	repo, err := forge.ParseRepo(cfg.ForgeRepo)
	if err != nil {
		return "", store.Publication{}, call.Conflict("the project's forge repository: %v", err)
	}
	pr, err := cl.GetPR(ctx, repo, n)
	if err != nil {
		return "", store.Publication{}, asRefusal(err)
	}
	switch {
	case pr.State != "open":
		return "", store.Publication{}, call.Conflict("pull request %d of %s is %s", n, repo, pr.State)
	case strings.HasPrefix(pr.HeadBranch, "refs/") || forge.CheckBranch("head", pr.HeadBranch) != nil:
		return "", store.Publication{}, call.Conflict("pull request %d of %s has no branch a job could publish back to (an AGit pull request)", n, repo)
	}
	if repoDir != "" {
		remote, err := cl.Remote(ctx, repo)
		if err != nil {
			return "", store.Publication{}, asRefusal(err)
		}
		g := remoteGit{git: s.cfg.Git, dir: repoDir, remote: remote}
		if _, err := g.run(ctx, "fetch", "--no-tags", "--no-write-fetch-head", remote.URL, "refs/heads/"+pr.HeadBranch); err != nil {
			return "", store.Publication{}, asRefusal(err)
		}
		if _, err := s.cfg.Git.Out(ctx, repoDir, "cat-file", "-e", pr.HeadSHA+"^{commit}"); err != nil {
			return "", store.Publication{}, call.Conflict("pull request %d's head moved while the hub fetched it; try again", n)
		}
	}
	now := s.cfg.Now()
	return pr.HeadSHA, store.Publication{Forge: cfg.Forge, Repo: cfg.ForgeRepo, Mode: apitypes.PublishToPR, ToPR: n,
		Branch: pr.HeadBranch, Base: pr.Base, Expect: pr.HeadSHA, PRNumber: pr.Number, PRURL: pr.URL,
		State: store.PublicationPlanned, CreatedAt: now, UpdatedAt: now}, nil
}

// DefaultHead is the head of the default branch of the project's forge
// repository: where a job started from an issue on the forge begins. For
// a project hosted on the hub (repoDir not "") it is fetched there first;
// a mapped project's runners fetch it themselves.
func (s *Service) DefaultHead(ctx context.Context, cfg store.ProjectConfig, repoDir string) (string, error) {
	if cfg.Forge == "" || cfg.ForgeRepo == "" {
		return "", call.Errf(409, CodeNotMapped, "the project is mapped to no forge")
	}
	cl, err := s.client(ctx, cfg.Forge)
	if err != nil {
		return "", asRefusal(err)
	}
	repo, err := forge.ParseRepo(cfg.ForgeRepo)
	if err != nil {
		return "", call.Conflict("the project's forge repository: %v", err)
	}
	branch, err := cl.DefaultBranch(ctx, repo)
	if err != nil {
		return "", asRefusal(err)
	}
	remote, err := cl.Remote(ctx, repo)
	if err != nil {
		return "", asRefusal(err)
	}
	g := remoteGit{git: s.cfg.Git, dir: repoDir, remote: remote}
	out, err := g.run(ctx, "ls-remote", "--", remote.URL, "refs/heads/"+branch)
	if err != nil {
		return "", asRefusal(err)
	}
	head, _, _ := strings.Cut(strings.TrimSpace(out), "\t")
	if !gitcmd.ValidCommitID(head) {
		return "", call.Conflict("%s has no branch %s to start from", repo, branch)
	}
	if repoDir != "" {
		if _, err := g.run(ctx, "fetch", "--no-tags", "--no-write-fetch-head", remote.URL, "refs/heads/"+branch); err != nil {
			return "", asRefusal(err)
		}
		if _, err := s.cfg.Git.Out(ctx, repoDir, "cat-file", "-e", head+"^{commit}"); err != nil {
			return "", call.Conflict("%s's branch %s moved while the hub fetched it; try again", repo, branch)
		}
	}
	return head, nil
}

// asRefusal is a forge's or git's failure as the caller of a request sees
// it: its code and reason, never a credential.
func asRefusal(err error) error {
	if _, ok := errors.AsType[*call.Refusal](err); ok {
		return err
	}
	code, reason := outcome(err)
	status := 502
	switch code {
	case "forge_" + forge.CodeNotFound:
		status = 404
	case CodeRewrite:
		status = 409
	}
	return call.Errf(status, code, "%s", reason)
}
