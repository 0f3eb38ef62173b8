package facts

import (
	"slices"
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
