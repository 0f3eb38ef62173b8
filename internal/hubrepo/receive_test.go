package hubrepo

import (
	"bytes"
	"strings"
	"testing"

	"drover/internal/gitcmd"
)

func TestReadBundleHeader(t *testing.T) {
	id := strings.Repeat("ab", 20)
	tests := []struct {
		in      string
		refs    int
		prereqs int
		bad     string
	}{
		{in: "# v2 git bundle\n-" + id + " parent\n" + id + " refs/heads/x\n\nPACK", refs: 1, prereqs: 1},
		{in: "# v3 git bundle\n@object-format=sha1\n" + id + " refs/heads/x\n" + id + " refs/heads/y\n\nPACK", refs: 2},
		{in: "# v3 git bundle\n@object-format=sha256\n\n", bad: "not supported"},
		{in: "hello", bad: "not a git bundle"},
		{in: "# v2 git bundle\n" + id + "\n\n", bad: "malformed"},
		{in: "# v2 git bundle\n-xyz\n\n", bad: "not a commit id"},
		{in: "# v2 git bundle\n" + id + " refs/heads/x\n", bad: "truncated"},
	}
	for _, tt := range tests {
		b, err := ReadBundleHeader(strings.NewReader(tt.in))
		if tt.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tt.bad) {
				t.Errorf("%.40q: got %v, want an error mentioning %q", tt.in, err, tt.bad)
			}
			continue
		}
		if err != nil || len(b.Refs) != tt.refs || len(b.Prerequisites) != tt.prereqs || tt.in[b.packOffset:] != "PACK" {
			t.Errorf("%.40q: got %+v, %v", tt.in, b, err)
		}
	}
}

// A fuzz target for what a runner sends the hub's git side: a
// publication's bundle header.

const fuzzCommit = "0123456789abcdef0123456789abcdef01234567"

var bundleSeeds = []string{
	"# v2 git bundle\n" + fuzzCommit + " refs/heads/main\n\nPACK",
	"# v3 git bundle\n@object-format=sha1\n-" + fuzzCommit + " parent\n" + fuzzCommit + " refs/drover/pub\n\n",
	"# v3 git bundle\n@object-format=sha256\n\n",
	"# v2 git bundle\n-" + strings.ToUpper(fuzzCommit) + "\n\n",
	"# v2 git bundle\n" + fuzzCommit + "\n\n",
	"# v2 git bundle\n" + fuzzCommit + " a\n" + fuzzCommit + " b\n",
	"# v1 git bundle\n\n",
	"PACK",
	"",
}

// FuzzReadBundleHeader: the parser refuses with a *gitcmd.Refusal, never panics;
// what it accepts is commit ids and non-empty names, and the header it read
// written out again parses to the same bundle at the same pack offset.
func FuzzReadBundleHeader(f *testing.F) {
	for _, s := range bundleSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		b, err := ReadBundleHeader(bytes.NewReader(data))
		if err != nil {
			if _, ok := err.(*gitcmd.Refusal); !ok {
				t.Fatalf("refusal %T is not a *gitcmd.Refusal: %v", err, err)
			}
			return
		}
		if b.packOffset <= 0 || b.packOffset > int64(len(data)) {
			t.Fatalf("pack offset %d of %d bytes", b.packOffset, len(data))
		}
		for _, p := range b.Prerequisites {
			if !gitcmd.ValidCommitID(p) {
				t.Fatalf("prerequisite %q accepted", p)
			}
		}
		for _, r := range b.Refs {
			if !gitcmd.ValidCommitID(r.ID) || r.Name == "" || strings.Contains(r.Name, "\n") {
				t.Fatalf("ref %+v accepted", r)
			}
		}
		// Round trip: the header as git would write it (capabilities are
		// only sha1, which needs no line) parses the same.
		var w bytes.Buffer
		w.WriteString("# v3 git bundle\n")
		for _, p := range b.Prerequisites {
			w.WriteString("-" + p + "\n")
		}
		for _, r := range b.Refs {
			w.WriteString(r.ID + " " + r.Name + "\n")
		}
		w.WriteString("\n")
		b2, err := ReadBundleHeader(bytes.NewReader(w.Bytes()))
		if err != nil || b2.packOffset != int64(w.Len()) || len(b2.Refs) != len(b.Refs) || len(b2.Prerequisites) != len(b.Prerequisites) {
			t.Fatalf("header does not round-trip: %v\n%q", err, w.Bytes())
		}
		for i := range b.Refs {
			if b.Refs[i] != b2.Refs[i] {
				t.Fatalf("ref %+v reads back as %+v", b.Refs[i], b2.Refs[i])
			}
		}
	})
}
