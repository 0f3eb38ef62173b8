// Package agenttest helps the adapters' tests run their parsers over
// captured CLI output.
package agenttest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/agent"
	"drover/internal/rules"
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

// FuzzParse fuzzes an adapter's output parser, seeded with every line of
// the captured output files matching glob. CLI output is untrusted (the
// agent runs the repository's code and may print anything), so for any
// output: the parser never panics; every event has a known kind and the
// fields of its kind; a raw event keeps its line verbatim; and the summary
// the runner reports from it is one the hub takes (usage within
// protocol.Usage.Check, a session plain text, a limit's reset time
// encodable as JSON). Seeds
// add lines of the CLI's format that the captures lack.
func FuzzParse(f *testing.F, glob string, parse agent.ParseFunc, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		f.Fatalf("no captured output matches %s (%v)", glob, err)
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(l) > 0 && len(l) <= 4096 {
				f.Add(l)
			}
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, out []byte) {
		if len(out) > 1<<16 {
			return
		}
		for _, l := range bytes.Split(out, []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			for _, e := range parse(l) {
				checkEvent(t, l, e)
			}
		}
		sum, err := agent.Scan(bytes.NewReader(out), parse, nil)
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		if err := sum.Usage.Check(); err != nil {
			t.Fatalf("summary usage the hub refuses: %v", err)
		}
		if err := rules.CheckPlainText("session", sum.Session, false); err != nil {
			t.Fatalf("summary session the hub refuses: %v", err)
		}
		var r agent.Result
		sum.Fill(&r, now)
		if r.Limit != nil {
			if !r.Limit.ResetsAt.After(now) {
				t.Fatalf("limit resets at %v, not after now", r.Limit.ResetsAt)
			}
			if _, err := json.Marshal(r.Limit); err != nil {
				t.Fatalf("limit does not encode: %v", err)
			}
		}
	})
}

func checkEvent(t *testing.T, line []byte, e agent.Event) {
	t.Helper()
	switch e.Kind {
	case agent.EventRaw:
		if e.Text != string(line) {
			t.Fatalf("raw event %q for line %q", e.Text, line)
		}
	case agent.EventTurn: // any name: only counted
	case agent.EventUsage:
		if e.Usage == nil {
			t.Fatal("usage event without usage")
		}
	case agent.EventLimit:
		if e.Limit == nil {
			t.Fatal("limit event without limit")
		}
	case agent.EventOutcome:
		if e.Outcome == nil {
			t.Fatal("outcome event without outcome")
		}
	case agent.EventSession:
		if e.Session == "" {
			t.Fatal("empty session event")
		}
	case agent.EventText, agent.EventToolUse, agent.EventToolResult:
	default:
		t.Fatalf("unknown event kind %q", e.Kind)
	}
	if _, err := json.Marshal(e); err != nil {
		t.Fatalf("event %+v does not encode: %v", e, err)
	}
}
