package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
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
// at any depth (which of the two a reader takes differs between parsers).
// It also refuses malformed JSON, with the decoder's reason.
func CheckJSON(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // no float parsing: the values are not needed here
	type level struct {
		keys    map[string]bool // nil for an array
		wantKey bool            // an object's next token is a key
		path    string          // where this container is, for messages
		key     string          // the object's current key
		index   int             // the array's next index
	}
	var stack []*level
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
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			done = len(stack) == 0
			continue
		}
		if s, ok := tok.(string); ok && top != nil && top.keys != nil && top.wantKey {
			if top.keys[s] {
				return fmt.Errorf("duplicate key %q in the object at %s", s, top.path)
			}
			top.keys[s] = true
			top.key, top.wantKey = s, false
			continue
		}
		// A value: the element of an array, the member of an object, or
		// the whole message. Only a container needs its path.
		d, container := tok.(json.Delim)
		path := ""
		switch {
		case container && top == nil:
			path = "$"
		case container && top.keys != nil:
			path = top.path + "." + top.key
		case container:
			path = top.path + "[" + strconv.Itoa(top.index) + "]"
		}
		if top != nil && top.keys != nil {
			top.wantKey = true
		} else if top != nil {
			top.index++
		}
		switch {
		case d == '{':
			stack = append(stack, &level{keys: map[string]bool{}, wantKey: true, path: path})
		case d == '[':
			stack = append(stack, &level{path: path})
		default:
			done = len(stack) == 0
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// namePattern is what runner and user names (and attempt ids) must look like.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidName reports whether s can name a runner or a user: 1-64 letters,
// digits or ._- starting with a letter or digit.
func ValidName(s string) bool { return namePattern.MatchString(s) }
