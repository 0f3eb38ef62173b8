package catalog

import (
	"slices"
	"testing"
)

// TestCatalogue: names are unique, exec comes first, every vendor CLI has
// its adapter and package, and the lists derived from it agree with it.
func TestCatalogue(t *testing.T) {
	names := Names()
	if len(names) == 0 || names[0] != "exec" {
		t.Fatalf("names %v: want exec first", names)
	}
	seen := map[string]bool{}
	for _, e := range All() {
		if seen[e.Name] {
			t.Errorf("%s listed twice", e.Name)
		}
		seen[e.Name] = true
		if e.Kind == CLI && (e.Adapter == nil || e.Adapter.Name != e.Name || e.Package == "") {
			t.Errorf("%s: a CLI needs its adapter and npm package", e.Name)
		}
		if got, ok := Lookup(e.Name); !ok || got.Name != e.Name {
			t.Errorf("Lookup(%s) = %v, %v", e.Name, got.Name, ok)
		}
	}
	if slices.Contains(AccountAgents(), "exec") {
		t.Errorf("exec runs under no account: %v", AccountAgents())
	}
	if len(CLIs())+1 > len(names) {
		t.Errorf("%d CLIs of %d agents", len(CLIs()), len(names))
	}
	if _, err := Registry(Config{}); err != nil {
		t.Fatal(err)
	}
}
