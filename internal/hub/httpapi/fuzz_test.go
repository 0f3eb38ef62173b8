package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"unicode/utf8"

	"drover/internal/hub/call"
)

// FuzzQueryInt: a query number is 0 when absent, else a whole number in
// [lo, hi] (never one that overflowed), else a 400 whose message is UTF-8.
func FuzzQueryInt(f *testing.F) {
	for _, s := range []string{"", "0", "1", "-1", "+5", "007", "1000", "1001", "9223372036854775807", "9223372036854775808", "-9223372036854775809", "1e3", "0x10", " 1", "１", "\xff"} {
		f.Add(s, int64(0), int64(1000))
	}
	f.Add("5", int64(1), int64(9223372036854775807))
	f.Fuzz(func(t *testing.T, s string, lo, hi int64) {
		if len(s) > 1024 {
			return
		}
		n, err := queryInt(url.Values{"n": {s}}, "n", lo, hi)
		if s == "" {
			if n != 0 || err != nil {
				t.Fatalf("absent: %d %v", n, err)
			}
			return
		}
		if err != nil {
			var ae *call.Refusal
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !utf8.ValidString(ae.Msg) {
				t.Fatalf("refusal of %q: %v", s, err)
			}
			return
		}
		if n < lo || n > hi {
			t.Fatalf("%q gave %d outside [%d, %d]", s, n, lo, hi)
		}
		want, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || want != n {
			t.Fatalf("%q gave %d (%v)", s, n, perr)
		}
	})
}
