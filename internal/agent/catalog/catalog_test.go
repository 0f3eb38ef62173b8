package catalog

import (
	"slices"
	"strings"
	"testing"

	"drover/internal/agent"
	"drover/internal/agent/facts"
)

// TestCatalogue: every agent of package facts has its implementation,
// under its name and with its capabilities, and every adapter is a vendor
// CLI of facts, listed in facts' order.
func TestCatalogue(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	names := c.Names()
	slices.Sort(names)
	want := facts.Names()
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("registered %v, facts name %v", names, want)
	}
	for _, f := range facts.All() {
		a, ok := c.Lookup(f.Name)
		if !ok {
			t.Errorf("%s: not registered", f.Name)
			continue
		}
		if got := agent.CapabilitiesOf(a); got != f.Caps {
			t.Errorf("%s: capabilities %+v, facts say %+v", f.Name, got, f.Caps)
		}
		if _, ok := Adapter(f.Name); ok != (f.Kind == facts.KindCLI) {
			t.Errorf("%s: has an adapter: %v, kind %d", f.Name, ok, f.Kind)
		}
	}
	var ads []string
	for _, ad := range Adapters() {
		ads = append(ads, ad.Name)
	}
	if !slices.Equal(ads, facts.CLIs()) {
		t.Errorf("adapters %v, want facts' CLIs %v", ads, facts.CLIs())
	}
}

// TestAvailable: a vendor CLI is available only where it is installed; the
// other agents always are.
func TestAvailable(t *testing.T) {
	c, err := New(Config{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range facts.All() {
		err := c.Available(f.Name)
		if f.Kind == facts.KindCLI && (err == nil || !strings.Contains(err.Error(), f.Name)) {
			t.Errorf("%s on an empty path: %v", f.Name, err)
		}
		if f.Kind != facts.KindCLI && err != nil {
			t.Errorf("%s: %v", f.Name, err)
		}
	}
}
