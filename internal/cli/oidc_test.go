package cli

import (
	"strings"
	"testing"
)

// TestSigninOIDCAdd: a provider's client secret goes from its file to the
// hub's body only, never argv or output; missing flags are usage errors
// before anything is sent.
func TestSigninOIDCAdd(t *testing.T) {
	const canary = "canary-oidc-secret-7d1e"
	add := []string{"signin", "oidc", "add", "corp", "--issuer", "https://id.example", "--client-id", "cid"}
	runSecretCases(t, canary, []secretCase{
		{"add", "", append(add, "--client-secret-file", tempFile(t, "s", canary+"\n")), 0,
			`{"issuer":"https://id.example","client_id":"cid","client_secret":"` + canary + `"}`,
			"redirect URI is https://hub.example/auth/oidc/corp/callback"},
		{"secret on stdin", canary, append(add, "--client-secret-file", "-"), 0,
			`{"issuer":"https://id.example","client_id":"cid","client_secret":"` + canary + `"}`, "provider corp set"},
		{"no secret", "", add, 2, "", ""},
		{"no issuer", "", []string{"signin", "oidc", "add", "corp", "--client-id", "cid", "--client-secret-file", tempFile(t, "s", canary)}, 2, "", ""},
		{"bad name", "", []string{"signin", "oidc", "add", "a/b", "--issuer", "https://id.example", "--client-id", "cid",
			"--client-secret-file", tempFile(t, "s", canary)}, 2, "", ""},
		{"empty secret", "", append(add, "--client-secret-file", tempFile(t, "s", "\n")), 1, "", ""},
	})
}

// TestUsersLinkOIDC: drover users link --oidc --subject links and unlinks
// a provider's identity (a subject with a '/' and a space reaches the hub
// whole); half of a pair, or a forge and a provider at once, is refused
// before anything is sent.
func TestUsersLinkOIDC(t *testing.T) {
	const sub = "a/b c"
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"link", []string{"users", "link", "bob", "--oidc", "corp", "--subject", sub, "--json"}, 0, `"subject": "a/b c"`},
		{"unlink", []string{"users", "link", "bob", "--oidc", "corp", "--subject", sub, "--unlink"}, 0, "unlinked a/b c of corp from bob"},
		{"no subject", []string{"users", "link", "bob", "--oidc", "corp"}, 1, ""},
		{"forge and provider", []string{"users", "link", "bob", "--oidc", "corp", "--forge", "gt", "--subject", "s", "--login", "l"}, 2, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHub(t)
			r := runCLI(t, forgeEnv(h), "", tt.args...)
			if r.code != tt.wantCode || !strings.Contains(r.stdout, tt.wantOut) {
				t.Fatalf("code %d, want %d; stdout %q; stderr %q", r.code, tt.wantCode, r.stdout, r.stderr)
			}
		})
	}
}
