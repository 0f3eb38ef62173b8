package testkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"drover/internal/childproc"
	"drover/internal/testkit/ciskip"
)

// giteaTimeout bounds each step of bringing Gitea up (a migration, the web server's start, a
// CLI call): generous, since on a busy 2-core machine Gitea's first start takes many seconds.
const giteaTimeout = 3 * time.Minute

// Gitea is a real Gitea (built by scripts/gitea/build) on a free loopback port, with SQLite, a
// config, repositories and a log in one temporary directory, and one admin user.
type Gitea struct {
	URL        string // http://127.0.0.1:PORT, no trailing slash
	AdminUser  string
	AdminToken string // a personal access token of AdminUser with every scope
	Dir        string // config, database, repositories, log
	bin, conf  string
	env        []string
	p          *proc
}

// StartGitea starts `gitea web` on a free loopback port and waits until it is healthy, with an
// admin user made. The binary is $DROVER_GITEA (scripts/test sets it), else a build already in
// scripts/gitea/build's cache; without one the test is skipped, or with CI=true fails. Gitea is
// killed when the test ends; if the test failed, the end of its log is printed.
func StartGitea(t testing.TB) *Gitea {
	t.Helper()
	bin, static := giteaBinary(t)
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{"data", "repos", "log", "home"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	addr, err := childproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	g := &Gitea{URL: "http://" + addr, AdminUser: "drover-admin", Dir: dir, bin: bin,
		conf: filepath.Join(dir, "app.ini"), env: childproc.Env(filepath.Join(dir, "home"))}
	_, port, _ := net.SplitHostPort(addr)
	secret := g.cli(t, "generate", "secret", "SECRET_KEY")
	internal := g.cli(t, "generate", "secret", "INTERNAL_TOKEN")
	write(t, g.conf, fmt.Sprintf(`APP_NAME = drover test Gitea
RUN_USER = %[1]s
RUN_MODE = prod
WORK_PATH = %[2]s
; The tests run as root on CI machines; this Gitea is the test's own, on loopback.
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = %[3]t

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[4]s
DOMAIN = 127.0.0.1
ROOT_URL = http://%[5]s/
; The git hooks call Gitea back here: never "localhost", which may be ::1.
LOCAL_ROOT_URL = http://%[5]s/
APP_DATA_PATH = %[2]s/data
; Templates and options from the module source: the build has no bindata.
STATIC_ROOT_PATH = %[6]s
; Offline: 1.26 has no OFFLINE_MODE (its assets are local, Gravatar is off by default);
; the update checker, which would call out, is off below.
DISABLE_SSH = true
START_SSH_SERVER = false
LFS_START_SERVER = false

[database]
DB_TYPE = sqlite3
PATH = %[2]s/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[2]s/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = %[7]s
INTERNAL_TOKEN = %[8]s

[service]
DISABLE_REGISTRATION = true

[mailer]
ENABLED = false

[cron.update_checker]
ENABLED = false

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[actions]
ENABLED = false

[webhook]
; Hooks go to the test's own receivers, on loopback.
ALLOWED_HOST_LIST = loopback

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[log]
MODE = file
LEVEL = info
ROOT_PATH = %[2]s/log
`, u.Username, dir, os.Geteuid() == 0, port, addr, static, secret, internal))
	logFile := filepath.Join(dir, "log", "gitea.log")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("--- end of Gitea's log %s ---\n%s", logFile, tail(string(b), 8000))
		}
	})
	g.cli(t, "migrate")
	g.p = start(t, "gitea web", g.env, nil, bin, "web", "--config", g.conf, "--work-path", dir)
	g.waitHealthy(t)
	out := g.cli(t, "admin", "user", "create", "--admin", "--username", g.AdminUser, "--random-password",
		"--email", g.AdminUser+"@drover.test", "--must-change-password=false", "--access-token",
		"--access-token-name", "drover-test", "--access-token-scopes", "all")
	m := regexp.MustCompile(`(?m)^Access token was successfully created\.\.\. (\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("gitea admin user create printed no access token")
	}
	g.AdminToken = m[1]
	return g
}

// giteaBinary finds Gitea and the directory it serves templates from.
func giteaBinary(t testing.TB) (bin, static string) {
	t.Helper()
	bin = os.Getenv("DROVER_GITEA")
	if bin == "" {
		// scripts/gitea/build knows its cache's key; --cached never builds.
		root, err := findModuleRoot()
		if err == nil {
			var out []byte
			out, err = exec.Command(filepath.Join(root, "scripts", "gitea", "build"), "--cached").Output()
			bin = strings.TrimSpace(string(out))
			if ee, ok := errors.AsType[*exec.ExitError](err); ok {
				err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
			}
		}
		if err != nil {
			ciskip.Skipf(t, "Gitea is not built (%v); run scripts/test or scripts/gitea/build (many minutes), or set DROVER_GITEA", err)
		}
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		ciskip.Skipf(t, "DROVER_GITEA=%s is not an executable (%v); run scripts/gitea/build", bin, err)
	}
	static = os.Getenv("DROVER_GITEA_STATIC")
	if static == "" {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "static-root"))
		if err != nil {
			t.Fatalf("Gitea's templates: set DROVER_GITEA_STATIC or rebuild with scripts/gitea/build: %v", err)
		}
		static = strings.TrimSpace(string(b))
	}
	if _, err := os.Stat(filepath.Join(static, "templates")); err != nil {
		t.Fatalf("Gitea's templates are not in %s (DROVER_GITEA_STATIC): %v", static, err)
	}
	return bin, static
}

// cli runs a gitea subcommand on this instance's config and returns its standard output,
// which may hold a secret: it is never logged, and only standard error is shown on failure.
func (g *Gitea) cli(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), giteaTimeout)
	defer cancel()
	if args[0] != "generate" {
		args = append(args, "--config", g.conf, "--work-path", g.Dir)
	}
	cmd := exec.CommandContext(ctx, g.bin, args...)
	cmd.Env = g.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("gitea %s: %v\n%s", args[0], err, tail(stderr.String(), 4000))
	}
	return strings.TrimSpace(stdout.String())
}

// waitHealthy polls /api/healthz until Gitea answers 200, fails if it exits first.
func (g *Gitea) waitHealthy(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(giteaTimeout)
	var last error
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/api/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cancel()
				return
			}
			err = fmt.Errorf("healthz: %s", resp.Status)
		}
		cancel()
		last = err
		if g.p.exited() {
			t.Fatalf("gitea web exited at start: %v", g.p.err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("gitea web not healthy after %s: %v", giteaTimeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// API calls Gitea's REST API (path after /api/v1) as the user of token, with in as the JSON
// body (nil for none), and decodes a 2xx answer into out (nil to drop it). Another status fails
// the test with the answer's body.
func (g *Gitea) API(t testing.TB, token, method, path string, in, out any) {
	t.Helper()
	g.api(t, method, path, in, out, func(r *http.Request) { r.Header.Set("Authorization", "token "+token) })
}

func (g *Gitea) api(t testing.TB, method, path string, in, out any, auth func(*http.Request)) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(t.Context(), giteaTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, g.URL+"/api/v1"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	auth(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("Gitea %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("Gitea %s %s: read the answer: %v", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		t.Fatalf("Gitea %s %s: %s: %s", method, path, resp.Status, tail(string(b), 2000))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("Gitea %s %s: decode the answer: %v", method, path, err)
		}
	}
}

// CreateRepo creates owner/name (owner a user) with an initial commit on its default branch
// main, as the admin.
func (g *Gitea) CreateRepo(t testing.TB, owner, name string) {
	t.Helper()
	g.API(t, g.AdminToken, http.MethodPost, "/admin/users/"+owner+"/repos", map[string]any{
		"name": name, "auto_init": true, "default_branch": "main", "readme": "Default", "private": false,
	}, nil)
}

// CreateUser creates a user (not an admin) and returns a personal access token of theirs with
// every scope.
func (g *Gitea) CreateUser(t testing.TB, name string) string {
	t.Helper()
	tok, _ := g.CreateLogin(t, name)
	return tok
}

// CreateLogin is CreateUser that also returns the user's password, for a test that signs in on
// Gitea's own pages.
func (g *Gitea) CreateLogin(t testing.TB, name string) (token, password string) {
	t.Helper()
	var pw [16]byte
	rand.Read(pw[:])
	password = hex.EncodeToString(pw[:])
	g.API(t, g.AdminToken, http.MethodPost, "/admin/users", map[string]any{
		"username": name, "email": name + "@drover.test", "password": password, "must_change_password": false,
	}, nil)
	// Gitea makes tokens only for a password login.
	var tok struct {
		SHA1 string `json:"sha1"`
	}
	g.api(t, http.MethodPost, "/users/"+name+"/tokens", map[string]any{"name": "drover-test", "scopes": []string{"all"}}, &tok,
		func(r *http.Request) { r.SetBasicAuth(name, password) })
	if tok.SHA1 == "" {
		t.Fatalf("Gitea made no token for %s", name)
	}
	return tok.SHA1, password
}
