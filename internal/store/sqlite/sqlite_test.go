package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"drover/internal/job"
	"drover/internal/store"
	"drover/internal/store/storetest"
)

func openTest(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, filepath.Join(t.TempDir(), "drover.db"))
	})
}

func appliedVersions(t *testing.T, s *Store) []int {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestMigrationsOnceAndReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	want := len(ms)

	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if vs := appliedVersions(t, s); len(vs) != want || vs[len(vs)-1] != want {
		t.Fatalf("applied versions %v, want 1..%d", vs, want)
	}
	u := store.User{ID: "u-1", Name: "alice", Admin: true, CreatedAt: time.UnixMilli(1_700_000_000_123)}
	if err := s.Write(t.Context(), func(tx store.Tx) error {
		return errors.Join(tx.InsertUser(u), tx.SetMeta("admin", "u-1"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopening applies nothing again and finds the committed rows.
	for range 2 {
		s := openTest(t, path)
		if vs := appliedVersions(t, s); len(vs) != want {
			t.Errorf("after reopen, applied versions %v, want %d", vs, want)
		}
		if err := s.Read(t.Context(), func(tx store.Tx) error {
			got, err := tx.User("u-1")
			if err != nil {
				return err
			}
			if got.Name != u.Name || !got.CreatedAt.Equal(u.CreatedAt) || !got.Admin {
				t.Errorf("after reopen, user = %+v, want %+v", got, u)
			}
			v, err := tx.Meta("admin")
			if v != "u-1" {
				t.Errorf("after reopen, meta admin = %q", v)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(t.Context(), path)
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v, want an error saying it is newer", err)
	}
}

// TestPragmas checks that every pooled connection, not only the first, has
// the settings durability and integrity depend on.
func TestPragmas(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "drover.db"))
	for _, p := range []struct {
		name  string
		db    *sql.DB
		conns int
	}{{"writer", s.w, 1}, {"reader", s.r, 3}} {
		var held []*sql.Conn
		for range p.conns {
			c, err := p.db.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		for i, c := range held {
			for _, q := range []struct{ pragma, want string }{
				{"journal_mode", "wal"},
				{"synchronous", "2"}, // FULL
				{"foreign_keys", "1"},
				{"busy_timeout", "10000"},
			} {
				var got string
				if err := c.QueryRowContext(t.Context(), "PRAGMA "+q.pragma).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != q.want {
					t.Errorf("%s conn %d: PRAGMA %s = %s, want %s", p.name, i, q.pragma, got, q.want)
				}
			}
			c.Close()
		}
	}
}

func TestReadTransactionIsReadOnly(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "drover.db"))
	err := s.Read(t.Context(), func(tx store.Tx) error { return tx.SetMeta("k", "v") })
	if err == nil {
		t.Fatal("SetMeta inside Read succeeded")
	}
}

func TestCommittedWriteSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := s.Write(t.Context(), func(tx store.Tx) error {
		if err := tx.InsertUser(store.User{ID: "u-1", Name: "alice", CreatedAt: time.Now()}); err != nil {
			return err
		}
		if err := tx.InsertJob(store.Job{ID: "j-1", State: job.Queued, RequesterID: "u-1", CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
			return err
		}
		seq, err = tx.AddEvent(store.Event{JobID: "j-1", At: time.Now(), Kind: "created"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path)
	if err := s.Read(t.Context(), func(tx store.Tx) error {
		es, err := tx.Events("j-1", 0, 0)
		if err == nil && (len(es) != 1 || es[0].Seq != seq) {
			t.Errorf("after reopen, events = %+v, want one with seq %d", es, seq)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestBusyAtBegin: a second Store on the same file (as another process
// would be) waits for the first one's write transaction instead of failing.
func TestBusyAtBegin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	a, b := openTest(t, path), openTest(t, path)
	entered := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.Write(t.Context(), func(tx store.Tx) error {
			close(entered)
			<-release
			return tx.SetMeta("a", "1")
		}); err != nil {
			t.Error(err)
		}
	})
	<-entered
	time.AfterFunc(200*time.Millisecond, func() { close(release) })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := b.Write(ctx, func(tx store.Tx) error { return tx.SetMeta("b", "1") }); err != nil {
		t.Errorf("second writer: %v", err)
	}
	wg.Wait()
}

func BenchmarkWriteTx(b *testing.B) {
	s := openTest(b, filepath.Join(b.TempDir(), "drover.db"))
	ctx := b.Context()
	now := time.Now()
	if err := s.Write(ctx, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(store.User{ID: "u-1", Name: "alice", CreatedAt: now}),
			tx.InsertJob(store.Job{ID: "j-1", State: job.Queued, RequesterID: "u-1", CreatedAt: now, UpdatedAt: now}),
		)
	}); err != nil {
		b.Fatal(err)
	}
	e := store.Event{JobID: "j-1", At: now, Kind: "log", Actor: "bench", Message: "one durable transaction"}
	for b.Loop() {
		if err := s.Write(ctx, func(tx store.Tx) error {
			_, err := tx.AddEvent(e)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// The database and SQLite's own -wal and -shm are 0600 whatever the umask,
// and stay so after a checkpoint and after a reopen recreates them.
func TestFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0) // the loosest: SQLite alone would make 0644 files
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "drover.db")
	check := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if m := st.Mode().Perm(); m != 0o600 {
				t.Errorf("%s: %s has mode %04o, want 0600", when, filepath.Base(p), m)
			}
		}
	}
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	check("after open")
	if err := s.Write(t.Context(), func(tx store.Tx) error { return tx.SetMeta("k", "v") }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(t.Context(), `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	check("after a checkpoint")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the -wal outlived the last connection (%v): the reopen below would not recreate it", err)
	}
	s = openTest(t, path)
	check("after a reopen")
	if err := s.Write(t.Context(), func(tx store.Tx) error { return tx.SetMeta("k", "w") }); err != nil {
		t.Fatal(err)
	}
	check("after a write")
}
