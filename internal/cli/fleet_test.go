package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRegistrationTokenFileMustBePrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "registration")
	if err := os.WriteFile(p, []byte("drv_g_x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readTokenFile(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a 0644 token file: %v", err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := readTokenFile(p); err != nil || tok != "drv_g_x" {
		t.Fatalf("a 0600 token file: %q %v", tok, err)
	}
}
