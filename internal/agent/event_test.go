package agent

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestScan(t *testing.T) {
	parse := func(line []byte) []Event {
		switch s := string(line); {
		case s == "session":
			return []Event{{Kind: EventSession, Session: "s1"}}
		case s == "usage":
			return []Event{{Kind: EventUsage, Usage: &Usage{InputTokens: 1, OutputTokens: 2, CostUSD: 0.5}}}
		case s == "limit":
			return []Event{{Kind: EventLimit, Limit: &Limit{Message: "out"}}}
		case s == "done":
			return []Event{{Kind: EventOutcome, Outcome: &Outcome{OK: true}}}
		}
		return Raw(line)
	}
	tests := []struct {
		name    string
		in      string
		events  int
		summary Summary
		err     error
	}{
		{"empty", "", 0, Summary{}, nil},
		{"summary adds usage", "session\nusage\n\nusage\nnoise\ndone", 5,
			Summary{Session: "s1", Usage: Usage{InputTokens: 2, OutputTokens: 4, CostUSD: 1}, Outcome: &Outcome{OK: true}}, nil},
		{"limit", "limit\n", 1, Summary{Limit: &Limit{Message: "out"}}, nil},
		{"flood", "session\n" + strings.Repeat("x", MaxLine+1), 1, Summary{Session: "s1"}, bufio.ErrTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n int
			sum, err := Scan(strings.NewReader(tt.in), parse, func(Event) { n++ })
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if n != tt.events {
				t.Errorf("%d events, want %d", n, tt.events)
			}
			if sum.Session != tt.summary.Session || sum.Usage != tt.summary.Usage ||
				(sum.Outcome == nil) != (tt.summary.Outcome == nil) || (sum.Limit == nil) != (tt.summary.Limit == nil) {
				t.Errorf("summary = %+v, want %+v", sum, tt.summary)
			}
		})
	}
	// A nil sink drops events without failing.
	if _, err := Scan(strings.NewReader("usage\n"), parse, nil); err != nil {
		t.Fatal(err)
	}
}

func TestLimitUntil(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		resets time.Time
		want   time.Time
	}{
		{"stated", now.Add(3 * time.Hour), now.Add(3 * time.Hour)},
		{"none stated", time.Time{}, now.Add(time.Hour)},
		{"already past", now.Add(-time.Minute), now.Add(time.Hour)},
	}
	for _, tt := range tests {
		if got := (Limit{ResetsAt: tt.resets}).Until(now); !got.Equal(tt.want) {
			t.Errorf("%s: Until = %v, want %v", tt.name, got, tt.want)
		}
	}
}

type plain struct{}

func (plain) Name() string                                 { return "plain" }
func (plain) Run(context.Context, Attempt) (Result, error) { return Result{}, nil }

type resumer struct{ plain }

func (resumer) Capabilities() Capabilities { return Capabilities{CanResume: true} }

func TestCapabilitiesOf(t *testing.T) {
	if CapabilitiesOf(plain{}).CanResume || !CapabilitiesOf(resumer{}).CanResume {
		t.Error("capabilities not reported as declared")
	}
}

func TestJoinURL(t *testing.T) {
	for _, tt := range []struct{ base, path, want string }{
		{"http://h:1", "v1", "http://h:1/v1"},
		{"http://h:1/", "/v1", "http://h:1/v1"},
		{"http://h:1/p/", "v1", "http://h:1/p/v1"},
	} {
		if got := JoinURL(tt.base, tt.path); got != tt.want {
			t.Errorf("JoinURL(%q, %q) = %q, want %q", tt.base, tt.path, got, tt.want)
		}
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	c := Command{Files: []File{{Path: filepath.Join(dir, "a", "b", "config.toml"), Data: []byte("x = 1\n")}}}
	for range 2 { // a second attempt replaces the file
		if err := c.WriteFiles(); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(c.Files[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(c.Files[0].Path)); di.Mode().Perm() != 0o700 {
		t.Errorf("directory mode = %v, want 0700", di.Mode().Perm())
	}
}

func TestSummaryFill(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		sum  Summary
		in   Result
		want Result
	}{
		{"ok", Summary{Session: "s", Usage: Usage{InputTokens: 3}, Outcome: &Outcome{OK: true, Message: "done"}},
			Result{Session: "old"}, Result{Session: "s", Usage: Usage{InputTokens: 3}}},
		{"no session printed keeps the old one", Summary{}, Result{Session: "old"}, Result{Session: "old"}},
		{"error", Summary{Outcome: &Outcome{Message: "codex: 401"}}, Result{}, Result{Message: "codex: 401"}},
		{"error keeps the runner's message", Summary{Outcome: &Outcome{Message: "codex: 401"}}, Result{Message: "timed out"},
			Result{Message: "timed out"}},
		{"limit without reset", Summary{Limit: &Limit{Message: "429"}}, Result{},
			Result{Limit: &Limit{ResetsAt: now.Add(DefaultLimitWait), Message: "429"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.in
			tt.sum.Fill(&r, now)
			if r.Session != tt.want.Session || r.Usage != tt.want.Usage || r.Message != tt.want.Message ||
				(r.Limit == nil) != (tt.want.Limit == nil) || (r.Limit != nil && *r.Limit != *tt.want.Limit) {
				t.Errorf("result = %+v (limit %+v), want %+v (limit %+v)", r, r.Limit, tt.want, tt.want.Limit)
			}
		})
	}
}

// The vendors' wordings of a refused key or login are refusals; limits,
// other errors and a bare status number are not.
func TestMentionsAuthRefusal(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"API error 401: Failed to authenticate. API Error: 401 authentication_error", true},
		{"unexpected status 401 Unauthorized: Incorrect API key provided", true},
		{"API error 403: Forbidden", true},
		{"[API Error: API key not valid. Please pass a valid API key. (API_KEY_INVALID)]", true},
		{"permission_error: your key may not use this model", true},
		{"API error 429: rate limit reached", false},
		{"API error 500: internal server error", false},
		{"read 401 bytes", false},
		{"connection refused", false},
	} {
		if got := MentionsAuthRefusal(tc.msg); got != tc.want {
			t.Errorf("MentionsAuthRefusal(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
	for _, e := range Failed("x", "API error 429: rate limit reached; 401 unauthorized earlier") {
		if e.Kind == EventOutcome && e.Outcome.Refused {
			t.Error("a limit was taken for a refusal")
		}
	}
}
