package workspace

import (
	"path/filepath"
	"testing"
)

// An agent commits with its objects in a directory of its own (as the
// runner sets up): the clone gains no object, RestoreAdmin puts HEAD back
// before anything reads it, so a fetch into the clone works, the
// publication holds the files (not the agent's commit), and the pooled
// worktree prepares for the next job.
func TestAgentCommitWithPrivateObjects(t *testing.T) {
	f, base, w := startedJob(t, map[string]string{"a.txt": "a\n"})
	common, admin := w.GitDirs()
	if admin != filepath.Join(common, "worktrees", filepath.Base(w.Dir())) {
		t.Fatalf("GitDirs = %s, %s", common, admin)
	}
	objects := func() string { return f.git(common, "count-objects", "-v") }
	before := objects()
	priv := t.TempDir()
	agent := f.sh(w.Dir(), "export GIT_OBJECT_DIRECTORY="+priv+" GIT_ALTERNATE_OBJECT_DIRECTORIES="+common+"/objects\n"+
		"echo x > a.txt && git add a.txt && git commit -qm x && git rev-parse HEAD")
	if got := objects(); got != before {
		t.Fatalf("the agent's commit wrote into the clone:\n%s\nwas\n%s", got, before)
	}
	noErr(t, w.RestoreAdmin())
	if got := f.git(w.Dir(), "rev-parse", "HEAD"); got != base {
		t.Fatalf("HEAD after RestoreAdmin = %s, want %s (the agent's was %s)", got, base, agent)
	}
	// Another job's commit is fetched into the clone: git reads every
	// worktree's HEAD for that.
	next := f.commit(map[string]string{"b.txt": "b\n"})
	other := f.prepare(f.cache, "job2", next)
	noErr(t, other.Release(f.ctx))

	commit, err := w.Commit(f.ctx, CommitInfo{Job: "job1", Attempt: "at1", Requester: "alice"})
	noErr(t, err)
	if commit == agent || f.git(common, "rev-parse", commit+"^") != base || f.git(common, "show", commit+":a.txt") != "x" {
		t.Fatalf("publication %s (agent's %s)", commit, agent)
	}
	noErr(t, w.Adopt(f.ctx, commit))
	noErr(t, w.Release(f.ctx))
	if out, err := shell(f.ctx, common, "git cat-file -e "+agent); err == nil {
		t.Fatalf("the agent's commit is in the clone: %s", out)
	}
	for _, job := range []string{"job3", "job4"} {
		n := f.prepare(f.cache, job, base)
		if got := f.git(n.Dir(), "status", "--porcelain"); got != "" || f.git(n.Dir(), "rev-parse", "HEAD") != base {
			t.Fatalf("%s on a pooled worktree: status %q", job, got)
		}
		defer n.Keep()
	}
}
