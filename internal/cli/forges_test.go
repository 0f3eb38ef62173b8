package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"drover/internal/apitypes"
)

// forgeEnv is the environment of a CLI run against h.
func forgeEnv(h *fakeHub) map[string]string {
	return map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
}

// tempFile writes a file in a directory of the test's own and returns its path.
func tempFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	writeFile(t, p, content)
	return p
}

// TestForgesAddCredentialNeverShown: the token or key read from a file (or
// stdin) reaches the hub in the request's body, trimmed, and nothing the
// CLI prints: not its answer, its JSON, its errors or its debug log.
func TestForgesAddCredentialNeverShown(t *testing.T) {
	const canary = "canary-forge-secret-7f3e"
	pem := "-----BEGIN RSA PRIVATE KEY-----\n" + canary + "\n-----END RSA PRIVATE KEY-----\n"
	for _, tt := range []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		wantBody string // the body the hub got; "" for no request
	}{
		{"token file", "", []string{"forges", "add", "gt", "--kind", "gitea", "--url", "https://gitea.example",
			"--forge-token-file", tempFile(t, "tok", canary+"\n")}, 0,
			`{"kind":"gitea","url":"https://gitea.example","token":"` + canary + `"}`},
		{"token on stdin", canary + "\r\n", []string{"forges", "add", "gt", "--kind", "gitea", "--url", "https://gitea.example",
			"--forge-token-file", "-", "--json"}, 0,
			`{"kind":"gitea","url":"https://gitea.example","token":"` + canary + `"}`},
		{"github app", "", []string{"forges", "add", "gh", "--kind", "github", "--url", "https://github.com",
			"--app-id", "42", "--private-key-file", tempFile(t, "key.pem", pem)}, 0,
			`{"kind":"github","url":"https://github.com","app_id":42,"private_key":` + jsonString(strings.TrimSpace(pem)) + `}`},
		{"hub refuses", "", []string{"forges", "add", "taken", "--kind", "gitea", "--url", "https://gitea.example",
			"--forge-token-file", tempFile(t, "tok", canary)}, 1,
			`{"kind":"gitea","url":"https://gitea.example","token":"` + canary + `"}`},
		{"empty file", "", []string{"forges", "add", "gt", "--kind", "gitea", "--url", "https://gitea.example",
			"--forge-token-file", tempFile(t, "tok", "\n")}, 1, ""},
		{"huge file", "", []string{"forges", "add", "gt", "--kind", "gitea", "--url", "https://gitea.example",
			"--forge-token-file", tempFile(t, "tok", strings.Repeat(canary, maxForgeCredential/len(canary)+1))}, 1, ""},
		{"missing file", "", []string{"forges", "add", "gt", "--kind", "gitea", "--url", "https://gitea.example",
			"--forge-token-file", filepath.Join(t.TempDir(), "none")}, 1, ""},
		{"app on gitea", "", []string{"forges", "add", "gt", "--kind", "gitea", "--url", "https://gitea.example",
			"--app-id", "42", "--private-key-file", tempFile(t, "key.pem", pem)}, 2, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHub(t)
			r := runCLI(t, forgeEnv(h), tt.stdin, append([]string{"--log-level", "debug"}, tt.args...)...)
			if r.code != tt.wantCode {
				t.Fatalf("code %d, want %d; stderr %q", r.code, tt.wantCode, r.stderr)
			}
			secretOnlyInBody(t, h, r, canary, tt.wantBody)
		})
	}
}

// secretOnlyInBody checks that the run printed no secret and sent the hub
// the one body wantBody ("" for none).
func secretOnlyInBody(t *testing.T, h *fakeHub, r cliResult, secret, wantBody string) {
	t.Helper()
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("the secret was printed:\nstdout %q\nstderr %q", r.stdout, r.stderr)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case wantBody == "" && len(h.forgeBodies) > 0:
		t.Errorf("sent %q", h.forgeBodies)
	case wantBody != "" && (len(h.forgeBodies) != 1 || strings.TrimSpace(h.forgeBodies[0]) != wantBody):
		t.Errorf("sent %q, want %s", h.forgeBodies, wantBody)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestForgesAddFlags: a credential that does not fit is a usage error
// (exit 2) before anything is read or sent.
func TestForgesAddFlags(t *testing.T) {
	h := newFakeHub(t)
	tok := tempFile(t, "tok", "secret-token")
	key := tempFile(t, "key", "-----BEGIN KEY-----\nx\n-----END KEY-----\n")
	base := []string{"forges", "add", "f", "--kind", "github", "--url", "https://github.com"}
	for _, tt := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no credential", base, "forge-token-file app-id"},
		{"token and app", append(base, "--forge-token-file", tok, "--app-id", "1", "--private-key-file", key), "none of the others"},
		{"token and key", append(base, "--forge-token-file", tok, "--private-key-file", key), "[app-id]"},
		{"app without key", append(base, "--app-id", "1"), "all be set"},
		{"no kind", []string{"forges", "add", "f", "--url", "https://x", "--forge-token-file", tok}, `"kind"`},
		{"no url", []string{"forges", "add", "f", "--kind", "gitea", "--forge-token-file", tok}, `"url"`},
		{"bad kind", []string{"forges", "add", "f", "--kind", "svn", "--url", "https://x", "--forge-token-file", tok}, "want one of github, gitea, gitlab"},
		{"stdin twice", []string{"--token-file", "-", "forges", "add", "f", "--kind", "gitea", "--url", "https://x", "--forge-token-file", "-"}, "not both"},
		{"bad name", []string{"forges", "add", "a/b", "--kind", "gitea", "--url", "https://x", "--forge-token-file", tok}, "no spaces"},
	} {
		r := runCLI(t, forgeEnv(h), "", tt.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%s: code %d, stderr %q; want 2 and %q", tt.name, r.code, r.stderr, tt.want)
		}
	}
	if n := h.requestCount(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestForgesListAndRemove(t *testing.T) {
	h := newFakeHub(t)
	h.forges = []apitypes.ForgeView{
		{Name: "gh", Kind: "github", URL: "https://github.com", AppID: 42, CreatedBy: "admin", Projects: []string{"web", "api"}},
		{Name: "gt", Kind: "gitea", URL: "https://gitea.example/\x1b[2J", CreatedBy: "ev\u009bil"},
	}
	env := forgeEnv(h)
	r := runCLI(t, env, "", "forges", "list")
	for _, want := range []string{"GitHub App 42", "web,api", "a token", `https://gitea.example/\x1b[2J`, `ev\u009bil`} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("list: code %d, no %q in\n%s", r.code, want, r.stdout)
		}
	}
	if strings.ContainsFunc(r.stdout, func(r rune) bool { return escaped(r) && r != '\n' }) {
		t.Errorf("list printed control characters: %q", r.stdout)
	}
	r = runCLI(t, env, "", "forges", "list", "--json")
	var l apitypes.ForgeList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Forges) != 2 || l.Forges[0].AppID != 42 {
		t.Errorf("list --json: %v %+v", err, l)
	}
	if r := runCLI(t, env, "", "forges", "remove", "gh"); r.code != 0 || !strings.Contains(r.stdout, "forge gh removed") {
		t.Errorf("remove: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, env, "", "forges", "remove", "gh"); r.code != 1 || !strings.Contains(r.stderr, "no forge gh") {
		t.Errorf("remove again: code %d, stderr %q", r.code, r.stderr)
	}
}

// TestPublishRequests: the flags make the request; flags that exclude each
// other are a usage error and send nothing.
func TestPublishRequests(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want apitypes.PublishRequest
		bad  bool
	}{
		{"default", nil, apitypes.PublishRequest{}, false},
		{"pr", []string{"--pr", "--base", "dev", "--draft", "--title", "Fix it"},
			apitypes.PublishRequest{Mode: "pr", Base: "dev", Draft: true, Title: "Fix it"}, false},
		{"branch", []string{"--branch", "fix/x", "--base", "main"}, apitypes.PublishRequest{Mode: "branch", Branch: "fix/x", Base: "main"}, false},
		{"to pr", []string{"--to-pr", "12"}, apitypes.PublishRequest{Mode: "to_pr", ToPR: 12}, false},
		{"agit", []string{"--agit", "--title", "T"}, apitypes.PublishRequest{Mode: "agit", Title: "T"}, false},
		{"pr and branch", []string{"--pr", "--branch", "x"}, apitypes.PublishRequest{}, true},
		{"to pr and agit", []string{"--to-pr", "3", "--agit"}, apitypes.PublishRequest{}, true},
		{"to pr and base", []string{"--to-pr", "3", "--base", "main"}, apitypes.PublishRequest{}, true},
		{"branch and draft", []string{"--branch", "x", "--draft"}, apitypes.PublishRequest{}, true},
		{"to pr and title", []string{"--to-pr", "3", "--title", "T"}, apitypes.PublishRequest{}, true},
		{"empty branch", []string{"--branch", ""}, apitypes.PublishRequest{}, true},
		{"bad pr number", []string{"--to-pr", "0"}, apitypes.PublishRequest{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHub(t)
			h.publications["j-1"] = apitypes.PublicationView{Job: "j-1", State: "done"}
			r := runCLI(t, forgeEnv(h), "", append([]string{"publish", "j-1"}, tt.args...)...)
			h.mu.Lock()
			defer h.mu.Unlock()
			if tt.bad {
				if r.code != 2 || len(h.publishes) != 0 {
					t.Errorf("code %d, sent %+v; want a usage error and nothing sent (stderr %q)", r.code, h.publishes, r.stderr)
				}
				return
			}
			if r.code != 0 || len(h.publishes) != 1 || h.publishes[0] != tt.want {
				t.Errorf("code %d, sent %+v, want %+v (stderr %q)", r.code, h.publishes, tt.want, r.stderr)
			}
		})
	}
}

// TestPublishOutcome: what publish prints of each outcome, escaped, and its
// exit status: non-zero when the publication failed, with or without --json.
func TestPublishOutcome(t *testing.T) {
	for _, tt := range []struct {
		name     string
		pub      apitypes.PublicationView
		json     bool
		wantCode int
		want     []string
	}{
		{"done", apitypes.PublicationView{Job: "j-1", Forge: "gh", Repo: "acme/web", Mode: "pr", Branch: "drover/j-1", Base: "main",
			Commit: "c0ffee", Pushed: "c0ffee", PR: 7, URL: "https://github.com/acme/web/pull/7", State: "done"}, false, 0,
			[]string{"done (pr to acme/web on forge gh)", "#7 https://github.com/acme/web/pull/7", "drover/j-1 into main", "Pushed:", "c0ffee"}},
		{"failed", apitypes.PublicationView{Job: "j-1", Forge: "gh", Repo: "acme/web", Mode: "to_pr", PR: 3, State: "failed",
			Code: "remote_moved", Reason: "the head moved"}, false, 1,
			[]string{"failed (to_pr to acme/web", "Failed:", "remote_moved: the head moved"}},
		{"failed json", apitypes.PublicationView{Job: "j-1", State: "failed", Code: "forge_unauthorized"}, true, 1,
			[]string{`"state": "failed"`, `"code": "forge_unauthorized"`}},
		{"pending", apitypes.PublicationView{Job: "j-1", Forge: "gh", Repo: "acme/web", State: "pending", Tries: 2,
			Code: "forge_unavailable", Reason: "503"}, false, 0,
			[]string{"pending", "Last error:", "Tries:", "carries the publication on", "drover show j-1"}},
		{"hostile", apitypes.PublicationView{Job: "j-1", State: "failed", URL: "https://x/\x1b]8;;https://evil\x07pull\u009b1",
			Branch: "b\x1b[2J", Code: "c\u202e", Reason: "no\x1b[31m\nsecond line\x07"}, false, 1,
			[]string{`https://x/\x1b]8;;https://evil\x07pull\u009b1`, `b\x1b[2J`, `c\u202e`, `no\x1b[31m\nsecond line\x07`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHub(t)
			h.publications["j-1"] = tt.pub
			args := []string{"publish", "j-1"}
			if tt.json {
				args = append(args, "--json")
			}
			r := runCLI(t, forgeEnv(h), "", args...)
			if r.code != tt.wantCode {
				t.Errorf("code %d, want %d (stderr %q)", r.code, tt.wantCode, r.stderr)
			}
			if strings.ContainsFunc(r.stdout+r.stderr, func(r rune) bool { return escaped(r) && r != '\n' }) {
				t.Errorf("printed control characters: %q %q", r.stdout, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("no %q in\n%s", w, r.stdout)
				}
			}
		})
	}
}

// TestProjectConfigForge: only the forge flags the user set are sent;
// --forge "" unmaps; the printed config shows the mapping.
func TestProjectConfigForge(t *testing.T) {
	for _, tt := range []struct {
		name     string
		args     []string
		wantBody string // "" for no PUT
		wantCode int
		want     string // in stdout (code 0) or stderr
	}{
		{"map", []string{"--forge", "gh", "--forge-repo", "acme/web", "--publish", "pr"}, `{"forge":"gh","forge_repo":"acme/web","publish":"pr"}`, 0,
			"acme/web on forge gh"},
		{"direct push", []string{"--direct-push"}, `{"direct_push":true}`, 0, "Project:"},
		{"no direct push", []string{"--direct-push=false", "--publish", "none"}, `{"publish":"none","direct_push":false}`, 0, "Project:"},
		{"unmap", []string{"--forge", ""}, `{"forge":"","forge_repo":""}`, 0, "Project:"},
		{"requester signs", []string{"--forge", "gh", "--forge-repo", "acme/web", "--publish-author", "requester", "--publish-email", "{user}@acme.test", "--publish-sign"},
			`{"forge":"gh","forge_repo":"acme/web","publish_author":"requester","publish_email":"{user}@acme.test","publish_sign":true}`, 0,
			"commits authored by the job's requester ({user}@acme.test); commits signed with the hub's key"},
		{"agent authors", []string{"--publish-author", "agent", "--publish-sign=false"}, `{"publish_author":"","publish_sign":false}`, 0, "Project:"},
		{"bad author", []string{"--publish-author", "bob"}, "", 2, "want requester or agent"},
		{"show", nil, "", 0, "Project:"},
		{"forge without repo", []string{"--forge", "gh"}, "", 2, "both --forge NAME and --forge-repo"},
		{"repo without forge", []string{"--forge-repo", "acme/web"}, "", 2, "both --forge NAME and --forge-repo"},
		{"unmap with repo", []string{"--forge", "", "--forge-repo", "acme/web"}, "", 2, "unmaps the project"},
		{"bad repo", []string{"--forge", "gh", "--forge-repo", "acme"}, "", 2, "OWNER/REPO"},
		{"bad publish", []string{"--publish", "merge"}, "", 2, "want one of pr, branch, none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHub(t)
			r := runCLI(t, forgeEnv(h), "", append([]string{"projects", "config", "web"}, tt.args...)...)
			out := r.stdout
			if tt.wantCode != 0 {
				out = r.stderr
			}
			if r.code != tt.wantCode || !strings.Contains(out, tt.want) {
				t.Errorf("code %d, want %d and %q in stdout %q stderr %q", r.code, tt.wantCode, tt.want, r.stdout, r.stderr)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if got := strings.TrimSpace(strings.Join(h.configBodies, "")); got != tt.wantBody {
				t.Errorf("sent %q, want %q", got, tt.wantBody)
			}
		})
	}
}

// TestRunFromPR: drover run --from-pr sends the project and the pull
// request, no base (the hub resolves the head), and refuses what cannot go
// with it before sending anything.
func TestRunFromPR(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string // in stderr when refused
	}{
		{"sent", []string{"--project", "web", "--from-pr", "17"}, 0, ""},
		{"no project", []string{"--from-pr", "17"}, 2, "needs --project"},
		{"with repo", []string{"--repo", ".", "--project", "web", "--from-pr", "17"}, 2, "cannot go with --repo"},
		{"observe", []string{"--project", "web", "--from-pr", "17", "--mode", "observe"}, 2, "fix mode"},
		{"negative", []string{"--project", "web", "--from-pr", "-3"}, 2, "a pull request's number"},
		{"bad project", []string{"--project", "Web!", "--from-pr", "3"}, 2, "project name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHub(t)
			args := append(append([]string{"run", "--agent", "exec"}, tt.args...), "true")
			r := runCLI(t, forgeEnv(h), "", args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("code %d, want %d and %q in stderr %q", r.code, tt.code, tt.want, r.stderr)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if tt.code != 0 {
				if len(h.submits) != 0 {
					t.Errorf("a refused run submitted %+v", h.submits)
				}
				return
			}
			if len(h.submits) != 1 || h.submits[0].Repo == nil || *h.submits[0].Repo != (apitypes.SubmitRepo{Project: "web", FromPR: 17}) {
				t.Errorf("submitted %+v", h.submits)
			}
		})
	}
}

// TestForgesOAuth: the client secret goes from its file to the hub's body
// only, never argv or output; the flags that do not fit are usage errors
// before anything is sent.
func TestForgesOAuth(t *testing.T) {
	const canary = "canary-oauth-secret-41c2"
	runSecretCases(t, canary, []secretCase{
		{"set", "", []string{"forges", "oauth", "gt", "--client-id", "cid", "--client-secret-file", tempFile(t, "s", canary+"\n")}, 0,
			`{"client_id":"cid","client_secret":"` + canary + `"}`, "redirect URI is https://hub.example/auth/forge/gt/callback"},
		{"secret on stdin", canary, []string{"forges", "oauth", "gt", "--client-id", "cid", "--client-secret-file", "-"}, 0,
			`{"client_id":"cid","client_secret":"` + canary + `"}`, "sign-in set"},
		{"off", "", []string{"forges", "oauth", "gt", "--off"}, 0, `{"off":true}`, "sign-in off"},
		{"no secret", "", []string{"forges", "oauth", "gt", "--client-id", "cid"}, 2, "", ""},
		{"neither", "", []string{"forges", "oauth", "gt"}, 2, "", ""},
		{"id and off", "", []string{"forges", "oauth", "gt", "--off", "--client-id", "cid", "--client-secret-file", tempFile(t, "s", canary)}, 2, "", ""},
		{"empty secret", "", []string{"forges", "oauth", "gt", "--client-id", "cid", "--client-secret-file", tempFile(t, "s", "\n")}, 1, "", ""},
	})
}

// secretCase is a command given a secret (canary) from a file or stdin.
type secretCase struct {
	name     string
	stdin    string
	args     []string
	wantCode int
	wantBody string // "" for no request
	wantOut  string
}

// runSecretCases runs each case against a fake hub: its exit code and
// output, and canary in the hub's body only (wantBody).
func runSecretCases(t *testing.T, canary string, cases []secretCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHub(t)
			r := runCLI(t, forgeEnv(h), tt.stdin, append([]string{"--log-level", "debug"}, tt.args...)...)
			if r.code != tt.wantCode || !strings.Contains(r.stdout, tt.wantOut) {
				t.Fatalf("code %d, want %d; stdout %q; stderr %q", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			secretOnlyInBody(t, h, r, canary, tt.wantBody)
		})
	}
}
