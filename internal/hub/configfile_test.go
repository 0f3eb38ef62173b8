package hub

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("s3cret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	openKey := filepath.Join(dir, "open_ed25519")
	if err := os.WriteFile(openKey, []byte("k\n"), 0o600); err != nil || os.Chmod(openKey, 0o644) != nil {
		t.Fatal(err)
	}
	cred := `"credentials": {"private": {"policy": %q, "upstream": %q, "header": "Authorization", "prefix": "Bearer ",
		"key_file": %q, "key_env": "REG_KEY", "base_url_env": "REG_URL"}}`
	for _, tc := range []struct {
		name, body, err string
	}{
		{"ok", `{"network": {"policies": {"go": ["proxy.golang.org"]}}, "signing_key": "` + key + `", ` +
			fmt.Sprintf(cred, "go", "https://registry.example", key) + `}`, ""},
		{"signing key others may read", `{"network": {}, "signing_key": "` + openKey + `"}`, "mode 0644, readable by others: make it 0600"},
		{"signing key missing", `{"network": {}, "signing_key": "` + filepath.Join(dir, "nope") + `"}`, "signing key"},
		{"every host", `{"network": {"policies": {"all": ["*"]}}}`, "every host"},
		{"malformed", `{"network": {"policies": {"x": ["a b.com"]}}}`, "label"},
		{"misspelt", `{"network": {"policys": {}}}`, "unknown field"},
		{"credential without policy", `{"network": {"policies": {"go": ["proxy.golang.org"]}}, ` +
			fmt.Sprintf(cred, "npm", "https://registry.example", key) + `}`, `no network policy "npm"`},
		{"credential over plain http", `{"network": {"policies": {"go": ["proxy.golang.org"]}}, ` +
			fmt.Sprintf(cred, "go", "http://registry.example", key) + `}`, "must be https"},
		{"credential for a malformed runner", `{"network": {"policies": {"go": ["proxy.golang.org"]}}, ` +
			strings.Replace(fmt.Sprintf(cred, "go", "https://registry.example", key), `"key_env"`, `"runners": ["gpu-1"], "key_env"`, 1) + `}`,
			"want OWNER/RUNNER"},
		{"credential key missing", `{"network": {"policies": {"go": ["proxy.golang.org"]}}, ` +
			fmt.Sprintf(cred, "go", "https://registry.example", filepath.Join(dir, "nope")) + `}`, "read its key"},
	} {
		path := filepath.Join(dir, tc.name+".json")
		if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := ReadFile(path)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: ReadFile = %v, want an error with %q", tc.name, err, tc.err)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%s: the error shows the key: %v", tc.name, err)
		case tc.err == "" && (len(f.Setup) != 1 || f.Setup[0].Key != "s3cret-value" || strings.Contains(f.Setup[0].String(), "s3cret")):
			t.Errorf("%s: setup credentials = %v", tc.name, f.Setup)
		}
	}
}

// The runners a credential names besides admins' come out of the file
// per credential.
func TestReadFileTrustedRunners(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hub.json")
	body := fmt.Sprintf(`{"network": {"policies": {"go": ["proxy.golang.org"]}}, "credentials": {"private": {"policy": "go",
		"upstream": "https://registry.example", "header": "Authorization", "key_file": %q, "key_env": "K", "base_url_env": "U",
		"runners": ["ci/box-1"]}}}`, key)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(path)
	if err != nil || len(f.Trusted["private"]) != 1 || f.Trusted["private"][0] != "ci/box-1" {
		t.Fatalf("ReadFile = %+v, %v", f.Trusted, err)
	}
}
