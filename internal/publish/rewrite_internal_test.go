package publish

import "testing"

// TestWithTrailer: the agent's trailer joins a message's trailer block,
// or starts one, once.
func TestWithTrailer(t *testing.T) {
	const tr = "Co-authored-by: exec <exec@agents.drover.invalid>"
	for _, c := range []struct{ msg, want string }{
		{"", tr + "\n"},
		{"fix it\n", "fix it\n\n" + tr + "\n"},
		{"Fixes: a bug\n", "Fixes: a bug\n\n" + tr + "\n"}, // a subject alone is no trailer block
		{"fix it\n\nwhy\n", "fix it\n\nwhy\n\n" + tr + "\n"},
		{"fix it\n\nSigned-off-by: t <t@t>\n", "fix it\n\nSigned-off-by: t <t@t>\n" + tr + "\n"},
		{"fix it\n\n" + tr + "\n", "fix it\n\n" + tr + "\n"},
		{"fix it\n\nnot: a trailer block\nreally\n", "fix it\n\nnot: a trailer block\nreally\n\n" + tr + "\n"},
	} {
		if got := withTrailer(c.msg, tr); got != c.want {
			t.Errorf("withTrailer(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}
