package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"drover/internal/netpolicy"
	"drover/internal/protocol"
	"drover/internal/sandbox/egress"
)

// Kinds of boundary.
const (
	KindBwrap  = "bwrap"
	KindDocker = "docker"
	KindPodman = "podman"
	KindNone   = "none"
)

// Kinds lists the kinds New accepts, the default first.
func Kinds() []string { return []string{KindBwrap, KindDocker, KindPodman, KindNone} }

// Modes: fix may write the worktree, observe may not.
const (
	ModeFix     = protocol.ModeFix
	ModeObserve = protocol.ModeObserve
)

// Home is the private, empty home directory of commands in a sandbox.
const Home = "/home/sandbox"

// Where the egress proxy and its credential endpoints appear inside a
// sandbox. Sockets must use other ports.
const (
	ProxyAddr      = "127.0.0.1:3128"
	credentialPort = 3129 // credential i listens on credentialPort+i
)

// Policy says what the commands of one attempt may touch. New maps it to a
// Boundary; nothing else builds one.
type Policy struct {
	Kind string // KindBwrap (default), KindDocker, KindPodman or KindNone
	Mode string // ModeFix (default): Root read-write; ModeObserve: read-only
	// Root is the attempt's directory (its worktree). Every command runs
	// inside it; it is the only host directory a sandbox can write.
	Root string
	// Extra host paths, mounted at Dst (default: Src). They must not
	// overlap Root.
	ReadOnly  []Mount
	ReadWrite []Mount
	// Env names the variables, beyond PATH, HOME, LANG and TERM, that a
	// command's environment may hold. Credentials, tokens, SSH_AUTH_SOCK,
	// GIT_* (but for the object directories) and cloud settings are refused.
	Env     []string
	Network Network
	// Sockets are host unix sockets reachable inside at a loopback address
	// (e.g. a tools server), through the same bridge as the egress proxy.
	Sockets []Socket
	Limits  Limits
	// Containers only: the image, which is never pulled unless AllowPull.
	Image     string
	AllowPull bool
	// InitBinary is the drover binary, mounted read-only into sandboxes
	// that need a bridge (network rules or sockets) and run as their init.
	// Default: this process's executable.
	InitBinary string
	// Evidence receives one JSON line per egress connection or request;
	// nil: a readable line in the command's output.
	Evidence io.Writer
	Logger   *slog.Logger
}

// Mount is a host path made visible inside a sandbox.
type Mount struct {
	Src string
	Dst string // default Src
}

// Network is off unless it lists something: then commands reach exactly
// the allowed host:port pairs and credential endpoints, through the egress
// proxy.
type Network struct {
	Allow       []string // host[:port] patterns (netpolicy.ParsePattern)
	Open        bool     // every host (the operator's "open" policy)
	Credentials []egress.Credential
	// Policy names the network policy in force and Widen says how a
	// refused host:port is let through, for the proxy's refusals.
	Policy string
	Widen  func(hostport string) string
}

func (n Network) enabled() bool { return n.Open || len(n.Allow) > 0 || len(n.Credentials) > 0 }

// Socket exposes the host unix socket Path at Addr (127.0.0.1:PORT) inside
// the sandbox.
type Socket struct {
	Addr string
	Path string
}

// Limits bound each command. Zero means no limit.
type Limits struct {
	Timeout time.Duration // wall clock per command; a Spec may ask for less
	Memory  int64         // bytes: a cgroup where one is writable, else the address space (RLIMIT_AS)
	CPUTime time.Duration // CPU seconds per process (RLIMIT_CPU)
	CPUs    float64       // CPU bandwidth: containers, or a cgroup where one is writable
	Pids    int           // processes: a cgroup where one is writable, else RLIMIT_NPROC
	Output  int64         // bytes of output kept, truncation marker included
}

// DefaultLimits are a runner's limits unless its operator says otherwise:
// enough processes for a build, few enough that a fork bomb stays small.
func DefaultLimits() Limits { return Limits{Pids: 4096} }

// New returns the boundary p asks for, after checking that it works on
// this machine: a kind that does not work is an error that says how to fix
// it, never a quieter fallback.
func New(ctx context.Context, p Policy) (Boundary, error) {
	p, err := p.normalize()
	if err != nil {
		return nil, err
	}
	switch p.Kind {
	case KindBwrap:
		return newBwrap(ctx, p)
	case KindDocker, KindPodman:
		return newEngine(ctx, p)
	case KindNone:
		return newLocal(p)
	}
	return nil, fmt.Errorf("unknown sandbox %q: want one of %s", p.Kind, strings.Join(Kinds(), ", "))
}

func (p Policy) normalize() (Policy, error) {
	if p.Kind == "" {
		p.Kind = KindBwrap
	}
	if !slices.Contains(Kinds(), p.Kind) {
		return p, fmt.Errorf("unknown sandbox %q: want one of %s", p.Kind, strings.Join(Kinds(), ", "))
	}
	switch p.Mode {
	case "":
		p.Mode = ModeFix
	case ModeFix, ModeObserve:
	default:
		return p, fmt.Errorf("sandbox mode %q: want %s or %s", p.Mode, ModeFix, ModeObserve)
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	root, err := canonicalDir(p.Root)
	if err != nil {
		return p, fmt.Errorf("sandbox root: %w", err)
	}
	if root == "/" {
		return p, errors.New("sandbox root: the whole filesystem cannot be a job's worktree")
	}
	p.Root = root
	for _, ms := range []*[]Mount{&p.ReadOnly, &p.ReadWrite} {
		out := make([]Mount, 0, len(*ms))
		for _, m := range *ms {
			if m, err = p.checkMount(m); err != nil {
				return p, err
			}
			out = append(out, m)
		}
		*ms = out
	}
	for _, name := range p.Env {
		if err := checkEnvName(name); err != nil {
			return p, err
		}
	}
	if l := p.Limits; l.Timeout < 0 || l.Memory < 0 || l.CPUTime < 0 || l.CPUs < 0 || l.Pids < 0 || l.Output < 0 {
		return p, fmt.Errorf("sandbox limits must not be negative: %+v", l)
	}
	if _, err := netpolicy.NewMatcher(p.Network.Allow, p.Network.Open); err != nil {
		return p, fmt.Errorf("egress allowlist: %w", err)
	}
	inside := map[string]bool{ProxyAddr: true}
	for i, c := range p.Network.Credentials {
		if _, err := egress.CheckCredential(c); err != nil {
			return p, err
		}
		for _, name := range []string{c.KeyEnv, c.BaseURLEnv} {
			if name == "HOME" || name == "PATH" || strings.Contains(name, "PROXY") || strings.Contains(name, "proxy") {
				return p, fmt.Errorf("credential %q: variable %s is drover's own", c.Name, name)
			}
		}
		inside[credentialAddr(i)] = true
	}
	for _, s := range p.Sockets {
		host, port, err := net.SplitHostPort(s.Addr)
		if n, _ := strconv.Atoi(port); err != nil || host != "127.0.0.1" || n < 1 || n > 65535 {
			return p, fmt.Errorf("socket %s: want 127.0.0.1:PORT inside the sandbox", s.Addr)
		}
		if inside[s.Addr] {
			return p, fmt.Errorf("socket %s: address already used inside the sandbox", s.Addr)
		}
		inside[s.Addr] = true
		if fi, err := os.Stat(s.Path); err != nil || fi.Mode()&os.ModeSocket == 0 {
			return p, fmt.Errorf("socket %s: %s is not a unix socket", s.Addr, s.Path)
		}
	}
	if p.bridged() {
		if p.InitBinary == "" {
			if p.InitBinary, err = os.Executable(); err != nil {
				return p, fmt.Errorf("find the drover binary for the sandbox init: %w", err)
			}
		}
		if err := executable(p.InitBinary); err != nil {
			return p, fmt.Errorf("sandbox init: %w", err)
		}
	}
	return p, nil
}

// bridged reports whether commands need drover's init inside the sandbox.
func (p Policy) bridged() bool { return p.Network.enabled() || len(p.Sockets) > 0 }

func credentialAddr(i int) string { return "127.0.0.1:" + strconv.Itoa(credentialPort+i) }

// CredentialURL is where the i-th credential rule of a policy is reached
// from inside its sandbox: a CLI's API base URL.
func CredentialURL(i int) string { return "http://" + credentialAddr(i) }

func canonicalDir(dir string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%q is not an absolute path", dir)
	}
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(d)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return d, nil
}

// within reports whether path is dir or below it (both canonical).
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

func (p Policy) checkMount(m Mount) (Mount, error) {
	if !filepath.IsAbs(m.Src) {
		return m, fmt.Errorf("mount %q: not an absolute path", m.Src)
	}
	src, err := filepath.EvalSymlinks(m.Src)
	if err != nil {
		return m, fmt.Errorf("mount: %w", err)
	}
	dst := m.Dst
	if dst == "" {
		dst = src
	}
	dst = filepath.Clean(dst)
	if !filepath.IsAbs(dst) {
		return m, fmt.Errorf("mount %s: destination %q is not absolute", src, m.Dst)
	}
	for _, path := range []string{src, dst} {
		if within(path, p.Root) || within(p.Root, path) {
			return m, fmt.Errorf("mount %s on %s overlaps the sandbox root %s", src, dst, p.Root)
		}
		for _, sys := range []string{"/proc", "/dev", "/sys", "/run/drover"} {
			if within(path, sys) || path == "/" {
				return m, fmt.Errorf("mount %s on %s: %s is the sandbox's own", src, dst, path)
			}
		}
	}
	return Mount{Src: src, Dst: dst}, nil
}

// baseEnv names the variables every command may get; a policy may name more.
func baseEnv() []string { return []string{"PATH", "HOME", "LANG", "TERM"} }

// checkEnvName refuses names that carry credentials or reach the runner's
// own agents and accounts, whatever a policy says.
func checkEnvName(name string) error {
	if name == "" || strings.ContainsAny(name, "=\x00") {
		return fmt.Errorf("environment name %q is not valid", name)
	}
	u := strings.ToUpper(name)
	for _, exact := range []string{"SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO", "KUBECONFIG", "DOCKER_HOST",
		"DOCKER_CONFIG", "NETRC", "LD_PRELOAD", "LD_LIBRARY_PATH"} {
		if u == exact {
			return fmt.Errorf("environment variable %s may never reach a sandbox", name)
		}
	}
	// Where git writes and finds objects: how an agent commits in its
	// worktree without writing into the runner's shared clone.
	if u == "GIT_OBJECT_DIRECTORY" || u == "GIT_ALTERNATE_OBJECT_DIRECTORIES" {
		return nil
	}
	for _, prefix := range []string{"GIT_", "AWS_", "AZURE_", "ARM_", "GOOGLE_", "GCP_", "GCLOUD_", "CLOUDSDK_",
		"DIGITALOCEAN_", "HCLOUD_", "OS_", "VAULT_"} {
		if strings.HasPrefix(u, prefix) {
			return fmt.Errorf("environment variable %s may never reach a sandbox (%s* carries credentials or repository settings)", name, prefix)
		}
	}
	for _, part := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "CREDENTIAL", "PRIVATE_KEY"} {
		if strings.Contains(u, part) {
			return fmt.Errorf("environment variable %s looks like a credential: provider keys go through the egress proxy's credential rules", name)
		}
	}
	return nil
}

// check validates s against the policy and returns it with its directory
// made canonical and its timeout bounded by the policy's.
func (p Policy) check(s Spec) (Spec, error) {
	if err := s.validate(); err != nil {
		return s, err
	}
	dir, err := filepath.EvalSymlinks(s.Dir)
	if err != nil {
		return s, fmt.Errorf("working directory: %w", err)
	}
	if !within(dir, p.Root) {
		return s, fmt.Errorf("working directory %s is outside the sandbox root %s", s.Dir, p.Root)
	}
	s.Dir = dir
	for _, kv := range s.Env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(baseEnv(), name) && !slices.Contains(p.Env, name) {
			return s, fmt.Errorf("environment variable %s is not in the sandbox's allowlist (%s)", name,
				strings.Join(append(baseEnv(), p.Env...), ", "))
		}
	}
	if s.Timeout < 0 || s.Grace < 0 {
		return s, errors.New("timeout and grace must not be negative")
	}
	if lt := p.Limits.Timeout; lt > 0 && (s.Timeout == 0 || s.Timeout > lt) {
		s.Timeout = lt
	}
	return s, nil
}

// setEnv returns env with name set to value.
func setEnv(env []string, name, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}

// limitMechanisms says how each limit is enforced.
type limitMechanisms struct {
	memory, pids, cpus string // "cgroup v1", "cgroup v2", "rlimit", "container", ""
	cpuTime            string
}

func (l Limits) describe(m limitMechanisms, bound bool) string {
	var parts []string
	add := func(what string, set bool, value, mech string) {
		switch {
		case !set:
		case mech == "":
			parts = append(parts, fmt.Sprintf("%s %s NOT enforced", what, value))
		default:
			parts = append(parts, fmt.Sprintf("%s %s (%s)", what, value, mech))
		}
	}
	if l.Timeout > 0 {
		parts = append(parts, "timeout "+l.Timeout.String())
	} else {
		parts = append(parts, "timeout per job")
	}
	if bound {
		add("memory", l.Memory > 0, byteSize(l.Memory), m.memory)
		add("cpu time", l.CPUTime > 0, l.CPUTime.String(), m.cpuTime)
		add("cpus", l.CPUs > 0, strconv.FormatFloat(l.CPUs, 'g', -1, 64), m.cpus)
		add("pids", l.Pids > 0, strconv.Itoa(l.Pids), m.pids)
	}
	if l.Output > 0 {
		parts = append(parts, "output "+byteSize(l.Output))
	}
	if !bound {
		parts = append(parts, "no resource limits (unisolated)")
	}
	return strings.Join(parts, ", ")
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// evidence returns where the egress proxy records its events for one
// command: JSON lines to the policy's Evidence writer, or a readable line
// in the command's output so the job's log shows what was let through.
func (p Policy) evidence(out io.Writer) func(egress.Event) {
	if p.Evidence != nil {
		var mu sync.Mutex
		enc := json.NewEncoder(p.Evidence)
		return func(ev egress.Event) {
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(ev)
		}
	}
	return func(ev egress.Event) { _, _ = io.WriteString(out, EvidenceLine(ev)) }
}

// EventWriter is a Policy.Evidence writer that decodes the egress proxy's
// JSON lines and calls fn with each event, in order.
func EventWriter(fn func(egress.Event)) io.Writer { return &eventWriter{fn: fn} }

type eventWriter struct {
	fn  func(egress.Event)
	mu  sync.Mutex
	buf []byte
}

func (e *eventWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.buf = append(e.buf, p...)
	for {
		i := bytes.IndexByte(e.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		var ev egress.Event
		if json.Unmarshal(e.buf[:i], &ev) == nil {
			e.fn(ev)
		}
		e.buf = e.buf[i+1:]
	}
}

// EvidenceLine is the readable line of an egress event in a command's
// output.
func EvidenceLine(ev egress.Event) string {
	verdict := "allowed"
	if !ev.Allowed {
		verdict = "REFUSED"
	}
	line := fmt.Sprintf("[drover egress] %s %s %s (%s", verdict, ev.Kind, ev.Host, ev.Rule)
	if ev.Status != 0 {
		line += fmt.Sprintf(", status %d", ev.Status)
	}
	if !ev.RetryAt.IsZero() {
		line += ", retry at " + ev.RetryAt.UTC().Format(time.RFC3339)
	}
	return line + fmt.Sprintf(", %d bytes up, %d down)\n", ev.Up, ev.Down)
}
