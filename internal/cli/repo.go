package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/gitcmd"
	"drover/internal/ids"
	"drover/internal/localrepo"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// sourceOptions are the flags of `drover run` that give a job its source.
type sourceOptions struct {
	repo    string
	ref     string
	project string
	dirty   bool
	mode    string
	context []string
	fromPR  int
}

func (o *sourceOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.repo, "repo", "", "run on this git checkout: its exact commit is pushed to the hub and pinned")
	f.StringVar(&o.ref, "ref", "", "with --repo: pin this commit (branch, tag, id) instead of HEAD; the working tree is not looked at")
	f.StringVar(&o.project, "project", "", "with --repo: the hub project (default: the checkout's directory name)")
	f.BoolVar(&o.dirty, "dirty", false, "with --repo: send uncommitted changes and untracked files too, as a throwaway commit")
	f.StringVar(&o.mode, "mode", "", "with --repo: fix (publish the agent's changes; default) or observe (the tree must stay unchanged)")
	f.IntVar(&o.fromPR, "from-pr", 0, "start at the head of this pull request on the project's forge (with --project; no --repo) and publish the result back onto it")
	f.StringArrayVar(&o.context, "context", nil, "with --repo: attach a file the agent can read in $DROVER_CONTEXT_DIR (repeatable; up to 100 files, 8 MiB each, 16 MiB in all)")
}

// applySource adds the source and context files to a submission, pushing the
// pinned commit to the hub first.
func (a *app) applySource(ctx context.Context, c *client.Client, o sourceOptions, req *apitypes.SubmitRequest) error {
	if o.fromPR != 0 {
		switch {
		case o.fromPR < 0:
			return usagef("--from-pr %d: want a pull request's number", o.fromPR)
		case o.repo != "" || o.ref != "" || o.dirty:
			return usagef("--from-pr starts at the pull request's head: it cannot go with --repo, --ref or --dirty")
		case o.project == "":
			return usagef("--from-pr needs --project, the hub project mapped to the pull request's repository")
		case o.mode == protocol.ModeObserve:
			return usagef("--from-pr publishes back onto the pull request: it runs in fix mode")
		case !gitcmd.ValidProject(o.project):
			return usagef("project name %q: use 1-64 lower-case letters, digits and ._- (--project NAME)", o.project)
		}
		files, err := readContextFiles(o.context)
		if err != nil {
			return err
		}
		req.Context, req.Repo = files, &apitypes.SubmitRepo{Project: o.project, FromPR: o.fromPR}
		return nil
	}
	if o.repo == "" && (o.ref != "" || o.project != "" || o.dirty || o.mode != "" || len(o.context) > 0) {
		return usagef("--ref, --project, --dirty, --mode and --context need --repo")
	}
	if o.ref != "" && o.dirty {
		return usagef("--dirty sends the working tree; it cannot go with --ref")
	}
	if o.mode != "" && o.mode != protocol.ModeFix && o.mode != protocol.ModeObserve {
		return usagef("--mode %q: want fix or observe", o.mode)
	}
	files, err := readContextFiles(o.context)
	if err != nil {
		return err
	}
	if o.repo == "" {
		return nil
	}
	req.Context = files
	repo, err := a.pinSource(ctx, c, o)
	if err != nil {
		return err
	}
	req.Repo, req.Mode = repo, o.mode
	return nil
}

// checkout opens the working tree holding dir, honouring the user's global
// ignore file.
func (a *app) checkout(ctx context.Context, dir string) (localrepo.Checkout, error) {
	home, _ := a.home()
	g := gitcmd.Git{} // sanitized, like every git call in drover
	return localrepo.Open(ctx, g, dir, localrepo.UserExcludesFile(ctx, g, home, a.env.Getenv("XDG_CONFIG_HOME")))
}

// pinSource resolves the exact commit a job starts from, checks it, and
// pushes it to the hub (unless the project is mapped to a remote).
func (a *app) pinSource(ctx context.Context, c *client.Client, o sourceOptions) (*apitypes.SubmitRepo, error) {
	co, err := a.checkout(ctx, o.repo)
	if err != nil {
		return nil, err
	}
	project := o.project
	if project == "" {
		project = projectFromDir(co.Dir)
	}
	if !gitcmd.ValidProject(project) {
		return nil, usagef("project name %q: use 1-64 lower-case letters, digits and ._- (--project NAME)", project)
	}
	// The committed tree is checked first, so that a submodule is reported
	// as such rather than as a change in the working tree.
	start := o.ref
	if start == "" {
		start = "HEAD"
	}
	startID, err := co.Resolve(ctx, start)
	if err != nil {
		return nil, err
	}
	if err := gitcmd.CheckSourceTree(ctx, co.Git, co.Dir, startID); err != nil {
		return nil, fmt.Errorf("cannot run on %s: %w", co.Dir, err)
	}
	commit, err := a.pinCommit(ctx, co, o, startID)
	if err != nil {
		return nil, err
	}
	if commit != startID {
		if err := gitcmd.CheckSourceTree(ctx, co.Git, co.Dir, commit); err != nil {
			return nil, fmt.Errorf("cannot run on the working tree of %s: %w", co.Dir, err)
		}
	}
	remote, err := projectRemote(ctx, c, project)
	if err != nil {
		return nil, err
	}
	if remote != "" {
		fprintf(a.env.Stderr, "project %s is mapped to %s: runners fetch %s from there (make sure it is pushed)\n", project, remote, commit)
		return &apitypes.SubmitRepo{Project: project, Base: commit}, nil
	}
	s, err := a.settings()
	if err != nil {
		return nil, err
	}
	upload := gitcmd.UploadRefPrefix + ids.New("up")
	if err := co.Push(ctx, c.GitURL(project), s.Token, commit, upload); err != nil {
		if strings.Contains(err.Error(), " 413") {
			return nil, fmt.Errorf("the source is over the hub's transfer cap: map the project to a remote URL runners fetch themselves "+
				"(drover projects map %s URL), or ask for a larger --transfer-cap: %w", project, err)
		}
		return nil, err
	}
	fprintf(a.env.Stderr, "pinned %s at %s\n", project, commit)
	return &apitypes.SubmitRepo{Project: project, Base: commit}, nil
}

// pinCommit is start (--ref, or HEAD of a clean checkout), or with
// --dirty a throwaway commit of the working tree.
func (a *app) pinCommit(ctx context.Context, co localrepo.Checkout, o sourceOptions, start string) (string, error) {
	if o.ref != "" {
		return start, nil
	}
	tracked, untracked, err := co.Changes(ctx)
	if err != nil {
		return "", err
	}
	if o.dirty {
		id, err := co.Snapshot(ctx, "drover: working tree of "+co.Dir)
		if err != nil {
			return "", err
		}
		if len(tracked)+len(untracked) > 0 {
			fprintf(a.env.Stderr, "sending the working tree as throwaway commit %s (%d changed, %d untracked files)\n",
				id, len(tracked), len(untracked))
		}
		return id, nil
	}
	if len(tracked) > 0 {
		return "", fmt.Errorf("%s has uncommitted changes to tracked files: %s; commit them, or pass --dirty to send the working tree as it is",
			co.Dir, localrepo.ListPaths(tracked))
	}
	if len(untracked) > 0 {
		fprintf(a.env.Stderr, "note: %d untracked files are not part of the job (%s); --dirty would include them\n",
			len(untracked), localrepo.ListPaths(untracked))
	}
	return start, nil
}

// projectFromDir makes a project name from a directory name.
func projectFromDir(dir string) string {
	name := strings.TrimSuffix(strings.ToLower(filepath.Base(dir)), ".git")
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, name)
	name = strings.TrimLeft(name, "._-")
	return name[:min(len(name), 64)]
}

// projectRemote returns the remote a project is mapped to, "" when hosted.
func projectRemote(ctx context.Context, c *client.Client, project string) (string, error) {
	l, err := c.Projects(ctx)
	if err != nil {
		return "", err
	}
	for _, p := range l.Projects {
		if p.Name == project {
			return p.Remote, nil
		}
	}
	return "", nil
}

// readContextFiles reads --context files. A relative path keeps its path
// as the name in the job's context folder (it must not leave the current
// directory); an absolute path keeps its base name. Symlinks, special
// files, secrets by name or content and oversized sets are refused.
func readContextFiles(paths []string) ([]rules.ContextUpload, error) {
	if len(paths) > rules.MaxContextFiles {
		return nil, fmt.Errorf("%d context files; the limit is %d", len(paths), rules.MaxContextFiles)
	}
	var out []rules.ContextUpload
	total := int64(0)
	for _, p := range paths {
		name := filepath.ToSlash(filepath.Clean(p))
		if filepath.IsAbs(p) {
			name = filepath.Base(p)
		}
		if err := rules.CheckContextName(name); err != nil {
			return nil, fmt.Errorf("--context %s: %w", p, err)
		}
		st, err := os.Lstat(p)
		if err != nil {
			return nil, fmt.Errorf("--context %s: %w", p, err)
		}
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			return nil, fmt.Errorf("--context %s is a symlink; name the file it points to", p)
		case !st.Mode().IsRegular():
			return nil, fmt.Errorf("--context %s is not a regular file (%s)", p, st.Mode().Type())
		case st.Size() > rules.MaxContextFile:
			return nil, fmt.Errorf("--context %s is %d bytes; the limit is %d", p, st.Size(), rules.MaxContextFile)
		}
		if total += st.Size(); total > rules.MaxContextTotal {
			return nil, fmt.Errorf("context files take more than %d bytes in all", rules.MaxContextTotal)
		}
		data, err := readRegular(p, st, rules.MaxContextFile)
		if err != nil {
			return nil, fmt.Errorf("--context %s: %w", p, err)
		}
		out = append(out, rules.ContextUpload{Name: name, Data: data})
	}
	if err := rules.CheckContextFiles(out); err != nil {
		return nil, err
	}
	return out, nil
}

// readRegular reads the file checked as checked (not swapped for a symlink
// or something else since), within most bytes.
func readRegular(path string, checked fs.FileInfo, most int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return readOpened(f, checked, most)
}

// readOpened reads f, opened after it was checked, if it is still that
// regular file, within most bytes, and closes it.
func readOpened(f *os.File, checked fs.FileInfo, most int64) ([]byte, error) {
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !os.SameFile(st, checked) || !st.Mode().IsRegular() {
		return nil, errors.New("the file changed while it was read")
	}
	b, err := io.ReadAll(io.LimitReader(f, most+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > most {
		return nil, fmt.Errorf("over %d bytes", most)
	}
	return b, nil
}

// jobResult downloads a job's head into co under a temporary ref and
// checks it: it must be the head the hub recorded and descend from the
// job's base. Objects are validated as they arrive (fsck). done removes
// the temporary ref.
func (a *app) jobResult(ctx context.Context, c *client.Client, co localrepo.Checkout, id string) (apitypes.JobView, func(), error) {
	v, err := c.Job(ctx, id)
	if err != nil {
		return v, nil, err
	}
	if v.Project == "" {
		return v, nil, fmt.Errorf("job %s has no repository", id)
	}
	s, err := a.settings()
	if err != nil {
		return v, nil, err
	}
	tmp := "refs/drover/fetch/" + id
	done := func() { _ = co.DeleteRef(context.WithoutCancel(ctx), tmp) }
	got, err := co.FetchRef(ctx, c.GitURL(v.Project), s.Token, gitcmd.JobRef(id), tmp)
	if err != nil {
		done()
		return v, nil, err
	}
	if got != v.Head {
		// A publication may have landed in between: ask again.
		if v, err = c.Job(ctx, id); err != nil {
			done()
			return v, nil, err
		}
		if got != v.Head {
			done()
			return v, nil, fmt.Errorf("the hub sent %s for job %s, but its recorded head is %s; try again", got, id, v.Head)
		}
	}
	ok, err := co.IsAncestor(ctx, v.Base, got)
	if err != nil {
		done()
		return v, nil, err
	}
	if !ok {
		done()
		return v, nil, fmt.Errorf("the result %s of job %s does not descend from its base %s; refused", got, id, v.Base)
	}
	return v, done, nil
}

func (a *app) fetchCmd() *cobra.Command {
	var branch, repo string
	cmd := &cobra.Command{
		Use:   "fetch JOB [--branch NAME] [--repo PATH]",
		Short: "Download a job's result into a local branch",
		Long: `Download a job's published result (refs/drover/jobs/JOB on the hub) into the
checkout at --repo (default: the current directory), verify that it is the
head the hub recorded and descends from the job's base, and create the branch
(default drover/JOB) or fast-forward it. A branch that moved elsewhere, or
local changes on it when it is checked out, stop the fetch: nothing is ever
overwritten.

Plain git works too:
  git fetch HUB/git/PROJECT refs/drover/jobs/JOB`,
		Args: exactArgs("JOB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id := args[0]
			branch, err := fetchBranch(branch, id)
			if err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			co, err := a.checkout(ctx, repo)
			if err != nil {
				return err
			}
			v, done, err := a.jobResult(ctx, c, co, id)
			if err != nil {
				return err
			}
			defer done()
			what, err := co.UpdateBranch(ctx, branch, v.Head)
			if err != nil {
				return err
			}
			if v.Head == v.Base {
				fprintf(a.env.Stderr, "job %s has published nothing yet: the branch is its base\n", id)
			}
			_, err = fprintf(a.env.Stdout, "branch %s %s at %s (job %s on %s, base %s)\n", branch, what, v.Head, id, v.Project, v.Base)
			return err
		},
	}
	cmd.Flags().StringVar(&branch, "branch", "", "local branch to create or fast-forward (default drover/JOB)")
	cmd.Flags().StringVar(&repo, "repo", ".", "the local checkout to fetch into")
	return cmd
}

// fetchBranch is the short name of the branch fetch updates: --branch with
// any refs/heads/ taken off (git would otherwise make
// refs/heads/refs/heads/NAME), or drover/JOB.
func fetchBranch(flag, id string) (string, error) {
	if flag == "" {
		return "drover/" + id, nil
	}
	b := strings.TrimPrefix(flag, "refs/heads/")
	if b == "" || strings.HasPrefix(b, "refs/") {
		return "", usagef("--branch %q: name a branch, as NAME or refs/heads/NAME", flag)
	}
	return b, nil
}

func (a *app) diffCmd() *cobra.Command {
	var repo string
	cmd := &cobra.Command{
		Use:   "diff JOB [--repo PATH]",
		Short: "Print the change a job published (git diff BASE..HEAD)",
		Long: `Print the change a job published, from its base to its head, as git diff
does. The objects are fetched into the checkout at --repo (default: the
current directory, or a temporary repository outside of one); no branch
or working tree is touched.`,
		Args: exactArgs("JOB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			co, err := a.checkout(ctx, repo)
			if err != nil && !cmd.Flags().Changed("repo") {
				var remove func()
				co, remove, err = localrepo.TempRepo(ctx, gitcmd.Git{})
				if err == nil {
					defer remove()
				}
			}
			if err != nil {
				return err
			}
			v, done, err := a.jobResult(ctx, c, co, args[0])
			if err != nil {
				return err
			}
			defer done()
			return co.Diff(ctx, v.Base, v.Head, a.env.Stdout)
		},
	}
	cmd.Flags().StringVar(&repo, "repo", ".", "the local checkout to fetch into")
	return cmd
}

func (a *app) projectsCmd() *cobra.Command {
	list := func(ctx context.Context, c *client.Client, _ []string) (apitypes.ProjectList, error) {
		return c.Projects(ctx)
	}
	text := func(w io.Writer, l apitypes.ProjectList) error {
		t := newTable(w)
		fprintf(t, "PROJECT\tOWNER\tHOSTED\tREMOTE\n")
		for _, p := range l.Projects {
			fprintf(t, "%s\t%s\t%t\t%s\n", p.Name, dash(p.Owner), p.Hosted, dash(p.Remote))
		}
		return t.Flush()
	}
	cmd := answerCmd(a, &cobra.Command{
		Use:   "projects [--json]",
		Short: "List the hub's projects (same as 'projects list'); map one to a remote, manage its members",
		Args:  noArgs,
	}, list, text)
	cmd.AddCommand(answerCmd(a, &cobra.Command{
		Use:   "list [--json]",
		Short: "List the hub's projects and their owners",
		Args:  noArgs,
	}, list, text), a.membersCmd())
	cmd.AddCommand(a.projectConfigCmds()...)
	cmd.AddCommand(a.projectTriggersCmd())
	mapCmd := answerCmd(a, &cobra.Command{
		Use:   "map NAME URL",
		Short: "Map a project to a remote git URL (admin only)",
		Long: `Map a project to a remote git URL. Runners then fetch its commits by id from
there with their own credentials, and drover run --repo no longer pushes the
source to the hub: the way to run on a repository too large to transfer. The
hub still keeps the results; it fetches a job's base from the remote (without
credentials) when it lacks it. An empty URL makes the project hosted again.`,
		Args: exactArgs("NAME", "URL"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.ProjectView, error) {
		return c.MapProject(ctx, args[0], args[1])
	}, func(w io.Writer, p apitypes.ProjectView) error {
		if p.Remote == "" {
			_, err := fprintf(w, "project %s is hosted on the hub\n", p.Name)
			return err
		}
		_, err := fprintf(w, "project %s is mapped to %s\n", p.Name, p.Remote)
		return err
	})
	cmd.AddCommand(mapCmd)
	return cmd
}

// membersCmd is `projects members`: who may use a runner or an account
// shared with the project (drover runners share --project).
func (a *app) membersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "members list|add|remove",
		Short: "List, add and remove the members of a project",
		Long: `A project's members may run their jobs on that project on the runners and
accounts shared with it ('drover runners share NAME --project PROJECT').
Its owner and admins add and remove members; members see the list.`,
		Args: noArgs,
		RunE: showHelp,
	}
	text := func(w io.Writer, l apitypes.MemberList) error { return printMembers(w, l) }
	names := func(names ...string) cobra.PositionalArgs {
		return projectArgs(func(s string) error { return checkName("user", s) }, names...)
	}
	cmd.AddCommand(answerCmd(a, &cobra.Command{
		Use:   "list PROJECT [--json]",
		Short: "List a project's owner and members",
		Args:  names("PROJECT"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.MemberList, error) {
		return c.Members(ctx, args[0])
	}, text), answerCmd(a, &cobra.Command{
		Use:   "add PROJECT USER [--json]",
		Short: "Make a user a member of a project (its owner or an admin)",
		Args:  names("PROJECT", "USER"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.MemberList, error) {
		return c.AddMember(ctx, args[0], args[1])
	}, text), answerCmd(a, &cobra.Command{
		Use:   "remove PROJECT USER [--json]",
		Short: "Take a user out of a project (its owner or an admin)",
		Args:  names("PROJECT", "USER"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.MemberList, error) {
		return c.RemoveMember(ctx, args[0], args[1])
	}, text))
	return cmd
}

// projectArgs checks the arguments PROJECT [SECOND]: their number, the
// project's name and, when given, the second with second.
func projectArgs(second func(string) error, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := exactArgs(names...)(cmd, args); err != nil {
			return err
		}
		if err := checkName("project", args[0]); err != nil {
			return err
		}
		if len(args) > 1 {
			return second(args[1])
		}
		return nil
	}
}

// printMembers lists a project's members, the owner first.
func printMembers(w io.Writer, l apitypes.MemberList) error {
	if len(l.Members) == 0 && l.Owner == "" {
		_, err := fprintf(w, "project %s has no members\n", l.Project)
		return err
	}
	t := newTable(w)
	fprintf(t, "MEMBER\tROLE\n")
	if l.Owner != "" {
		fprintf(t, "%s\towner\n", l.Owner)
	}
	for _, m := range l.Members {
		if m != l.Owner {
			fprintf(t, "%s\tmember\n", m)
		}
	}
	return t.Flush()
}
