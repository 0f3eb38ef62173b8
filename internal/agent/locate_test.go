package agent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLocate(t *testing.T) {
	root := t.TempDir()
	nm := filepath.Join(root, "lib", "node_modules")
	script := filepath.Join(nm, "@vendor", "cli", "bin", "cli.js")
	bin := filepath.Join(root, "bin")
	plain := filepath.Join(root, "opt", "tool")
	for _, p := range []string{script, plain} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(script, filepath.Join(bin, "cli")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "noexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	path := "relative:" + bin + ":" + filepath.Dir(plain)
	for _, tc := range []struct {
		cli, want, mount string
	}{
		{"cli", script, nm},
		{"tool", plain, filepath.Dir(plain)},
		{"sh", "", ""}, // only on a PATH that names /bin
	} {
		b, err := Locate(tc.cli, path)
		if tc.want == "" {
			if !errors.Is(err, ErrNotInstalled) {
				t.Errorf("%s: %+v, %v; want not installed", tc.cli, b, err)
			}
			continue
		}
		if err != nil || b.Path != tc.want || len(b.Mounts) != 1 || b.Mounts[0] != tc.mount {
			t.Errorf("%s: %+v, %v; want %s mounting %s", tc.cli, b, err, tc.want, tc.mount)
		}
	}
	if _, err := Locate("noexec", path); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("a file without x bits was found: %v", err)
	}
	if b, err := Locate("sh", "/bin"); err != nil || len(b.Mounts) != 0 {
		t.Errorf("sh in /bin: %+v, %v; want no mount", b, err)
	}
}
