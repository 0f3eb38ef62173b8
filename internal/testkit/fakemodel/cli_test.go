package fakemodel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
)

// key is the only key the CLIs are given; the fakes refuse any other, and
// the tests check no other ever reached them.
const key = "fake-key-0123"

// run is one CLI run: its argv, environment and working directory.
type run struct {
	argv []string
	env  []string
	dir  string
}

// setup is what a CLI run is made of: the CLI's bin directory, a work dir
// with no git repository, a private scratch dir for HOME and config, the
// script and the fake's options, and optionally an MCP server to configure.
type setup struct {
	bin, work, home string
	turns           []fakemodel.Turn
	opts            []fakemodel.Option
	mcp             *fakeMCP
}

// cliCase sets up one real CLI against its fake: start returns the fake
// and how to run the CLI.
type cliCase struct {
	name  string
	start func(t *testing.T, s setup) (*fakemodel.FakeServer, run)
}

var cliCases = []cliCase{
	{"claude", startClaude},
	{"codex", startCodex},
	{"opencode", startOpencode},
	{"gemini", startGemini},
}

// baseEnv is all a CLI gets from the test's environment: no real keys,
// config or caches leak in.
func baseEnv(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "HOME=" + home,
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local/share"), "XDG_STATE_HOME=" + filepath.Join(home, ".local/state"),
	}
}

func startClaude(t *testing.T, s setup) (*fakemodel.FakeServer, run) {
	home := s.home
	f := fakemodel.NewFakeAnthropic(t, s.turns, append(s.opts, fakemodel.RequireKey(key))...)
	env := append(baseEnv(home),
		"CLAUDE_CONFIG_DIR="+filepath.Join(home, "claude"),
		"IS_SANDBOX=1", // bypassPermissions refuses to run as root otherwise
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
		"ANTHROPIC_BASE_URL="+f.URL, "ANTHROPIC_API_KEY="+key)
	argv := []string{filepath.Join(s.bin, "claude"), "-p", "do the task",
		"--output-format", "stream-json", "--verbose", "--permission-mode", "bypassPermissions"}
	if s.mcp != nil {
		path := filepath.Join(home, "mcp.json")
		writeFile(t, path, fmt.Sprintf(`{"mcpServers":{%q:{"type":"http","url":%q,"headers":{"Authorization":%q}}}}`,
			mcpServer, s.mcp.URL, "Bearer "+mcpToken))
		argv = append(argv, "--mcp-config", path, "--strict-mcp-config")
	}
	return f, run{argv: argv, env: env, dir: s.work}
}

func startCodex(t *testing.T, s setup) (*fakemodel.FakeServer, run) {
	home := s.home
	f := fakemodel.NewFakeResponses(t, s.turns, append(s.opts, fakemodel.RequireKey(key))...)
	// CODEX_HOME under /tmp breaks codex's own sandbox helper; with
	// danger-full-access it starts none, so t.TempDir() is fine here.
	codexHome := filepath.Join(home, "codex")
	cfg := `approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
model = "fake-model"
model_provider = "fake"

[analytics]
enabled = false

[model_providers.fake]
name = "fake"
base_url = "` + f.URL + `/v1"
env_key = "FAKE_CODEX_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`
	if s.mcp != nil {
		// The table drover's codex adapter generates.
		cfg += fmt.Sprintf("\n[mcp_servers.%s]\nurl = %q\nhttp_headers = { Authorization = %q }\n",
			mcpServer, s.mcp.URL, "Bearer "+mcpToken)
	}
	writeFile(t, filepath.Join(codexHome, "config.toml"), cfg)
	env := append(baseEnv(home), "CODEX_HOME="+codexHome, "FAKE_CODEX_KEY="+key)
	// The work dir is no git repository, which codex exec refuses without
	// --skip-git-repo-check.
	return f, run{argv: []string{filepath.Join(s.bin, "codex"), "exec", "--json", "--skip-git-repo-check", "do the task"},
		env: env, dir: s.work}
}

func startOpencode(t *testing.T, s setup) (*fakemodel.FakeServer, run) {
	home := s.home
	f := fakemodel.NewFakeChat(t, s.turns, append(s.opts, fakemodel.RequireKey(key))...)
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
		"permission": map[string]string{"edit": "allow", "bash": "allow"},
		"model":      "fake/fake-model",
		"provider": map[string]any{"fake": map[string]any{
			"npm": "@ai-sdk/openai-compatible",
			// opencode substitutes {env:VAR}; the key reaching the fake
			// proves it.
			"options": map[string]string{"baseURL": f.URL + "/v1", "apiKey": "{env:FAKE_OPENCODE_KEY}"},
			"models":  map[string]any{"fake-model": map[string]any{}},
		}},
	}
	if s.mcp != nil {
		// The entry drover's opencode adapter generates.
		cfg["mcp"] = map[string]any{mcpServer: map[string]any{"type": "remote", "url": s.mcp.URL,
			"headers": map[string]string{"Authorization": "Bearer " + mcpToken}}}
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, "opencode.json")
	writeFile(t, path, string(data))
	env := append(baseEnv(home), "OPENCODE_CONFIG="+path,
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "FAKE_OPENCODE_KEY="+key)
	return f, run{argv: []string{filepath.Join(s.bin, "opencode"), "run", "--format", "json", "do the task"}, env: env, dir: s.work}
}

func startGemini(t *testing.T, s setup) (*fakemodel.FakeServer, run) {
	home := s.home
	f := fakemodel.NewFakeGemini(t, s.turns, append(s.opts, fakemodel.RequireKey(key))...)
	// Without a selected auth type Gemini CLI exits 41 in headless mode.
	settings := map[string]any{"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}}
	if s.mcp != nil {
		// The entry drover's gemini adapter generates.
		settings["mcpServers"] = map[string]any{mcpServer: map[string]any{"httpUrl": s.mcp.URL,
			"headers": map[string]string{"Authorization": "Bearer " + mcpToken}, "trust": true}}
	}
	data, err := json.Marshal(settings)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, ".gemini", "settings.json"), string(data))
	env := append(baseEnv(home), "GOOGLE_GEMINI_BASE_URL="+f.URL, "GEMINI_API_KEY="+key)
	return f, run{argv: []string{filepath.Join(s.bin, "gemini"), "-p", "do the task",
		"--output-format", "stream-json", "--yolo", "--skip-trust"}, env: env, dir: s.work}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRealCLIs runs each pinned CLI against its fake through a script that
// writes a file, runs a command and answers: the file must exist with the
// content, and the command's output must come back to the fake.
func TestRealCLIs(t *testing.T) {
	for _, c := range cliCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			bin := testkit.AgentCLI(t, c.name)
			work, home := t.TempDir(), t.TempDir()
			target := filepath.Join(work, "sub", "hello.txt")
			content := "hello from the fake " + c.name + "\nit's quoted \"twice\"\n"
			turns := []fakemodel.Turn{
				fakemodel.WriteFile(target, content),
				// printf proves a shell ran it: "marker-42" appears nowhere
				// in the request. (Gemini CLI refuses $(( )) as command
				// substitution.)
				fakemodel.RunCommand("printf 'marker-%s\\n' 42; cat sub/hello.txt"),
				fakemodel.Text("all done"),
			}
			f, r := c.start(t, setup{bin: bin, work: work, home: home, turns: turns})
			out := runCLI(t, r)
			if t.Failed() || !f.Done() {
				t.Fatalf("script not finished; requests:\n%s\noutput:\n%s", f.Dump(), out)
			}
			got, err := os.ReadFile(target)
			if err != nil || string(got) != content {
				t.Errorf("file %s = %q, %v; want %q", target, got, err, content)
			}
			res, ok := f.Result(1)
			if !ok || !strings.Contains(res.Output, "marker-42") || !strings.Contains(res.Output, "hello from the fake") {
				t.Errorf("command result = %+v, %v; want the command's output", res, ok)
			}
			if keys := f.Keys(); slices.ContainsFunc(keys, func(k string) bool { return k != key && k != "" }) {
				t.Errorf("keys seen %q; want only %q", keys, key)
			}
			if t.Failed() {
				t.Logf("requests:\n%s\noutput:\n%s", f.Dump(), out)
			}
		})
	}
}

// TestRealCLIsRateLimit answers the first model request with the
// vendor's 429. Claude Code and Codex (their own retries off) end the run
// with an error naming the limit; opencode and Gemini CLI cannot be told
// not to retry, so they retry and get the answer.
func TestRealCLIsRateLimit(t *testing.T) {
	tests := []struct {
		cli     string
		fails   bool
		message string // in the output
	}{
		{"claude", true, `"api_error_status":429`},
		{"codex", true, "usage limit"},
		{"opencode", false, "answer after the limit"},
		{"gemini", false, "answer after the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.cli, func(t *testing.T) {
			t.Parallel()
			i := slices.IndexFunc(cliCases, func(c cliCase) bool { return c.name == tt.cli })
			bin := testkit.AgentCLI(t, tt.cli)
			// A reset one second away keeps Gemini CLI's honoured retry
			// delay short.
			f, r := cliCases[i].start(t, setup{bin: bin, work: t.TempDir(), home: t.TempDir(),
				turns: []fakemodel.Turn{fakemodel.Text("answer after the limit")},
				opts:  []fakemodel.Option{fakemodel.RateLimit(0, time.Now().Add(time.Second))}})
			out, err := runCLIErr(r)
			if (err != nil) != tt.fails || !strings.Contains(out, tt.message) {
				t.Errorf("err = %v (want failure: %v), output wants %q:\n%s", err, tt.fails, tt.message, out)
			}
			var statuses []int
			for _, req := range f.Requests() {
				if req.Turn >= 0 || req.Status == http.StatusTooManyRequests {
					statuses = append(statuses, req.Status)
				}
			}
			want := []int{http.StatusTooManyRequests}
			if !tt.fails {
				want = append(want, http.StatusOK)
			}
			if !slices.Equal(statuses, want) {
				t.Errorf("model requests answered %v; want %v\n%s", statuses, want, f.Dump())
			}
		})
	}
}

// runCLI runs r with stdin closed (codex and gemini wait for more prompt
// otherwise) and returns its output; a failure or a hang fails the test.
func runCLI(t *testing.T, r run) string {
	t.Helper()
	out, err := runCLIErr(r)
	if err != nil {
		t.Errorf("%s: %v\n%s", filepath.Base(r.argv[0]), err, out)
	}
	return out
}

func runCLIErr(r run) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.argv[0], r.argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdin = r.env, r.dir, nil
	// A killed CLI's children may keep its output open.
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
