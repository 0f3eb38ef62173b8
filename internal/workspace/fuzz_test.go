package workspace

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// Fuzz targets for what a runner or a user sends the hub's git side: a
// publication's bundle header, project names, commit ids and upload refs.

const fuzzCommit = "0123456789abcdef0123456789abcdef01234567"

var bundleSeeds = []string{
	"# v2 git bundle\n" + fuzzCommit + " refs/heads/main\n\nPACK",
	"# v3 git bundle\n@object-format=sha1\n-" + fuzzCommit + " parent\n" + fuzzCommit + " refs/drover/pub\n\n",
	"# v3 git bundle\n@object-format=sha256\n\n",
	"# v2 git bundle\n-" + strings.ToUpper(fuzzCommit) + "\n\n",
	"# v2 git bundle\n" + fuzzCommit + "\n\n",
	"# v2 git bundle\n" + fuzzCommit + " a\n" + fuzzCommit + " b\n",
	"# v1 git bundle\n\n",
	"PACK",
	"",
}

// FuzzReadBundleHeader: the parser refuses with a *Refusal, never panics;
// what it accepts is commit ids and non-empty names, and the header it read
// written out again parses to the same bundle at the same pack offset.
func FuzzReadBundleHeader(f *testing.F) {
	for _, s := range bundleSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		b, err := ReadBundleHeader(bytes.NewReader(data))
		if err != nil {
			if _, ok := err.(*Refusal); !ok {
				t.Fatalf("refusal %T is not a *Refusal: %v", err, err)
			}
			return
		}
		if b.packOffset <= 0 || b.packOffset > int64(len(data)) {
			t.Fatalf("pack offset %d of %d bytes", b.packOffset, len(data))
		}
		for _, p := range b.Prerequisites {
			if !ValidCommitID(p) {
				t.Fatalf("prerequisite %q accepted", p)
			}
		}
		for _, r := range b.Refs {
			if !ValidCommitID(r.ID) || r.Name == "" || strings.Contains(r.Name, "\n") {
				t.Fatalf("ref %+v accepted", r)
			}
		}
		// Round trip: the header as git would write it (capabilities are
		// only sha1, which needs no line) parses the same.
		var w bytes.Buffer
		w.WriteString("# v3 git bundle\n")
		for _, p := range b.Prerequisites {
			w.WriteString("-" + p + "\n")
		}
		for _, r := range b.Refs {
			w.WriteString(r.ID + " " + r.Name + "\n")
		}
		w.WriteString("\n")
		b2, err := ReadBundleHeader(bytes.NewReader(w.Bytes()))
		if err != nil || b2.packOffset != int64(w.Len()) || len(b2.Refs) != len(b.Refs) || len(b2.Prerequisites) != len(b.Prerequisites) {
			t.Fatalf("header does not round-trip: %v\n%q", err, w.Bytes())
		}
		for i := range b.Refs {
			if b.Refs[i] != b2.Refs[i] {
				t.Fatalf("ref %+v reads back as %+v", b.Refs[i], b2.Refs[i])
			}
		}
	})
}

// The documented rules, written out as references.
var (
	refProject = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	refCommit  = regexp.MustCompile(`^[0-9a-f]{40}$`)
	refUpload  = regexp.MustCompile(`^refs/drover/uploads/[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

var nameSeeds = []string{
	"drover", "my-project", "a.b_c", "x.git", "x.lock", "a..b", ".hidden", "-x", "UPPER", strings.Repeat("p", 64), strings.Repeat("p", 65),
	"refs/drover/uploads/u-1", "refs/drover/uploads/a..b", "refs/drover/uploads/x.lock", "refs/drover/uploads/a/b", "refs/drover/uploads/",
	"refs/drover/uploads/a.", "refs/drover/uploads/a@{1}", "refs/drover/uploads/.x", "refs/heads/main", fuzzCommit, "a\x00b", "a b",
}

// FuzzNames: ValidProject, ValidCommitID and ValidUploadRef agree with the
// documented rules; an accepted project is a safe directory name and an
// accepted upload ref one git takes (see TestUploadRefsPassGitCheckRefFormat).
func FuzzNames(f *testing.F) {
	for _, s := range nameSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1024 {
			return
		}
		want := refProject.MatchString(s) && !strings.HasSuffix(s, ".git") && !strings.HasSuffix(s, ".lock") && !strings.Contains(s, "..")
		if ValidProject(s) != want {
			t.Fatalf("ValidProject(%q) = %v", s, !want)
		}
		if want && (s == "." || s == ".." || strings.ContainsAny(s, "/\\")) {
			t.Fatalf("project %q is not a plain directory name", s)
		}
		if ValidCommitID(s) != refCommit.MatchString(s) {
			t.Fatalf("ValidCommitID(%q)", s)
		}
		up := ValidUploadRef(s)
		if up != (refUpload.MatchString(s) && !strings.HasSuffix(s, ".lock") && !strings.HasSuffix(s, ".") && !strings.Contains(s, "..")) {
			t.Fatalf("ValidUploadRef(%q) = %v", s, up)
		}
		if up && !gitRefFormatOK(s) {
			t.Fatalf("upload ref %q accepted, which git refuses", s)
		}
	})
}

// gitRefFormatOK is git check-ref-format's rule for the names
// ValidUploadRef can accept (one component of [A-Za-z0-9._-] under a fixed
// prefix): no component starting with '.', no "..", not ending in '.' or
// ".lock". The differential test below holds it to the real git binary.
func gitRefFormatOK(ref string) bool {
	for _, c := range strings.Split(ref, "/") {
		if c == "" || strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			return false
		}
	}
	return !strings.Contains(ref, "..") && !strings.HasSuffix(ref, ".") && !strings.ContainsAny(ref, " ~^:?*[\\\x7f") && !strings.Contains(ref, "@{") && ref != "@"
}

// TestUploadRefsPassGitCheckRefFormat is the differential test behind
// FuzzNames: over the seeds and the committed corpus-shaped names, every
// ref ValidUploadRef accepts is one `git check-ref-format` accepts, and
// gitRefFormatOK agrees with git on all of them.
func TestUploadRefsPassGitCheckRefFormat(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	names := append([]string{}, nameSeeds...)
	for _, n := range []string{"a", "a.b", "a-", "a_", "A9", "a.", "a.lock", "a..b", "x.lock.y", "a...", "0", strings.Repeat("z", 128)} {
		names = append(names, UploadRefPrefix+n)
	}
	for _, n := range names {
		if strings.ContainsRune(n, 0) {
			continue // not an argv
		}
		gitOK := exec.Command(git, "check-ref-format", n).Run() == nil
		if ValidUploadRef(n) && !gitOK {
			t.Errorf("ValidUploadRef accepts %q, which git check-ref-format refuses", n)
		}
		if strings.HasPrefix(n, UploadRefPrefix) && gitRefFormatOK(n) != gitOK {
			t.Errorf("gitRefFormatOK(%q) = %v, git says %v", n, !gitOK, gitOK)
		}
	}
}

// FuzzDeclaredFilter: the .gitattributes scan never panics and reports a
// filter only where a line names one.
func FuzzDeclaredFilter(f *testing.F) {
	for _, s := range []string{"*.bin filter=lfs diff=lfs\n", "# *.x filter=a\n", "*.c text\n", "x filter=\n", "\n\n", strings.Repeat("a", 70000) + " filter=x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<17 {
			return
		}
		pattern, filter, ok := declaredFilter(data)
		if !ok {
			return
		}
		if !bytes.Contains(data, []byte("filter="+filter)) || pattern == "" || strings.HasPrefix(pattern, "#") {
			t.Fatalf("filter %q for %q found in %q", filter, pattern, data)
		}
	})
}
