package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"drover/internal/childproc"
	"drover/internal/testkit/ciskip"
	"drover/internal/testkit/syncbuf"
)

// postgresInstall is what to run when the tests find no Postgres.
const postgresInstall = "apt-get install postgresql (scripts/test installs it)"

// A Postgres cluster for the whole test binary, started by the first test
// that asks for one: initdb into a temporary directory, then postgres on a
// free loopback port with its unix socket there too. Each test gets a
// database of its own. It is the one process-wide resource of the test kit
// (a cluster per test would cost seconds each); PostgresMain or
// MainWithBinary stop it when the tests end.
var pg struct {
	mu        sync.Mutex
	c         *pgCluster
	err       error
	n         int                    // databases made
	templates map[string]*pgTemplate // StartPostgresFrom's, by name
}

// pgTemplate is a database that new ones are copied from, prepared once.
type pgTemplate struct {
	once sync.Once
	err  error
}

type pgCluster struct {
	dir  string // data, socket and log, removed at the end
	bin  string // initdb's and postgres's directory
	cred *syscall.Credential
	port int
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
}

// StartPostgres returns the URL of a new, empty database on the test
// binary's Postgres cluster (starting it on first use), dropped when the
// test ends. Without Postgres the test is skipped, or with CI=true fails.
func StartPostgres(t testing.TB) string {
	t.Helper()
	return newDatabase(t, "")
}

// StartPostgresFrom is StartPostgres for a database that starts as a copy of
// the template named name (CREATE DATABASE ... TEMPLATE), which prepare
// makes from an empty database once for the test binary, e.g. by applying
// every migration: a test that needs a migrated store then does not pay
// for the migrations. prepare must close its connections.
func StartPostgresFrom(t testing.TB, name string, prepare func(ctx context.Context, url string) error) string {
	t.Helper()
	pg.mu.Lock()
	if pg.templates == nil {
		pg.templates = map[string]*pgTemplate{}
	}
	tpl := pg.templates[name]
	if tpl == nil {
		tpl = &pgTemplate{}
		pg.templates[name] = tpl
	}
	pg.mu.Unlock()
	tpl.once.Do(func() {
		c, err := cluster(t)
		if err != nil {
			tpl.err = err
			return
		}
		// Made under a context of its own: the first test's ending must
		// not cut the preparation others wait for.
		ctx := context.Background()
		if err := c.admin(ctx, `CREATE DATABASE `+name); err != nil {
			tpl.err = fmt.Errorf("create template database %s: %w", name, err)
			return
		}
		if err := prepare(ctx, c.url(name)); err != nil {
			tpl.err = fmt.Errorf("prepare template database %s: %w", name, err)
		}
	})
	if tpl.err != nil {
		t.Fatal(tpl.err)
	}
	return newDatabase(t, name)
}

// cluster returns the test binary's cluster, starting it on first use;
// without Postgres the test is skipped, or with CI=true fails.
func cluster(t testing.TB) (*pgCluster, error) {
	t.Helper()
	pg.mu.Lock()
	if pg.c == nil && pg.err == nil {
		pg.c, pg.err = startCluster()
	}
	c, err := pg.c, pg.err
	pg.mu.Unlock()
	var missing *pgMissing
	if errors.As(err, &missing) {
		ciskip.Skipf(t, "%v; install it with %s", err, postgresInstall)
	}
	if err != nil {
		return nil, fmt.Errorf("start Postgres: %w", err)
	}
	return c, nil
}

// newDatabase makes a database on the cluster, a copy of template if it is
// not "", dropped when the test ends, and returns its URL.
func newDatabase(t testing.TB, template string) string {
	t.Helper()
	c, err := cluster(t)
	if err != nil {
		t.Fatal(err)
	}
	pg.mu.Lock()
	pg.n++
	name := fmt.Sprintf("t%d", pg.n)
	pg.mu.Unlock()
	create := `CREATE DATABASE ` + name
	if template != "" {
		create += ` TEMPLATE ` + template
	}
	if err := c.admin(t.Context(), create); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := c.admin(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return c.url(name)
}

// PostgresMain is a TestMain for a package whose tests use StartPostgres:
// it runs them, stops the cluster and exits.
func PostgresMain(m *testing.M) {
	code := m.Run()
	StopPostgres()
	os.Exit(code)
}

// StopPostgres stops the cluster, if one was started, and removes its
// directory.
func StopPostgres() {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.c != nil {
		pg.c.stop()
	}
	pg.c, pg.err, pg.templates = nil, nil, nil
}

// pgMissing is a Postgres that is not installed (or cannot run here).
type pgMissing struct{ why string }

func (e *pgMissing) Error() string { return e.why }

func (c *pgCluster) url(db string) string {
	return fmt.Sprintf("postgres://drover@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

func (c *pgCluster) admin(ctx context.Context, stmt string) error {
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, stmt)
	return err
}

// postgresBin finds the directory of initdb and postgres: on PATH, else
// Debian's /usr/lib/postgresql/VERSION/bin (the newest).
func postgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(a))))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b))))
		return va - vb
	})
	if len(found) == 0 {
		return "", &pgMissing{"Postgres is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin)"}
	}
	return filepath.Dir(found[len(found)-1]), nil
}

func startCluster() (*pgCluster, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	// Postgres refuses to run as root: then it runs as Debian's postgres
	// user, which must be able to reach its directory.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, &pgMissing{"running as root, Postgres needs an unprivileged postgres user, and there is none"}
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "drover-pg-")
	if err != nil {
		return nil, err
	}
	c := &pgCluster{dir: dir, bin: bin, cred: cred, out: &syncbuf.Buffer{}}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", c.data(), "-U", "drover", "--auth=trust",
		"--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Env = childproc.Env(dir)
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb in %s (is every directory above it reachable by the postgres user?): %v\n%s", dir, err, out)
	}
	addr, err := childproc.FreeAddr()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	c.port, _ = strconv.Atoi(port)
	if err := c.run(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.ready(); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

// run starts the server on the cluster's port.
func (c *pgCluster) run() error {
	// Durable like the hub's SQLite (fsync, synchronous commit): the
	// benchmarks compare the two as they would run.
	c.cmd = exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.data(), "-p", strconv.Itoa(c.port), "-k", c.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "shared_buffers=64MB")
	c.cmd.Env = childproc.Env(c.dir)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	// Its own process group, and SIGQUIT (immediate shutdown) if the test
	// binary dies without stopping it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	c.done = done
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(done) }(c.cmd)
	return nil
}

// ready waits for the server to take connections.
func (c *pgCluster) ready() error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.url("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("postgres exited at start:\n%s", tail(c.out.String(), 4000))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after a minute (%v):\n%s", err, tail(c.out.String(), 4000))
		}
	}
}

// stop shuts the server down fast and removes its directory.
func (c *pgCluster) stop() {
	c.halt()
	if err := os.RemoveAll(c.dir); err != nil && !strings.Contains(err.Error(), "no such file") {
		fmt.Fprintf(os.Stderr, "testkit: remove Postgres directory: %v\n", err)
	}
}

// halt shuts the server down fast (SIGINT: sessions end, no waiting for
// clients) and waits until it is gone.
func (c *pgCluster) halt() {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

// Postgres is a cluster of one test's own, for a test that restarts it
// (StartPostgres's cluster is shared by the tests of a binary).
type Postgres struct {
	c   *pgCluster
	URL string // of its one database
}

// StartPostgresCluster starts a cluster for t alone with one database,
// stopped and removed when t ends. Without Postgres the test is skipped,
// or with CI=true fails.
func StartPostgresCluster(t testing.TB) *Postgres {
	t.Helper()
	c, err := startCluster()
	if missing, ok := errors.AsType[*pgMissing](err); ok {
		ciskip.Skipf(t, "%v; install it with %s", missing, postgresInstall)
	}
	if err != nil {
		t.Fatalf("start Postgres: %v", err)
	}
	t.Cleanup(c.stop)
	if err := c.admin(t.Context(), `CREATE DATABASE drover`); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return &Postgres{c: c, URL: c.url("drover")}
}

// Restart stops the server (fast shutdown: every session is cut) and
// starts it again on the same port and data, waiting until it takes
// connections; down is how long it stays stopped.
func (p *Postgres) Restart(t testing.TB, down time.Duration) {
	t.Helper()
	p.c.halt()
	time.Sleep(down)
	if err := p.c.run(); err != nil {
		t.Fatal(err)
	}
	if err := p.c.ready(); err != nil {
		t.Fatalf("Postgres after a restart: %v", err)
	}
}
