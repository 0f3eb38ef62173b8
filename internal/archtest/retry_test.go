package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// retryHome is the one package that may wait between tries (see
// internal/retry); everything else calls it.
const retryHome = "internal/retry"

// sleepAllowed are folders whose production files may call time.Sleep:
// they pause on purpose, they do not retry.
var sleepAllowed = []string{
	"internal/chaos",               // fault injection: its pauses are the faults
	"internal/testkit",             // test helpers
	"internal/store/storetest",     // test helpers
	"internal/sandbox/sandboxtest", // test helpers
}

// backoffAllowed are files that may still declare a backoff of their own.
var backoffAllowed = []string{
	"internal/runner/conn.go", // the runner's reconnect backoff: to be migrated to internal/retry
}

var backoffName = regexp.MustCompile(`(?i)backoff`)

// TestRetryLoopsUseThePolicy fails when a retry loop of its own appears
// outside internal/retry: a time.Sleep, or a name saying backoff.
func TestRetryLoopsUseThePolicy(t *testing.T) {
	root, _ := moduleRoot(t)
	for _, f := range ownRetries(t, root) {
		t.Error(f + ": wait between tries with internal/retry (Policy.Delay, Sleep, Do)")
	}
}

// TestRetryCheckFindsAPlantedLoop: the check above can fail.
func TestRetryCheckFindsAPlantedLoop(t *testing.T) {
	root := t.TempDir()
	plant := func(rel, src string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	plant("internal/pkg/loop.go", `package pkg
import "time"
func connect(try func() error) {
	backoff := time.Millisecond
	for try() != nil {
		time.Sleep(backoff)
		backoff *= 2
	}
}
`)
	plant("internal/pkg/loop_test.go", "package pkg\nimport \"time\"\nfunc wait() { time.Sleep(1) }\n")
	plant("internal/retry/retry.go", "package retry\nimport \"time\"\nfunc nap() { time.Sleep(1) }\nvar backoff int\n")
	plant("internal/runner/conn.go", "package runner\nfunc backoff() {}\n")
	plant("cmd/x/main.go", "package main\ntype Backoff struct{}\nfunc main() {}\n")
	got := strings.Join(ownRetries(t, root), "\n")
	for _, want := range []string{
		"internal/pkg/loop.go:4: declares backoff",
		"internal/pkg/loop.go:6: calls time.Sleep",
		"cmd/x/main.go:2: declares Backoff",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the check missed %q; it found:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 3 {
		t.Errorf("the check found %d, want 3 (tests, internal/retry and the allowlist aside):\n%s", n, got)
	}
}

// ownRetries lists, as "file:line: what", the time.Sleep calls and the
// backoff names declared in the production Go files of internal/ and cmd/
// outside internal/retry and the allowlists.
func ownRetries(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
			if d.IsDir() {
				if d.Name() == "testdata" || rel == retryHome {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
				return nil
			}
			found = append(found, fileRetries(t, path, rel)...)
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	return found
}

func fileRetries(t *testing.T, path, rel string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", rel, err)
	}
	mayBackoff := slices.Contains(backoffAllowed, rel)
	maySleep := false
	for _, dir := range sleepAllowed {
		maySleep = maySleep || strings.HasPrefix(rel, dir+"/")
	}
	var found []string
	report := func(n ast.Node, what string) {
		found = append(found, rel+":"+strconv.Itoa(fset.Position(n.Pos()).Line)+": "+what)
	}
	declared := func(ids ...*ast.Ident) {
		for _, id := range ids {
			if id != nil && !mayBackoff && backoffName.MatchString(id.Name) {
				report(id, "declares "+id.Name)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sleep" && !maySleep {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" {
					report(n, "calls time.Sleep")
				}
			}
		case *ast.FuncDecl:
			declared(n.Name)
		case *ast.ValueSpec:
			declared(n.Names...)
		case *ast.TypeSpec:
			declared(n.Name)
		case *ast.Field:
			declared(n.Names...)
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, e := range n.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						declared(id)
					}
				}
			}
		}
		return true
	})
	return found
}
