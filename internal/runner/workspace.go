package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"drover/internal/gitcmd"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/retry"
	"drover/internal/sandbox"
	"drover/internal/workspace"
)

// A job with a repository runs in a git worktree instead of an empty work
// dir (internal/workspace does all the git): prepared before the agent
// starts, published (fix mode) or checked (observe mode) after it stops and
// before the attempt's receipt, kept for the job's next attempt or given
// back to the pool once the hub acknowledged the finish.

const (
	publishTimeout = 10 * time.Minute // one publication, uploads and retries included
	gcEvery        = 10 * time.Minute
)

// workspaces is the runner's cache of clones and worktrees, and the hub's
// calls that move context files and publications.
type workspaces struct {
	cache *workspace.Cache
	hub   protocol.Transfers

	mu     sync.Mutex
	lastGC time.Time
	// busy maps a job to a channel closed once the attempt that holds the
	// job's worktree is done with it: the hub may offer the next attempt
	// (after a limit, say) before the last one has put its worktree back.
	busy map[string]chan struct{}
}

// hold waits until no other attempt of the runner holds job's worktree,
// then holds it until the returned function is called.
func (w *workspaces) hold(ctx context.Context, job string) (func(), error) {
	for {
		w.mu.Lock()
		ch, taken := w.busy[job]
		if !taken {
			ch = make(chan struct{})
			w.busy[job] = ch
			w.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					w.mu.Lock()
					delete(w.busy, job)
					w.mu.Unlock()
					close(ch)
				})
			}, nil
		}
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

func newWorkspaces(home string, remoteEnv []string, hub protocol.Transfers, log *slog.Logger) (*workspaces, error) {
	c, err := workspace.NewCache(workspace.CacheConfig{Home: home, Logger: log, RemoteEnv: remoteEnv})
	if err != nil {
		return nil, err
	}
	return &workspaces{cache: c, hub: hub, busy: map[string]chan struct{}{}}, nil
}

// attemptWorkspace is what one attempt works with.
type attemptWorkspace struct {
	wt      *workspace.Worktree
	context string // read-only folder of the job's context files; "" for none
	// objects is where git in the sandbox writes objects (the agent's own
	// commits), so that the shared clone can stay read-only.
	objects string
	release func() // lets the job's next attempt at the worktree
	// admin is a copy of the worktree's admin dir that the sandbox shows
	// read-write in its place (fix mode; "" in observe mode): the agent's
	// HEAD may name an object only objects holds, and the clone's own copy
	// of it is read by every fetch into the clone, which would then fail.
	admin string
}

func (r *Runner) contextPath(id string) string {
	return filepath.Join(r.cfg.Home, "work", id+".context")
}
func (r *Runner) bundlePath(id string) string { return filepath.Join(r.cfg.Home, "work", id+".bundle") }

// jobHead is the commit an attempt starts from: the job's latest
// publication, or its base before any.
func jobHead(spec *protocol.RepoSpec) string {
	if spec.Head != "" {
		return spec.Head
	}
	return spec.Base
}

// prepareWorkspace gives an attempt of a job with a repository its
// worktree at the job's head and fetches its context files. What fails is
// said in the attempt's log (out) too.
func (r *Runner) prepareWorkspace(a *attempt, out io.Writer) (*attemptWorkspace, error) {
	spec, id := a.spec.Repo, a.ref.Attempt
	head := jobHead(spec)
	start := r.now()
	release, err := r.ws.hold(a.ctx, a.ref.Job)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			release()
		}
	}()
	wt, err := r.prepareWorktree(a, out)
	if err != nil {
		fmt.Fprintf(out, "drover: cannot prepare the worktree: %v\n", err)
		return nil, err
	}
	how := "prepared"
	if wt.Resumed() {
		how = "resumed (kept from the job's earlier attempt, nothing checked out)"
	}
	fmt.Fprintf(out, "drover: worktree of %s at %s %s in %s\n", spec.Project, head, how, r.now().Sub(start).Round(time.Millisecond))
	aw := &attemptWorkspace{wt: wt, objects: filepath.Join(r.workPath(id), "git-objects"), release: release}
	if a.spec.Mode != protocol.ModeObserve {
		aw.admin = filepath.Join(r.workPath(id), "git-admin")
	}
	if err := aw.makeGitDirs(); err != nil {
		fmt.Fprintf(out, "drover: %v\n", err)
		r.keepWorktree(a, wt)
		return nil, err
	}
	if len(a.spec.Context) > 0 {
		dir := r.contextPath(id)
		if err := r.fetchContext(a, dir); err != nil {
			fmt.Fprintf(out, "drover: cannot fetch the job's context files: %v\n", err)
			r.keepWorktree(a, wt)
			return nil, err
		}
		aw.context = dir
		fmt.Fprintf(out, "drover: %d context file(s) in $DROVER_CONTEXT_DIR\n", len(a.spec.Context))
	}
	ok = true
	return aw, nil
}

// prepareWorktree prepares the attempt's worktree, waiting out a hub that
// cannot be reached for a while (a restart) instead of failing the job: its
// fetch is tried again, as the runner's other calls to its hub are. A
// refusal (a missing commit, 404, 403, a damaged pack) fails at once, and
// so does a mapped remote, which is not the hub's to be back.
func (r *Runner) prepareWorktree(a *attempt, out io.Writer) (*workspace.Worktree, error) {
	spec := a.spec.Repo
	src := workspace.SourceOf(spec, r.login.Token)
	pol := r.hubWait()
	pol.OnRetry = func(try int, err error, wait time.Duration) {
		if try == 1 {
			fmt.Fprintf(out, "drover: the hub is unreachable; fetching again…\n")
		}
		r.log.Warn("the hub is unreachable; fetching again", "attempt", a.ref.String(), "try", try, "after", wait.Round(time.Millisecond), "err", err)
	}
	var wt *workspace.Worktree
	err := retry.Do(a.ctx, pol, func(ctx context.Context) error {
		var err error
		wt, err = r.ws.cache.Prepare(ctx, src, a.ref.Job, jobHead(spec))
		if err != nil && (spec.Remote || !gitcmd.Unreachable(err)) {
			return retry.Permanent(err)
		}
		return err
	})
	return wt, err
}

// env is what the agent's environment gains from the workspace: git
// writes objects to the attempt's own directory and reads the clone's too.
func (aw *attemptWorkspace) env() []string {
	if aw == nil {
		return nil
	}
	common, _ := aw.wt.GitDirs()
	env := []string{"GIT_OBJECT_DIRECTORY=" + aw.objects, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + filepath.Join(common, "objects")}
	if aw.context != "" {
		env = append(env, "DROVER_CONTEXT_DIR="+aw.context)
	}
	return env
}

// makeGitDirs makes the attempt's object directory and, in fix mode, its
// copy of the worktree's admin dir.
func (aw *attemptWorkspace) makeGitDirs() error {
	if err := os.Mkdir(aw.objects, 0o700); err != nil {
		return fmt.Errorf("make the agent's git object directory: %w", err)
	}
	if aw.admin == "" {
		return nil
	}
	if err := os.Mkdir(aw.admin, 0o700); err != nil {
		return fmt.Errorf("make the agent's git admin dir: %w", err)
	}
	// A sparse worktree's cone (info/sparse-checkout) comes along, so the
	// agent's git keeps to it, and so does the shared part of a split index
	// (copied, never linked: the agent's git must not write the runner's).
	_, admin := aw.wt.GitDirs()
	names := []string{"HEAD", "index", "commondir", "gitdir", "config.worktree", "info/sparse-checkout"}
	ents, err := os.ReadDir(admin)
	if err != nil {
		return fmt.Errorf("copy the worktree's git admin dir: %w", err)
	}
	for _, e := range ents {
		if workspace.IsSharedIndex(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return aw.copyAdmin(names...)
}

// copyAdmin copies files of the worktree's admin dir to the agent's copy
// of it.
func (aw *attemptWorkspace) copyAdmin(names ...string) error {
	_, admin := aw.wt.GitDirs()
	return copyAdminFiles(admin, aw.admin, names...)
}

// copyAdminFiles copies the named files (index and info/sparse-checkout
// may be missing) from admin to dst. dst is the agent's to write while it
// runs, so every file is written through an os.Root: a symlink the agent
// put there cannot lead the runner's write outside it.
func copyAdminFiles(admin, dst string, names ...string) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("open the agent's git admin dir: %w", err)
	}
	defer root.Close()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(admin, name))
		if errors.Is(err, fs.ErrNotExist) && (name == "index" || name == "info/sparse-checkout") {
			continue
		}
		if err == nil && filepath.Dir(name) != "." {
			err = root.MkdirAll(filepath.Dir(name), 0o700)
		}
		if err == nil {
			err = root.WriteFile(name, b, 0o600)
		}
		if err != nil {
			return fmt.Errorf("copy the worktree's git admin dir: %w", err)
		}
	}
	return nil
}

// policy lets git work in the worktree inside the sandbox: the clone is
// mounted read-only, the attempt's object directory read-write, and in fix
// mode the attempt's copy of the admin dir (HEAD, index) read-write on top
// of the worktree's. The admin dirs of other worktrees are listed but not
// writable.
func (aw *attemptWorkspace) policy(p *sandbox.Policy) {
	common, admin := aw.wt.GitDirs()
	p.ReadOnly = append(p.ReadOnly[:len(p.ReadOnly):len(p.ReadOnly)], sandbox.Mount{Src: common, Dst: common})
	rw := []sandbox.Mount{{Src: aw.objects, Dst: aw.objects}}
	if aw.admin != "" {
		rw = append(rw, sandbox.Mount{Src: aw.admin, Dst: admin})
	}
	p.ReadWrite = append(p.ReadWrite[:len(p.ReadWrite):len(p.ReadWrite)], rw...)
	p.Env = append(p.Env, "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES")
	if aw.context != "" {
		p.ReadOnly = append(p.ReadOnly, sandbox.Mount{Src: aw.context})
		p.Env = append(p.Env, "DROVER_CONTEXT_DIR")
	}
}

// settleWorkspace runs after the agent stopped and before the receipt: in
// fix mode it publishes what the agent produced (also when the attempt was
// cancelled or the runner is stopping), in observe mode it fails the
// attempt if HEAD, the index or a tracked file changed and discards the
// changes. It returns the outcome to report.
func (r *Runner) settleWorkspace(a *attempt, aw *attemptWorkspace, out io.Writer, o job.Outcome) job.Outcome {
	if errors.Is(context.Cause(a.ctx), errDropped) {
		return o // the attempt is not ours any more: the hub would refuse it
	}
	ctx, cancel := context.WithTimeout(r.life, publishTimeout)
	defer cancel()
	if a.spec.Mode == protocol.ModeObserve {
		ch, err := aw.wt.Changes(ctx)
		if err != nil {
			fmt.Fprintf(out, "drover: cannot check the worktree: %v\n", err)
			return workspaceFailure(o, job.ReasonWorkspace, "cannot check the worktree in observe mode: "+err.Error())
		}
		if ch.Empty() {
			return o
		}
		fmt.Fprintf(out, "drover: observe mode, but the agent changed the worktree: %s; the changes are discarded\n", ch)
		if err := aw.wt.Discard(ctx); err != nil {
			r.log.Warn("discard observe-mode changes", "attempt", a.ref.String(), "err", err)
		}
		return workspaceFailure(o, job.ReasonObserveChanged, "observe mode: "+ch.String())
	}
	if _, err := r.publish(ctx, a, aw.wt, out, false); err != nil {
		fmt.Fprintf(out, "drover: publication failed: %v\n", err)
		r.log.Error("publication failed", "attempt", a.ref.String(), "err", err)
		return workspaceFailure(o, job.ReasonWorkspace, "publication failed: "+err.Error())
	}
	return o
}

// workspaceFailure fails an attempt that ran to its end for a workspace
// reason. A cancelled or released attempt keeps its state (the user or the
// runner stopped it) and only gains the message.
func workspaceFailure(o job.Outcome, reason job.Reason, msg string) job.Outcome {
	if o.State == job.AttemptCancelled || o.State == job.AttemptReleased {
		o.Message = clip(joinMsg(o.Message, msg), 4096)
		return o
	}
	return job.Outcome{State: job.AttemptFailed, Reason: reason, ExitCode: o.ExitCode, Message: clip(joinMsg(msg, o.Message), 4096)}
}

func joinMsg(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// publish commits the worktree on top of the job's head, uploads it and
// returns the job's head. When the hub already holds a newer head (an
// earlier reply was lost), the runner continues from that head and
// publishes only what it lacks. checkpoint marks work in progress (the
// checkpoint and ask tools).
func (r *Runner) publish(ctx context.Context, a *attempt, wt *workspace.Worktree, out io.Writer, checkpoint bool) (string, error) {
	info := workspace.CommitInfo{Job: a.ref.Job, Attempt: a.ref.Attempt, Requester: a.spec.Requester}
	path := r.bundlePath(a.ref.Attempt)
	defer os.Remove(path)
	for round := 0; round < 3; round++ {
		commit, err := wt.Commit(ctx, info)
		if err != nil {
			return "", err
		}
		if commit == "" {
			if round == 0 {
				fmt.Fprintf(out, "drover: nothing to publish: the worktree equals %s\n", wt.Head())
			}
			return wt.Head(), nil
		}
		p, err := wt.Bundle(ctx, commit, path, r.timings().transfer)
		if err != nil {
			return "", err
		}
		res, err := r.ws.upload(ctx, a.ref, p, checkpoint, wt.Sparse())
		if sh, stale := errors.AsType[*protocol.StaleHeadError](err); stale {
			fmt.Fprintf(out, "drover: the hub already holds %s (a reply was lost); continuing from it\n", sh.Head)
			if err := wt.Adopt(ctx, sh.Head); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", err
		}
		if err := wt.Adopt(ctx, res.Head); err != nil {
			return "", err
		}
		stat, _ := wt.DiffStat(ctx, commit)
		fmt.Fprintf(out, "drover: published %s on %s (%s; %d bytes sent)\n", commit, p.Parent, stat, p.Size)
		return wt.Head(), nil
	}
	return "", errors.New("the job's head kept moving under this attempt")
}

// upload publishes a bundle, with the worktree's sparse folders (none: it
// is whole; else the cone as the agent may have widened it, which the
// job's next attempts start from). A stale head comes back as a
// *protocol.StaleHeadError.
func (ws *workspaces) upload(ctx context.Context, ref protocol.AttemptRef, p workspace.Publication, checkpoint bool, sparse []string) (protocol.PublishResult, error) {
	f, err := os.Open(p.Path)
	if err != nil {
		return protocol.PublishResult{}, fmt.Errorf("open bundle: %w", err)
	}
	defer f.Close()
	return ws.hub.Publish(ctx, ref, protocol.Publication{Commit: p.Commit, SHA256: p.SHA256, Checkpoint: checkpoint,
		Sparse: sparse, Bundle: f, Size: p.Size})
}

// fetchContext downloads the job's context files into dir, a folder
// outside the worktree that the agent can read but not change (their
// names, kinds and sizes checked again by protocol.Transfers).
func (r *Runner) fetchContext(a *attempt, dir string) error {
	if err := removeTree(dir); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("make context folder: %w", err)
	}
	if err := r.ws.hub.ContextFiles(a.ctx, a.ref, func(name string, data io.Reader) error {
		return writeContextFile(dir, name, data)
	}); err != nil {
		return err
	}
	return readOnlyTree(dir)
}

// writeContextFile writes one context file under dir, by a name already
// checked (protocol.CheckContextName); no file is written twice.
func writeContextFile(dir, name string, data io.Reader) error {
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("write context file %s: %w", name, err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write context file %s: %w", name, err)
	}
	_, err = io.Copy(f, data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write context file %s: %w", name, err)
	}
	return nil
}

// readOnlyTree makes a folder and everything in it read-only.
func readOnlyTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o444)
		if d.IsDir() {
			mode = 0o555
		}
		return os.Chmod(p, mode)
	})
}

// removeTree removes a folder that may be read-only.
func removeTree(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// closeWorkspace ends the attempt's use of its worktree once the attempt
// is over here. The worktree goes back to the pool when the job is done
// (completed or cancelled, and the hub acknowledged it); otherwise it is
// kept, as it is, for the job's next attempt (a retry, or a requeue after
// this runner stopped). Then, now and then, worktrees of jobs that are gone
// are collected.
func (r *Runner) closeWorkspace(a *attempt, aw *attemptWorkspace, o job.Outcome, acknowledged bool) {
	defer aw.release()
	if acknowledged && (o.State == job.AttemptCompleted || o.State == job.AttemptCancelled) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.life), publishTimeout)
		defer cancel()
		if err := aw.wt.Release(ctx); err != nil {
			r.log.Warn("release worktree", "attempt", a.ref.String(), "err", err)
		}
	} else {
		r.keepWorktree(a, aw.wt)
	}
	r.collectWorktrees()
}

func (r *Runner) keepWorktree(a *attempt, wt *workspace.Worktree) {
	if err := wt.Keep(); err != nil {
		r.log.Warn("keep worktree", "attempt", a.ref.String(), "err", err)
	}
}

// collectWorktrees runs the worktree garbage collector at most every
// gcEvery: a job is live while this runner holds one of its attempts.
func (r *Runner) collectWorktrees() {
	r.ws.mu.Lock()
	due := r.now().Sub(r.ws.lastGC) >= gcEvery
	if due {
		r.ws.lastGC = r.now()
	}
	r.ws.mu.Unlock()
	if !due || r.life.Err() != nil {
		return
	}
	live := func(jobID string) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, a := range r.attempts {
			if a.ref.Job == jobID {
				return true
			}
		}
		return false
	}
	if _, err := r.ws.cache.GC(r.life, workspace.GCOptions{Live: live, Budget: r.cfg.CacheSize}); err != nil {
		r.log.Warn("collect worktrees", "err", err)
	}
	r.trimCaches()
}
