package repo

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/testkit"
)

// registryToken is the private registry's token: the hub's operator has
// it, the proxy adds it, no sandbox, log or view ever shows it (the test's
// commands spell it in two halves so that their echo does not).
const registryToken = "reg-token-5f1c9a7e3b"

// projectToken is a project secret: its owner set it for the registry, the
// proxy adds it in X-Registry-Token, nothing else ever shows it.
const projectToken = "prj-token-8a2c4d6f1e"

// fakeRegistry is a package registry on loopback: it serves one package and
// logs what it was asked for, with the Authorization header it got.
type fakeRegistry struct {
	addr string
	mu   sync.Mutex
	log  []string
}

// startRegistry listens on 127.0.0.2, which is not the sandbox's own
// loopback (127.0.0.1, ::1 and localhost bypass the proxy inside).
func startRegistry(t *testing.T) *fakeRegistry {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine: %v", err)
	}
	reg := &fakeRegistry{addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := r.URL.Path + " auth=" + r.Header.Get("Authorization")
		if tok := r.Header.Get("X-Registry-Token"); tok != "" {
			line += " token=" + tok
		}
		reg.mu.Lock()
		reg.log = append(reg.log, line)
		reg.mu.Unlock()
		switch {
		case r.URL.Path == "/echo":
			// A debugging endpoint: it reflects the request's headers in
			// its own and in its body, as sent and base64-encoded.
			for k, vs := range r.Header {
				for _, v := range vs {
					w.Header().Add("X-Echo-"+k, v)
				}
			}
			for k, vs := range r.Header {
				for _, v := range vs {
					fmt.Fprintf(w, "ECHO %s: %s (%s)\n", k, v, base64.StdEncoding.EncodeToString([]byte("u:"+v)))
				}
			}
		case r.URL.Path == "/pkg/big.tgz":
			w.Write(make([]byte, 32<<20))
		case r.URL.Path == "/pkg/left-pad-1.0.tgz":
			fmt.Fprint(w, "LEFT-PAD-PACKAGE-1.0\n")
		case r.URL.Path == "/private/secret-lib.tgz" && r.Header.Get("Authorization") == "Bearer "+registryToken:
			fmt.Fprint(w, "SECRET-LIB-PACKAGE\n")
		case r.URL.Path == "/private/secret-lib.tgz":
			http.Error(w, "no token", http.StatusUnauthorized)
		case r.URL.Path == "/project/own-lib.tgz" && r.Header.Get("X-Registry-Token") == projectToken:
			fmt.Fprint(w, "OWN-LIB-PACKAGE\n")
		default:
			http.NotFound(w, r)
		}
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return reg
}

// downloads lists the requests for path.
func (r *fakeRegistry) downloads(path string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.log {
		if strings.HasPrefix(l, path+" ") {
			out = append(out, l)
		}
	}
	return out
}

// A project's owner picks operator-defined policies: setup fetches a
// package from a registry under the setup policy into the project's cache;
// the agent, under a policy without the registry, is refused with a
// structured denial that drover show lists with its allow command; the
// next job reuses the cache (no second download), another project's job
// cannot see it, and --network none leaves the agent no network at all.
func TestNetworkPoliciesSetupAndCaches(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t)
	cfg := filepath.Join(t.TempDir(), "hub.json")
	keyFile := filepath.Join(t.TempDir(), "registry.token")
	if err := os.WriteFile(keyFile, []byte(registryToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	policies := fmt.Sprintf(`{"network": {"policies": {"registry": [%q], "docs": ["docs.example.org"]}},
		"credentials": {"private": {"policy": "registry", "upstream": "http://%s", "header": "Authorization", "prefix": "Bearer ",
			"key_file": %q, "key_env": "PRIVATE_REGISTRY_KEY", "base_url_env": "PRIVATE_REGISTRY_URL"}}}`, reg.addr, reg.addr, keyFile)
	if err := os.WriteFile(cfg, []byte(policies), 0o600); err != nil {
		t.Fatal(err)
	}
	h := testkit.StartHub(t, bin, "--config", cfg)
	alice, bob := h.AddUser(t, "alice"), h.AddUser(t, "bob")
	// The operator's registry credential reaches only an admin's runner:
	// alice's jobs run on one shared hub-wide.
	r := h.StartRunner(t, "r1")
	e2ekit.Must(t, h.CLI, "runners", "share", "r1", "--hub-wide")
	c := alice.Client()
	wait := func(id string) apitypes.JobView {
		t.Helper()
		return testkit.WaitJob(t, c, id, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	}

	// The first push makes alice the owner of project web.
	web := e2ekit.Checkout(t, "web")
	first := e2ekit.RunWith(t, alice.CLI, "--repo", web, "--agent", "exec", "--", "true")
	if v := wait(first.ID); v.State != job.Completed {
		t.Fatalf("first job ended %s (%s)", v.State, v.Reason)
	}

	// Bad choices are refused and change nothing.
	for _, bad := range [][]string{
		{"projects", "network", "web", "--agent", "nope"},
		{"projects", "network", "web", "--agent", "open"},
		{"projects", "network", "web", "--agent", "registry,none"},
		{"projects", "caches", "web", "../up"},
	} {
		e2ekit.Refused(t, alice.CLI, bad...)
	}
	e2ekit.Must(t, alice.CLI, "projects", "members", "add", "web", "bob")
	if out := e2ekit.Refused(t, bob.CLI, "projects", "network", "web", "--agent", "registry"); !strings.Contains(out, "owner") {
		t.Fatalf("a member who is not the owner: %s", out)
	}

	url := "http://" + reg.addr + "/pkg/left-pad-1.0.tgz"
	e2ekit.Must(t, alice.CLI, "projects", "network", "web", "--setup", "registry", "--agent", "docs")
	e2ekit.Must(t, alice.CLI, "projects", "caches", "web", "deps")
	// A project secret: only its owner sets or sees it, its value read
	// from a file.
	valueFile := filepath.Join(t.TempDir(), "own.token")
	if err := os.WriteFile(valueFile, []byte(projectToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := []string{"projects", "secrets", "set", "web", "own", "--host", "http://" + reg.addr, "--header", "X-Registry-Token",
		"--value-file", valueFile}
	e2ekit.Refused(t, bob.CLI, secret...)
	e2ekit.Refused(t, bob.CLI, "projects", "secrets", "list", "web")
	e2ekit.Must(t, alice.CLI, secret...)
	if out := e2ekit.Must(t, alice.CLI, "projects", "secrets", "list", "web"); !strings.Contains(out, "$DROVER_SECRET_OWN_URL") ||
		strings.Contains(out, projectToken) {
		t.Fatalf("projects secrets list:\n%s", out)
	}
	e2ekit.Must(t, alice.CLI, "projects", "setup", "web", "--timeout", "1m", "--key-file", "go.sum", "--command",
		`test -s "$DROVER_CACHE_DIR/deps/left-pad.tgz" || curl -sf -o "$DROVER_CACHE_DIR/deps/left-pad.tgz" `+url,
		"--command", `curl -sf -H "Authorization: Bearer $PRIVATE_REGISTRY_KEY" -o "$DROVER_CACHE_DIR/deps/secret-lib.tgz" `+
			`"$PRIVATE_REGISTRY_URL/private/secret-lib.tgz" && cat "$DROVER_CACHE_DIR/deps/secret-lib.tgz"`,
		"--command", `curl -sf -H "X-Registry-Token: $DROVER_SECRET_OWN" -o "$DROVER_CACHE_DIR/deps/own-lib.tgz" `+
			`"$DROVER_SECRET_OWN_URL/project/own-lib.tgz" && cat "$DROVER_CACHE_DIR/deps/own-lib.tgz"`,
		"--command", `env | sort; grep -rlF -e "$(printf %s%s `+registryToken[:6]+` `+registryToken[6:]+`)" `+
			`-e "$(printf %s%s `+projectToken[:6]+` `+projectToken[6:]+`)" "$HOME" /tmp . "$DROVER_CACHE_DIR" || echo TOKEN-NOT-IN-FILES`)
	out := e2ekit.Must(t, alice.CLI, "projects", "config", "web")
	for _, want := range []string{"Setup network:", "registry", "Agent network:", "docs", "deps", reg.addr} {
		if !strings.Contains(out, want) {
			t.Fatalf("projects config lacks %q:\n%s", want, out)
		}
	}

	agent := `cat "$DROVER_CACHE_DIR/deps/left-pad.tgz"; curl -s ` + url + `; echo`
	j1 := e2ekit.RunWith(t, alice.CLI, "--repo", web, "--agent", "exec", "--", "sh", "-c", agent)
	v1 := wait(j1.ID)
	log1 := testkit.Log(t, c, j1.ID, 0)
	if v1.State != job.Completed || !strings.Contains(log1, "=== drover setup: 4 command(s), network registry") ||
		!strings.Contains(log1, "=== drover setup done ===") || !strings.Contains(log1, "LEFT-PAD-PACKAGE-1.0") {
		t.Fatalf("job 1 ended %s (%s):\n%s", v1.State, v1.Reason, log1)
	}
	// The private registry's token: added by the proxy, seen by the
	// registry, never in the sandbox's environment, files or log.
	if !strings.Contains(log1, "SECRET-LIB-PACKAGE") || !strings.Contains(log1, "PRIVATE_REGISTRY_KEY=drover-placeholder-") ||
		!strings.Contains(log1, "OWN-LIB-PACKAGE") || !strings.Contains(log1, "DROVER_SECRET_OWN=drover-placeholder-") ||
		!strings.Contains(log1, "TOKEN-NOT-IN-FILES") || strings.Contains(log1, registryToken) || strings.Contains(log1, projectToken) {
		t.Fatalf("job 1's setup and the private registry:\n%s", log1)
	}
	if got := reg.downloads("/private/secret-lib.tgz"); len(got) != 1 || got[0] != "/private/secret-lib.tgz auth=Bearer "+registryToken {
		t.Fatalf("private registry log = %q", got)
	}
	// The agent's own request was refused, with a message that says why
	// and how to widen it.
	if !strings.Contains(log1, `"egress_denied"`) || !strings.Contains(log1, `"policy":"agent: docs"`) ||
		!strings.Contains(log1, "drover projects network web --agent docs,registry") {
		t.Fatalf("job 1's agent got no structured denial:\n%s", log1)
	}
	if got := reg.downloads("/pkg/left-pad-1.0.tgz"); len(got) != 1 {
		t.Fatalf("registry log after job 1 = %q, want one download by setup", got)
	}
	iso := v1.Attempts[0].Isolation
	if iso == nil || iso.Policy != "setup: registry; agent: docs" || len(iso.Denials) != 1 || iso.Denials[0].Host != reg.addr ||
		iso.Denials[0].Phase != "agent" {
		t.Fatalf("job 1 isolation = %+v", iso)
	}
	show := e2ekit.Must(t, alice.CLI, "show", j1.ID)
	if !strings.Contains(show, "network policy: setup: registry; agent: docs") ||
		!strings.Contains(show, "denied "+reg.addr+" (agent phase, 1 time(s)); to allow it: drover projects network web --agent docs,registry") {
		t.Fatalf("drover show:\n%s", show)
	}
	events := e2ekit.CLIJSON[apitypes.JobView](t, alice.CLI, "show", j1.ID)
	denied := false
	for _, e := range events.Events {
		denied = denied || (e.Kind == "egress_denied" && strings.Contains(e.Message, reg.addr))
	}
	if !denied {
		t.Fatalf("no egress_denied event: %+v", events.Events)
	}

	// Job 2 of the project finds the packages in its cache, and its setup
	// (same commands, same go.sum) is reused instead of run again.
	j2 := e2ekit.RunWith(t, alice.CLI, "--repo", web, "--agent", "exec", "--", "sh", "-c", `cat "$DROVER_CACHE_DIR/deps/"*.tgz`)
	v2 := wait(j2.ID)
	log2 := testkit.Log(t, c, j2.ID, 0)
	if v2.State != job.Completed || !strings.Contains(log2, "LEFT-PAD-PACKAGE-1.0") || !strings.Contains(log2, "SECRET-LIB-PACKAGE") ||
		!strings.Contains(log2, "=== drover setup reused") || strings.Contains(log2, "--- setup 1/4") || !v2.Attempts[0].Isolation.SetupReused {
		t.Fatalf("job 2 ended %s (%s):\n%s", v2.State, v2.Reason, log2)
	}
	if got := append(append(reg.downloads("/pkg/left-pad-1.0.tgz"), reg.downloads("/private/secret-lib.tgz")...),
		reg.downloads("/project/own-lib.tgz")...); len(got) != 3 {
		t.Fatalf("registry log after job 2 = %q, want still one download of each", got)
	}
	if show := e2ekit.Must(t, alice.CLI, "show", j2.ID); !strings.Contains(show, "caches: deps (setup result reused)") {
		t.Fatalf("drover show of job 2:\n%s", show)
	}

	// A job never widens its project's network; --network none is none.
	if out := e2ekit.Refused(t, alice.CLI, "run", "--repo", web, "--network", "registry", "--agent", "exec", "--", "true"); !strings.Contains(out, "never widens") {
		t.Fatalf("widening refusal: %s", out)
	}
	j3 := e2ekit.RunWith(t, alice.CLI, "--repo", web, "--network", "none", "--agent", "exec", "--", "sh", "-c",
		`env | grep -i _proxy || echo NO-PROXY; curl -s -m 5 `+url+` || echo NO-NETWORK`)
	v3 := wait(j3.ID)
	log3 := testkit.Log(t, c, j3.ID, 0)
	if v3.State != job.Completed || !strings.Contains(log3, "NO-PROXY") || !strings.Contains(log3, "NO-NETWORK") ||
		v3.Attempts[0].Isolation.Policy != "setup: registry; agent: none" {
		t.Fatalf("--network none job ended %s (%s), isolation %+v:\n%s", v3.State, v3.Reason, v3.Attempts[0].Isolation, log3)
	}

	// Another project's job has a cache of its own and cannot see web's.
	api := e2ekit.Checkout(t, "api")
	e2ekit.Must(t, alice.CLI, "run", "--repo", api, "--agent", "exec", "--wait", "--", "true")
	e2ekit.Must(t, alice.CLI, "projects", "caches", "api", "deps")
	webCache := filepath.Join(r.Home, "caches", "web")
	j4 := e2ekit.RunWith(t, alice.CLI, "--repo", api, "--agent", "exec", "--", "sh", "-c",
		`ls -A "$DROVER_CACHE_DIR/deps"; echo "dir=$DROVER_CACHE_DIR"; ls `+webCache+` 2>/dev/null || echo WEB-HIDDEN`)
	v4 := wait(j4.ID)
	log4 := testkit.Log(t, c, j4.ID, 0)
	if v4.State != job.Completed || strings.Contains(log4, "left-pad") || !strings.Contains(log4, "WEB-HIDDEN") ||
		!strings.Contains(log4, "caches/api") {
		t.Fatalf("other project's job ended %s:\n%s", v4.State, log4)
	}

	for what, text := range map[string]string{"hub output": h.Output(), "runner output": r.Output(),
		"job view": e2ekit.Must(t, alice.CLI, "show", j1.ID, "--json"), "job 2 log": testkit.Log(t, c, j2.ID, 0)} {
		if strings.Contains(text, registryToken) || strings.Contains(text, projectToken) {
			t.Fatalf("a registry token is in the %s", what)
		}
	}

	// A setup that hangs fails the attempt at its timeout and frees the slot.
	e2ekit.Must(t, alice.CLI, "projects", "setup", "api", "--timeout", "2s", "--command", "sleep 600")
	j5 := e2ekit.RunWith(t, alice.CLI, "--repo", api, "--agent", "exec", "--", "echo", "agent-ran")
	v5 := wait(j5.ID)
	log5 := testkit.Log(t, c, j5.ID, 0)
	if v5.State != job.Failed || v5.Reason != job.ReasonSetupFailed || strings.Contains(log5, "agent-ran") ||
		!strings.Contains(v5.Attempts[0].Message, "timeout") {
		t.Fatalf("hanging setup: job ended %s (%s) %q:\n%s", v5.State, v5.Reason, v5.Attempts[0].Message, log5)
	}
	// One that floods its output is cut in the log and fails at its
	// timeout too; the runner's one slot is free for the next job.
	e2ekit.Must(t, alice.CLI, "projects", "setup", "api", "--timeout", "3s", "--command", "yes flood")
	j6 := e2ekit.RunWith(t, alice.CLI, "--repo", api, "--agent", "exec", "--", "echo", "agent-ran")
	v6 := wait(j6.ID)
	log6 := testkit.Log(t, c, j6.ID, 0)
	if v6.State != job.Failed || v6.Reason != job.ReasonSetupFailed || strings.Contains(log6, "agent-ran") || len(log6) > 9<<20 ||
		!strings.Contains(v6.Attempts[0].Message, "timeout") {
		t.Fatalf("flooding setup: job ended %s (%s) %q with %d log bytes", v6.State, v6.Reason, v6.Attempts[0].Message, len(log6))
	}
	e2ekit.Must(t, alice.CLI, "projects", "setup", "api", "--clear")
	if v := wait(e2ekit.RunWith(t, alice.CLI, "--repo", api, "--agent", "exec", "--", "echo", "next-ran").ID); v.State != job.Completed {
		t.Fatalf("the job after the failed setups ended %s (%s)", v.State, v.Reason)
	}
}

// The start-to-agent measurement, in one run: the attempt time of
// a job whose setup downloads 32 MiB into a cold cache, against the same
// job with a warm cache and a reused setup. It reports; it asserts no
// time. DROVER_BENCH_SETUP=1 go test ./internal/e2e/repo -run TestSetupColdAgainstWarm -v
func TestSetupColdAgainstWarm(t *testing.T) {
	if os.Getenv("DROVER_BENCH_SETUP") == "" {
		t.Skip("a measurement: set DROVER_BENCH_SETUP=1 to run it")
	}
	reg := startRegistry(t)
	cfg := filepath.Join(t.TempDir(), "hub.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"network": {"policies": {"registry": [%q]}}}`, reg.addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	h := testkit.StartHub(t, bin, "--config", cfg)
	alice := h.AddUser(t, "alice")
	alice.StartRunner(t, "r1")
	c := alice.Client()
	checkouts := map[string]string{}
	url := "http://" + reg.addr + "/pkg/big.tgz"
	setup := `test -s "$DROVER_CACHE_DIR/deps/big.tgz" || curl -sf -o "$DROVER_CACHE_DIR/deps/big.tgz" ` + url
	attemptTime := func(project string) time.Duration {
		t.Helper()
		v := e2ekit.RunWith(t, alice.CLI, "--repo", checkouts[project], "--agent", "exec", "--", "true")
		v = testkit.WaitJob(t, c, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
		a := v.Attempts[len(v.Attempts)-1]
		if v.State != job.Completed || a.StartedAt == nil || a.FinishedAt == nil {
			t.Fatalf("job on %s ended %s (%s)", project, v.State, v.Reason)
		}
		return a.FinishedAt.Sub(*a.StartedAt)
	}
	const n = 5
	var cold, warm time.Duration
	for i := range n + 1 {
		project := fmt.Sprintf("cold%d", i)
		if i == n {
			project = "warm"
		}
		checkouts[project] = e2ekit.Checkout(t, project)
		e2ekit.Must(t, alice.CLI, "run", "--repo", checkouts[project], "--agent", "exec", "--wait", "--", "true")
		e2ekit.Must(t, alice.CLI, "projects", "network", project, "--setup", "registry", "--agent", "none")
		e2ekit.Must(t, alice.CLI, "projects", "caches", project, "deps")
		e2ekit.Must(t, alice.CLI, "projects", "setup", project, "--key-file", "go.sum", "--command", setup)
		if i < n {
			cold += attemptTime(project)
		}
	}
	attemptTime("warm") // fills the cache and records the setup
	for range n {
		warm += attemptTime("warm")
	}
	cold, warm = cold/n, warm/n
	t.Logf("attempt start to end, mean of %d: cold cache %s, warm cache with reused setup %s, ratio %.2f",
		n, cold.Round(time.Millisecond), warm.Round(time.Millisecond), float64(cold)/float64(warm))
}

// The open policy exists only when the operator enables it; a project that
// takes it reaches any host, and the attempt says OPEN where drover show
// and its isolation record show the policy.
func TestOpenPolicyIsRecordedAsOpen(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t)
	cfg := filepath.Join(t.TempDir(), "hub.json")
	if err := os.WriteFile(cfg, []byte(`{"network": {"allow_open": true, "policies": {"docs": ["docs.example.org"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h := testkit.StartHub(t, bin, "--config", cfg)
	alice := h.AddUser(t, "alice")
	alice.StartRunner(t, "r1")
	c := alice.Client()
	src := e2ekit.Checkout(t, "web")
	e2ekit.Must(t, alice.CLI, "run", "--repo", src, "--agent", "exec", "--wait", "--", "true")
	e2ekit.Must(t, alice.CLI, "projects", "network", "web", "--agent", "open")
	v := e2ekit.RunWith(t, alice.CLI, "--repo", src, "--agent", "exec", "--", "curl", "-sf", "http://"+reg.addr+"/pkg/left-pad-1.0.tgz")
	v = testkit.WaitJob(t, c, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if log := testkit.Log(t, c, v.ID, 0); v.State != job.Completed || !strings.Contains(log, "LEFT-PAD-PACKAGE-1.0") {
		t.Fatalf("open job ended %s (%s):\n%s", v.State, v.Reason, log)
	}
	iso := v.Attempts[0].Isolation
	if iso == nil || iso.Policy != "agent: OPEN (every host)" || !strings.Contains(iso.Network, "OPEN") {
		t.Fatalf("isolation = %+v", iso)
	}
	if show := e2ekit.Must(t, alice.CLI, "show", v.ID); !strings.Contains(show, "network policy: agent: OPEN (every host)") {
		t.Fatalf("drover show:\n%s", show)
	}
	// A job on it may still narrow to a named policy or to none.
	n := e2ekit.RunWith(t, alice.CLI, "--repo", src, "--network", "docs", "--agent", "exec", "--", "true")
	n = testkit.WaitJob(t, c, n.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if n.State != job.Completed || n.Attempts[0].Isolation.Policy != "agent: docs" {
		t.Fatalf("narrowed job ended %s, isolation %+v", n.State, n.Attempts[0].Isolation)
	}
}

// registryHub starts a registry and a hub whose one network policy,
// "registry", reaches it.
func registryHub(t *testing.T) (*fakeRegistry, *testkit.Hub) {
	t.Helper()
	reg := startRegistry(t)
	cfg := filepath.Join(t.TempDir(), "hub.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"network": {"policies": {"registry": [%q]}}}`, reg.addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	return reg, testkit.StartHub(t, bin, "--config", cfg)
}

// A setup script of the repository runs only once the project's owner
// enabled it, inside the sandbox under the setup policy (it reaches the
// registry, not the runner's files), as the job's commit has it.
func TestSetupFileFromRepository(t *testing.T) {
	t.Parallel()
	reg, h := registryHub(t)
	alice, bob := h.AddUser(t, "alice"), h.AddUser(t, "bob")
	alice.StartRunner(t, "r1")
	c := alice.Client()
	outside := t.TempDir() // the runner's machine, outside every sandbox
	src := e2ekit.Checkout(t, "web")
	script := func(version string) {
		t.Helper()
		body := fmt.Sprintf("echo SETUP-SCRIPT-%s\ncurl -sf http://%s/pkg/left-pad-1.0.tgz\n"+
			"echo escaped > %s/escaped-%s 2>/dev/null || echo CONFINED\n", version, reg.addr, outside, version)
		if err := os.MkdirAll(filepath.Join(src, ".drover"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, ".drover", "setup.sh"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		e2ekit.Git(t, src, "add", "-A")
		e2ekit.Git(t, src, "commit", "--quiet", "-m", "setup "+version)
	}
	script("v1")
	run := func() (apitypes.JobView, string) {
		t.Helper()
		v := e2ekit.RunWith(t, alice.CLI, "--repo", src, "--agent", "exec", "--", "echo", "agent-ran")
		v = testkit.WaitJob(t, c, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
		return v, testkit.Log(t, c, v.ID, 0)
	}
	// Off until the owner enables it.
	if v, log := run(); v.State != job.Completed || strings.Contains(log, "SETUP-SCRIPT") || strings.Contains(log, "drover setup") {
		t.Fatalf("a job before the script was enabled ended %s:\n%s", v.State, log)
	}
	e2ekit.Must(t, alice.CLI, "projects", "members", "add", "web", "bob")
	e2ekit.Refused(t, bob.CLI, "projects", "setup", "web", "--from-repo", ".drover/setup.sh")
	e2ekit.Refused(t, alice.CLI, "projects", "setup", "web", "--from-repo", "../setup.sh")
	e2ekit.Must(t, alice.CLI, "projects", "network", "web", "--setup", "registry", "--agent", "none")
	e2ekit.Must(t, alice.CLI, "projects", "setup", "web", "--from-repo", ".drover/setup.sh")
	if out := e2ekit.Must(t, alice.CLI, "projects", "config", "web"); !strings.Contains(out, "sh .drover/setup.sh (from the repository)") {
		t.Fatalf("projects config:\n%s", out)
	}
	v, log := run()
	if v.State != job.Completed || !strings.Contains(log, "--- setup 1/1: $ sh .drover/setup.sh") || !strings.Contains(log, "SETUP-SCRIPT-v1") ||
		!strings.Contains(log, "LEFT-PAD-PACKAGE-1.0") || !strings.Contains(log, "CONFINED") || !strings.Contains(log, "agent-ran") {
		t.Fatalf("job with the script ended %s (%s):\n%s", v.State, v.Reason, log)
	}
	// The next commit's script is the one that runs.
	script("v2")
	if v, log := run(); v.State != job.Completed || !strings.Contains(log, "SETUP-SCRIPT-v2") || strings.Contains(log, "SETUP-SCRIPT-v1") {
		t.Fatalf("job on the second commit ended %s:\n%s", v.State, log)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("the script wrote outside its sandbox: %v", entries)
	}
	// A commit without the script fails its setup, saying why; the agent
	// never runs.
	e2ekit.Git(t, src, "rm", "--quiet", "-r", ".drover")
	e2ekit.Git(t, src, "commit", "--quiet", "-m", "no script")
	if v, log := run(); v.State != job.Failed || v.Reason != job.ReasonSetupFailed || strings.Contains(log, "agent-ran") ||
		!strings.Contains(v.Attempts[0].Message, "setup file .drover/setup.sh is not a file in the job's commit") {
		t.Fatalf("job without the script ended %s (%s) %q:\n%s", v.State, v.Reason, v.Attempts[0].Message, log)
	}
	e2ekit.Must(t, alice.CLI, "projects", "setup", "web", "--from-repo", "")
	if v, log := run(); v.State != job.Completed || strings.Contains(log, "drover setup") {
		t.Fatalf("job after the script was turned off ended %s:\n%s", v.State, log)
	}
}

// A repository's setup script that any member's commit can change gets the
// project's secrets only in a version its owner approved by digest: a
// member's unapproved script runs without them (the registry sees no
// token, the log says why) while the owner's own setup commands keep
// theirs; once approved it gets them. An upstream that echoes the request
// puts no form of the token into the job's log or events: the proxy masks
// it.
func TestSetupScriptSecretNeedsApproval(t *testing.T) {
	t.Parallel()
	reg, h := registryHub(t)
	alice, bob := h.AddUser(t, "alice"), h.AddUser(t, "bob")
	r := alice.StartRunner(t, "r1")
	ca, cb := alice.Client(), bob.Client()
	src := e2ekit.Checkout(t, "web")
	wait := func(c *client.Client, id string) (apitypes.JobView, string) {
		t.Helper()
		v := testkit.WaitJob(t, c, id, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
		return v, testkit.Log(t, c, id, 0)
	}
	if v, _ := wait(ca, e2ekit.RunWith(t, alice.CLI, "--repo", src, "--agent", "exec", "--", "true").ID); v.State != job.Completed {
		t.Fatalf("first job ended %s", v.State)
	}
	valueFile := filepath.Join(t.TempDir(), "own.token")
	if err := os.WriteFile(valueFile, []byte(projectToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e2ekit.Must(t, alice.CLI, "projects", "members", "add", "web", "bob")
	e2ekit.Must(t, alice.CLI, "runners", "share", "r1", "--project", "web")
	e2ekit.Must(t, alice.CLI, "projects", "network", "web", "--setup", "registry", "--agent", "none")
	e2ekit.Must(t, alice.CLI, "projects", "secrets", "set", "web", "own", "--host", "http://"+reg.addr, "--header", "X-Registry-Token",
		"--value-file", valueFile)
	e2ekit.Must(t, alice.CLI, "projects", "setup", "web", "--from-repo", ".drover/setup.sh", "--command",
		`curl -sf -H "X-Registry-Token: $DROVER_SECRET_OWN" "$DROVER_SECRET_OWN_URL/project/own-lib.tgz"`)

	// bob's commit brings a script that spends the secret, and asks an
	// echoing endpoint what it was sent.
	script := fmt.Sprintf("curl -s -H \"X-Registry-Token: $DROVER_SECRET_OWN\" \"$DROVER_SECRET_OWN_URL/project/bob\" || "+
		"curl -s http://%s/project/bob\ncurl -si -H \"X-Registry-Token: $DROVER_SECRET_OWN\" \"$DROVER_SECRET_OWN_URL/echo\"\necho BOB-SCRIPT-RAN\n", reg.addr)
	if err := os.MkdirAll(filepath.Join(src, ".drover"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, ".drover", "setup.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	e2ekit.Git(t, src, "add", "-A")
	e2ekit.Git(t, src, "commit", "--quiet", "-m", "bob's setup")
	sum := sha256.Sum256([]byte(script))
	digest := hex.EncodeToString(sum[:])

	v, log := wait(cb, e2ekit.RunWith(t, bob.CLI, "--repo", src, "--agent", "exec", "--", "true").ID)
	if got := reg.downloads("/project/bob"); len(got) != 1 || strings.Contains(got[0], "token=") {
		t.Fatalf("the registry heard bob's unapproved script as %q, want one request without the token", got)
	}
	if v.State != job.Completed || !strings.Contains(log, "BOB-SCRIPT-RAN") || !strings.Contains(log, "OWN-LIB-PACKAGE") ||
		!strings.Contains(log, ".drover/setup.sh runs WITHOUT the project's secrets") ||
		!strings.Contains(log, "drover projects setup web --approve "+digest) {
		t.Fatalf("bob's job with an unapproved script ended %s (%s):\n%s", v.State, v.Reason, log)
	}
	if got := reg.downloads("/project/own-lib.tgz"); len(got) != 1 || !strings.HasSuffix(got[0], "token="+projectToken) {
		t.Fatalf("the owner's setup command reached the registry as %q, want with the token", got)
	}

	e2ekit.Refused(t, bob.CLI, "projects", "setup", "web", "--approve", digest)
	e2ekit.Refused(t, alice.CLI, "projects", "setup", "web", "--approve", "not-a-digest")
	approved := filepath.Join(t.TempDir(), "setup.sh")
	if err := os.WriteFile(approved, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e2ekit.Must(t, alice.CLI, "projects", "setup", "web", "--approve-file", approved); !strings.Contains(out, "sha256 "+digest) {
		t.Fatalf("projects setup --approve-file:\n%s", out)
	}
	v, log = wait(cb, e2ekit.RunWith(t, bob.CLI, "--repo", src, "--agent", "exec", "--", "true").ID)
	if v.State != job.Completed || !strings.Contains(log, "BOB-SCRIPT-RAN") ||
		!strings.Contains(log, "is a version the project's owner approved: it runs with the project's secrets") {
		t.Fatalf("bob's job with an approved script ended %s (%s):\n%s", v.State, v.Reason, log)
	}
	if got := reg.downloads("/project/bob"); len(got) != 2 || !strings.HasSuffix(got[1], "token="+projectToken) {
		t.Fatalf("the registry heard bob's approved script as %q, want the token the second time", got)
	}
	// The echo answered (its headers and body went through), masked.
	if got := reg.downloads("/echo"); len(got) != 1 || !strings.Contains(log, "X-Echo-X-Registry-Token: ****") ||
		!strings.Contains(log, "ECHO X-Registry-Token: ****") {
		t.Fatalf("the echo was asked %q; log:\n%s", got, log)
	}
	encoded := base64.StdEncoding.EncodeToString([]byte("u:" + projectToken))
	view := e2ekit.Must(t, bob.CLI, "show", v.ID, "--json")
	for what, text := range map[string]string{"job log": log, "job view and events": view, "runner output": r.Output(), "hub output": h.Output()} {
		if strings.Contains(text, projectToken) || strings.Contains(text, encoded[4:len(encoded)-4]) {
			t.Fatalf("the secret is in the %s:\n%s", what, text)
		}
	}
	e2ekit.Must(t, alice.CLI, "projects", "setup", "web", "--unapprove", digest)
	if out := e2ekit.Must(t, alice.CLI, "projects", "config", "web"); strings.Contains(out, digest) {
		t.Fatalf("the approval stayed:\n%s", out)
	}
}
