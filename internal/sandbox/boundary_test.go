package sandbox

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// processStarters are the only places outside this package allowed to
// start processes, and why. Agent and repository commands go through a
// Boundary; nothing else may run them.
func processStarters() map[string]string {
	return map[string]string{
		"internal/sandbox/":           "the execution boundary itself",
		"internal/gitcmd/":            "the one package that runs git: fixed argv, sanitized environment, hooks and filters off; the trusted side, never a repository's commands",
		"internal/hubrepo/":           "serves the hub's repositories through git http-backend (net/http/cgi) with gitcmd's sanitized environment and safety config",
		"internal/cli/demo.go":        "starts drover's own hub and runner processes, git on the demo's own repository, and apt-get for --install-deps",
		"internal/testkit/":           "starts drover's own processes for end-to-end tests",
		"internal/e2e/e2ekit/":        "the end-to-end tests' helpers: run drover demo and git on the tests' own repositories",
		"internal/bench/":             "benchmark harness: starts drover's own hub and plays a fake runner whose fixed `date` argv stands in for an agent",
		"internal/chaos/procs.go":     "the fault campaign: starts, signals and restarts drover's own hub and runner processes",
		"internal/fleet/container.go": "the docker/podman fleet target: runs the engine's CLI with fixed argv (the token in an env file)",
		"internal/fleet/local.go":     "the local fleet target: starts drover's own runner processes, detached, with fixed argv",
		"internal/fleet/ssh.go":       "the ssh fleet target: runs the system ssh with fixed options and the operator's host, and drover's own bridge processes",
	}
}

// forbiddenCalls start a process without os/exec.
func forbiddenCalls() map[string][]string {
	return map[string][]string{
		"os":                    {"StartProcess"},
		"syscall":               {"ForkExec", "Exec", "StartProcess"},
		"golang.org/x/sys/unix": {"Exec"},
	}
}

// TestOnlyTheBoundaryStartsProcesses fails when code outside the allowlist
// imports os/exec or starts a process another way. Test files are exempt:
// they are not part of the binary.
func TestOnlyTheBoundaryStartsProcesses(t *testing.T) {
	root := moduleRoot(t)
	allowed := processStarters()
	used := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		for prefix := range allowed {
			if rel == prefix || (strings.HasSuffix(prefix, "/") && strings.HasPrefix(rel, prefix)) {
				used[prefix] = true
				return nil
			}
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, why := range starts(f) {
			t.Errorf("%s %s: only internal/sandbox may start agent or repository processes (add a justified entry to processStarters if this is drover's own)", rel, why)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for prefix := range allowed {
		if !used[prefix] {
			t.Errorf("processStarters lists %s, which no longer exists: remove it", prefix)
		}
	}
}

// starts lists how f starts processes.
func starts(f *ast.File) []string {
	var found []string
	names := map[string]string{} // local name → import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if path == "os/exec" {
			found = append(found, "imports os/exec")
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = path
	}
	calls := forbiddenCalls()
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok {
			for _, fn := range calls[names[x.Name]] {
				if sel.Sel.Name == fn {
					found = append(found, "uses "+names[x.Name]+"."+fn)
				}
			}
		}
		return true
	})
	return found
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

func TestTheScanSeesEveryWayToStartAProcess(t *testing.T) {
	src := `package x
import (
	"os"
	sc "syscall"
	"golang.org/x/sys/unix"
	ex "os/exec"
)
func f() { os.StartProcess("", nil, nil); sc.Exec("", nil, nil); unix.Exec("", nil, nil); _ = ex.Command }`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(starts(f), "; ")
	for _, want := range []string{"imports os/exec", "uses os.StartProcess", "uses syscall.Exec", "uses golang.org/x/sys/unix.Exec"} {
		if !strings.Contains(got, want) {
			t.Errorf("scan found %q, missing %q", got, want)
		}
	}
}
