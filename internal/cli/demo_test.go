package cli

import (
	"strings"
	"testing"
)

// The demo refuses, before starting anything, what it cannot do, and says
// what would work. (The demo itself runs in the e2e suite.)
func TestDemoRefusesWhatItCannotDo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"demo", "--agent", "native"}, 2, "no model server"},
		{[]string{"demo", "--agent", "nobody"}, 2, "want exec, claude"},
		{[]string{"demo", "--agent", "claude"}, 1, "$ANTHROPIC_API_KEY"},
		{[]string{"demo", "--sandbox", "docker"}, 2, "bwrap or none"},
	} {
		if r := runCLI(t, nil, "", tc.args...); r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %d %q", tc.args, r.code, r.stderr)
		}
	}
}
