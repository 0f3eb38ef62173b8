package archtest

import (
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// forbidden lists, for a package, module packages it must not depend on,
// directly or through others (test files aside).
var forbidden = map[string][]string{
	"internal/githttp":   {"internal/workspace"},
	"internal/workspace": {"internal/hubrepo", "internal/hub", "internal/localrepo"},
	"internal/hubrepo":   {"internal/workspace", "internal/localrepo"},
	"internal/localrepo": {"internal/workspace", "internal/hubrepo"},
	// They read agents' facts only, never the runner's agent code (the
	// hub's sandbox/egress is the proxy's rules, not the sandbox).
	"internal/hub":      {"internal/workspace", "internal/sandbox", "internal/agent", "internal/agent/catalog", "internal/model"},
	"internal/accounts": {"internal/sandbox", "internal/agent", "internal/agent/catalog", "internal/model"},
	// The runner gateway carries frames: git and the pages are others'
	// (and the core, TestHubTransportsDoNotImportTheCore).
	"internal/hub/gateway": {"internal/hubrepo", "internal/web"},
	// The runner wire does not know the HTTP API's bodies.
	"internal/protocol": {"internal/apitypes"},
}

// leaves may import no other package of the module.
var leaves = []string{"internal/gitcmd", "internal/retry", "internal/agent/facts"}

// nearLeaves may import only the listed packages of the module: the rules
// the runner wire and the HTTP API share sit below both.
var nearLeaves = map[string][]string{"internal/rules": {"internal/job"}}

// lean lists, for a package, module path prefixes outside drover it must
// not link: the model SDKs and the Kubernetes client are most of the
// binary, and only the runner's agents and the fleet's kubernetes target
// need them.
var lean = map[string][]string{
	"internal/hub":      {"github.com/openai/openai-go", "github.com/anthropics/anthropic-sdk-go", "k8s.io/client-go"},
	"internal/accounts": {"github.com/openai/openai-go", "github.com/anthropics/anthropic-sdk-go", "k8s.io/client-go"},
}

// small are the folders whose Go files must stay under maxLines, so that
// each keeps to one responsibility.
var small = []string{"internal/gitcmd", "internal/hubrepo", "internal/workspace", "internal/localrepo", "internal/hub/gateway", "internal/hub/call", "internal/hub/httpapi"}

const maxLines = 600

func TestDependenciesPointOneWay(t *testing.T) {
	root, module := moduleRoot(t)
	for pkg, bad := range forbidden {
		deps := moduleDeps(t, root, module, pkg)
		for _, b := range bad {
			if deps[b] {
				t.Errorf("%s depends on %s", pkg, b)
			}
		}
	}
	for _, pkg := range leaves {
		if imps := moduleImports(t, root, module, pkg); len(imps) > 0 {
			t.Errorf("%s is a leaf but imports %v", pkg, imps)
		}
	}
	for pkg, ok := range nearLeaves {
		for _, imp := range moduleImports(t, root, module, pkg) {
			if !slices.Contains(ok, imp) {
				t.Errorf("%s may import only %v of the module, but imports %s", pkg, ok, imp)
			}
		}
	}
}

// TestHubTransportsDoNotImportTheCore: every package under internal/hub
// (call, and the transports: httpapi, gateway, ...) is mounted by the hub,
// its composition root, and declares what it needs of the core; importing
// the core would turn that around.
func TestHubTransportsDoNotImportTheCore(t *testing.T) {
	root, module := moduleRoot(t)
	dirs, err := filepath.Glob(filepath.Join(root, "internal", "hub", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]bool{}
	for _, f := range dirs {
		rel, err := filepath.Rel(root, filepath.Dir(f))
		if err != nil {
			t.Fatal(err)
		}
		pkgs[filepath.ToSlash(rel)] = true
	}
	if !pkgs["internal/hub/httpapi"] || !pkgs["internal/hub/call"] {
		t.Fatalf("the hub's packages are not where this test looks: %v", pkgs)
	}
	for pkg := range pkgs {
		if moduleDeps(t, root, module, pkg)["internal/hub"] {
			t.Errorf("%s depends on internal/hub, the core that mounts it", pkg)
		}
	}
}

// TestLeanPackages: go list -deps, the linker's view, holds none of a
// lean package's banned modules.
func TestLeanPackages(t *testing.T) {
	_, module := moduleRoot(t)
	for pkg, bad := range lean {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"/"+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, module+"/"+pkg) {
			t.Fatalf("go list -deps %s does not list it: %v", pkg, deps)
		}
		var hits []string
		for _, d := range deps {
			if slices.ContainsFunc(bad, func(m string) bool { return strings.HasPrefix(d, m) }) {
				hits = append(hits, d)
			}
		}
		if len(hits) > 0 {
			t.Errorf("%s links %d packages of %v, e.g. %s", pkg, len(hits), bad, strings.Join(hits[:min(len(hits), 5)], ", "))
		}
	}
}

func TestGitPackagesFilesAreSmall(t *testing.T) {
	root, _ := moduleRoot(t)
	for _, dir := range small {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(b), "\n"); n > maxLines {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s has %d lines, over %d: split it by responsibility", rel, n, maxLines)
			}
		}
	}
}

// moduleDeps is every module package pkg depends on, itself excluded.
func moduleDeps(t *testing.T, root, module, pkg string) map[string]bool {
	seen := map[string]bool{}
	todo := []string{pkg}
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		for _, imp := range moduleImports(t, root, module, p) {
			if !seen[imp] {
				seen[imp] = true
				todo = append(todo, imp)
			}
		}
	}
	return seen
}

// moduleImports lists the module packages pkg's non-test files import, as
// paths relative to the module root.
func moduleImports(t *testing.T, root, module, pkg string) []string {
	t.Helper()
	bp, err := build.Default.ImportDir(filepath.Join(root, filepath.FromSlash(pkg)), 0)
	if err != nil {
		t.Fatalf("read package %s: %v", pkg, err)
	}
	var out []string
	for _, imp := range bp.Imports {
		if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
			out = append(out, rel)
		}
	}
	return out
}

// moduleRoot is the module's folder (two above this package's) and its
// path, from go.mod.
func moduleRoot(t *testing.T) (dir, module string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if m, ok := strings.CutPrefix(line, "module "); ok {
			return dir, strings.TrimSpace(m)
		}
	}
	t.Fatal("go.mod names no module")
	return "", ""
}
