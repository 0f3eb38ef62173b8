package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol/protocoltest"
	"drover/internal/rules"
)

func TestParseLabels(t *testing.T) {
	tests := []struct {
		in      []string
		want    map[string]string
		wantErr bool
	}{
		{in: nil, want: nil},
		{in: []string{"os=linux", "gpu="}, want: map[string]string{"os": "linux", "gpu": ""}},
		{in: []string{" arch=arm64 "}, want: map[string]string{"arch": "arm64"}},
		{in: []string{"a=b=c"}, want: map[string]string{"a": "b=c"}},
		{in: []string{"novalue"}, wantErr: true},
		{in: []string{"=v"}, wantErr: true},
		{in: []string{"a b=c"}, wantErr: true},
		{in: []string{"a=1", "a=2"}, wantErr: true},
		{in: []string{strings.Repeat("k", rules.MaxLabelLen+1) + "=v"}, wantErr: true},
		{in: make([]string, rules.MaxLabels+1), wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseLabels(tt.in)
		if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseLabels(%q) = %v, %v", tt.in, got, err)
		}
	}
	// The hub's rule, as the runner and the hub test it: a label the CLI
	// takes is never one the hub refuses.
	for _, tc := range protocoltest.LabelCases {
		check := func(in string, err error) {
			var ue usageError
			if (err == nil) != tc.OK || err != nil && (!strings.Contains(err.Error(), tc.Why) || !errors.As(err, &ue)) {
				t.Errorf("%s: %q: %v; want ok=%v (%q)", tc.Name, in, err, tc.OK, tc.Why)
			}
		}
		item := tc.Key + "=" + tc.Value
		_, err := parseLabels([]string{item})
		check(item, err)
		if !strings.Contains(item, ",") { // a list cannot hold a comma
			_, err = parseLabelList("a=1," + item)
			check("a=1,"+item, err)
		}
	}
}

// A runner started with a label the hub would refuse never dials: it
// exits 2 naming the label, where it used to be disconnected by the hub
// at every reconnect.
func TestRunnerRefusesBadLabels(t *testing.T) {
	r := runCLI(t, nil, "", "runner", "--labels", "zone=lab,gpu:x=1")
	if r.code != 2 || !strings.Contains(r.stderr, `label key "gpu:x"`) {
		t.Fatalf("runner --labels gpu:x=1: exit %d\n%s", r.code, r.stderr)
	}
}

func TestParseApproveCode(t *testing.T) {
	key := strings.Repeat("ab", 32)
	tests := []struct {
		code     string
		wantName string
	}{
		{"http://hub:7700/approve?name=r1&key=" + key, "r1"},
		{"https://hub.example/drover/approve?key=" + strings.ToUpper(key) + "&name=gpu-box", "gpu-box"},
		{"r1:" + key, "r1"},
		{"  host:with:colons:" + key + "\n", "host:with:colons"},
		{"r1:" + key[:63], ""},
		{"r1:" + strings.Repeat("zz", 32), ""},
		{":" + key, ""},
		{key, ""},
		{"http://hub/approve?name=r1", ""},
		{"", ""},
	}
	for _, tt := range tests {
		req, err := parseApproveCode(tt.code)
		if tt.wantName == "" {
			if err == nil {
				t.Errorf("parseApproveCode(%q) = %+v, want an error", tt.code, req)
			}
			continue
		}
		if err != nil || req.Name != tt.wantName || req.Key != key {
			t.Errorf("parseApproveCode(%q) = %+v, %v", tt.code, req, err)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"},
		{"users", "bogus"},
		{"runners", "bogus"},
		{"hubs", "extra"},
		{"show"},
		{"show", "a", "b"},
		{"jobs", "--nope"},
		{"jobs", "--state", "sleeping"},
		{"hub", "extra"},
		{"run"},
		{"run", "--agent", "exec", "--label", "nokv"},
		{"run", "--agent", "exec", "--image", "-v", "true"},
		{"run", "--agent", "exec", "--image", "Bad Image", "true"},
		{"runner", "--slots", "0"},
		{"runner", "login"},
		{"runner", "approve", "not-a-code"},
		{"users", "add", "two words"},
		{"--log-level", "loud", "whoami"},
	} {
		r := runCLI(t, nil, "", args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "drover: ") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("%q: code %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

func TestAPIErrorIsOneLine(t *testing.T) {
	h := newFakeHub(t)
	r := runCLI(t, map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}, "", "show", "j-404")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "no job j-404") {
		t.Errorf("code %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": "wrong"}, "", "whoami")
	if r.code != 1 || !strings.Contains(r.stderr, "unauthorized") {
		t.Errorf("code %d, stderr %q", r.code, r.stderr)
	}
}

func TestLogin(t *testing.T) {
	h := newFakeHub(t)
	env := map[string]string{"HOME": t.TempDir()}
	r := runCLI(t, env, "wrong-token\n", "login", "--hub", h.URL)
	if r.code != 1 {
		t.Fatalf("login with a bad token: code %d, stderr %q", r.code, r.stderr)
	}
	cfg := filepath.Join(env["HOME"], ".config", "drover", "client.json")
	if _, err := os.Stat(cfg); !os.IsNotExist(err) {
		t.Fatalf("a failed login saved %s", cfg)
	}

	r = runCLI(t, env, h.token+"\n", "login", "--hub", h.URL+"/")
	if r.code != 0 {
		t.Fatalf("login: code %d, stderr %q", r.code, r.stderr)
	}
	assertMode(t, cfg, 0o600)
	assertMode(t, filepath.Dir(cfg), 0o700)
	if c, err := loadConfig(cfg); err != nil || c.Hub != h.URL || c.Token != h.token {
		t.Errorf("saved %+v, %v", c, err)
	}
	r = runCLI(t, env, "", "whoami")
	if r.code != 0 || r.stdout != "user admin (admin) on "+h.URL+"\n" {
		t.Errorf("whoami after login: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	h.who = apitypes.Whoami{Kind: "runner", Name: "admin", Runner: "r1"}
	r = runCLI(t, env, h.token, "login", "--hub", h.URL)
	if r.code != 1 || !strings.Contains(r.stderr, "runner token") {
		t.Errorf("login with a runner token: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestUsersAddPrintsOnlyTheToken(t *testing.T) {
	h := newFakeHub(t)
	tok := filepath.Join(t.TempDir(), "admin.token")
	writeFile(t, tok, h.token)
	r := runCLI(t, nil, "", "--hub", h.URL, "--token-file", tok, "users", "add", "bob", "--admin")
	if r.code != 0 || r.stdout != "drv_u_bob\n" {
		t.Errorf("code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if len(h.users) != 1 || h.users[0] != (apitypes.NewUserRequest{Name: "bob", Admin: true}) {
		t.Errorf("requests %+v", h.users)
	}
}

func TestRunnerApprove(t *testing.T) {
	h := newFakeHub(t)
	key := strings.Repeat("0f", 32)
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	r := runCLI(t, env, "", "runner", "approve", "http://elsewhere:7700/approve?name=gpu&key="+key)
	if r.code != 0 || len(h.approvals) != 1 || h.approvals[0] != (apitypes.ApproveRequest{Name: "gpu", Key: key}) {
		t.Errorf("code %d, stderr %q, approvals %+v", r.code, r.stderr, h.approvals)
	}
	if r.stdout != "approved runner gpu (owner admin)\n" {
		t.Errorf("stdout %q", r.stdout)
	}

	link := "http://elsewhere:7700/approve?name=taken&key=" + key
	r = runCLI(t, env, "", "runner", "approve", link)
	if r.code == 0 || !strings.Contains(r.stderr, "is taken") || !strings.Contains(r.stderr, "replace") {
		t.Errorf("over a taken name: code %d, stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"--replace", link}, {link, "--replace"}} {
		r = runCLI(t, env, "", append([]string{"runner", "approve"}, args...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "revoked the old runner taken's token") || !h.approvals[len(h.approvals)-1].Replace {
			t.Errorf("approve %v: code %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

func TestRunSubmits(t *testing.T) {
	h := newFakeHub(t)
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	// Flags after the first argument are the agent's.
	r := runCLI(t, env, "", "run", "--agent", "exec", "--label", "os=linux", "--key", "k1", "ls", "-la", "--", "x")
	if r.code != 0 || r.stdout != "j-1\n" {
		t.Fatalf("code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	want := apitypes.SubmitRequest{Agent: "exec", Args: []string{"ls", "-la", "--", "x"},
		Labels: map[string]string{"os": "linux"}, Key: "k1"}
	if !reflect.DeepEqual(h.submits[0], want) {
		t.Errorf("submitted %+v, want %+v", h.submits[0], want)
	}
	if r := runCLI(t, env, "", "run", "--agent", "exec", "--image", "swebench/sweb.eval.x86_64.a-1", "true"); r.code != 0 ||
		h.submits[1].Image != "swebench/sweb.eval.x86_64.a-1" {
		t.Fatalf("--image: code %d, stderr %q, submitted %+v", r.code, r.stderr, h.submits[1])
	}
	r = runCLI(t, env, "", "run", "--json", "--agent", "exec", "--", "true")
	var v apitypes.JobView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.ID != "j-3" || !reflect.DeepEqual(v.Args, []string{"true"}) {
		t.Errorf("--json printed %q: %v", r.stdout, err)
	}
}

func TestRunWaitExitCodes(t *testing.T) {
	code := func(n int) *int { return &n }
	tests := []struct {
		name  string
		state job.State
		exit  *int
		want  int
	}{
		{"completed", job.Completed, code(0), 0},
		{"failed with a code", job.Failed, code(3), 3},
		{"failed without one", job.Failed, nil, 1},
		{"cancelled", job.Cancelled, nil, 2},
		{"unknown", job.Unknown, nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHub(t)
			h.finish = func(v apitypes.JobView) apitypes.JobView {
				v.State, v.ExitCode, v.Runner = tt.state, tt.exit, "r1"
				v.Attempts = []apitypes.AttemptView{{Number: 1, Runner: "r1", State: job.AttemptCompleted}}
				h.logs[v.ID] = "hello\n"
				return v
			}
			env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
			r := runCLI(t, env, "", "run", "--wait", "--agent", "exec", "--", "echo", "hello")
			if r.code != tt.want || r.stdout != "hello\n" {
				t.Errorf("code %d (want %d), stdout %q", r.code, tt.want, r.stdout)
			}
			if !strings.Contains(r.stderr, "--- attempt 1 on r1 ---\n") || !strings.Contains(r.stderr, "job j-1 "+string(tt.state)) {
				t.Errorf("stderr %q", r.stderr)
			}
		})
	}
}

func TestReadCommands(t *testing.T) {
	h := newFakeHub(t)
	h.finish = func(v apitypes.JobView) apitypes.JobView {
		v.State, v.Runner = job.Completed, "r1"
		v.Attempts = []apitypes.AttemptView{{Number: 1, Runner: "r1", State: job.AttemptCompleted, LogSize: 6}}
		h.logs[v.ID] = "hello\n"
		return v
	}
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	if r := runCLI(t, env, "", "run", "--agent", "exec", "--", "echo", "hello world"); r.code != 0 {
		t.Fatalf("run: %q", r.stderr)
	}

	r := runCLI(t, env, "", "jobs", "--json")
	var l apitypes.JobList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Jobs) != 1 || l.Jobs[0].ID != "j-1" {
		t.Errorf("jobs --json printed %q: %v", r.stdout, err)
	}
	r = runCLI(t, env, "", "jobs")
	if !strings.HasPrefix(r.stdout, "ID ") || !strings.Contains(r.stdout, "j-1") || !strings.Contains(r.stdout, "completed") {
		t.Errorf("jobs printed %q", r.stdout)
	}
	r = runCLI(t, env, "", "show", "j-1")
	if !strings.Contains(r.stdout, "echo 'hello world'") || !strings.Contains(r.stdout, "ATTEMPT") {
		t.Errorf("show printed %q", r.stdout)
	}
	r = runCLI(t, env, "", "logs", "j-1")
	if r.code != 0 || r.stdout != "hello\n" {
		t.Errorf("logs: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, env, "", "logs", "--offset", "2", "j-1")
	if r.stdout != "llo\n" {
		t.Errorf("logs --offset printed %q", r.stdout)
	}
	r = runCLI(t, env, "", "cancel", "j-1")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot cancel job j-1: the job already ended") {
		t.Errorf("cancel of an ended job: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestFormatting(t *testing.T) {
	code := func(n int) *int { return &n }
	for _, tt := range []struct {
		code *int
		r    job.Reason
		want string
	}{
		{nil, job.ReasonNone, "-"},
		{code(0), job.ReasonExited, "exit 0"},
		{code(137), job.ReasonTimeout, "exit 137, timeout"},
		{nil, job.ReasonRunnerLost, "runner_lost"},
	} {
		if got := outcome(tt.code, tt.r); got != tt.want {
			t.Errorf("outcome(%v, %s) = %q, want %q", tt.code, tt.r, got, tt.want)
		}
	}
	if got := shellQuote([]string{"sh", "-c", "echo 'hi'", ""}); got != `sh -c 'echo '\''hi'\''' ''` {
		t.Errorf("shellQuote = %s", got)
	}
}
