package eval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/eval/dataset"
	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// IsTestPath says whether a file of a repository is a test's: the agent's
// changes to it are dropped before grading, so that the base's tests
// decide. It goes by the conventions of the common languages: a folder
// named test, tests, testdata, testing, __tests__ or spec, or a file
// named *_test.*, test_*.*, *.test.*, *_spec.*, *.spec.*, *Test.java or
// conftest.py.
func IsTestPath(p string) bool {
	dir, base := path.Split(p)
	for _, d := range strings.Split(strings.Trim(dir, "/"), "/") {
		switch strings.ToLower(d) {
		case "test", "tests", "testdata", "testing", "__tests__", "spec", "specs":
			return true
		}
	}
	stem, _, _ := strings.Cut(base, ".")
	lower := strings.ToLower(base)
	return strings.HasSuffix(stem, "_test") || strings.HasPrefix(lower, "test_") || strings.Contains(lower, ".test.") ||
		strings.HasSuffix(stem, "_spec") || strings.Contains(lower, ".spec.") || strings.HasSuffix(base, "Test.java") ||
		strings.HasSuffix(base, "Tests.java") || base == "conftest.py"
}

// gradedCommit is the commit an item is graded at: the agent's result
// with every test file as the base has it (one the agent added is
// dropped), recorded on the hub so that its ref keeps it; and the
// model_patch, the agent's whole diff against the base.
func (e *Evals) gradedCommit(ctx context.Context, c call.Caller, ev store.Eval, it *store.EvalItem, in apitypes.EvalInstance) (string, string, error) {
	base, head := in.BaseCommit, it.Head
	if head == base {
		return base, "", nil
	}
	dir, err := e.core.Source(ctx, c, in.Repo, base)
	if err != nil {
		return "", "", err
	}
	git := func(env []string, stdin []byte, args ...string) (string, error) {
		cmd := gitcmd.Cmd{Dir: dir, Env: env, Args: args}
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		out, err := e.cfg.Git.Run(ctx, cmd)
		if err != nil {
			return "", fmt.Errorf("item %s: git %s: %w", it.Key, args[0], err)
		}
		return string(out), nil
	}
	patch, err := git(nil, nil, "diff", "--binary", "--no-renames", "--no-ext-diff", "--no-textconv", base, head)
	if err != nil {
		return "", "", err
	}
	names, err := git(nil, nil, "diff", "--name-only", "-z", "--no-renames", base, head)
	if err != nil {
		return "", "", err
	}
	var tests []string
	for _, n := range strings.Split(names, "\x00") {
		if n != "" && IsTestPath(n) {
			tests = append(tests, n)
		}
	}
	if len(tests) == 0 {
		return head, patch, nil
	}
	// The base's version of each test the agent touched, or its removal.
	listed, err := git(nil, nil, append([]string{"ls-tree", "-z", base, "--"}, tests...)...)
	if err != nil {
		return "", "", err
	}
	inBase := map[string]string{}
	for _, l := range strings.Split(listed, "\x00") {
		meta, name, ok := strings.Cut(l, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 && f[1] == "blob" {
			inBase[name] = f[0] + " " + f[2]
		}
	}
	// NUL-terminated (a path may hold a newline), removals first (a folder
	// the agent made a file gives way to the base's files in it).
	var removals, restores bytes.Buffer
	for _, t := range tests {
		if v, ok := inBase[t]; ok {
			fmt.Fprintf(&restores, "%s\t%s\x00", v, t)
		} else {
			fmt.Fprintf(&removals, "0 %s\t%s\x00", strings.Repeat("0", 40), t)
		}
	}
	info := append(removals.Bytes(), restores.Bytes()...)
	idx, err := os.CreateTemp("", "drover-eval-index-")
	if err != nil {
		return "", "", fmt.Errorf("item %s: grading index: %w", it.Key, err)
	}
	idx.Close()
	defer os.Remove(idx.Name())
	env := []string{"GIT_INDEX_FILE=" + idx.Name()}
	if _, err := git(env, nil, "read-tree", head); err != nil {
		return "", "", err
	}
	if _, err := git(env, info, "update-index", "-z", "--index-info"); err != nil {
		return "", "", err
	}
	tree, err := git(env, nil, "write-tree")
	if err != nil {
		return "", "", err
	}
	// A fixed identity and date: the same result makes the same commit.
	date := fmt.Sprintf("%d +0000", ev.CreatedAt.Unix())
	env = []string{
		"GIT_AUTHOR_NAME=drover", "GIT_AUTHOR_EMAIL=drover@localhost", "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=drover", "GIT_COMMITTER_EMAIL=drover@localhost", "GIT_COMMITTER_DATE=" + date,
	}
	msg := fmt.Sprintf("eval %s: %s without its changes to %d test files\n", ev.ID, it.Key, len(tests))
	graded, err := git(env, []byte(msg), "commit-tree", strings.TrimSpace(tree), "-p", base)
	if err != nil {
		return "", "", err
	}
	graded = strings.TrimSpace(graded)
	v, err := e.core.Record(ctx, c, Recorded{Key: jobKey(it, "graded"), Project: in.Repo, Base: base, Head: graded,
		Summary: fmt.Sprintf("%s's result without its changes to tests: %s", it.AgentJob, strings.Join(tests, ", "))})
	if err != nil {
		return "", "", fmt.Errorf("item %s: %w: %w", it.Key, errRecord, err)
	}
	return v.Head, patch, nil
}

// errRecord is a failure to record the graded commit: the store's, tried
// again at the next pass.
var errRecord = errors.New("record the graded commit")

// exitWall is how the grading script ends when a test ran past its wall
// limit (timeout(1)'s code).
const exitWall = 124

// gradeScript runs an instance's tests, each under a wall limit: test_cmd
// alone, or each of FAIL_TO_PASS and PASS_TO_PASS (a command, or test_cmd's
// argument). It prints PASS or FAIL for each, and exits 0 only when all
// passed.
const gradeScript = `wall=$1 cmd=$2
shift 2
if [ $# -eq 0 ]; then
	exec timeout -k 5 "$wall" sh -c "$cmd"
fi
fail=0
for t in "$@"; do
	if [ -n "$cmd" ]; then
		timeout -k 5 "$wall" sh -c "$cmd \"\$1\"" drover-test "$t"
	else
		timeout -k 5 "$wall" sh -c "$t"
	fi
	rc=$?
	if [ $rc -eq 0 ]; then
		echo "PASS $t"
	else
		echo "FAIL $t (exit $rc)"
		[ $rc -eq 124 ] && exit 124
		fail=1
	fi
done
exit $fail`

// gradeArgs is the grading job's command.
func gradeArgs(in apitypes.EvalInstance, wallS int) []string {
	return append([]string{"sh", "-c", gradeScript, "drover-grade", strconv.Itoa(wallS), in.TestCmd}, dataset.Tests(in)...)
}
