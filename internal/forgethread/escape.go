package forgethread

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The forge renders comments as Markdown with HTML, mentions, links and
// images. What the agent wrote (a question, a reason, a summary) reaches a
// comment only through block, whose code block shows it as text: no
// mention pings anyone, no tag, link or image is made, and the fence is
// longer than any run of backticks in the text, so the text cannot close
// it.

// maxShown bounds each untrusted text in a comment, in bytes.
const maxShown = 2000

// block is text as a fenced code block, bounded to maxShown bytes.
func block(text string) string {
	text = clean(text, maxShown)
	fence := strings.Repeat("`", max(3, longestRun(text, '`')+1))
	return fence + "text\n" + text + "\n" + fence
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// clean makes untrusted text safe to place in a code block: valid UTF-8,
// without control characters but newlines and tabs, without an HTML
// comment's opening (a bot's comment is found by the marker it holds as
// one: text must not forge another's), and at most limit bytes, cut on a
// rune with a note.
func clean(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return -1
		}
		return r
	}, strings.ReplaceAll(s, "\r\n", "\n"))
	s = strings.ReplaceAll(s, "<!--", "<\u200b!--")
	return clip(strings.TrimSpace(s), limit)
}

// clip cuts s at limit bytes, on a rune, with a note that it did.
func clip(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "\n… (cut at " + itoa(limit) + " bytes)"
}

// link is a Markdown link to u when it is an http(s) URL the hub or its
// forge made, else the label alone as code.
func link(label, u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" ||
		strings.ContainsAny(u, " \t\n<>()[]`\"'") {
		return "`" + label + "`"
	}
	return "[" + label + "](" + u + ")"
}
