package gitcmd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"
)

// CheckSourceTree refuses a commit whose tree holds a gitlink (a submodule)
// or a .gitattributes that assigns a filter (Git LFS and the like): a bundle
// of the repository does not carry their content, and drover never runs
// filters. dir is any repository holding the commit.
func CheckSourceTree(ctx context.Context, g Git, dir, commit string) error {
	var out bytes.Buffer
	if _, err := g.Run(ctx, Cmd{Dir: dir, Stdout: &out,
		Args: []string{"ls-tree", "-r", "-z", "--full-tree", "--end-of-options", commit}}); err != nil {
		return fmt.Errorf("list the tree of %s: %w", commit, err)
	}
	var attrs []string // "oid path"
	for _, ent := range bytes.Split(out.Bytes(), []byte{0}) {
		meta, p, ok := strings.Cut(string(ent), "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta) // mode type oid
		if len(f) != 3 {
			continue
		}
		if f[0] == "160000" {
			return GitlinkRefusal(commit, p)
		}
		if path.Base(p) == ".gitattributes" && f[1] == "blob" {
			attrs = append(attrs, f[2]+" "+p)
		}
	}
	for _, a := range attrs {
		oid, p, _ := strings.Cut(a, " ")
		blob, err := g.Run(ctx, Cmd{Dir: dir, Args: []string{"cat-file", "blob", oid}})
		if err != nil {
			return fmt.Errorf("read %s of %s: %w", p, commit, err)
		}
		if err := CheckAttributes(commit, p, blob); err != nil {
			return err
		}
	}
	return nil
}

// GitlinkRefusal refuses commit for the gitlink (submodule) at p.
func GitlinkRefusal(commit, p string) error {
	return Refusef("%s has a submodule (gitlink) at %s; drover does not support submodules", Short(commit), p)
}

// CheckAttributes refuses commit if blob, its .gitattributes at p, assigns
// a filter.
func CheckAttributes(commit, p string, blob []byte) error {
	if pattern, filter, ok := declaredFilter(blob); ok {
		return Refusef("%s: %s assigns filter=%s to %q (e.g. Git LFS); drover does not run filters, so it refuses this repository",
			Short(commit), p, filter, pattern)
	}
	return nil
}

// declaredFilter finds the first "filter=NAME" attribute in a .gitattributes.
func declaredFilter(b []byte) (pattern, filter string, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		for _, attr := range f[1:] {
			if name, ok := strings.CutPrefix(attr, "filter="); ok {
				return f[0], name, true
			}
		}
	}
	return "", "", false
}

// CheckCone refuses sparse folders that commit (in repository dir) lacks:
// nothing would be checked out there.
func CheckCone(ctx context.Context, g Git, dir, commit string, dirs []string) error {
	for _, d := range dirs {
		if t, err := g.Out(ctx, dir, "cat-file", "-t", commit+":"+d); err != nil || t != "tree" {
			return Refusef("sparse path %s is not a folder of %s; nothing would be checked out there", d, Short(commit))
		}
	}
	return nil
}
