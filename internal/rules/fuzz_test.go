package rules

import (
	"bytes"
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

// Fuzz targets for what a peer sends: the gateway's frames and every
// message they carry, durations, text, context files and answers. Each
// checks that a parser never panics, that a refusal is an error (nothing
// half-decoded is trusted) and, where a format has one, that it round-trips.

// maxFuzzInput bounds what a target looks at: a frame is at most MaxFrame,
// and larger inputs only slow the fuzzer down.
const maxFuzzInput = 64 << 10

// FuzzCheckText: accepted text is non-blank, within the limit, UTF-8 and
// free of C0 controls other than tab, newline and CR, and of DEL.
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{"hello", " ", "", "a\tb\nc\r\n", "\x1b[2J", "\x7f", "\xff", "caf\u00e9", "\u009b31m", strings.Repeat("x", 70)} {
		f.Add(s, 64)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if len(s) > maxFuzzInput {
			return
		}
		err := CheckText("text", s, limit)
		if err != nil {
			return
		}
		switch {
		case strings.TrimSpace(s) == "":
			t.Fatalf("blank %q accepted", s)
		case len(s) > limit:
			t.Fatalf("%d bytes accepted over the limit %d", len(s), limit)
		case !utf8.ValidString(s):
			t.Fatalf("invalid UTF-8 %q accepted", s)
		}
		for _, r := range s {
			if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
				t.Fatalf("control character %U accepted in %q", r, s)
			}
		}
	})
}

// contextNameOK is the rule CheckContextName implements, written again
// the other way round: what a context folder may hold.
func contextNameOK(name string) bool {
	if name == "" || len(name) > 1024 {
		return false
	}
	for _, r := range name {
		if r == '\\' || r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return false
		}
	}
	if strings.HasPrefix(name, "/") {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." || part == ".git" {
			return false
		}
	}
	return true
}

// FuzzCheckContextName: an accepted name is a clean relative path that
// stays inside the context folder, has no .git component and no control
// character; the secret-file conventions are refused whatever the case.
func FuzzCheckContextName(f *testing.F) {
	for _, s := range []string{"notes.md", "a/b/c.txt", "../x", "a/../b", "./a", "a//b", "/etc/passwd", ".git/config", "a/.git", ".env", "prod.ENV", ".env.local", "id_rsa.pub", "ID_ED25519", "cert.pem", "x.Key", "a\\b", "a\x00b", "a\nb", ".", "..", "a/", "\u0085x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if len(name) > 4096 {
			return
		}
		if CheckContextName(name) != nil {
			return
		}
		if !contextNameOK(name) {
			t.Fatalf("context name %q accepted", name)
		}
		if path.Clean(name) != name || path.IsAbs(name) {
			t.Fatalf("unclean name %q accepted", name)
		}
		base := strings.ToLower(path.Base(name))
		if strings.Contains(base, ".env") && (base == ".env" || strings.HasPrefix(base, ".env.") || strings.HasSuffix(base, ".env")) ||
			strings.HasPrefix(base, "id_rsa") || strings.HasSuffix(base, ".pem") || strings.HasSuffix(base, ".key") {
			t.Fatalf("secret-looking name %q accepted", name)
		}
	})
}

// FuzzCheckContextFiles: a set is accepted only when every file is, no
// name repeats, no file is another's folder, and the bounds hold.
func FuzzCheckContextFiles(f *testing.F) {
	f.Add("a.txt\x00b/c.txt", []byte("hello"))
	f.Add("a\x00a/b", []byte(""))
	f.Add("a\x00a", []byte("x"))
	f.Add("k.txt", []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"))
	f.Add("k.txt", []byte("-----BEGIN RSA PRIVATE KEY----"))
	f.Fuzz(func(t *testing.T, names string, data []byte) {
		if len(names)+len(data) > maxFuzzInput {
			return
		}
		var files []ContextUpload
		for i, n := range strings.Split(names, "\x00") {
			files = append(files, ContextUpload{Name: n, Data: data[:len(data)*i/(i+1)]})
		}
		if CheckContextFiles(files) != nil {
			return
		}
		seen := map[string]bool{}
		for _, fl := range files {
			if CheckContextFile(fl.Name, fl.Data) != nil {
				t.Fatalf("set accepted with a refused file %q", fl.Name)
			}
			if bytes.Contains(fl.Data, []byte("PRIVATE KEY-----")) && bytes.Contains(fl.Data, []byte("-----BEGIN ")) && privateKeyPEM.Match(fl.Data) {
				t.Fatalf("private key accepted in %q", fl.Name)
			}
			seen[fl.Name] = true
		}
		if len(seen) != len(files) {
			t.Fatalf("a repeated name was accepted: %q", names)
		}
		for _, fl := range files {
			for d := path.Dir(fl.Name); d != "."; d = path.Dir(d) {
				if seen[d] {
					t.Fatalf("%q is a file and the folder of %q", d, fl.Name)
				}
			}
		}
	})
}
