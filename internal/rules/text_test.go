package rules

import (
	"fmt"
	"strings"
	"testing"

	"drover/internal/testkit/allocs"
)

func TestCheckPlainText(t *testing.T) {
	tests := []struct {
		name      string
		s         string
		multiline bool
		ok        bool
	}{
		{"plain", "héllo, wörld ✓", false, true},
		{"empty", "", false, true},
		{"tab in a line", "a\tb", false, false},
		{"newline in a line", "a\nb", false, false},
		{"tab and newline in text", "a\tb\nc\n", true, true},
		{"CRLF in text", "a\r\nb\r\n", true, true},
		{"lone CR in text", "abc\rxyz", true, false},
		{"CR at the end", "abc\r", true, false},
		{"NUL", "a\x00b", true, false},
		{"ESC", "a\x1b[2Jb", true, false},
		{"BEL", "\x07", true, false},
		{"unit separator", "\x1f", true, false},
		{"DEL", "a\x7f", true, false},
		{"C1 CSI U+009B", "a\u009b2J", true, false},
		{"C1 U+0080", "\u0080", true, false},
		{"C1 U+009F", "\u009f", true, false},
		{"just past C1", "\u00a0", false, true},
		{"invalid UTF-8", "a\xffb", true, false},
		{"raw C1 byte", "a\x9bb", true, false}, // not UTF-8 either
		{"truncated rune", "\xe2\x9c", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckPlainText("field", tt.s, tt.multiline)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckPlainText(%q, %v) = %v, want ok=%v", tt.s, tt.multiline, err, tt.ok)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "field ") {
				t.Fatalf("the error does not name the field: %v", err)
			}
		})
	}
}

func TestCheckJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" for accepted, else part of the error
	}{
		{"object", `{"a":1,"b":[1,2,{"c":"d"}],"e":{"f":null}}`, ""},
		{"same key in sibling objects", `{"a":{"x":1},"b":{"x":2},"c":[{"x":1},{"x":2}]}`, ""},
		{"key equal to a value", `{"a":"a","b":"a"}`, ""},
		{"null", `null`, ""},
		{"scalar", ` "s" `, ""},
		{"trailing newline", "{}\n", ""},
		{"empty", ``, "no JSON value"},
		{"blank", " \n", "no JSON value"},
		{"duplicate key", `{"a":1,"a":2}`, `duplicate key "a" in the object at $`},
		{"duplicate nested key", `{"x":{"y":[0,{"k":1,"k":1}]}}`, `duplicate key "k" in the object at $.x.y[1]`},
		{"duplicate after a nested object", `{"a":{"b":1},"a":2}`, `duplicate key "a"`},
		{"escaped duplicate", `{"a":1,"\u0061":2}`, `duplicate key "a"`},
		{"second value", `{} {}`, "data after the JSON value"},
		{"trailing garbage", `{"a":1}x`, "data after the JSON value"},
		{"trailing bracket", `[1]]`, "data after the JSON value"},
		{"invalid UTF-8 in a string", "{\"a\":\"\xff\"}", "not valid UTF-8"},
		{"invalid UTF-8 in a key", "{\"\xc3\":1}", "not valid UTF-8"},
		{"malformed", `{"a":}`, "invalid character"},
		{"unterminated", `{"a":1`, "EOF"},
		// keys encoding/json would take as one struct field
		{"keys differing in case", `{"agent":"exec","Agent":"claude"}`, `duplicate key "Agent" in the object at $: it differs from "agent" only in case`},
		{"nested keys differing in case", `{"x":[{"slots":1,"SLOTS":2}]}`, `duplicate key "SLOTS" in the object at $.x[0]`},
		{"Kelvin sign for k", `{"k":1,"\u212a":2}`, "only in case"},
		{"long s for s", `{"s":1,"\u017f":2}`, "only in case"},
		{"case variants in sibling objects", `{"a":{"k":1},"A":[{"K":2}]}`, "only in case"},
		{"case variants in different objects", `{"a":{"k":1},"b":{"K":2}}`, ""},
		// nesting
		{"64 levels", strings.Repeat(`{"a":`, 63) + "[]" + strings.Repeat("}", 63), ""},
		{"65 levels", strings.Repeat(`{"a":`, 64) + "[]" + strings.Repeat("}", 64), "nested deeper than 64 levels"},
		{"65 arrays", strings.Repeat("[", 65) + strings.Repeat("]", 65), "nested deeper than 64 levels"},
		{"deep and unterminated", strings.Repeat("[", 100000), "nested deeper than 64 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckJSON([]byte(tt.in))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckJSON(%q) = %v", tt.in, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckJSON(%q) = %v, want an error with %q", tt.in, err, tt.want)
			}
		})
	}
}

// nestedJSON is objects nested depth deep, each with one key of keyLen
// bytes: the shape of the attack of issue 24.
func nestedJSON(keyLen, depth int) string {
	key := `"` + strings.Repeat("k", keyLen) + `":`
	return strings.Repeat("{"+key, depth) + "0" + strings.Repeat("}", depth)
}

// flatJSON is one object of distinct 50-byte keys, of about size bytes.
func flatJSON(size int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; b.Len() < size-60; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"%050d":0`, i)
	}
	b.WriteString("}")
	return b.String()
}

// CheckJSON's memory grows with the size of its input, not with depth
// times key length: a path string per level made a 549 KB body of nested
// objects with 50-byte keys take gigabytes. Each shape may allocate at
// most twice what a flat body of the same size does, measured in the
// same run.
func TestCheckJSONMemoryIsLinear(t *testing.T) {
	const size = 128 << 10
	tests := []struct {
		name string
		body string
		want string // "" for accepted, else part of the error
	}{
		{"deep nesting with 50-byte keys (the attack)", nestedJSON(50, size/55), "nested deeper than 64 levels"},
		{"64 levels of 2 KiB keys", nestedJSON(size/64-6, 64), ""},
		{"deep arrays", strings.Repeat("[", size/2) + strings.Repeat("]", size/2), "nested deeper than 64 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, flat := []byte(tt.body), []byte(flatJSON(len(tt.body)))
			if err := CheckJSON(flat); err != nil {
				t.Fatal(err)
			}
			base := allocs.Least(func() { _ = CheckJSON(flat) })
			got := allocs.Least(func() { _ = CheckJSON(body) })
			ratio := float64(got) / float64(base)
			t.Logf("%d bytes: %d allocated, %d for a flat body of %d bytes: ratio %.2f", len(body), got, base, len(flat), ratio)
			if err := CheckJSON(body); tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("CheckJSON = %v, want %q", err, tt.want)
			}
			if ratio > 2 {
				t.Errorf("CheckJSON allocated %d bytes for %d bytes of this shape, %.1f times what a flat body of the same size takes (%d)", got, len(body), ratio, base)
			}
		})
	}
}

func TestEscape(t *testing.T) {
	cases := []struct {
		in        string
		multiline bool
		want      string
	}{
		{"plain", false, "plain"},
		{"a\x1b[31mb", false, `a\x1b[31mb`},
		{"line\nnext\r\nend\rover", true, "line\nnext\r\nend\\rover"},
		{"line\nnext", false, `line\nnext`},
		{"c1 \u009b2J", true, `c1 \u009b2J`},
		{"bad \xff byte, kept \uFFFD", true, "bad \\xff byte, kept \uFFFD"},
	}
	for _, c := range cases {
		got := Escape(c.in, c.multiline)
		if got != c.want {
			t.Errorf("Escape(%q, %v) = %q, want %q", c.in, c.multiline, got, c.want)
		}
		if err := CheckPlainText("x", got, c.multiline); err != nil {
			t.Errorf("Escape(%q) is not plain text: %v", c.in, err)
		}
	}
}

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"a longer text", 8, "a lon…"},
		{"ééééé", 8, "éé…"}, // never half a character
		{"abc", 2, "…"},
	} {
		if got := Clip(c.in, c.n); got != c.want || (len(c.in) > c.n && len(got) > max(c.n, len("…"))) {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
