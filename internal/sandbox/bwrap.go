package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	bwrapInstallFix = "install it (apt-get install bubblewrap, or dnf install bubblewrap), or run the runner with --sandbox none to run jobs unisolated"
	userNSFix       = "user namespaces are not available to the runner's user: enable them (Debian: sysctl kernel.unprivileged_userns_clone=1; " +
		"Ubuntu 24.04: sysctl kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap; everywhere: user.max_user_namespaces > 0), " +
		"or run the runner with --sandbox none to run jobs unisolated"
	sandboxUID   = 1000 // who a root runner's commands are inside the sandbox: never root
	defaultTmpfs = 1 << 30
	probeTimeout = 30 * time.Second // a check outside any job: bwrap that hangs fails it
)

// bwrapBox runs each command in fresh namespaces with bubblewrap.
type bwrapBox struct {
	p           Policy
	bin         string
	version     string
	modern      bool // 0.8 or later: --disable-userns, --size
	uid, gid    int  // inside
	base        []string
	passwd      []byte
	group       []byte
	cg          cgroupParents
	mech        limitMechanisms
	placeholder string
}

// bwrapHost is what a boundary needs to know of the machine's bubblewrap,
// learnt once.
type bwrapHost struct {
	bin     string
	version string
	modern  bool
}

func checkBwrap(ctx context.Context) (bwrapHost, error) {
	bin, err := exec.LookPath("bwrap")
	if err != nil {
		return bwrapHost{}, &FixError{Problem: "bubblewrap (bwrap) is not installed", Fix: bwrapInstallFix}
	}
	version, modern, err := bwrapVersion(ctx, bin)
	if err != nil {
		return bwrapHost{}, err
	}
	return bwrapHost{bin: bin, version: version, modern: modern}, nil
}

func newBwrap(ctx context.Context, p Policy) (Boundary, error) {
	h, err := checkBwrap(ctx)
	if err != nil {
		return nil, err
	}
	return h.boundary(ctx, p, probeTimeout)
}

// boundary builds p's boundary and runs `true` in it; a positive timeout
// bounds that probe, otherwise ctx alone does.
func (h bwrapHost) boundary(ctx context.Context, p Policy, timeout time.Duration) (*bwrapBox, error) {
	b := &bwrapBox{p: p, bin: h.bin, version: h.version, modern: h.modern, uid: os.Getuid(), gid: os.Getgid()}
	if b.uid == 0 {
		b.uid = sandboxUID
	}
	if b.gid == 0 {
		b.gid = sandboxUID
	}
	b.passwd = fmt.Appendf(nil, "root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:%d:%d:drover sandbox:%s:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		b.uid, b.gid, Home)
	b.group = fmt.Appendf(nil, "root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", b.gid)
	b.cg, b.mech = limitsOf(p)
	if b.mech.pids == "" && p.Limits.Pids > 0 {
		p.Logger.Warn("the sandbox's process limit is NOT enforced: the runner runs as root, which RLIMIT_NPROC exempts, and no pids cgroup is writable; run the runner as another user or give it a cgroup")
	}
	b.base = b.baseArgs()
	if err := b.probe(ctx, timeout); err != nil {
		return nil, err
	}
	if len(p.Network.Credentials) > 0 {
		b.placeholder = "drover-placeholder-" + randomHex(16)
	}
	return b, nil
}

// limitsOf decides how each limit is enforced: a cgroup where one is
// writable (pids, memory, cpu), else an rlimit where one exists.
func limitsOf(p Policy) (cgroupParents, limitMechanisms) {
	var want []string
	l := p.Limits
	if l.Pids > 0 {
		want = append(want, "pids")
	}
	if l.Memory > 0 {
		want = append(want, "memory")
	}
	if l.CPUs > 0 {
		want = append(want, "cpu")
	}
	cg := findCgroups(want)
	m := limitMechanisms{pids: cg.mechanism("pids"), memory: cg.mechanism("memory"), cpus: cg.mechanism("cpu"), cpuTime: "rlimit"}
	if m.memory == "" {
		m.memory = "rlimit on address space"
	}
	if m.pids == "" && os.Getuid() != 0 { // the kernel exempts root from RLIMIT_NPROC
		m.pids = "rlimit"
	}
	return cg, m
}

func bwrapVersion(ctx context.Context, bin string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "", false, &FixError{Problem: fmt.Sprintf("%s --version failed: %v", bin, err), Fix: bwrapInstallFix}
	}
	v := strings.TrimSpace(string(out)) // "bubblewrap 0.8.0"
	f := strings.Fields(v)
	if len(f) != 2 {
		return v, false, nil
	}
	parts := strings.Split(f[1], ".")
	major, _ := strconv.Atoi(parts[0])
	minor := 0
	if len(parts) > 1 {
		minor, _ = strconv.Atoi(parts[1])
	}
	return v, major > 0 || minor >= 8, nil
}

// systemDirs are the host's top-level system directories, read-only.
func systemDirs() []string { return []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} }

// etcFiles are what programs need of /etc; the rest of it stays outside
// (passwd and group are the sandbox's own). Certificates, never the private
// keys beside them: commands of a root runner are uid 0 to the host's
// permission checks, so only what is mounted protects a root-only file.
func etcFiles() []string {
	return []string{"/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf",
		"/etc/protocols", "/etc/services", "/etc/localtime", "/etc/timezone", "/etc/mime.types", "/etc/os-release",
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
		"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/ca-certificates.conf",
		"/etc/pki/ca-trust", "/etc/pki/tls/certs", "/etc/pki/tls/openssl.cnf", "/etc/crypto-policies",
		"/etc/shells", "/etc/bash.bashrc", "/etc/profile"}
}

// baseArgs are the arguments every command of this boundary shares.
func (b *bwrapBox) baseArgs() []string {
	a := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net",
		"--uid", strconv.Itoa(b.uid), "--gid", strconv.Itoa(b.gid), "--hostname", "sandbox",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
	}
	if b.modern {
		a = append(a, "--disable-userns")
	}
	a = append(a, "--ro-bind", "/usr", "/usr")
	for _, d := range systemDirs() {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, f := range etcFiles() {
		a = append(a, "--ro-bind-try", f, f)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	size := int64(defaultTmpfs)
	if b.p.Limits.Memory > 0 {
		size = b.p.Limits.Memory
	}
	for _, d := range []string{"/tmp", Home} {
		if b.modern {
			a = append(a, "--size", strconv.FormatInt(size, 10))
		}
		a = append(a, "--tmpfs", d)
	}
	for _, m := range b.p.ReadOnly {
		a = append(a, "--ro-bind", m.Src, m.Dst)
	}
	for _, m := range b.p.ReadWrite {
		a = append(a, "--bind", m.Src, m.Dst)
	}
	if b.p.Mode == ModeObserve {
		a = append(a, "--ro-bind", b.p.Root, b.p.Root)
	} else {
		a = append(a, "--bind", b.p.Root, b.p.Root)
	}
	return a
}

// visible reports whether the host path p (canonical) is seen at the same
// path inside the sandbox.
func (b *bwrapBox) visible(p string) bool {
	for _, d := range append(systemDirs(), "/usr", b.p.Root) {
		if within(p, d) {
			return true
		}
	}
	for _, m := range append(slices.Clone(b.p.ReadOnly), b.p.ReadWrite...) {
		if m.Src == m.Dst && within(p, m.Src) {
			return true
		}
	}
	return false
}

// args is the whole bwrap command line for command run in dir. The
// passwd and group data are on fds 3 and 4; with control, bwrap writes its
// info on fd 5 and waits on fd 6 before running the command.
func (b *bwrapBox) args(dir string, bridge *bridgePlan, control bool, command []string) []string {
	a := append([]string{"bwrap"}, b.base...)
	a = append(a, "--ro-bind-data", "3", "/etc/passwd", "--ro-bind-data", "4", "/etc/group")
	if control {
		a = append(a, "--info-fd", "5", "--block-fd", "6")
	}
	if bridge != nil {
		a = append(a, "--ro-bind", bridge.dir, runDir)
		for _, bind := range bridge.binds {
			a = append(a, "--ro-bind", bind[0], bind[1])
		}
		command = append(slices.Clone(bridge.init), command...)
	}
	a = append(a, "--remount-ro", "/", "--chdir", dir, "--")
	return append(a, command...)
}

// dataFiles returns pipes that hold the sandbox's passwd and group.
func (b *bwrapBox) dataFiles() ([]*os.File, error) {
	var files []*os.File
	for _, data := range [][]byte{b.passwd, b.group} {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(files)
			return nil, fmt.Errorf("make a pipe for bwrap: %w", err)
		}
		_, err = w.Write(data) // fits in the pipe's buffer
		w.Close()
		files = append(files, r)
		if err != nil {
			closeAll(files)
			return nil, fmt.Errorf("write bwrap's data: %w", err)
		}
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// probe runs `true` in a sandbox like the real ones, so that a machine
// where bwrap cannot work fails at New with the fix, not at the first job.
func (b *bwrapBox) probe(ctx context.Context, timeout time.Duration) error {
	tru, err := lookPath("true", []string{"PATH=/usr/bin:/bin"}, "/", b.visible)
	if err != nil {
		return fmt.Errorf("check bubblewrap: %w", err)
	}
	files, err := b.dataFiles()
	if err != nil {
		return err
	}
	defer closeAll(files)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	args := b.args(b.p.Root, nil, false, []string{tru})
	cmd := exec.CommandContext(ctx, b.bin, args[1:]...)
	cmd.Env = []string{}
	cmd.ExtraFiles = files
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(string(out))
	for _, sign := range []string{"namespace", "uid map", "Operation not permitted", "Permission denied"} {
		if strings.Contains(msg, sign) {
			return &FixError{Problem: "bubblewrap cannot make a sandbox here: " + msg, Fix: userNSFix}
		}
	}
	return &FixError{Problem: fmt.Sprintf("bubblewrap cannot make a sandbox here: %v: %s", err, msg),
		Fix: "see `drover runner doctor`, or run the runner with --sandbox none to run jobs unisolated"}
}

func (b *bwrapBox) Describe() Isolation {
	fs := fmt.Sprintf("worktree read-write (%s)", b.p.Mode)
	if b.p.Mode == ModeObserve {
		fs = "worktree read-only (observe)"
	}
	fs += "; system dirs read-only; private /tmp and home"
	if n := len(b.p.ReadOnly); n > 0 {
		fs += fmt.Sprintf("; %d read-only mount(s)", n)
	}
	if n := len(b.p.ReadWrite); n > 0 {
		fs += fmt.Sprintf("; %d read-write mount(s)", n)
	}
	return Isolation{
		Kind:       KindBwrap,
		Version:    b.version,
		Network:    networkOf(b.p),
		Filesystem: fs,
		User:       fmt.Sprintf("uid %d → %d in a user namespace; no capabilities, no new privileges", os.Getuid(), b.uid),
		Limits:     b.p.Limits.describe(b.mech, true),
	}
}

func networkOf(p Policy) string {
	n := "none (loopback only)"
	switch {
	case p.Network.Open:
		n = "OPEN: every host, through the egress proxy"
	case p.Network.enabled():
		n = fmt.Sprintf("egress proxy (%d rules)", len(p.Network.Allow)+len(p.Network.Credentials))
	}
	if p.Network.Policy != "" {
		n += ", policy " + p.Network.Policy
	}
	if k := len(p.Sockets); k > 0 {
		n += fmt.Sprintf(", %d bridged socket(s)", k)
	}
	return n
}

func (b *bwrapBox) Start(ctx context.Context, s Spec) (Process, error) {
	s, err := b.p.check(s)
	if err != nil {
		return nil, err
	}
	if _, err := lookPath(s.Argv[0], s.Env, s.Dir, b.visible); err != nil {
		return nil, err
	}
	out := newCapWriter(s.Output, b.p.Limits.Output)
	env := setEnv(s.Env, "HOME", Home)
	var bridge *bridgePlan
	if b.p.bridged() {
		if bridge, err = b.p.bridge(b.placeholder, out); err != nil {
			return nil, err
		}
		env = append(env, bridge.env...)
	}
	res := &nsTree{log: b.p.Logger}
	if bridge != nil {
		res.cleanup = append(res.cleanup, bridge.close)
	}
	fail := func(err error) (Process, error) {
		res.release()
		return nil, err
	}
	var cg *cgroup
	if len(b.cg.dirs) > 0 {
		if cg, err = b.cg.create(b.p.Limits); err != nil {
			return fail(err)
		}
		res.cleanup = append(res.cleanup, cg.remove)
	}
	fds, err := b.controlFiles()
	if err != nil {
		return fail(err)
	}
	// Closes our ends once Start is done: on failure bwrap has been
	// reaped by then, and the block fd must stay open until it is, since
	// EOF on it would let the command run.
	defer fds.close()
	cmd := &exec.Cmd{Path: b.bin, Args: b.args(s.Dir, bridge, true, s.Argv), Env: env, ExtraFiles: fds.child}
	if cg != nil && b.cg.version == 2 {
		// Born in the cgroup (CLONE_INTO_CGROUP): no migration to wait for.
		dir, err := os.Open(cg.dirs[0])
		if err != nil {
			return fail(fmt.Errorf("open the sandbox's cgroup: %w", err))
		}
		defer dir.Close()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
		cg = nil // nothing left to attach
	}
	p, err := start(ctx, launch{cmd: cmd, timeout: s.Timeout, grace: s.Grace, out: out, wrapped: true,
		setup: func(pid int) (tree, error) {
			closeAll(fds.child)
			res.outer = pid
			if err := res.enter(fds.infoR, cg, b.rlimits()); err != nil {
				res.kill()
				return nil, err
			}
			if _, err := fds.blockW.Write([]byte{1}); err != nil {
				res.kill()
				return nil, fmt.Errorf("start the sandboxed command: %w", err)
			}
			return res, nil
		}})
	if err != nil {
		return fail(err)
	}
	return p, nil
}

// controlFiles are the pipes of one bwrap call. bwrap gets child as fds 3
// to 6: passwd and group data, then its info (written to us) and block fd
// (it waits for a byte from us before running the command).
type controlFiles struct {
	child         []*os.File
	infoR, blockW *os.File
}

func (b *bwrapBox) controlFiles() (*controlFiles, error) {
	files, err := b.dataFiles()
	if err != nil {
		return nil, err
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		closeAll(files)
		return nil, fmt.Errorf("make a pipe for bwrap: %w", err)
	}
	blockR, blockW, err := os.Pipe()
	if err != nil {
		closeAll(append(files, infoR, infoW))
		return nil, fmt.Errorf("make a pipe for bwrap: %w", err)
	}
	return &controlFiles{child: append(files, infoW, blockR), infoR: infoR, blockW: blockW}, nil
}

// close closes every end still open; closing twice is harmless.
func (c *controlFiles) close() { closeAll(append(c.child, c.infoR, c.blockW)) }

type rlimit struct {
	resource int
	value    uint64
}

// rlimits are the limits no cgroup enforces, set on the sandbox's first
// process before it runs anything, so every process inherits them.
func (b *bwrapBox) rlimits() []rlimit {
	l := b.p.Limits
	rl := []rlimit{{unix.RLIMIT_CORE, 0}} // no core dumps of the job in its worktree
	if l.Memory > 0 && !strings.HasPrefix(b.mech.memory, "cgroup") {
		rl = append(rl, rlimit{unix.RLIMIT_AS, uint64(l.Memory)})
	}
	if l.CPUTime > 0 {
		rl = append(rl, rlimit{unix.RLIMIT_CPU, uint64((l.CPUTime + time.Second - 1) / time.Second)})
	}
	if l.Pids > 0 && b.mech.pids == "rlimit" {
		rl = append(rl, rlimit{unix.RLIMIT_NPROC, uint64(l.Pids)})
	}
	return rl
}

// nsTree is a sandbox's process tree: everything in its pid namespace,
// which ends when its pid 1 does.
type nsTree struct {
	outer   int // bwrap, in its own process group
	pid1    int // the sandbox's pid 1, as the host sees it
	pidfd   int // of pid1; -1 when unknown
	ns      [2]uint64
	cleanup []func() error
	log     interface{ Warn(string, ...any) }
}

// enter learns the sandbox's pid 1 from bwrap's info and, while bwrap
// waits on its block fd, puts it in its cgroup and sets its rlimits: every
// process of the command is born inside both.
func (t *nsTree) enter(info io.Reader, cg *cgroup, limits []rlimit) error {
	t.pidfd = -1
	var st struct {
		ChildPid int `json:"child-pid"`
	}
	b, err := io.ReadAll(io.LimitReader(info, 64<<10))
	if err != nil || json.Unmarshal(b, &st) != nil || st.ChildPid <= 0 {
		return fmt.Errorf("bubblewrap did not start the sandbox (info %q, %v)", b, err)
	}
	t.pid1 = st.ChildPid
	fd, err := unix.PidfdOpen(t.pid1, 0)
	if err != nil {
		return fmt.Errorf("watch the sandbox's pid 1: %w", err)
	}
	t.pidfd = fd
	if t.ns, err = pidNS(t.pid1); err != nil {
		return err
	}
	if cg != nil {
		if err := cg.attach(t.pid1); err != nil {
			return err
		}
	}
	for _, l := range limits {
		v := unix.Rlimit{Cur: l.value, Max: l.value}
		if err := unix.Prlimit(t.pid1, l.resource, &v, nil); err != nil {
			return fmt.Errorf("set the sandbox's limits: %w", err)
		}
	}
	return nil
}

func pidNS(pid int) ([2]uint64, error) {
	fi, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return [2]uint64{}, fmt.Errorf("find the sandbox's pid namespace: %w", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return [2]uint64{st.Dev, st.Ino}, nil
}

// members lists the host pids of the processes in the sandbox's pid
// namespace, pid 1 excepted.
func (t *nsTree) members() []int {
	if t.pid1 == 0 {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == t.pid1 {
			continue
		}
		if ns, err := pidNS(pid); err == nil && ns == t.ns {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (t *nsTree) signal(sig unix.Signal) {
	if t.pid1 == 0 {
		_ = unix.Kill(-t.outer, sig)
		return
	}
	for _, pid := range t.members() {
		_ = unix.Kill(pid, sig) // ESRCH: gone meanwhile
	}
}

// kill ends the pid namespace: when its pid 1 dies the kernel kills every
// process in it, daemons that left the session included.
func (t *nsTree) kill() {
	if t.pidfd >= 0 {
		_ = unix.PidfdSendSignal(t.pidfd, unix.SIGKILL, nil, 0)
	}
	if t.outer > 0 {
		_ = unix.Kill(-t.outer, unix.SIGKILL)
	}
}

func (t *nsTree) release() {
	t.kill()
	if t.pidfd >= 0 {
		// pid 1 exits only once the kernel has emptied its namespace.
		fds := []unix.PollFd{{Fd: int32(t.pidfd), Events: unix.POLLIN}}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			n, err := unix.Poll(fds, 1000)
			if n > 0 || (err != nil && !errors.Is(err, syscall.EINTR)) {
				break
			}
		}
		unix.Close(t.pidfd)
		t.pidfd = -1
	}
	for i := len(t.cleanup) - 1; i >= 0; i-- {
		if err := t.cleanup[i](); err != nil {
			t.log.Warn("sandbox cleanup", "err", err)
		}
	}
	t.cleanup = nil
}
