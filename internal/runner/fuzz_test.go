package runner

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"drover/internal/rules"
)

// tarOf builds a tar of the named files (name\x00data pairs).
func tarOf(t testing.TB, files ...string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := 0; i+1 < len(files); i += 2 {
		if err := tw.WriteHeader(&tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(files[i+1]))
	}
	_ = tw.Close()
	return b.Bytes()
}

// FuzzExtractContext feeds the context tar extraction what a hub (or a
// man in the middle of a plain-HTTP hub) might send. It never panics, and
// whatever it accepts or refuses, nothing is written outside the context
// folder, only regular files and folders are made, every file has a name
// CheckContextName accepts and the limits hold.
func FuzzExtractContext(f *testing.F) {
	f.Add(tarOf(f, "notes.md", "hello", "a/b/c.txt", "x"), "")
	f.Add(tarOf(f, "../escape", "x"), "")
	f.Add(tarOf(f, "a", "1", "a", "2"), "")
	f.Add(tarOf(f, "a", "1", "a/b", "2"), "")
	f.Add(tarOf(f, ".env", "SECRET=1"), "")
	f.Add([]byte("not a tar"), "")
	f.Add([]byte{}, "")
	// The second argument, when set, is one entry's name with a type flag
	// as its first byte, so the fuzzer reaches links and devices.
	f.Add([]byte{}, "2link")
	f.Add([]byte{}, "5dir/")
	f.Add([]byte{}, "1hard")
	f.Fuzz(func(t *testing.T, data []byte, entry string) {
		if len(data) > 1<<16 || len(entry) > 1024 {
			return
		}
		if entry != "" {
			var b bytes.Buffer
			tw := tar.NewWriter(&b)
			h := &tar.Header{Typeflag: entry[0], Name: entry[1:], Linkname: "../../outside", Mode: 0o644, Format: tar.FormatPAX}
			if h.Typeflag == tar.TypeReg {
				h.Size = int64(len(data))
			}
			if tw.WriteHeader(h) != nil {
				return
			}
			if h.Typeflag == tar.TypeReg {
				_, _ = tw.Write(data)
			}
			_ = tw.Close()
			data = b.Bytes()
		}
		root := t.TempDir()
		dir := filepath.Join(root, "ctx")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		err := rules.ReadContextTar(bytes.NewReader(data), func(name string, data io.Reader) error {
			return writeContextFile(dir, name, data)
		})
		var total int64
		n := 0
		walkErr := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == root || p == dir {
				return nil
			}
			rel, _ := filepath.Rel(dir, p)
			if rel == ".." || strings.HasPrefix(rel, "../") {
				t.Fatalf("extraction wrote %s outside the context folder", p)
			}
			if !d.Type().IsRegular() && !d.IsDir() {
				t.Fatalf("extraction made %s of type %v", rel, d.Type())
			}
			if d.Type().IsRegular() {
				if cerr := rules.CheckContextName(filepath.ToSlash(rel)); cerr != nil {
					t.Fatalf("extraction wrote %q: %v", rel, cerr)
				}
				info, _ := d.Info()
				total += info.Size()
				n++
			}
			return nil
		})
		if walkErr != nil {
			t.Fatal(walkErr)
		}
		if n > rules.MaxContextFiles || total > rules.MaxContextTotal {
			t.Fatalf("%d files of %d bytes extracted", n, total)
		}
		_ = err
	})
}

// FuzzValidName: runner names become file names (and attempt ids do too):
// an accepted one is a single plain path component.
func FuzzValidName(f *testing.F) {
	for _, s := range []string{"r1", "build-box.lan", ".", "..", "-r", "a/b", "a\\b", strings.Repeat("n", 64), strings.Repeat("n", 65), "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1024 || !ValidName(s) {
			return
		}
		if s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00 \n") || len(s) > 64 || filepath.Base(s) != s || s[0] == '-' || s[0] == '.' {
			t.Fatalf("runner name %q accepted", s)
		}
	})
}
