package postgres

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"drover/internal/childproc"
	"drover/internal/fsutil"
	"drover/internal/store"
	"drover/internal/store/sqlstore"
	"drover/internal/store/storetest"
	"drover/internal/testkit"
	"drover/internal/testkit/disk"
)

func TestMain(m *testing.M) { testkit.PostgresMain(m) }

func openTest(t testing.TB, url string) *Store {
	t.Helper()
	s, err := Open(t.Context(), url)
	return storetest.Opened(t, s, err)
}

// migratedURL is the URL of a new database with every migration applied:
// a copy of a template migrated once for the test binary (a test that only
// needs an empty store does not pay for the migrations; those of the
// migrations themselves start from testkit.StartPostgres).
func migratedURL(t testing.TB) string {
	t.Helper()
	return testkit.StartPostgresFrom(t, "migrated", func(ctx context.Context, url string) error {
		s, err := Open(ctx, url)
		if err != nil {
			return err
		}
		return s.Close()
	})
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, migratedURL(t))
	})
}

// TestTemplateIsMigrated: a database copied from the template is at the
// last version and has nothing else in it.
func TestTemplateIsMigrated(t *testing.T) {
	s := openTest(t, migratedURL(t))
	ms, err := sqlstore.Migrations(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	var n, users int
	if err := s.db.QueryRowContext(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(ms) {
		t.Fatalf("schema_migrations has %d rows (%v), want %d", n, err, len(ms))
	}
	if err := s.db.QueryRowContext(t.Context(), `SELECT count(*) FROM users`).Scan(&users); err != nil || users != 0 {
		t.Fatalf("users in a new store: %d, %v; want none", users, err)
	}
}

func TestReopenKeepsDataAndMigratesOnce(t *testing.T) {
	url := testkit.StartPostgres(t)
	s := openTest(t, url)
	if err := s.Write(t.Context(), func(tx store.Tx) error { return tx.SetMeta("k", "v") }); err != nil {
		t.Fatal(err)
	}
	s2 := openTest(t, url)
	var v string
	if err := s2.Read(t.Context(), func(tx store.Tx) (err error) { v, err = tx.Meta("k"); return err }); err != nil || v != "v" {
		t.Fatalf("Meta after reopen = %q, %v; want v", v, err)
	}
	var n int
	if err := s2.db.QueryRowContext(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if ms, _ := sqlstore.Migrations(migrationFS, "migrations"); n != len(ms) {
		t.Errorf("schema_migrations has %d rows after two opens, want %d", n, len(ms))
	}
}

// TestNewerSchemaRefused: a database a newer drover migrated is refused,
// naming its version and this binary's.
func TestNewerSchemaRefused(t *testing.T) {
	url := testkit.StartPostgres(t)
	s := openTest(t, url)
	if _, err := s.db.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	ms, err := sqlstore.Migrations(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), url)
	if err == nil || !strings.Contains(err.Error(), "version 999 is newer") ||
		!strings.Contains(err.Error(), fmt.Sprintf("(version %d)", len(ms))) {
		t.Fatalf("Open of a newer schema: %v, want an error naming version 999 and %d", err, len(ms))
	}
}

// TestBadURLFailsFast: a wrong or unreachable database fails Open (within
// connectTimeout, not the driver's retries) with the host and the cause, never the password.
func TestBadURLFailsFast(t *testing.T) {
	good := testkit.StartPostgres(t)
	u, err := neturl.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cret-pa55word"
	withPass := func(host, db string) string {
		v := *u
		v.User = neturl.UserPassword("drover", secret)
		if host != "" {
			v.Host = host
		}
		if db != "" {
			v.Path = "/" + db
		}
		return v.String()
	}
	closed, err := childproc.FreeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, url, want string
	}{
		{"unreachable", withPass(closed, ""), closed},
		{"no such database", withPass("", "nosuchdb"), "nosuchdb"},
		{"not a URL", "postgres://drover:" + secret + "@[::1", "postgres"},
	} {
		s, err := Open(t.Context(), tc.url)
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not name %q", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error %q shows the password", tc.name, err)
		}
		t.Logf("%s: %v", tc.name, err)
	}
}

// TestWritesOfTwoStoresRetry: two Stores on one database (two hubs) doing
// read-modify-write increments of one row at once lose none: the loser of
// each serialization race runs again, also when its fn swallowed the
// failed statement's error.
func TestWritesOfTwoStoresRetry(t *testing.T) {
	url := migratedURL(t)
	a, b := openTest(t, url), openTest(t, url)
	storetest.ConcurrentWrites(t, a, a, b, swallowing{a}, swallowing{b})
}

// TestAccessVersionsOfStoresInOrder: hubs on one database changing
// runners' access at once never stamp the same access version.
func TestAccessVersionsOfStoresInOrder(t *testing.T) {
	url := migratedURL(t)
	a, b, c := openTest(t, url), openTest(t, url), openTest(t, url)
	storetest.AccessVersionRace(t, a, a, b, c, a, b, c)
}

// swallowing is a store whose Write callers ignore their statements'
// errors, as hub code that goes on after an expected one does.
type swallowing struct{ store.Store }

func (s swallowing) Write(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Write(ctx, func(tx store.Tx) error { _ = fn(tx); return nil })
}

// TestRecoversFromDroppedConnections: after the server ends every
// connection of the store (as a restart or a cut network does), the next
// Write and Read succeed on new ones, each applied once.
func TestRecoversFromDroppedConnections(t *testing.T) {
	url := migratedURL(t)
	s := openTest(t, url)
	other := openTest(t, url) // an operator's session, to cut the store's
	now := time.UnixMilli(0)
	mustWrite := func(u store.User) {
		t.Helper()
		if err := s.Write(t.Context(), func(tx store.Tx) error { return tx.InsertUser(u) }); err != nil {
			t.Fatalf("Write after the connections were cut: %v", err)
		}
	}
	cut := func() {
		t.Helper()
		var n int
		if err := other.db.QueryRowContext(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil || n == 0 {
			t.Fatalf("terminate the store's connections: %d, %v", n, err)
		}
	}
	mustWrite(store.User{ID: "u-1", Name: "alice", CreatedAt: now})
	cut()
	mustWrite(store.User{ID: "u-2", Name: "bob", CreatedAt: now})
	cut()
	var users []store.User
	if err := s.Read(t.Context(), func(tx store.Tx) (err error) { users, err = tx.Users(); return err }); err != nil {
		t.Fatalf("Read after the connections were cut: %v", err)
	}
	if len(users) != 2 {
		t.Fatalf("users = %+v, want alice and bob once each", users)
	}
}

// TestFullDiskIsErrNoSpace: a write Postgres cannot store for lack of
// space (disk_full, 53100) is ErrNoSpace, keeps nothing, and succeeds once
// space is freed. The table lives in a tablespace on a small tmpfs.
func TestFullDiskIsErrNoSpace(t *testing.T) {
	mnt := disk.Tmpfs(t, 4<<20)
	s := openTest(t, migratedURL(t))
	// The server runs as the postgres user when the tests run as root: it
	// must own the tablespace's directory and reach it.
	if u, err := user.Lookup("postgres"); err == nil && os.Geteuid() == 0 {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(mnt, uid, gid); err != nil {
			t.Fatal(err)
		}
		// Only the test's own directories, below the temporary directory.
		for d := filepath.Dir(mnt); strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
			if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
				if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	ts := "full_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, stmt := range []string{"CREATE TABLESPACE " + ts + " LOCATION '" + mnt + "'", "ALTER TABLE meta SET TABLESPACE " + ts} {
		if _, err := s.db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		_, _ = s.db.ExecContext(context.Background(), "ALTER TABLE meta SET TABLESPACE pg_default")
		_, _ = s.db.ExecContext(context.Background(), "DROP TABLESPACE "+ts)
	})
	value := strings.Repeat("x", 512<<10)
	write := func() error {
		return s.Write(t.Context(), func(tx store.Tx) error { return tx.SetMeta("big", value) })
	}
	free := disk.Fill(t, mnt, 0)
	err := write()
	if !errors.Is(err, store.ErrNoSpace) || !fsutil.IsNoSpace(err) || pgCode(err) != "53100" {
		t.Fatalf("write on a full disk: %v (no space: %v)", err, fsutil.IsNoSpace(err))
	}
	t.Logf("write on a full disk: %v", err)
	if _, err := s.db.ExecContext(t.Context(), "SELECT 1"); err != nil {
		t.Fatalf("the store after a full disk: %v", err)
	}
	free()
	if err := write(); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
}
