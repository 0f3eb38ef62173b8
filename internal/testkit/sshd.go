package testkit

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/childproc"
	"drover/internal/testkit/ciskip"
)

// SSHD is a real OpenSSH server on 127.0.0.1 with its own host key, one
// authorized client key and config. It allows agent and TCP forwarding, so
// that a test shows the client's options, not the server, refuse them.
type SSHD struct {
	Addr string
	Port int
	User string
	// Home is the far side's HOME (a temporary directory, set by sshd's
	// SetEnv), where what a session writes lands.
	Home string
	// ClientConfig is an ssh client config with the alias Alias for this
	// server, its client key and KnownHosts.
	ClientConfig string
	Alias        string
	// KnownHosts is the client's known_hosts file, empty at first: the
	// test decides what it holds (TrustHostKey, a wrong key, nothing).
	KnownHosts string
	hostPub    string
	dir        string
	p          *proc
}

// StartSSHD starts `sshd -D -e -f CONFIG` on a free loopback port. Without
// sshd (openssh-server) it skips, or under CI=true fails.
func StartSSHD(t testing.TB) *SSHD {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		sshd = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(sshd); err != nil {
		ciskip.Skipf(t, "sshd (openssh-server) is not installed: %v", err)
	}
	for _, tool := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			ciskip.Skipf(t, "%s (openssh-client) is not installed", tool)
		}
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if u.Uid == "0" {
		// sshd's compiled-in privilege separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	s := &SSHD{User: u.Username, Home: filepath.Join(dir, "home"), Alias: "fleet-test",
		ClientConfig: filepath.Join(dir, "ssh_config"), KnownHosts: filepath.Join(dir, "known_hosts"), dir: dir}
	if err := os.MkdirAll(s.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	keygen(t, filepath.Join(dir, "host_key"))
	keygen(t, filepath.Join(dir, "client_key"))
	pub, err := os.ReadFile(filepath.Join(dir, "host_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	s.hostPub = strings.TrimSpace(string(pub))
	clientPub, err := os.ReadFile(filepath.Join(dir, "client_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "authorized_keys"), string(clientPub))
	write(t, s.KnownHosts, "")
	addr, err := childproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = addr
	_, port, _ := net.SplitHostPort(addr)
	fmt.Sscan(port, &s.Port)
	write(t, filepath.Join(dir, "sshd_config"), fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AuthorizedKeysFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowAgentForwarding yes
AllowTcpForwarding yes
X11Forwarding no
PermitUserEnvironment no
SetEnv HOME=%s
`, s.Port, filepath.Join(dir, "host_key"), filepath.Join(dir, "sshd.pid"), filepath.Join(dir, "authorized_keys"), s.Home))
	write(t, s.ClientConfig, fmt.Sprintf(`Host %s
  HostName 127.0.0.1
  Port %d
  User %s
  IdentityFile %s
  IdentitiesOnly yes
  UserKnownHostsFile %s
  GlobalKnownHostsFile /dev/null
  LogLevel ERROR
`, s.Alias, s.Port, s.User, filepath.Join(dir, "client_key"), s.KnownHosts))
	s.p = start(t, "sshd", baseEnv(dir), nil, sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return s
		}
		if s.p.exited() || time.Now().After(deadline) {
			t.Fatalf("sshd did not start: %v\n%s", err, s.p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TrustHostKey writes the server's real host key to KnownHosts.
func (s *SSHD) TrustHostKey(t testing.TB) {
	t.Helper()
	write(t, s.KnownHosts, fmt.Sprintf("[127.0.0.1]:%d %s\n", s.Port, s.hostPub))
}

// TrustOtherKey writes a key that is not the server's for it: a changed
// host key, as the client sees it.
func (s *SSHD) TrustOtherKey(t testing.TB) {
	t.Helper()
	other := filepath.Join(s.dir, fmt.Sprintf("other_%d", time.Now().UnixNano()))
	keygen(t, other)
	pub, err := os.ReadFile(other + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	write(t, s.KnownHosts, fmt.Sprintf("[127.0.0.1]:%d %s\n", s.Port, strings.TrimSpace(string(pub))))
}

// AddClientConfig appends lines to the alias's client config (e.g. a
// forwarding an operator's config asks for).
func (s *SSHD) AddClientConfig(t testing.TB, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(s.ClientConfig, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// Output is what sshd logged.
func (s *SSHD) Output() string { return s.p.out.String() }

func keygen(t testing.TB, path string) {
	t.Helper()
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "drover-test", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
