package protocol

import (
	"strings"
	"testing"
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
