package eval

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// fakeGradeCore is a Core whose only repository is dir; Record answers
// the commit it was given. Every other operation panics (nil Core).
type fakeGradeCore struct {
	Core
	dir string
}

func (f fakeGradeCore) Source(context.Context, call.Caller, string, string) (string, error) {
	return f.dir, nil
}
func (f fakeGradeCore) Record(_ context.Context, _ call.Caller, r Recorded) (apitypes.JobView, error) {
	return apitypes.JobView{Head: r.Head}, nil
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitcmd.Git{}.Out(context.Background(), dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(out)
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The graded commit is the agent's result with every test as the base
// has it: a rewritten test restored, an added one dropped, a tests folder
// made a file given back, and a path that smuggles an index line in its
// name changes nothing else.
func TestGradedCommitKeepsTheBasesTests(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "--quiet")
	write(t, dir, map[string]string{"calc.sh": "bug\n", "tests/test_calc.sh": "real test\n", "spec/a_spec.rb": "spec\n"})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "--quiet", "-m", "base")
	base := git(t, dir, "rev-parse", "HEAD")
	cheat := git(t, dir, "hash-object", "-w", "--stdin", "--path", "x") // the empty blob
	write(t, dir, map[string]string{
		"calc.sh": "fixed\n", "tests/test_calc.sh": "exit 0\n", "tests/test_new.sh": "new\n",
		// A test path whose name holds an index-info line that would set
		// the real test to the cheat's blob.
		"tests/x\n100644 " + cheat + "\ttests/test_calc.sh": "smuggled\n",
	})
	if err := os.RemoveAll(filepath.Join(dir, "spec")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"spec": "a file where the folder was\n"})
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "--quiet", "-m", "agent")
	head := git(t, dir, "rev-parse", "HEAD")

	e := &Evals{core: fakeGradeCore{dir: dir}, cfg: Config{Now: time.Now}}
	it := &store.EvalItem{EvalID: "e-1", Key: "i#1#1", Head: head}
	graded, patch, err := e.gradedCommit(t.Context(), call.Caller{}, store.Eval{ID: "e-1", CreatedAt: time.Unix(1700000000, 0)}, it,
		apitypes.EvalInstance{Repo: "p", BaseCommit: base})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, dir, "show", graded+":calc.sh"); got != "fixed" {
		t.Errorf("calc.sh graded: %q, want the agent's fix", got)
	}
	if got := git(t, dir, "show", graded+":tests/test_calc.sh"); got != "real test" {
		t.Errorf("tests/test_calc.sh graded: %q, want the base's", got)
	}
	if got := git(t, dir, "show", graded+":spec/a_spec.rb"); got != "spec" {
		t.Errorf("spec/a_spec.rb graded: %q, want the base's", got)
	}
	if got := git(t, dir, "ls-tree", "-r", "--name-only", graded); got != "calc.sh\nspec/a_spec.rb\ntests/test_calc.sh" {
		t.Errorf("graded tree:\n%s", got)
	}
	if got := git(t, dir, "rev-parse", graded+"^"); got != base {
		t.Errorf("graded commit's parent %s, want the base %s", got, base)
	}
	if !strings.Contains(patch, "+exit 0") || !strings.Contains(patch, "+fixed") {
		t.Errorf("model_patch is not the agent's whole diff:\n%s", patch)
	}
}
