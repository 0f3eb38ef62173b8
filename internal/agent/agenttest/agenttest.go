// Package agenttest helps the adapters' tests run their parsers over
// captured CLI output.
package agenttest

import (
	"os"
	"slices"
	"strings"
	"testing"

	"drover/internal/agent"
)

// ScanFile runs parse over the file at path and returns every event and the
// summary.
func ScanFile(t *testing.T, path string, parse agent.ParseFunc) ([]agent.Event, agent.Summary) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []agent.Event
	sum, err := agent.Scan(f, parse, func(e agent.Event) { evs = append(evs, e) })
	if err != nil {
		t.Fatalf("scan %s: %v", path, err)
	}
	return evs, sum
}

// Kinds lists the events' kinds, space-separated, for compact expectations.
func Kinds(evs []agent.Event) string {
	ks := make([]string, len(evs))
	for i, e := range evs {
		ks[i] = string(e.Kind)
	}
	return strings.Join(ks, " ")
}

// Env turns KEY=VALUE entries into a map, the last entry winning.
func Env(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// CheckCommand fails t if secret shows in c's argv or environment (it may
// only go into files), and returns the data of c's one file, which must be
// at path; path "" means c must write no file.
func CheckCommand(t *testing.T, c agent.Command, secret, path string) []byte {
	t.Helper()
	if strings.Contains(strings.Join(append(slices.Clone(c.Argv), c.Env...), "\x00"), secret) {
		t.Errorf("secret in argv %q or env %q", c.Argv, c.Env)
	}
	if path == "" {
		if len(c.Files) != 0 {
			t.Errorf("files = %+v, want none", c.Files)
		}
		return nil
	}
	if len(c.Files) != 1 || c.Files[0].Path != path {
		t.Fatalf("files = %+v, want one at %s", c.Files, path)
	}
	return c.Files[0].Data
}
