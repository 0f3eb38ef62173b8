package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Input hygiene shared by the hub, the runner's tool server and the CLI:
// what "plain text" is, and what a well-formed JSON message is.

// CheckPlainText refuses text that a terminal could take for something
// other than text: invalid UTF-8, C0 controls (U+0000-U+001F), DEL (U+007F)
// and C1 controls (U+0080-U+009F, among them U+009B, a one-character
// escape sequence). Multiline text may hold tab, newline and the CR of a
// CRLF; a lone CR is refused, since it returns to the start of the line and
// lets text overwrite what came before it. Single-line text (names, labels,
// keys, URLs) holds no control character at all. The error names field.
func CheckPlainText(field, s string, multiline bool) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	for i, r := range s {
		switch {
		case !IsControl(r):
			continue
		case multiline && (r == '\t' || r == '\n'):
			continue
		case multiline && r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			continue
		}
		return fmt.Errorf("%s has a control character (%U) at byte %d; it must be plain text", field, r, i)
	}
	return nil
}

// IsControl reports the characters a terminal may act on rather than
// show: C0 (U+0000-U+001F), DEL and C1 (U+0080-U+009F). The hub refuses
// them in plain text and the CLI escapes them in what it prints.
func IsControl(r rune) bool {
	return r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f
}

// CheckText refuses blank text, text over limit bytes and text that is not
// multiline plain text (CheckPlainText): questions, answers and summaries
// are shown in terminals.
func CheckText(what, s string, limit int) error {
	switch {
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("%s is required and must not be blank", what)
	case len(s) > limit:
		return &LimitError{What: what, Size: len(s), Limit: limit}
	}
	return CheckPlainText(what, s, true)
}

// CheckJSON refuses what encoding/json accepts silently: bytes that are
// not UTF-8, data after the one JSON value, and an object key given twice
// at any depth (which of the two a reader takes differs between parsers),
// also when the two differ only in case (encoding/json fills one struct
// field from both, the last winning). It also refuses nesting deeper than
// MaxJSONDepth and malformed JSON, with the decoder's reason.
//
// What it holds grows with the input, never faster: per open container a
// fixed-size entry, and each key once. The path a message names is built
// only for the message.
func CheckJSON(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // no float parsing: the values are not needed here
	// keys maps each key seen, by its object and folded as encoding/json
	// matches names to fields, to the key as given.
	type objectKey struct {
		object int
		folded string
	}
	keys := map[objectKey]string{}
	var stack []jsonLevel
	objects := 0
	done := false
	for !done {
		tok, err := dec.Token()
		if err == io.EOF && len(stack) == 0 {
			return errors.New("no JSON value")
		}
		if err == io.EOF {
			return errors.New("unexpected EOF inside the JSON value")
		}
		if err != nil {
			return err
		}
		var top *jsonLevel
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			done = len(stack) == 0
			continue
		}
		if s, ok := tok.(string); ok && top != nil && top.object != 0 && top.wantKey {
			k := objectKey{top.object, foldKey(s)}
			if prev, seen := keys[k]; seen && prev == s {
				return fmt.Errorf("duplicate key %q in the object at %s", s, jsonPath(stack))
			} else if seen {
				return fmt.Errorf("duplicate key %q in the object at %s: it differs from %q only in case, and encoding/json takes the two as one", s, jsonPath(stack), prev)
			}
			keys[k] = s
			top.key, top.wantKey = s, false
			continue
		}
		// A value: the element of an array, the member of an object, or
		// the whole message.
		if top != nil && top.object != 0 {
			top.wantKey = true
		} else if top != nil {
			top.index++
		}
		d, container := tok.(json.Delim)
		switch {
		case container && len(stack) == MaxJSONDepth:
			return fmt.Errorf("JSON nested deeper than %d levels (at byte %d)", MaxJSONDepth, dec.InputOffset())
		case d == '{':
			objects++
			stack = append(stack, jsonLevel{object: objects, wantKey: true})
		case d == '[':
			stack = append(stack, jsonLevel{index: -1})
		default:
			done = len(stack) == 0
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// jsonLevel is an open object or array of CheckJSON: where in it the
// checker is, so that a message can name the path.
type jsonLevel struct {
	object  int    // the object's number, from 1; 0 for an array
	wantKey bool   // an object's next token is a key
	key     string // the object's current key
	index   int    // the array's current element
}

// jsonPath is where the innermost of stack is, as $.key[index]...
func jsonPath(stack []jsonLevel) string {
	var b strings.Builder
	b.WriteString("$")
	for _, l := range stack[:max(len(stack)-1, 0)] {
		if l.object != 0 {
			b.WriteString("." + l.key)
		} else {
			b.WriteString("[" + strconv.Itoa(l.index) + "]")
		}
	}
	return b.String()
}

// foldKey is s as encoding/json compares object keys with struct field
// names: two keys with the same fold fill the same field.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune { return unicode.ToUpper(unicode.ToLower(r)) }, s)
}

// namePattern is what runner and user names (and attempt ids) must look like.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidName reports whether s can name a runner or a user: 1-64 letters,
// digits or ._- starting with a letter or digit.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// Escape writes what CheckPlainText refuses as Go escapes (\x1b, \u009b,
// and \xff for a byte of invalid UTF-8), so that text from elsewhere (a
// server's message, an agent's words) shows as text wherever it goes.
// Multiline keeps tab, newline and the CR of a CRLF.
func Escape(s string, multiline bool) string {
	if CheckPlainText("", s, multiline) == nil {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !IsControl(r),
			multiline && (r == '\t' || r == '\n'),
			multiline && r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			b.WriteRune(r)
		default:
			b.WriteString(strings.Trim(strconv.QuoteRune(r), "'"))
		}
	}
	return b.String()
}

// Clip bounds s to n bytes, cutting on a rune boundary and marking the
// cut with "…" (within the n bytes).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)] + "…"
}
