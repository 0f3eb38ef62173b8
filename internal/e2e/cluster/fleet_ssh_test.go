package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/childproc"
	"drover/internal/fleet"
	"drover/internal/job"
	"drover/internal/testkit"
)

// TestFleetSSHRunsOverTheStdioTunnel launches a runner on a real OpenSSH
// server: refused while its host key is unknown or changed, then run with
// its hub connections inside the SSH session, nothing forwarded though
// the operator's config asks, and back after its session is cut.
func TestFleetSSHRunsOverTheStdioTunnel(t *testing.T) {
	t.Parallel()
	sshd := testkit.StartSSHD(t)
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	hosts := filepath.Join(t.TempDir(), "hosts.json")
	b, _ := json.Marshal(fleet.HostsFile{Hosts: []fleet.Host{{Name: "box", SSHHost: sshd.Alias, SSHConfig: sshd.ClientConfig,
		Labels: map[string]string{"site": "ssh"}}}})
	if err := os.WriteFile(hosts, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// An agent on this side and a config that asks for forwarding: the
	// target's own options must refuse both.
	agentSock := filepath.Join(t.TempDir(), "agent.sock")
	agent := exec.Command("ssh-agent", "-D", "-a", agentSock)
	if err := agent.Start(); err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	fwd, err := childproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	sshd.AddClientConfig(t, "ForwardAgent yes", "RemoteForward "+fwd+" "+strings.TrimPrefix(hub.URL, "http://"))
	env := []string{"SSH_AUTH_SOCK=" + agentSock}
	// The hosts get the binary --host-binary names, not the one launching
	// (here drover with bytes appended, which runs the same and hashes
	// differently).
	hostBin := filepath.Join(t.TempDir(), "drover-host")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, "drover host binary"...)
	if err := os.WriteFile(hostBin, data, 0o700); err != nil {
		t.Fatal(err)
	}
	hostSum := sha256.Sum256(data)
	launch := func() (string, error) {
		return hub.CLIWith(env, "fleet", "--hosts-file", hosts, "--host-binary", hostBin, "launch", "--on", "box", "--json")
	}

	for _, tc := range []struct {
		name  string
		trust func(testing.TB)
	}{
		{"unknown host key", func(testing.TB) {}},
		{"changed host key", sshd.TrustOtherKey},
	} {
		tc.trust(t)
		out, err := launch()
		if err == nil || !strings.Contains(out, "Host key verification failed") || !strings.Contains(out, "known_hosts") {
			t.Fatalf("%s: %v\n%s", tc.name, err, out)
		}
	}
	if l, err := c.Launches(ctx); err != nil || len(l.Launches) != 0 {
		t.Fatalf("launches after refused host keys: %+v %v", l, err)
	}
	if ps := testkit.Procs(t, "runner", "--stdio", sshd.Home); len(ps) != 0 {
		t.Fatalf("a runner started on a host with a refused key: %v", ps)
	}

	sshd.TrustHostKey(t)
	out, err := launch()
	if err != nil {
		t.Fatalf("launch: %v\n%s", err, out)
	}
	var lv apitypes.LaunchView
	if err := json.Unmarshal([]byte(out), &lv); err != nil {
		t.Fatalf("launch output: %v\n%s", err, out)
	}
	connected := func(v apitypes.LaunchView) bool { return len(v.Runners) == 1 && v.Runners[0].Connected }
	waitLaunch(t, c, lv.ID, connected)
	if bins, _ := filepath.Glob(filepath.Join(sshd.Home, ".cache", "drover", "bin", "drover-*")); len(bins) != 1 ||
		filepath.Base(bins[0]) != "drover-"+hex.EncodeToString(hostSum[:])[:16] {
		t.Fatalf("the host binary was not copied to the host: %v", bins)
	}

	runJob := func(what string) apitypes.JobView {
		t.Helper()
		v, _, err := c.Submit(ctx, apitypes.SubmitRequest{Agent: "exec", Args: []string{"echo", what}, Labels: map[string]string{"site": "ssh"}})
		if err != nil {
			t.Fatal(err)
		}
		done := testkit.WaitJob(t, c, v.ID, 2*time.Minute, testkit.InState(job.Completed))
		if done.Attempts[0].Runner != lv.Runners[0].Name {
			t.Fatalf("job ran on %q", done.Attempts[0].Runner)
		}
		return done
	}
	runJob("over ssh")

	// The far runner dials the tunnel's loopback listener, not the hub,
	// and got nothing forwarded.
	far := testkit.Procs(t, "runner", "--stdio", sshd.Home)
	if len(far) != 1 {
		t.Fatalf("far runners: %v", far)
	}
	for pid := range far {
		for _, kv := range testkit.Environ(t, pid) {
			if strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
				t.Errorf("the far side has the agent: %s", kv)
			}
		}
	}
	if conn, err := net.DialTimeout("tcp", fwd, time.Second); err == nil {
		conn.Close()
		t.Errorf("the operator config's RemoteForward %s is open on the far side", fwd)
	}
	logs, err := hub.CLI("fleet", "--hosts-file", hosts, "logs", lv.Runners[0].Name)
	if err != nil || !strings.Contains(logs, "connected to hub") {
		t.Fatalf("fleet logs: %v\n%s", err, logs)
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "connected to hub") && strings.Contains(l, hub.URL) {
			t.Fatalf("the far runner dialed the hub itself: %s", l)
		}
	}

	// Cut the session: kill the bridge's ssh. It comes back, and so does
	// the runner.
	bridges := hub.FleetPIDs("box")
	if len(bridges) != 1 {
		t.Fatalf("bridges: %v", bridges)
	}
	cut := 0
	for pid, ppid := range testkit.Procs(t, "ssh", sshd.Alias) {
		if ppid == bridges[0] {
			syscall.Kill(pid, syscall.SIGKILL)
			cut++
		}
	}
	if cut != 1 {
		t.Fatalf("found %d ssh sessions of bridge %d", cut, bridges[0])
	}
	waitLaunch(t, c, lv.ID, func(v apitypes.LaunchView) bool { return !connected(v) })
	waitLaunch(t, c, lv.ID, connected)
	runJob("after the cut")

	if out, err := hub.CLI("fleet", "--hosts-file", hosts, "stop", lv.ID); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	if fleet.GroupAlive(bridges[0]) {
		t.Error("the bridge outlived fleet stop")
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(testkit.Procs(t, "runner", "--stdio", sshd.Home)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the far runner outlived fleet stop")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
