package facts

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestFacts: names are unique, exec comes first, every vendor CLI has its
// npm package and login, and the lists derived from All agree with it.
func TestFacts(t *testing.T) {
	names := Names()
	if len(names) == 0 || names[0] != Exec {
		t.Fatalf("names %v: want exec first", names)
	}
	seen := map[string]bool{}
	for _, a := range All() {
		if seen[a.Name] {
			t.Errorf("%s listed twice", a.Name)
		}
		seen[a.Name] = true
		if a.Kind == KindCLI && (a.Package == "" || a.Login.Env == "" || a.Login.Command == "") {
			t.Errorf("%s: a CLI needs its npm package and login", a.Name)
		}
		if got, ok := Lookup(a.Name); !ok || got.Name != a.Name {
			t.Errorf("Lookup(%s) = %v, %v", a.Name, got.Name, ok)
		}
	}
	if slices.Contains(AccountAgents(), Exec) {
		t.Errorf("exec runs under no account: %v", AccountAgents())
	}
	if _, ok := Lookup("nope"); ok || Of("nope").Accounts() {
		t.Error("an unknown agent is found, or runs under an account")
	}
	for _, p := range Providers() {
		if p != OpenAICompatible && DefaultModel(p) == "" {
			t.Errorf("provider %s has no default model", p)
		}
	}
}

// TestReadersLinkNoAgentCode: the packages that only read agents' facts
// (the hub, the runner's accounts, and this one) link neither the model
// SDKs, nor the Kubernetes client, nor the sandbox, nor the agents' code:
// only the runner's catalogue does.
func TestReadersLinkNoAgentCode(t *testing.T) {
	// Modules by prefix; drover's packages exactly (the hub uses the
	// egress proxy's package, drover/internal/sandbox/egress, which is
	// none of these).
	modules := []string{"github.com/openai/openai-go", "github.com/anthropics/anthropic-sdk-go", "k8s.io/client-go"}
	packages := []string{"drover/internal/sandbox", "drover/internal/agent", "drover/internal/agent/catalog", "drover/internal/model"}
	for _, pkg := range []string{"drover/internal/hub", "drover/internal/accounts", "drover/internal/agent/facts"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, pkg) {
			t.Fatalf("go list -deps %s lists no %s: %v", pkg, pkg, deps)
		}
		var hits []string
		for _, d := range deps {
			if slices.Contains(packages, d) || slices.ContainsFunc(modules, func(m string) bool { return strings.HasPrefix(d, m) }) {
				hits = append(hits, d)
			}
		}
		if len(hits) > 0 {
			slices.Sort(hits)
			t.Errorf("%s reaches %d packages only the runner's agents need: %s", pkg, len(hits), strings.Join(hits[:min(len(hits), 8)], ", "))
		}
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "drover/internal/agent/facts").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out)); !slices.Equal(got, []string{"drover/internal/agent/facts"}) {
		t.Errorf("package facts imports more than the standard library: %v", got)
	}
}
