package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"drover/internal/accounts"
)

// account limits sets what its flags name and keeps the rest; a bad value
// changes nothing.
func TestAccountLimits(t *testing.T) {
	home := filepath.Join(t.TempDir(), "runner")
	if r := runCLI(t, nil, testKey+"\n", "runner", "account", "add", "--agent", "codex", "--label", "work", "--api-key-stdin", "--home", home); r.code != 0 {
		t.Fatalf("add: %d %s", r.code, r.stderr)
	}
	limits := func() accounts.Limits {
		t.Helper()
		s, err := accounts.Open(home)
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.Find("work")
		if err != nil {
			t.Fatal(err)
		}
		return a.Limits
	}
	for _, tc := range []struct {
		args []string
		code int
		want accounts.Limits
	}{
		{[]string{"--max-turns", "5", "--max-spend-per-day", "2.5"}, 0, accounts.Limits{TurnsPerJob: 5, SpendPerDay: 2.5}},
		{[]string{"--max-jobs-per-hour", "3"}, 0, accounts.Limits{JobsPerHour: 3, TurnsPerJob: 5, SpendPerDay: 2.5}},
		{[]string{"--max-jobs-per-hour", "-1"}, 2, accounts.Limits{JobsPerHour: 3, TurnsPerJob: 5, SpendPerDay: 2.5}},
		{[]string{"--max-spend-per-day", "NaN"}, 2, accounts.Limits{JobsPerHour: 3, TurnsPerJob: 5, SpendPerDay: 2.5}},
		{[]string{"--max-turns", "0"}, 0, accounts.Limits{JobsPerHour: 3, SpendPerDay: 2.5}},
	} {
		r := runCLI(t, nil, "", append([]string{"runner", "account", "limits", "work", "--home", home}, tc.args...)...)
		if r.code != tc.code || (tc.code == 0 && !strings.Contains(r.stdout, "limits: jobs per hour")) {
			t.Fatalf("limits %v: exit %d, want %d\n%s%s", tc.args, r.code, tc.code, r.stdout, r.stderr)
		}
		if got := limits(); got != tc.want {
			t.Fatalf("after limits %v: %+v, want %+v", tc.args, got, tc.want)
		}
	}
}
