package ids

import (
	"strings"
	"testing"
)

// FuzzValid: Valid accepts exactly prefix, '-' and 16 characters of the
// id alphabet, and every New id.
func FuzzValid(f *testing.F) {
	for _, s := range []string{New("j"), New("a"), "j-", "j-0123456789abcdef", "j-0123456789ABCDEF", "j-0123456789abcdeu", "x-0123456789abcdef", "j-0123456789abcdé"} {
		f.Add("j", s)
	}
	f.Fuzz(func(t *testing.T, prefix, s string) {
		if len(prefix)+len(s) > 1024 {
			return
		}
		rest, ok := strings.CutPrefix(s, prefix+"-")
		want := ok && len(rest) == 16 && strings.Trim(rest, "0123456789abcdefghjkmnpqrstvwxyz") == ""
		if Valid(prefix, s) != want {
			t.Fatalf("Valid(%q, %q) = %v", prefix, s, !want)
		}
		if prefix != "" && !strings.ContainsAny(prefix, "-") && !Valid(prefix, New(prefix)) {
			t.Fatalf("New(%q) is not Valid", prefix)
		}
	})
}
