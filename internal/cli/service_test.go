package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"drover/internal/runner"
	"drover/internal/testkit/ciskip"
)

// verifyUnit runs systemd-analyze verify on a unit and wants it silent:
// verify exits 0 even on unknown keys and bad values, which it only prints.
func verifyUnit(t *testing.T, name, text string, user bool) {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		ciskip.Skipf(t, "systemd-analyze is not installed (apt-get install systemd; scripts/test does)")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, name)
	must(t, os.WriteFile(path, []byte(text), 0o644))
	args := []string{"verify", path}
	cmd := exec.Command(sa, args...)
	if user {
		rt := filepath.Join(dir, "run")
		must(t, os.Mkdir(rt, 0o700))
		cmd = exec.Command(sa, append([]string{"--user"}, args...)...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s\nunit:\n%s", name, err, out, text)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The generated units pass systemd-analyze verify, system and user, with a
// home whose path needs quoting and escaping; the hardening is there, and
// the runner keeps what bubblewrap needs.
func TestServiceUnitsVerify(t *testing.T) {
	home := filepath.Join(t.TempDir(), "runner home%1")
	must(t, runner.SaveLogin(home, runner.Login{Hub: "http://127.0.0.1:7700", Name: "r1", Token: "drv_r_test"}))
	data := filepath.Join(t.TempDir(), "hub data")
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"}
	for _, tc := range []struct {
		name, file string
		args       []string
		user       bool
		want, not  []string
	}{
		{"runner system", "drover-runner.service", []string{"runner", "service", "install", "--print", "--home", home, "--", "--slots", "2"}, false,
			[]string{"ProtectSystem=strict", "ReadWritePaths=\"" + strings.ReplaceAll(home, "%", "%%") + "\"", "--slots 2", "Environment=PATH=/usr/local/bin:/usr/bin:/bin"},
			[]string{"RestrictNamespaces", "ProtectKernelTunables"}},
		{"runner user", "drover-runner.service", []string{"runner", "service", "install", "--print", "--user", "--home", home}, true,
			[]string{"WantedBy=default.target"}, []string{"User=", "ProtectSystem="}},
		{"hub system", "drover-hub.service", []string{"hub", "service", "install", "--print", "--data", data}, false,
			[]string{"ProtectSystem=strict", "ProtectHome=yes", "RestrictNamespaces=yes", "PrivateDevices=yes"}, nil},
		{"hub user", "drover-hub.service", []string{"hub", "service", "install", "--print", "--user", "--data", data}, true, nil, []string{"User="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(t, env, "", tc.args...)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			for _, w := range append(tc.want, "NoNewPrivileges=yes", "LimitNOFILE=", "Restart=on-failure", "RestartPreventExitStatus=3", "KillMode=mixed") {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("unit lacks %q:\n%s", w, res.stdout)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(res.stdout, n) {
					t.Errorf("unit has %q:\n%s", n, res.stdout)
				}
			}
			verifyUnit(t, tc.file, res.stdout, tc.user)
		})
	}
}

// install --user writes the unit where the user manager looks and says how
// to enable it; bad input writes nothing.
func TestServiceInstall(t *testing.T) {
	home := filepath.Join(t.TempDir(), "runner")
	cfg := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": cfg, "USER": "alice"}
	unitPath := filepath.Join(cfg, "systemd", "user", "drover-runner.service")

	res := runCLI(t, env, "", "runner", "service", "install", "--user", "--home", home)
	if res.code != 1 || !strings.Contains(res.stderr, "drover runner login") {
		t.Fatalf("install without a login: exit %d: %s", res.code, res.stderr)
	}
	must(t, runner.SaveLogin(home, runner.Login{Hub: "http://127.0.0.1:7700", Name: "r1", Token: "drv_r_test"}))
	res = runCLI(t, env, "", "runner", "service", "install", "--user", "--home", home, "slots")
	if res.code != 2 || !strings.Contains(res.stderr, "after '--'") {
		t.Fatalf("runner flags before --: exit %d: %s", res.code, res.stderr)
	}
	res = runCLI(t, env, "", "runner", "service", "install", "--user", "--as", "bob", "--home", home)
	if res.code != 2 {
		t.Fatalf("--as with --user: exit %d: %s", res.code, res.stderr)
	}
	if _, err := os.Stat(unitPath); err == nil {
		t.Fatal("bad input wrote a unit")
	}
	res = runCLI(t, env, "", "runner", "service", "install", "--user", "--home", home, "--", "--max-jobs", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "systemctl --user enable --now drover-runner.service") || !strings.Contains(res.stdout, "loginctl enable-linger alice") {
		t.Fatalf("install: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	b, err := os.ReadFile(unitPath)
	must(t, err)
	if !strings.Contains(string(b), "--max-jobs 1") {
		t.Fatalf("unit:\n%s", b)
	}
	verifyUnit(t, "drover-runner.service", string(b), true)

	res = runCLI(t, env, "", "hub", "service", "install", "--user", "--data", filepath.Join(t.TempDir(), "missing"))
	if res.code != 1 || !strings.Contains(res.stderr, "install -d") {
		t.Fatalf("hub install without its data directory: exit %d: %s", res.code, res.stderr)
	}
}

// TestRunnerEndedExitsThree: the exit code the unit's
// RestartPreventExitStatus names is the one a runner the hub ended exits with.
func TestRunnerEndedExitsThree(t *testing.T) {
	var stderr strings.Builder
	a := newApp(Env{Stderr: &stderr})
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{context.Canceled, 0},
		{fmt.Errorf("wait for welcome: %w", runner.ErrEnded), exitRunnerEnded},
		{errors.New("dial: connection refused"), 1},
	}
	for _, tt := range tests {
		if got := a.exit(nil, a.runnerEnded(tt.err)); got != tt.want {
			t.Errorf("runnerEnded(%v): exit %d, want %d", tt.err, got, tt.want)
		}
	}
	if !strings.Contains(stderr.String(), "drover: runner: wait for welcome: the hub ended this runner") {
		t.Errorf("stderr %q does not say why", stderr.String())
	}
}
