package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/runner"
)

// loginRun is a `drover runner login` running in the background.
type loginRun struct {
	lines chan string
	done  chan int
	out   strings.Builder // every line, read after done
}

func startLogin(t *testing.T, env map[string]string, args ...string) *loginRun {
	t.Helper()
	pr, pw := io.Pipe()
	lr := &loginRun{lines: make(chan string, 100), done: make(chan int, 1)}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lr.out.WriteString(sc.Text() + "\n")
			lr.lines <- sc.Text()
		}
		close(lr.lines)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		code := Run(ctx, append([]string{"runner", "login"}, args...), Env{Stdin: strings.NewReader(""), Stdout: pw, Stderr: pw,
			Getenv: func(k string) string { return env[k] }})
		pw.Close()
		lr.done <- code
	}()
	return lr
}

var approveCmdRE = regexp.MustCompile(`drover runner approve '([^']+)'`)

// link waits for the approval command the login prints.
func (lr *loginRun) link(t *testing.T) string {
	t.Helper()
	for l := range lr.lines {
		if m := approveCmdRE.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	t.Fatal("the login ended without printing an approval link")
	return ""
}

// wait waits for the login to end and returns its exit code and output.
func (lr *loginRun) wait(t *testing.T) (int, string) {
	t.Helper()
	for range lr.lines {
	}
	select {
	case code := <-lr.done:
		return code, lr.out.String()
	case <-time.After(60 * time.Second):
		t.Fatal("runner login did not end")
		return 0, ""
	}
}

// An approval link whose name was edited still leaves the hub and the
// runner agreeing: the runner takes the approved name.
func TestRunnerLoginTakesTheApprovedName(t *testing.T) {
	env, _ := realHub(t)
	home := filepath.Join(t.TempDir(), "runner")
	lr := startLogin(t, env, "--hub", env["DROVER_HUB"], "--name", "gpu1", "--home", home)
	link := lr.link(t)
	edited := strings.Replace(link, "name=gpu1", "name=gpu2", 1)
	if r := runCLI(t, env, "", "runner", "approve", edited); r.code != 0 {
		t.Fatalf("approve: %d %s", r.code, r.stderr)
	}
	code, out := lr.wait(t)
	if code != 0 || !strings.Contains(out, "approved this runner as gpu2, not gpu1") {
		t.Fatalf("login: %d\n%s", code, out)
	}
	l, err := runner.LoadLogin(home)
	if err != nil || l.Name != "gpu2" {
		t.Fatalf("saved login %+v, %v; want gpu2", l, err)
	}
	r := runCLI(t, env, "", "runners", "--json")
	var rl apitypes.RunnerList
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rl) != nil || len(rl.Runners) != 1 || rl.Runners[0].Name != "gpu2" {
		t.Fatalf("runners: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestRunnerLoginEndsWithoutAHubOrApproval(t *testing.T) {
	env, _ := realHub(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"closed port", []string{"--hub", closed}, []string{closed + "/api/v1/runner/login", "connection refused"}},
		{"no approval in time", []string{"--hub", env["DROVER_HUB"], "--timeout", "100ms"}, []string{"not approved within 100ms", "drover runner login"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--name", "gpu1", "--home", t.TempDir()}, tt.args...)
			code, out := startLogin(t, env, args...).wait(t)
			if code == 0 {
				t.Fatalf("login succeeded:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// The printed link opens the hub's approval page, and its form approves
// the waiting login.
func TestRunnerLoginLinkOpensThePage(t *testing.T) {
	env, _ := realHub(t)
	home := filepath.Join(t.TempDir(), "runner")
	lr := startLogin(t, env, "--hub", env["DROVER_HUB"], "--name", "gpu1", "--home", home)
	link := lr.link(t)
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "Approve runner gpu1") {
		t.Fatalf("GET %s: %d\n%s", link, resp.StatusCode, page)
	}
	u, _ := url.Parse(link)
	form := url.Values{"name": {u.Query().Get("name")}, "key": {u.Query().Get("key")}, "token": {env["DROVER_TOKEN"]}}
	req, _ := http.NewRequest("POST", env["DROVER_HUB"]+"/approve", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", env["DROVER_HUB"])
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST the form: %d", resp.StatusCode)
	}
	if code, out := lr.wait(t); code != 0 || !strings.Contains(out, "Runner gpu1 approved") {
		t.Fatalf("login: %d\n%s", code, out)
	}
}
