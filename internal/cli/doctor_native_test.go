package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"drover/internal/testkit/fakemodel"
)

// TestDoctorProbesNativeAccounts: the doctor asks each native account's
// endpoint once to call a tool, says whether it did, and never shows the
// key.
func TestDoctorProbesNativeAccounts(t *testing.T) {
	home := t.TempDir()
	tools := fakemodel.NewFakeChat(t, []fakemodel.Turn{fakemodel.CallTool("probe", map[string]any{"ok": true})}, fakemodel.RequireKey(testKey))
	text := fakemodel.NewFakeChat(t, []fakemodel.Turn{fakemodel.Text("no tools here")})
	for _, acct := range []struct{ label, url, stdin string }{{"tools", tools.URL, testKey + "\n"}, {"text", text.URL, ""}} {
		args := []string{"runner", "account", "add", "--agent", "native", "--label", acct.label, "--provider", "openai-compatible",
			"--base-url", acct.url + "/v1", "--model", "m", "--home", home}
		if acct.stdin != "" {
			args = append(args, "--api-key-stdin")
		} else {
			args = append(args, "--no-key")
		}
		if r := runCLI(t, nil, acct.stdin, args...); r.code != 0 {
			t.Fatalf("add: %s", r.stderr)
		}
	}
	r := runCLI(t, map[string]string{"PATH": ""}, "", "runner", "doctor", "--json", "--sandbox", "none", "--home", home)
	var items []nativeCheck
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
		t.Fatalf("doctor --json printed %q: %v", r.stdout, err)
	}
	got := map[string]bool{}
	for _, c := range items {
		if strings.HasPrefix(c.Kind, "native:") {
			label := strings.TrimSuffix(strings.Fields(c.Account)[2], ",") // "ID (native LABEL, ..."
			got[label] = c.ToolCalls
		}
	}
	if len(got) != 2 || !got["tools"] || got["text"] {
		t.Fatalf("native checks %v\n%s", got, r.stdout)
	}
	r = runCLI(t, map[string]string{"PATH": ""}, "", "runner", "doctor", "--sandbox", "none", "--home", home)
	if !strings.Contains(r.stdout, "NATIVE ACCOUNT") || !strings.Contains(r.stdout, "tool-call-parser") || strings.Contains(r.stdout+r.stderr, testKey) {
		t.Fatalf("doctor printed:\n%s%s", r.stdout, r.stderr)
	}
}
