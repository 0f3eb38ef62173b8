package rules

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"drover/internal/testkit/allocs"
)

// FuzzCheckJSON: CheckJSON accepts only what encoding/json takes as one
// valid value in UTF-8; it accepts every such value encoding/json writes
// (which never repeats a key) but keys differing only in case and nesting
// past MaxJSONDepth; a key given twice, also in another case, is refused
// at any depth; and it never panics or hangs, however deep the nesting.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `1`, `"x"`, `null`, ` {"a":1} `, `{"a":1,"a":2}`, `{"a":{"b":1,"b":1}}`, `[{"a":1},{"a":1}]`,
		`{"a":1} {}`, `{"a":1}x`, "\"\xff\"", `{"a":`, `[[[[[[[[[[]]]]]]]]]]`, strings.Repeat("[", 20000), `{"A":1,"a":2}`, `{"k":1,"\u212a":2}`, strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 64), `{"\u0061":1,"a":2}`, `1e999`, `{"a":[1,2,{"a":3}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		err := CheckJSON(data)
		valid := json.Valid(data) && utf8.Valid(data)
		if err == nil && !valid {
			t.Fatalf("CheckJSON accepted %q, which is not one valid JSON value in UTF-8", data)
		}
		if !valid {
			return
		}
		var v any
		if json.Unmarshal(data, &v) != nil {
			return // e.g. a number out of float64's range
		}
		enc, merr := json.Marshal(v)
		if merr != nil {
			t.Fatal(merr)
		}
		// encoding/json never writes a key twice, but it writes map keys
		// that differ only in case, and nests as deep as it was given.
		if e := CheckJSON(enc); e != nil && (err == nil || !strings.Contains(e.Error(), "only in case") && !strings.Contains(e.Error(), "nested deeper")) {
			t.Fatalf("CheckJSON refused %s, which encoding/json wrote: %v", enc, e)
		}
		if err != nil {
			return
		}
		if CheckJSON([]byte(`{"k":`+string(data)+`,"k":`+string(data)+`}`)) == nil {
			t.Fatal("a repeated key around an accepted value was accepted")
		}
		if CheckJSON([]byte(`{"k":`+string(data)+`,"K":`+string(data)+`}`)) == nil {
			t.Fatal("keys differing only in case around an accepted value were accepted")
		}
		if e := CheckJSON([]byte(`[` + string(data) + `,` + string(data) + `]`)); e != nil && !strings.Contains(e.Error(), "nested deeper") {
			t.Fatalf("an array of two accepted values was refused: %v", e)
		}
	})
}

// jsonAllocBound is the most CheckJSON may allocate for n bytes of input:
// linear in n. Each token costs encoding/json about 120 bytes, and a token
// may take 2 bytes ("1,"): the bound leaves room for twice that.
func jsonAllocBound(n int) uint64 { return 128*uint64(n) + 64<<10 }

// FuzzCheckJSONMemory: what CheckJSON allocates grows linearly with its
// input, whatever its shape. A checker holding a path string per level
// (depth times key length, quadratic in the size) fails at the first seed.
func FuzzCheckJSONMemory(f *testing.F) {
	for _, s := range []string{nestedJSON(50, 1000), nestedJSON(1, 10000), nestedJSON(2000, 30), flatJSON(32 << 10),
		strings.Repeat("[", 30000), strings.Repeat(`[1,`, 20000), "[" + strings.Repeat(`1,`, 30000) + "1]", "[" + strings.Repeat(`{"a":1},`, 5000) + "{}]", `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		if n, limit := allocs.Least(func() { _ = CheckJSON(data) }), jsonAllocBound(len(data)); n > limit {
			t.Fatalf("CheckJSON allocated %d bytes for %d bytes of input (%.0f per byte); the bound is %d", n, len(data), float64(n)/float64(len(data)), limit)
		}
	})
}

// FuzzCheckPlainText: accepted text is UTF-8 without C0, DEL or C1
// controls; multiline text may also hold tab, newline and CRLF, never a
// lone CR; CheckText adds non-blank and the limit.
func FuzzCheckPlainText(f *testing.F) {
	for _, s := range []string{"plain", "a\tb", "a\nb", "a\r\nb", "a\rb", "a\r", "\x1b[31m", "\u009b31m", "\x7f", "\xff", "caf\u00e9", "\u2028"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, multiline bool) {
		if len(s) > maxFuzzInput {
			return
		}
		if CheckPlainText("f", s, multiline) != nil {
			if CheckText("f", s, len(s)+1) == nil && multiline {
				t.Fatalf("CheckText accepted %q, which CheckPlainText refuses", s)
			}
			return
		}
		if !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8 %q accepted", s)
		}
		for i, r := range s {
			ctl := r < 0x20 || r >= 0x7f && r <= 0x9f
			if !ctl {
				continue
			}
			if !multiline || !(r == '\t' || r == '\n' || r == '\r' && i+1 < len(s) && s[i+1] == '\n') {
				t.Fatalf("control character %U at %d accepted in %q (multiline %v)", r, i, s, multiline)
			}
		}
		if multiline && strings.TrimSpace(s) != "" && CheckText("f", s, len(s)) != nil {
			t.Fatalf("CheckText refused %q, which is plain text", s)
		}
	})
}
