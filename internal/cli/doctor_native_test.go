package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"drover/internal/testkit/fakemodel"
)

// TestDoctorProbesNativeAccounts: the doctor asks each native account's
// endpoint to call a tool, says whether it did (streamed or whole) and the
// context it serves, records that on the account, and never shows the
// key.
func TestDoctorProbesNativeAccounts(t *testing.T) {
	home := t.TempDir()
	tools := fakemodel.NewFakeChat(t, []fakemodel.Turn{fakemodel.CallTool("probe", map[string]any{"ok": true})}, fakemodel.RequireKey(testKey))
	text := fakemodel.NewFakeChat(t, []fakemodel.Turn{fakemodel.Text("no tools here")})
	whole := fakemodel.NewFakeChat(t, []fakemodel.Turn{fakemodel.CallTool("probe", map[string]any{"ok": true})},
		fakemodel.BrokenStreamedTools(), fakemodel.ServedContext(4096))
	for _, acct := range []struct{ label, url, stdin string }{{"tools", tools.URL, testKey + "\n"}, {"text", text.URL, ""}, {"whole", whole.URL, ""}} {
		args := []string{"runner", "account", "add", "--agent", "native", "--label", acct.label, "--provider", "openai-compatible",
			"--base-url", acct.url + "/v1", "--model", "m", "--no-probe", "--home", home}
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
	got := map[string]string{}
	for _, c := range items {
		if strings.HasPrefix(c.Kind, "native:") {
			label := strings.TrimSuffix(strings.Fields(c.Account)[2], ",") // "ID (native LABEL, ..."
			got[label] = fmt.Sprintf("%s %d", c.toolMode(), c.ContextLength)
		}
	}
	want := map[string]string{"tools": "streamed 0", "text": "text protocol 0", "whole": "whole answers 4096"}
	if !maps.Equal(got, want) {
		t.Fatalf("native checks %v, want %v\n%s", got, want, r.stdout)
	}
	_, list, err := runnerAccounts(home)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range list {
		if c := a.Capabilities; c == nil || c.Probed.IsZero() || (a.Label == "whole") != (c.ToolCalls && !c.StreamedToolCalls && c.ContextLength == 4096) {
			t.Errorf("account %s recorded %+v", a.Label, c)
		}
	}
	r = runCLI(t, map[string]string{"PATH": ""}, "", "runner", "doctor", "--sandbox", "none", "--home", home)
	if !strings.Contains(r.stdout, "NATIVE ACCOUNT") || !strings.Contains(r.stdout, "tool-call-parser") || strings.Contains(r.stdout+r.stderr, testKey) {
		t.Fatalf("doctor printed:\n%s%s", r.stdout, r.stderr)
	}
}
