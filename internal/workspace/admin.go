package workspace

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"drover/internal/gitcmd"
)

// The admin files a fresh worktree has; everything else an agent or an
// earlier job left there (reflogs, ORIG_HEAD, per-worktree refs, rebase
// state, sparse-checkout) is removed.
var adminFiles = map[string]bool{"gitdir": true, "commondir": true, "HEAD": true, "index": true, "config.worktree": true}

// worktreeConfig makes `git push origin` from the worktree fail: results
// leave only as publications. And it checks out with parallel workers
// (git's own, from 100 files up): a checkout of many files waits on the
// disk for each file it creates, and workers overlap those waits, which a
// slow or shared disk makes most of the time a checkout takes.
var worktreeConfig = []byte("[remote \"origin\"]\n\tpushurl = drover-push-disabled://publish-through-drover\n[checkout]\n\tworkers = 8\n")

// splitIndexConfig keeps a whole worktree's index in two files: a shared
// part, rewritten only once much has changed, and a small file holding the
// rest, so that a call changing a few entries of 100,000 does not hash and
// write all of them. The runner removes the shared parts nothing refers to
// (see dropSharedIndexes); git must not expire one a saved index needs.
var splitIndexConfig = []byte("[core]\n\tsplitIndex = true\n[splitIndex]\n\tsharedIndexExpire = never\n")

// IsSharedIndex reports that an admin dir entry is a split index's shared
// part.
func IsSharedIndex(name string) bool {
	hex, ok := strings.CutPrefix(name, "sharedindex.")
	return ok && gitcmd.ValidCommitID(hex)
}

// sparseConfig turns on a cone-mode sparse checkout in a worktree's config.
var sparseConfig = []byte("[core]\n\tsparseCheckout = true\n\tsparseCheckoutCone = true\n[index]\n\tsparse = true\n")

// conePatterns is the sparse-checkout file of a cone of folders, as `git
// sparse-checkout set` writes it: the top level's files, the files of
// every folder on the way to each one, and everything under each.
func conePatterns(dirs []string) []byte {
	leaves := slices.Sorted(slices.Values(dirs))
	leaves = slices.Compact(leaves)
	leaves = slices.DeleteFunc(leaves, func(d string) bool {
		return slices.ContainsFunc(leaves, func(o string) bool { return strings.HasPrefix(d, o+"/") })
	})
	parents := map[string]bool{}
	for _, d := range leaves {
		for p := path.Dir(d); p != "."; p = path.Dir(p) {
			parents[p] = true
		}
	}
	var b strings.Builder
	b.WriteString("/*\n!/*/\n")
	for _, p := range slices.Sorted(maps.Keys(parents)) {
		fmt.Fprintf(&b, "/%s/\n!/%s/*/\n", p, p)
	}
	for _, d := range leaves {
		fmt.Fprintf(&b, "/%s/\n", d)
	}
	return []byte(b.String())
}

// writeAdmin writes the files that tie the worktree to its clone and the
// worktree's config.
func (w *Worktree) writeAdmin() error {
	files := map[string][]byte{
		w.path("/.git"):                             []byte("gitdir: " + w.admin() + "\n"),
		filepath.Join(w.admin(), "gitdir"):          []byte(w.path("/.git") + "\n"),
		filepath.Join(w.admin(), "commondir"):       []byte("../..\n"),
		filepath.Join(w.admin(), "config.worktree"): append(slices.Clip(worktreeConfig), splitIndexConfig...),
	}
	if len(w.rec.Sparse) > 0 { // a sparse index, which cannot be split
		files[filepath.Join(w.admin(), "config.worktree")] = append(slices.Clip(worktreeConfig), sparseConfig...)
		files[filepath.Join(w.admin(), "info", "sparse-checkout")] = conePatterns(w.rec.Sparse)
	}
	for p, b := range files {
		if fi, err := os.Lstat(p); err == nil && (fi.IsDir() || fi.Mode()&os.ModeSymlink != 0) {
			if err := os.RemoveAll(p); err != nil {
				return fmt.Errorf("restore %s: %w", p, err)
			}
		}
		if err := ensureFile(p, b); err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
	}
	return nil
}

// trimAdmin removes from the admin dir whatever a fresh worktree lacks.
func (w *Worktree) trimAdmin() error {
	ents, err := os.ReadDir(w.admin())
	if err != nil {
		return fmt.Errorf("read worktree admin: %w", err)
	}
	for _, e := range ents {
		if !adminFiles[e.Name()] && !IsSharedIndex(e.Name()) {
			if err := os.RemoveAll(filepath.Join(w.admin(), e.Name())); err != nil {
				return fmt.Errorf("clean worktree admin: %w", err)
			}
		}
	}
	return w.writeAdmin()
}

// restoreAdmin puts back the admin dir as the runner left it: HEAD at the
// commit of the saved index, and that index, so that what the agent did to
// HEAD or the index (assume-unchanged bits, forged stat data) cannot hide a
// change from the reset. Without a saved index, HEAD is target and the
// checkout writes every file. It returns the commit HEAD names.
func (w *Worktree) restoreAdmin(target string) (string, error) {
	if _, err := os.Stat(w.admin()); err != nil {
		return "", fmt.Errorf("worktree %s is not registered in its clone: %w", w.name, err)
	}
	if err := w.trimAdmin(); err != nil {
		return "", err
	}
	head := w.rec.IndexHead
	if checkCommitID(head) != nil || copyFile(w.path(".index"), filepath.Join(w.admin(), "index")) != nil {
		return target, w.dropIndex(target)
	}
	return head, writeAtomic(filepath.Join(w.admin(), "HEAD"), []byte(head+"\n"))
}

// dropIndex leaves the worktree without an index, HEAD at target.
func (w *Worktree) dropIndex(target string) error {
	if err := os.Remove(filepath.Join(w.admin(), "index")); err != nil && !isNotExist(err) {
		return fmt.Errorf("drop worktree index: %w", err)
	}
	return writeAtomic(filepath.Join(w.admin(), "HEAD"), []byte(target+"\n"))
}
