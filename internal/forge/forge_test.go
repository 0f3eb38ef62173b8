package forge_test

import (
	"strings"
	"testing"

	"drover/internal/forge"
)

func TestParseRepo(t *testing.T) {
	for _, tc := range []struct {
		in, err string // err: a part of the error, "" for none
	}{
		{"drover/demo", ""},
		{"Some-Org/my_repo.v2", ""},
		{"a/" + strings.Repeat("r", forge.MaxRepoName), ""},
		{strings.Repeat("o", forge.MaxOwner) + "/r", ""},
		{"", "want OWNER/REPO"},
		{"demo", "want OWNER/REPO"},
		{"/demo", "both non-empty"},
		{"drover/", "both non-empty"},
		{"group/sub/r", ""}, // a GitLab subgroup
		{strings.Repeat("g/", forge.MaxNesting) + "r", ""},
		{strings.Repeat("g/", forge.MaxNesting+1) + "r", "at most 20"},
		{"g/" + strings.Repeat("s", forge.MaxOwner+1) + "/r", "at most 40"},
		{"g//r", "letters, digits"},
		{"/g/r", "letters, digits"},
		{"g/-s/r", "starting with a letter or digit"},
		{"g/../r", `letters, digits`},
		{"g/s..t/r", `no ".."`},
		{"a/" + strings.Repeat("r", forge.MaxRepoName+1), "at most 100"},
		{strings.Repeat("o", forge.MaxOwner+1) + "/r", "at most 40"},
		{"-owner/r", "starting with a letter or digit"},
		{"own er/r", "letters, digits"},
		{"o/re po", "letters, digits"},
		{"o/a..b", `no ".."`},
		{"o/..", `no ".."`},
		{"o/.", `no name "."`},
		{"o/demo.git", `without ".git"`},
		{"o/r\x1b[2J", `\x1b`},
	} {
		r, err := forge.ParseRepo(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseRepo(%q): %v", tc.in, err)
		case tc.err == "" && r.String() != tc.in:
			t.Errorf("ParseRepo(%q) = %v", tc.in, r)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseRepo(%q): %v, want an error with %q", tc.in, err, tc.err)
		case err != nil && strings.ContainsRune(err.Error(), 0x1b):
			t.Errorf("ParseRepo(%q): the error holds a raw control character: %q", tc.in, err)
		}
	}
}

// TestRepoCheckKind: a subgroup is GitLab's alone; the other forges name a repository
// OWNER/REPO, and their clients refuse a nested one before any call.
func TestRepoCheckKind(t *testing.T) {
	flat, nested := forge.Repo{Owner: "o", Name: "r"}, forge.Repo{Owner: "g/sub", Name: "r"}
	for _, kind := range forge.Kinds() {
		if err := flat.CheckKind(kind); err != nil {
			t.Errorf("%s: o/r: %v", kind, err)
		}
		err := nested.CheckKind(kind)
		if kind == forge.KindGitLab && err != nil {
			t.Errorf("gitlab: g/sub/r: %v", err)
		}
		if kind != forge.KindGitLab && (err == nil || !strings.Contains(err.Error(), "only GitLab has subgroups")) {
			t.Errorf("%s: g/sub/r: %v, want refused", kind, err)
		}
	}
	if err := (forge.Repo{Owner: "g/", Name: "r"}).CheckKind(forge.KindGitLab); err == nil {
		t.Error("gitlab: g//r: no error")
	}
}

func TestNewPRValidate(t *testing.T) {
	ok := forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1", Body: "done\r\n\tand tested"}
	for _, tc := range []struct {
		name string
		edit func(*forge.NewPR)
		err  string
	}{
		{"valid", func(*forge.NewPR) {}, ""},
		{"empty body", func(n *forge.NewPR) { n.Body = "" }, ""},
		{"long title", func(n *forge.NewPR) { n.Title = strings.Repeat("t", forge.MaxTitle) }, ""},
		{"long body", func(n *forge.NewPR) { n.Body = strings.Repeat("b", forge.MaxBody) }, ""},
		{"no head", func(n *forge.NewPR) { n.Head = "" }, "head branch is required"},
		{"no base", func(n *forge.NewPR) { n.Base = "" }, "base branch is required"},
		{"same", func(n *forge.NewPR) { n.Base = n.Head }, "both"},
		{"blank title", func(n *forge.NewPR) { n.Title = " \n" }, "title is required"},
		{"title too long", func(n *forge.NewPR) { n.Title = strings.Repeat("t", forge.MaxTitle+1) }, "title"},
		{"title of two lines", func(n *forge.NewPR) { n.Title = "a\nb" }, "control character"},
		{"escape in title", func(n *forge.NewPR) { n.Title = "a\x1b[31m" }, "control character"},
		{"body too long", func(n *forge.NewPR) { n.Body = strings.Repeat("b", forge.MaxBody+1) }, "body"},
		{"lone CR in body", func(n *forge.NewPR) { n.Body = "a\rb" }, "control character"},
		{"C1 in body", func(n *forge.NewPR) { n.Body = "a\u009bb" }, "control character"},
		{"not UTF-8 body", func(n *forge.NewPR) { n.Body = "a\xffb" }, "UTF-8"},
		{"option head", func(n *forge.NewPR) { n.Head = "-x" }, "'-'"},
	} {
		n := ok
		tc.edit(&n)
		err := n.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
		}
	}
}

func TestCheckBranch(t *testing.T) {
	for _, b := range []string{"main", "drover/job-1", "release-1.2", "a_b", "x@y", strings.Repeat("b", forge.MaxBranch)} {
		if err := forge.CheckBranch("head", b); err != nil {
			t.Errorf("CheckBranch(%q): %v", b, err)
		}
	}
	for _, b := range []string{"", "-f", "@", "HEAD", "a..b", "a@{1}", "a.", "/a", "a/", "a//b", ".a", "a/.b",
		"a.lock", "a.lock/b", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[", `a\b`, "a\tb", "a\x7f", "é",
		strings.Repeat("b", forge.MaxBranch+1)} {
		if err := forge.CheckBranch("head", b); err == nil {
			t.Errorf("CheckBranch(%q) passed", b)
		}
	}
}
