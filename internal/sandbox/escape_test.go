package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"drover/internal/sandbox/egress"
	"drover/internal/sandbox/sandboxtest"
)

// The escape suite: every attack an agent could try, run for real inside
// bubblewrap, in fix and observe mode. Each must fail, and the failure must
// show in the command's output or the egress evidence. Every "host" is a
// loopback listener.

// world is a runner's machine around one attempt: its home with a token,
// another job's worktree, a user's ssh key and a canary variable in the
// runner's environment.
type world struct {
	home, root, other string // runner home, this attempt's worktree, another's
	userHome          string
	token, sshKey     string
	canary            string
	exe               string // the test binary: the attacker's tools
}

func newWorld(t *testing.T) world {
	w := world{token: "drover-token-" + randomHex(8), sshKey: "ssh-key-" + randomHex(8), canary: "canary-" + randomHex(8)}
	base := t.TempDir()
	w.home = filepath.Join(base, "runner")
	w.root = filepath.Join(w.home, "work", "at-this")
	w.other = filepath.Join(w.home, "work", "at-other")
	w.userHome = filepath.Join(base, "user")
	for _, d := range []string{w.root, w.other, filepath.Join(w.userHome, ".ssh")} {
		must(t, os.MkdirAll(d, 0o700))
	}
	must(t, os.WriteFile(filepath.Join(w.home, "login.json"), []byte(`{"token":"`+w.token+`"}`), 0o600))
	must(t, os.WriteFile(filepath.Join(w.other, "secret.txt"), []byte("other job "+w.token), 0o600))
	must(t, os.WriteFile(filepath.Join(w.userHome, ".ssh", "id_ed25519"), []byte(w.sshKey), 0o600))
	must(t, os.WriteFile(filepath.Join(w.root, "existing.txt"), []byte("original\n"), 0o644))
	t.Setenv("HOME", w.userHome)
	t.Setenv("DROVER_CANARY", w.canary)
	exe, err := os.Executable()
	must(t, err)
	w.exe = exe
	return w
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// policy is the attempt's policy, with the attacker's tools mounted.
func (w world) policy(mode string) Policy {
	return Policy{Kind: KindBwrap, Mode: mode, Root: w.root, ReadOnly: []Mount{{Src: w.exe}}, Limits: DefaultLimits(), Logger: quiet()}
}

// secrets must never appear in anything a sandbox prints.
func (w world) secrets() []string { return []string{w.token, w.sshKey, w.canary} }

func (w world) noSecrets(t *testing.T, out string) {
	t.Helper()
	for _, s := range w.secrets() {
		if strings.Contains(out, s) {
			t.Fatalf("a secret leaked into the sandbox's output:\n%s", out)
		}
	}
}

func TestEscapes(t *testing.T) {
	for _, mode := range []string{ModeFix, ModeObserve} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t)
			// From the host, as a cloned repository could have it.
			must(t, os.Symlink(filepath.Join(w.home, "login.json"), filepath.Join(w.root, "leak-token")))
			must(t, os.Symlink("../../login.json", filepath.Join(w.root, "leak-relative")))
			must(t, os.Symlink(filepath.Join(w.userHome, ".ssh", "id_ed25519"), filepath.Join(w.root, "leak-ssh")))
			must(t, os.Symlink("/", filepath.Join(w.root, "leak-root")))
			suid := filepath.Join(w.root, "suid-id")
			id, err := os.ReadFile("/usr/bin/id")
			must(t, err)
			must(t, os.WriteFile(suid, id, 0o755))
			must(t, os.Chmod(suid, 0o4755))
			listener, accepted := sandboxtest.EchoListener(t)

			b, _ := box(t, w.policy(mode))
			attacks := []struct {
				name, script string
				want         []string // each must show in the output
				not          []string // none may
			}{
				{"read the runner token", "cat " + filepath.Join(w.home, "login.json"),
					[]string{"No such file or directory"}, nil},
				{"read the host's private keys and passwords", "cat /etc/shadow; ls /etc/ssl/private /root",
					[]string{"No such file or directory"}, []string{"root:"}},
				{"read the runner environment", "env; tr '\\0' '\\n' < /proc/1/environ; echo canary=$DROVER_CANARY",
					[]string{"canary=\n"}, []string{"DROVER_CANARY"}},
				{"read ~/.ssh", "cat $HOME/.ssh/id_ed25519 " + filepath.Join(w.userHome, ".ssh", "id_ed25519") + "; ls -A $HOME",
					[]string{"No such file or directory"}, nil},
				{"read another job's worktree", "cat " + filepath.Join(w.other, "secret.txt") + "; echo work: $(ls " + filepath.Dir(w.root) + ")",
					[]string{"No such file or directory", "work: at-this\n"}, nil},
				{"write outside the worktree", "for f in " + filepath.Join(w.home, "pwned") + " /usr/pwned /etc/pwned /pwned " +
					filepath.Join(w.userHome, "pwned") + "; do touch $f; done",
					[]string{"Read-only file system"}, nil},
				{"symlinks to the host", "cat leak-token leak-relative leak-ssh; touch leak-root/pwned; ls leak-root" + w.home,
					[]string{"No such file or directory", "Read-only file system"}, nil},
				{"setuid binary", "./suid-id -u; grep NoNewPrivs /proc/self/status",
					[]string{"1000\n", "NoNewPrivs:\t1"}, []string{"\n0\n"}},
				{"reach a listener on the host's loopback", w.exe + " attack connect " + listener,
					[]string{"connect failed", "connection refused"}, nil},
				{"gain privileges in a new user namespace", "unshare -r id || echo unshare refused",
					[]string{"unshare refused"}, nil},
			}
			if mode == ModeObserve {
				attacks = append(attacks, struct {
					name, script string
					want, not    []string
				}{"write in observe mode", "touch new.txt; echo changed >> existing.txt; rm existing.txt; mkdir d",
					[]string{"Read-only file system"}, nil})
			}
			for _, a := range attacks {
				t.Run(a.name, func(t *testing.T) {
					_, out := runIn(t, context.Background(), b, w.root, "sh", "-c", "cd "+w.root+"; "+a.script)
					t.Logf("%s:\n%s", a.name, out)
					w.noSecrets(t, out)
					for _, s := range a.want {
						if !strings.Contains(out, s) {
							t.Errorf("output lacks %q", s)
						}
					}
					for _, s := range a.not {
						if strings.Contains(out, s) {
							t.Errorf("output has %q", s)
						}
					}
				})
			}
			for _, p := range []string{filepath.Join(w.home, "pwned"), "/usr/pwned", "/etc/pwned", "/pwned", filepath.Join(w.userHome, "pwned")} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("the sandbox wrote %s", p)
				}
			}
			if accepted.Load() != 0 {
				t.Error("the host's loopback listener was reached")
			}
			b2, err := os.ReadFile(filepath.Join(w.root, "existing.txt"))
			if mode == ModeObserve && (err != nil || string(b2) != "original\n") {
				t.Errorf("observe mode changed the worktree: %q %v", b2, err)
			}
		})
	}
}

// In fix mode the worktree is the job's to change: the control for the
// observe-mode attack.
func TestFixModeWritesTheWorktree(t *testing.T) {
	w := newWorld(t)
	b, _ := box(t, w.policy(ModeFix))
	ex, out := runIn(t, context.Background(), b, w.root, "sh", "-c", "echo changed >> existing.txt && touch new.txt && echo ok")
	if ex.Code != 0 || out != "ok\n" {
		t.Fatalf("exit %+v: %s", ex, out)
	}
	if b, _ := os.ReadFile(filepath.Join(w.root, "existing.txt")); string(b) != "original\nchanged\n" {
		t.Fatalf("worktree: %q", b)
	}
}

func TestForkBombIsBounded(t *testing.T) {
	for _, mode := range []string{ModeFix, ModeObserve} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t)
			p := w.policy(mode)
			p.Limits.Pids = 32 // small: the test machine must survive
			b, _ := box(t, p)
			if strings.Contains(b.Describe().Limits, "NOT enforced") {
				t.Skipf("the process limit cannot be enforced here: %s", b.Describe().Limits)
			}
			var out sandboxtest.Buffer
			proc := startIn(t, context.Background(), b, w.root, &out, "sh", "-c", `bomb() { bomb | bomb & }; bomb; sleep 1000`)
			sandboxtest.WaitFor(t, "the bomb to hit the limit", func() bool {
				s := out.String()
				return strings.Contains(s, "fork") || strings.Contains(s, "Resource temporarily unavailable")
			})
			proc.Stop()
			if _, err := proc.Wait(); err != nil {
				t.Fatal(err)
			}
			t.Logf("the bomb said: %.300s", out.String())
		})
	}
}

func TestTenGigabytesOfOutputAreCapped(t *testing.T) {
	for _, mode := range []string{ModeFix, ModeObserve} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t)
			p := w.policy(mode)
			p.Limits.Output = 64 << 10
			b, _ := box(t, p)
			var out sandboxtest.Buffer
			proc := startIn(t, context.Background(), b, w.root, &out, "sh", "-c", "head -c 10000000000 /dev/zero")
			marker := string(truncationMarker(p.Limits.Output))
			// The test stops at the marker instead of waiting for 10 GB.
			sandboxtest.WaitFor(t, "the truncation marker", func() bool { return strings.Contains(out.String(), marker) })
			proc.Stop()
			if _, err := proc.Wait(); err != nil {
				t.Fatal(err)
			}
			if s := out.String(); len(s) != 64<<10 || !strings.HasSuffix(s, marker) {
				t.Fatalf("kept %d bytes ending %q", len(s), s[max(0, len(s)-100):])
			}
		})
	}
}

func TestDaemonDoesNotSurviveCancel(t *testing.T) {
	for i, mode := range []string{ModeFix, ModeObserve} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t)
			b, _ := box(t, w.policy(mode))
			var out sandboxtest.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			daemon := fmt.Sprintf("sleep 98700%d", i)
			// Double fork, new session, SIGTERM and SIGHUP ignored: the
			// classic way to outlive whoever started you.
			proc := startIn(t, ctx, b, w.root, &out, "sh", "-c",
				`(trap "" TERM HUP; setsid sh -c 'trap "" TERM HUP; exec `+daemon+`' &) ; echo started; exec sleep 1000`)
			sandboxtest.WaitFor(t, "the daemon", func() bool { return len(hostPids(daemon)) == 1 })
			pid := hostPids(daemon)[0]
			cancel()
			ex, err := proc.Wait()
			if err != nil || !ex.Stopped {
				t.Fatalf("exit %+v, %v", ex, err)
			}
			if sandboxtest.Alive(pid) {
				t.Fatal("the daemon survived the cancel")
			}
		})
	}
}

// upstream is a fake model provider: it records the key each request
// carried and answers without echoing it.
type upstream struct {
	mu   sync.Mutex
	keys []string
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.keys = append(u.keys, r.Header.Get("x-api-key"))
	u.mu.Unlock()
	io.WriteString(w, `{"reply":"hello from the model"}`)
}

func (u *upstream) got() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.keys...)
}

func TestEgressThroughTheProxyOnly(t *testing.T) {
	for _, mode := range []string{ModeFix, ModeObserve} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t)
			allowed := httpHost(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "allowed host") }))
			denied, deniedHits := sandboxtest.EchoListener(t)
			echo, _ := sandboxtest.EchoListener(t)
			model := &upstream{}
			modelURL := httpHost(t, "127.0.0.1", model)
			const realKey = "sk-real-key-never-inside-0123456789"

			var evidence sandboxtest.Buffer
			p := w.policy(mode)
			p.Evidence = &evidence
			p.Network = Network{
				Allow: []string{allowed, echo},
				Credentials: []egress.Credential{{Name: "fake", Upstream: "http://" + modelURL, Header: "x-api-key", Key: realKey,
					KeyEnv: "FAKE_API_KEY", BaseURLEnv: "FAKE_BASE_URL"}},
			}
			b, _ := box(t, p)
			if d := b.Describe(); d.Network != "egress proxy (3 rules)" {
				t.Fatalf("network = %q", d.Network)
			}
			script := strings.Join([]string{
				"env | sort",
				w.exe + " attack proxy-get http://" + allowed + "/",
				w.exe + " attack proxy-connect " + echo,
				w.exe + " attack proxy-get http://" + denied + "/",
				w.exe + " attack proxy-connect " + denied,
				w.exe + " attack connect " + allowed, // around the proxy
				w.exe + ` attack get "$FAKE_BASE_URL/v1/messages" "x-api-key: $FAKE_API_KEY"`,
				w.exe + ` attack get "$FAKE_BASE_URL/v1/messages"`,
				w.exe + ` attack get "$FAKE_BASE_URL/v1/messages" "x-api-key: ` + realKey[:10] + `"`,
			}, "; echo; ")
			_, out := runIn(t, context.Background(), b, w.root, "sh", "-c", script)
			t.Logf("inside:\n%s\nevidence:\n%s", out, evidence.String())
			w.noSecrets(t, out)
			if strings.Contains(out, realKey) {
				t.Fatal("the real key reached the sandbox")
			}
			for _, want := range []string{
				"HTTP_PROXY=http://" + ProxyAddr, "FAKE_API_KEY=drover-placeholder-", "FAKE_BASE_URL=http://127.0.0.1:3129",
				"status 200: allowed host",
				`tunnel echoed "ping\n"`,
				`status 403: {"error":"egress_denied","rule":"allowlist","host":"` + denied,
				"CONNECT refused: 403 drover's egress proxy refused " + denied, // the status line says why
				"connect failed",
				`status 200: {"reply":"hello from the model"}`,
				`status 401: {"error":"credential_refused"`,
			} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q", want)
				}
			}
			if deniedHits.Load() != 0 {
				t.Error("the denied host was reached")
			}
			if keys := model.got(); len(keys) != 1 || keys[0] != realKey {
				t.Errorf("the model server got keys %q, want only the real one, once", keys)
			}
			var evs []egress.Event
			dec := json.NewDecoder(bytes.NewReader([]byte(evidence.String())))
			for dec.More() {
				var ev egress.Event
				must(t, dec.Decode(&ev))
				evs = append(evs, ev)
			}
			var allowedN, refusedN int
			for _, ev := range evs {
				if ev.Allowed && ev.Status == 200 {
					allowedN++
				} else {
					refusedN++
				}
			}
			if allowedN != 3 || refusedN != 4 {
				t.Errorf("evidence: %d allowed, %d refused, want 3 and 4: %+v", allowedN, refusedN, evs)
			}
		})
	}
}

// httpHost serves h on a loopback address and returns host:port.
func httpHost(t *testing.T, ip string, h http.Handler) string {
	l, err := net.Listen("tcp", ip+":0")
	must(t, err)
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}
