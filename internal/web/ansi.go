package web

import (
	"bytes"
	"html/template"
	"strconv"
	"strings"
	"unicode/utf8"
)

// sgr is the text style ANSI "select graphic rendition" codes set.
type sgr struct {
	bold, italic, under bool
	fg, bg              int // 0: default; 1-16: colour index + 1
}

func (s sgr) plain() bool { return s == sgr{} }

// class is the style as CSS classes of static/style.css (no inline style:
// the pages' CSP allows none).
func (s sgr) class() string {
	var c []string
	if s.bold {
		c = append(c, "b")
	}
	if s.italic {
		c = append(c, "i")
	}
	if s.under {
		c = append(c, "u")
	}
	if s.fg > 0 {
		c = append(c, "f"+strconv.Itoa(s.fg-1))
	}
	if s.bg > 0 {
		c = append(c, "g"+strconv.Itoa(s.bg-1))
	}
	return strings.Join(c, " ")
}

// apply applies one SGR sequence's parameters ("1;31").
func (s *sgr) apply(params string) {
	if params == "" {
		*s = sgr{}
		return
	}
	ps := strings.Split(params, ";")
	for i := 0; i < len(ps); i++ {
		n, err := strconv.Atoi(ps[i])
		if err != nil {
			continue
		}
		switch {
		case n == 0:
			*s = sgr{}
		case n == 1:
			s.bold = true
		case n == 3:
			s.italic = true
		case n == 4:
			s.under = true
		case n == 22:
			s.bold = false
		case n == 23:
			s.italic = false
		case n == 24:
			s.under = false
		case n >= 30 && n <= 37:
			s.fg = n - 30 + 1
		case n >= 90 && n <= 97:
			s.fg = n - 90 + 8 + 1
		case n == 39:
			s.fg = 0
		case n >= 40 && n <= 47:
			s.bg = n - 40 + 1
		case n >= 100 && n <= 107:
			s.bg = n - 100 + 8 + 1
		case n == 49:
			s.bg = 0
		case n == 38 || n == 48: // 256-colour and true-colour: skipped
			if i+1 < len(ps) && ps[i+1] == "5" {
				i += 2
			} else if i+1 < len(ps) && ps[i+1] == "2" {
				i += 4
			}
		}
	}
}

// logRenderer turns log bytes into HTML lines, one <div> per line with
// the byte offset it starts at, every character escaped, ANSI colours as
// classes and every other escape sequence dropped. The style carries from
// line to line within one rendering.
type logRenderer struct {
	style sgr
	buf   bytes.Buffer
	lines int
}

// render renders data, whose first byte is at offset base.
func (lr *logRenderer) render(data []byte, base int64) {
	for len(data) > 0 {
		line := data
		n := bytes.IndexByte(data, '\n')
		if n >= 0 {
			line = data[:n]
		}
		lr.line(line, base)
		adv := len(line)
		if n >= 0 {
			adv++
		}
		data, base = data[adv:], base+int64(adv)
	}
}

func (lr *logRenderer) line(line []byte, off int64) {
	lr.lines++
	b := &lr.buf
	b.WriteString(`<div class="l" data-o="`)
	b.WriteString(strconv.FormatInt(off, 10))
	b.WriteString(`">`)
	open := false
	span := func() {
		if open {
			b.WriteString("</span>")
			open = false
		}
		if !lr.style.plain() {
			b.WriteString(`<span class="`)
			b.WriteString(lr.style.class())
			b.WriteString(`">`)
			open = true
		}
	}
	span()
	for i := 0; i < len(line); {
		c := line[i]
		if c == 0x1b {
			i += lr.escape(line[i:], span)
			continue
		}
		if c == '\r' || (c < 0x20 && c != '\t') || c == 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRune(line[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			template.HTMLEscape(b, line[i:i+size])
		}
		i += size
	}
	if open {
		b.WriteString("</span>")
	}
	b.WriteString("</div>") // no newline between lines: the log is white-space: pre-wrap
}

// escape consumes one escape sequence at the start of s and returns its
// length; an SGR one changes the style (span reopens the styled span).
func (lr *logRenderer) escape(s []byte, span func()) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[': // CSI: parameters, intermediates, one final byte
		j := 2
		for j < len(s) && s[j] >= 0x30 && s[j] <= 0x3f {
			j++
		}
		for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
			j++
		}
		if j >= len(s) {
			return len(s)
		}
		if s[j] == 'm' {
			lr.style.apply(string(s[2:j]))
			span()
		}
		return j + 1
	case ']': // OSC, up to BEL or ST
		for j := 2; j < len(s); j++ {
			if s[j] == 0x07 {
				return j + 1
			}
			if s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\' {
				return j + 2
			}
		}
		return len(s)
	}
	return 2
}

// renderLog renders data starting at offset base as HTML lines.
func renderLog(data []byte, base int64) (template.HTML, int) {
	var lr logRenderer
	lr.render(data, base)
	return template.HTML(lr.buf.String()), lr.lines // #nosec: every byte of data was escaped above
}
