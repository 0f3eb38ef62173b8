package cli

import "testing"

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
