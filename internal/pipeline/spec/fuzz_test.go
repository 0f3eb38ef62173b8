package spec

import (
	"os"
	"strings"
	"testing"

	"drover/internal/testkit/allocs"
)

// parseAllocBound is the most Parse may allocate for n bytes of input:
// linear in n. yaml.v3 keeps a node (about 200 bytes) and a few tokens per
// couple of input bytes; the bound leaves room above that, and alias
// expansion, the way small YAML grows large, is refused.
func parseAllocBound(n int) uint64 { return 4096*uint64(n) + 1<<20 }

// FuzzParse: Parse never panics, and what it allocates stays linear in the
// input's size, whatever its shape. Allocation stands in for time (the
// project asserts no wall-clock times): the parser's work is building
// nodes, and alias expansion, which is work without input, is refused.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("../../../examples/pipelines/review-loop.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{valid, string(example), "name: p\nsteps: []\n", "a: &a [*a, *a]\n",
		"x: &a [1,2]\ny: &b [*a,*a]\nz: [*b,*b]\n", strings.Repeat("[", 5000), strings.Repeat("- ", 5000),
		"name: p\nsteps:\n" + strings.Repeat("  - {id: a, kind: exec, command: [x], depends_on: [a]}\n", 300),
		"name: p\nsteps:\n  - id: a\n    kind: exec\n    command: [\"{{" + strings.Repeat("{{", 1000) + "\"]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxFile+1 {
			return
		}
		n := allocs.Least(func() { _, _ = Parse("f.yaml", data, repo.read) })
		if limit := parseAllocBound(len(data)); n > limit {
			t.Fatalf("Parse allocated %d bytes for %d bytes of input; the bound is %d", n, len(data), limit)
		}
	})
}
