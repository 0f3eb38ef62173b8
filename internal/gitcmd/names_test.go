package gitcmd

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	for name, want := range map[string]bool{
		"web": true, "a.b_c-d": true, "0x": true, strings.Repeat("a", 64): true,
		"": false, "Web": false, "-web": false, ".web": false, "web.git": false, "a..b": false,
		"a/b": false, "web.lock": false, strings.Repeat("a", 65): false,
	} {
		if ValidProject(name) != want {
			t.Errorf("ValidProject(%q) = %v", name, !want)
		}
	}
	for ref, want := range map[string]bool{
		UploadRefPrefix + "up-123": true, UploadRefPrefix + "a": true,
		UploadRefPrefix: false, UploadRefPrefix + "a/b": false, UploadRefPrefix + "x.lock": false,
		"refs/heads/main": false, JobRef("j-1"): false, UploadRefPrefix + "..": false,
	} {
		if ValidUploadRef(ref) != want {
			t.Errorf("ValidUploadRef(%q) = %v", ref, !want)
		}
	}
}

// Fuzz targets for what a runner or a user sends the hub's git side:
// project names, commit ids and upload refs.

const fuzzCommit = "0123456789abcdef0123456789abcdef01234567"

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
