package accounts

import (
	"regexp"
	"strings"
	"testing"
)

var refLabel = regexp.MustCompile(`^[A-Za-z0-9._-]{0,64}$`)

// FuzzValidLabel: a label is accepted exactly when it is at most 64
// letters, digits, '.', '_' and '-' and does not look like an account id.
func FuzzValidLabel(f *testing.F) {
	for _, s := range []string{"", "work", "acct_x", "a b", "ä", strings.Repeat("l", 64), strings.Repeat("l", 65), "x/y", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, l string) {
		if len(l) > 1024 {
			return
		}
		want := refLabel.MatchString(l) && !strings.HasPrefix(l, idPrefix)
		if (ValidLabel(l) == nil) != want {
			t.Fatalf("ValidLabel(%q) = %v", l, ValidLabel(l))
		}
	})
}
