package forgethread

import (
	"strings"
	"testing"

	"drover/internal/protocol"
)

// inFence checks that body holds text only inside one fenced code block
// whose fence no line of the text closes, and returns that text.
func inFence(t *testing.T, body string) string {
	t.Helper()
	open := strings.Index(body, "``")
	if open < 0 {
		t.Fatalf("no fence in %q", body)
	}
	n := longestRun(body[open:], '`')
	fence := strings.Repeat("`", n)
	start := strings.Index(body, fence+"text\n")
	if start < 0 {
		t.Fatalf("no %s fence opening in %q", fence, body)
	}
	inner := body[start+len(fence)+5:]
	end := strings.LastIndex(inner, "\n"+fence)
	if end < 0 {
		t.Fatalf("fence not closed in %q", body)
	}
	inner = inner[:end]
	for _, l := range strings.Split(inner, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "```") && len(t) >= n && strings.Trim(t, "`") == "" {
			return "closed early by " + l
		}
	}
	return inner
}

func TestUntrustedTextIsEscaped(t *testing.T) {
	long := strings.Repeat("é", maxShown) // two bytes each: cut on a rune
	for _, tc := range []struct {
		name, in string
		want     string // what the block shows
	}{
		{"a mention", "ask @alice and @org/team", "ask @alice and @org/team"},
		{"html", "<script>alert(1)</script><img src=x onerror=alert(1)>", "<script>alert(1)</script><img src=x onerror=alert(1)>"},
		{"a link", "see [here](javascript:alert(1)) and ![i](https://evil.example/x.png)", "see [here](javascript:alert(1)) and ![i](https://evil.example/x.png)"},
		{"a fence", "before\n```\n@alice <b>out</b>\n````\nafter", "before\n```\n@alice <b>out</b>\n````\nafter"},
		{"a marker", "<!-- job:j-2 -->", "<\u200b!-- job:j-2 -->"},
		{"controls", "a\x00b\x1b[31mc\r\nd\u2028e", "ab[31mc\nde"},
		{"invalid utf-8", "a\xffb", "a\uFFFDb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := status{kind: "failed", reason: tc.in, settled: true}.render("j-1", "https://hub.example/jobs/j-1")
			if got := inFence(t, body); got != tc.want {
				t.Errorf("shown %q, want %q", got, tc.want)
			}
			outside := strings.Replace(body, tc.want, "", 1)
			if strings.Contains(outside, "@") || strings.Contains(outside, "<script") || strings.Contains(outside, "javascript:") {
				t.Errorf("untrusted text outside its block: %q", outside)
			}
		})
	}
	t.Run("very long", func(t *testing.T) {
		got := inFence(t, block(long))
		if len(got) > maxShown+40 || !strings.HasSuffix(got, "… (cut at 2000 bytes)") || !strings.HasPrefix(got, "éé") {
			t.Errorf("long text shown as %d bytes ending %q", len(got), got[len(got)-30:])
		}
		if strings.ToValidUTF8(got, "?") != got {
			t.Error("cut inside a rune")
		}
	})
	t.Run("question and choices", func(t *testing.T) {
		body := renderQuestion("j-1", "", protocol.QuestionView{ID: "q-1", Question: "@all ````", Choices: []string{"[x](javascript:1)", "@bob"}})
		if strings.Count(body, "`````text\n@all ````\n`````") != 1 {
			t.Errorf("question not in a longer fence: %q", body)
		}
		if !strings.Contains(body, "```text\n1. [x](javascript:1)\n2. @bob\n```") || !strings.Contains(body, "job `j-1`") {
			t.Errorf("choices or job not escaped: %q", body)
		}
	})
	t.Run("links only to web pages", func(t *testing.T) {
		for u, want := range map[string]string{
			"https://gt.example/acme/web/pulls/3": "[pull request #3](https://gt.example/acme/web/pulls/3)",
			"javascript:alert(1)":                 "`pull request #3`",
			"https://x.example/a)(b":              "`pull request #3`",
		} {
			if got := link("pull request #3", u); got != want {
				t.Errorf("link to %q = %q, want %q", u, got, want)
			}
		}
	})
}
