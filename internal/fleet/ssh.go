package fleet

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"drover/internal/retry"
	"drover/internal/rules"
)

// Host is an SSH host the operator registered for the fleet.
type Host struct {
	Name string `json:"name"` // what --on names
	// SSHHost is the host (usually an alias of the SSH config) ssh connects to.
	SSHHost string `json:"ssh_host"`
	// SSHConfig is the ssh client configuration file ("" for the user's).
	SSHConfig string `json:"ssh_config,omitempty"`
	// Command is drover on the host ("" to copy this binary there).
	Command string            `json:"command,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Owner is the hub user who may launch on the host ("" for anyone).
	Owner string `json:"owner,omitempty"`
}

// HostsFile is the operator's file of SSH hosts.
type HostsFile struct {
	Hosts []Host `json:"hosts"`
}

// LoadHosts reads the hosts file ("" or missing: no hosts).
func LoadHosts(path string) (HostsFile, error) {
	var hf HostsFile
	if path == "" {
		return hf, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return hf, nil
	} else if err != nil {
		return hf, fmt.Errorf("read the fleet's hosts file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hf); err != nil {
		return hf, fmt.Errorf("hosts file %s: %w", path, err)
	}
	for _, h := range hf.Hosts {
		switch {
		case !rules.ValidName(h.Name) || h.Name == "local":
			return hf, fmt.Errorf("hosts file %s: host name %q must be a name other than local", path, h.Name)
		case h.SSHHost == "" || strings.HasPrefix(h.SSHHost, "-"):
			return hf, fmt.Errorf("hosts file %s: host %s needs an ssh_host (an alias of your SSH config)", path, h.Name)
		}
	}
	return hf, nil
}

func (hf HostsFile) host(name string) (Host, bool) {
	for _, h := range hf.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return Host{}, false
}

// sshOptions are never left to a configuration: the host's key must be
// known already, nothing prompts, and nothing of this machine (agent,
// X11, ports, environment) is forwarded to the host.
var sshOptions = []string{"-T", "-e", "none",
	"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
	"-o", "ForwardAgent=no", "-o", "ForwardX11=no", "-o", "ClearAllForwardings=yes",
	"-o", "PermitLocalCommand=no", "-o", "SendEnv=-*", "-o", "RequestTTY=no",
	"-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3", "-o", "ConnectTimeout=20"}

func sshArgs(h Host, remote string) []string {
	var args []string
	if h.SSHConfig != "" {
		args = append(args, "-F", h.SSHConfig)
	}
	return append(append(args, sshOptions...), "--", h.SSHHost, remote)
}

// SSH runs each runner on an SSH host as `drover runner --stdio`, its
// session kept by a bridge process of this machine (a procs child) that
// reconnects it with backoff.
type SSH struct {
	procs
	host    Host
	ssh     string // the ssh binary ("" when missing)
	copied  string // the binary copied to the host (Config.HostBinary)
	remote  string // its path on the host (set by Check)
	present bool   // whether Check found it there
	checked bool
}

// NewSSH makes the ssh target of one registered host.
func NewSSH(c Config, h Host) (*SSH, error) {
	p, err := newProcs(c, func(s Spec, dir string) []string {
		return []string{"fleet", "ssh-bridge", "--dir", dir}
	})
	if err != nil {
		return nil, err
	}
	bin, _ := exec.LookPath("ssh")
	return &SSH{procs: p, host: h, ssh: bin, copied: cmp.Or(c.HostBinary, c.Binary)}, nil
}

// Labels are the host's, which its runners carry.
func (t *SSH) Labels() map[string]string {
	m := maps.Clone(t.host.Labels)
	if m == nil {
		m = map[string]string{}
	}
	return m
}

// Owner is the hub user the host is for ("" for anyone).
func (t *SSH) Owner() string { return t.host.Owner }

// Check fails unless ssh is installed and the host answers with a key
// known_hosts holds already. The same connection finds whether this
// version of drover is on the host.
func (t *SSH) Check(ctx context.Context) error {
	if t.ssh == "" {
		return errors.New("the ssh fleet target needs the OpenSSH client: install it (apt-get install openssh-client)")
	}
	if err := t.procs.Check(ctx); err != nil {
		return err
	}
	if t.host.Command != "" {
		_, err := t.run(ctx, "exit 0", nil)
		t.checked = err == nil
		return err
	}
	sum, err := fileSHA256(t.copied)
	if err != nil {
		return fmt.Errorf("hash the drover binary: %w", err)
	}
	t.remote = remoteBinary(sum)
	out, err := t.run(ctx, "if test -x "+t.remote+"; then echo present; fi", nil)
	if err != nil {
		return err
	}
	t.present, t.checked = strings.TrimSpace(string(out)) == "present", true
	return nil
}

// run runs a fixed command on the host (never content of a job).
func (t *SSH) run(ctx context.Context, remote string, stdin io.Reader) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.ssh, sshArgs(t.host, remote)...)
	cmd.Env = t.env
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.ExitCode() == 255 {
		return nil, fmt.Errorf("ssh to host %s (%s) failed: %s: if its host key is unknown or changed, verify the key and add it to known_hosts yourself (drover never accepts a new one); else check the host and your SSH config",
			t.host.Name, t.host.SSHHost, lastLine(stderr.String()))
	}
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("on host %s, %q: %w: %s", t.host.Name, remote, err, lastLine(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "no message"
	}
	return s
}

// remoteBinary is where this binary lives on a host it was copied to,
// named by its SHA-256, so another version is another file.
func remoteBinary(sum string) string { return `"$HOME"/.cache/drover/bin/drover-` + sum[:16] }

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// command is drover on the host: the operator's, or the host binary
// (this one unless Config.HostBinary names another), copied there unless
// Check found the same file there already.
func (t *SSH) command(ctx context.Context) (string, error) {
	if t.host.Command != "" {
		return t.host.Command, nil
	}
	if t.present {
		return t.remote, nil
	}
	f, err := os.Open(t.copied)
	if err != nil {
		return "", err
	}
	defer f.Close()
	bin := t.remote
	copyCmd := `umask 077 && mkdir -p "$HOME"/.cache/drover/bin && cat > ` + bin + `.tmp && chmod 700 ` + bin + `.tmp && mv ` + bin + `.tmp ` + bin
	if _, err := t.run(ctx, copyCmd, f); err != nil {
		return "", fmt.Errorf("copy drover to host %s: %w", t.host.Name, err)
	}
	t.present = true
	return bin, nil
}

// bridgeConfig is what a bridge process reads from its directory.
type bridgeConfig struct {
	Host   Host   `json:"host"`
	SSH    string `json:"ssh"`
	Remote string `json:"remote"`
	Hub    string `json:"hub"`
}

const bridgeFile = "bridge.json"

// bridgeRetry spaces the restarts of a failing SSH session: 500ms doubling
// to 30s (RunBridge starts again from the first after a long session).
func bridgeRetry() retry.Policy {
	return retry.Policy{First: 500 * time.Millisecond, Max: 30 * time.Second}
}

// Launch copies drover to the host when needed, then starts one bridge per
// runner; each runs `drover runner --stdio` on the host.
func (t *SSH) Launch(ctx context.Context, s Spec) ([]Instance, error) {
	if !t.checked {
		if err := t.Check(ctx); err != nil {
			return nil, err
		}
	}
	if _, err := hubAddr(s.Hub); err != nil {
		return nil, err
	}
	drover, err := t.command(ctx)
	if err != nil {
		return nil, err
	}
	labels := t.Labels()
	maps.Copy(labels, s.Labels)
	for _, r := range s.Runners {
		dir, err := t.runnerDir(s.LaunchID, r.Name)
		if err != nil {
			return nil, err
		}
		remote := drover + ` runner --stdio --home "$HOME"/.local/state/drover/fleet/` + r.Name +
			" --slots " + fmt.Sprint(max(s.Slots, 1))
		if len(labels) > 0 {
			remote += " --labels " + shellWord(rules.FormatLabels(labels))
		}
		b, err := json.Marshal(bridgeConfig{Host: t.host, SSH: t.ssh, Remote: remote, Hub: s.Hub})
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, bridgeFile), b, 0o600); err != nil {
			return nil, err
		}
	}
	return t.procs.Launch(ctx, s)
}

// shellWord quotes s as one word of a POSIX shell.
func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// hubAddr is the TCP address the bridge dials for each stream. The tunnel
// carries the runner's plain HTTP; an https hub would need the far side to
// speak TLS to a name it cannot resolve.
func hubAddr(hub string) (string, error) {
	u, err := url.Parse(hub)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("hub URL %q: want http://host[:port]", hub)
	}
	if u.Scheme != "http" {
		return "", fmt.Errorf("the ssh target tunnels plain http to the hub; %s is %s: launch with --hub http://ADDRESS the hub listens on", hub, u.Scheme)
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "80"), nil
	}
	return u.Host, nil
}

// RunBridge keeps one runner's SSH session (the bridge process of dir)
// until ctx ends: it runs the remote runner, serves its tunnel, and when
// the session ends starts it again with backoff.
func RunBridge(ctx context.Context, dir string, log *slog.Logger) error {
	b, err := os.ReadFile(filepath.Join(dir, bridgeFile))
	if err != nil {
		return fmt.Errorf("read the bridge's configuration: %w", err)
	}
	var bc bridgeConfig
	if err := json.Unmarshal(b, &bc); err != nil {
		return fmt.Errorf("read the bridge's configuration: %w", err)
	}
	addr, err := hubAddr(bc.Hub)
	if err != nil {
		return err
	}
	// Kept in memory only: the far side ignores it once it has a login.
	tokPath := filepath.Join(dir, tokenFileName)
	tok, err := os.ReadFile(tokPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	_ = os.Remove(tokPath)
	token := strings.TrimSpace(string(tok))
	for n := 0; ; n++ {
		start := time.Now()
		err := bridgeSession(ctx, bc, token, addr, log)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > time.Minute {
			n = 0
		}
		d := bridgeRetry().Delay(n)
		log.Warn("ssh session ended; reconnecting", "host", bc.Host.Name, "err", err, "after", d)
		if retry.Sleep(ctx, d) != nil {
			return nil
		}
	}
}

func bridgeSession(ctx context.Context, bc bridgeConfig, token, addr string, log *slog.Logger) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(sctx, bc.SSH, sshArgs(bc.Host, bc.Remote)...)
	cmd.Stderr = os.Stderr // the remote runner's log and ssh's, into the bridge's
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start ssh: %w", err)
	}
	log.Info("ssh session started", "host", bc.Host.Name, "pid", cmd.Process.Pid)
	serr := ServeNear(sctx, stdout, stdin, token, addr, log)
	cancel()
	werr := cmd.Wait()
	return errors.Join(serr, werr)
}

// hostNames lists the registered hosts' names.
func (hf HostsFile) hostNames() []string {
	var out []string
	for _, h := range hf.Hosts {
		out = append(out, h.Name)
	}
	return slices.Sorted(slices.Values(out))
}
