package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"drover/internal/fsutil"
	"drover/internal/job"
	"drover/internal/store"
	"drover/internal/store/sqlstore"
	"drover/internal/store/storetest"
	"drover/internal/testkit/disk"
)

func openTest(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	return storetest.Opened(t, s, err)
}

// migrated is the file of a new store with every migration applied, made
// once for the test binary: under -race, applying them is most of the CPU
// of a test that only needs an empty store (the tests of the migrations
// themselves open new files).
var migrated = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "drover-sqlite-template-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "drover.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		return nil, err
	}
	// Closing checkpoints the WAL into the file and removes it, so the
	// file alone is the whole database.
	if err := s.Close(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the closed template store left its WAL (%v)", err)
	}
	return os.ReadFile(path)
})

// newTest opens a new, empty store: a copy of migrated in a directory of
// the test's own.
func newTest(t testing.TB) *Store {
	t.Helper()
	db, err := migrated()
	if err != nil {
		t.Fatalf("migrated template store: %v", err)
	}
	path := filepath.Join(t.TempDir(), "drover.db")
	if err := os.WriteFile(path, db, 0o600); err != nil {
		t.Fatal(err)
	}
	return openTest(t, path)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newTest(t) })
}

// TestTemplateIsMigrated: a store opened from the template is at the last
// version and has nothing else in it.
func TestTemplateIsMigrated(t *testing.T) {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	s := newTest(t)
	if vs := appliedVersions(t, s); len(vs) != len(ms) || vs[len(vs)-1] != len(ms) {
		t.Fatalf("applied versions %v, want 1..%d", vs, len(ms))
	}
	if err := s.CheckSchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	var users int
	if err := s.r.QueryRowContext(t.Context(), `SELECT count(*) FROM users`).Scan(&users); err != nil || users != 0 {
		t.Fatalf("users in a new store: %d, %v; want none", users, err)
	}
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
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), path)
	if err == nil || !strings.Contains(err.Error(), "version 999 is newer") ||
		!strings.Contains(err.Error(), fmt.Sprintf("(version %d)", len(ms))) {
		t.Fatalf("Open of a newer schema: %v, want an error naming version 999 and %d", err, len(ms))
	}
}

// TestPragmas checks that every pooled connection, not only the first, has
// the settings durability and integrity depend on.
func TestPragmas(t *testing.T) {
	s := newTest(t)
	for _, p := range []struct {
		name  string
		db    *sql.DB
		conns int
		// The writer keeps its savepoints' sub-journal in memory (a
		// temporary file cost a group commit two writes per page).
		tempStore string
	}{{"writer", s.w, 1, "2"}, {"reader", s.r, 3, "0"}} {
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
				{"temp_store", p.tempStore},
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
	s := newTest(t)
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
	s := newTest(b)
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

// openVersion builds a database at path with only the first n migrations,
// as an older drover left it.
func openVersion(t *testing.T, path string, n int) *sql.DB {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	db, err := openPool(t.Context(), dsn(path, true), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMigrations(t.Context(), db, ms[:n]); err != nil {
		db.Close()
		t.Fatal(err)
	}
	return db
}

// TestTenancyMigration upgrades a version 7 database: each project's owner
// is the requester of its oldest job, else the admin, else nobody; every
// requester of its jobs is a member since their first job there, the owner
// since the project's creation.
func TestTenancyMigration(t *testing.T) {
	for _, tc := range []struct {
		name         string
		admin        string // meta admin_user_id, "" for none
		owners       map[string]string
		members      map[string][]string
		rootProjects []string // ProjectsOf(u-3), the admin in the first case
	}{
		{"with an admin", "u-3",
			map[string]string{"web": "u-1", "api": "u-3"},
			map[string][]string{"web": {"u-1", "u-4", "u-2"}, "api": {"u-3"}},
			[]string{"api"}},
		{"without an admin", "",
			map[string]string{"web": "u-1", "api": ""},
			map[string][]string{"web": {"u-1", "u-4", "u-2"}, "api": nil},
			nil},
		{"with a missing admin", "u-9",
			map[string]string{"web": "u-1", "api": ""},
			map[string][]string{"web": {"u-1", "u-4", "u-2"}, "api": nil},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "drover.db")
			db := openVersion(t, path, 7)
			const insertJob = `INSERT INTO jobs (id, state, agent, args, labels, requester_id, key, epoch,
				attempt_id, cancelling, reason, log_cap, created_at, updated_at, project)
				VALUES (?, 'completed', 'exec', '[]', '{}', ?, '', 1, '', 0, '', 0, ?, ?, ?)`
			type stmt struct {
				q    string
				args []any
			}
			stmts := []stmt{
				{`INSERT INTO users (id, name, admin, created_at) VALUES
					('u-1', 'alice', 0, 1), ('u-2', 'bob', 0, 2), ('u-3', 'root', 1, 3), ('u-4', 'carol', 0, 4)`, nil},
				{`INSERT INTO runners (id, name, owner_id, token_hash, slots, labels, created_at) VALUES ('r-1', 'box-1', 'u-2', 'h', 1, '{}', 4)`, nil},
				{`INSERT INTO projects (name, remote, created_at, updated_at) VALUES ('web', '', 1000, 1000), ('api', 'https://git.example/api.git', 1100, 1100)`, nil},
				// Newer jobs first; alice's is web's oldest. Bob's last job is
				// older than carol's, his first newer. ghost is no project,
				// so its job makes nobody a member.
				{insertJob, []any{"j-c2", "u-4", 4000, 4000, "web"}},
				{insertJob, []any{"j-b", "u-2", 3000, 3000, "web"}},
				{insertJob, []any{"j-a", "u-1", 1500, 1500, "web"}},
				{insertJob, []any{"j-b2", "u-2", 2000, 2000, "web"}},
				{insertJob, []any{"j-c", "u-4", 1800, 1800, "web"}},
				{insertJob, []any{"j-g", "u-3", 500, 500, "ghost"}},
				{insertJob, []any{"j-n", "u-3", 400, 400, ""}},
			}
			if tc.admin != "" {
				stmts = append(stmts, stmt{`INSERT INTO meta (key, value) VALUES ('admin_user_id', ?)`, []any{tc.admin}})
			}
			for _, st := range stmts {
				if _, err := db.ExecContext(t.Context(), st.q, st.args...); err != nil {
					db.Close()
					t.Fatalf("%s: %v", st.q, err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			s := openTest(t, path)
			if err := s.Read(t.Context(), func(tx store.Tx) error {
				for name, want := range tc.owners {
					p, err := tx.Project(name)
					if err != nil {
						return err
					}
					if p.OwnerID != want {
						t.Errorf("owner of %s = %q, want %q", name, p.OwnerID, want)
					}
					got, err := tx.Members(name)
					if err != nil {
						return err
					}
					if !slices.Equal(got, tc.members[name]) {
						t.Errorf("members of %s = %v, want %v", name, got, tc.members[name])
					}
				}
				// u-3's job on ghost, no project, makes it no member.
				if got, err := tx.ProjectsOf("u-3"); err != nil || !slices.Equal(got, tc.rootProjects) {
					t.Errorf("ProjectsOf(u-3) = %v (err %v), want %v", got, err, tc.rootProjects)
				}
				// Membership gives bob the others' jobs on web.
				js, err := tx.Jobs(store.JobFilter{VisibleTo: "u-2"})
				if err != nil {
					return err
				}
				if got, want := jobIDsOf(js), []string{"j-c2", "j-b", "j-b2", "j-c", "j-a"}; !slices.Equal(got, want) {
					t.Errorf("jobs visible to bob = %v, want %v", got, want)
				}
				r, err := tx.Runner("r-1")
				if err != nil {
					return err
				}
				if r.Access != "private" {
					t.Errorf("an upgraded runner's access = %q, want private", r.Access)
				}
				u, err := tx.User("u-1")
				if err == nil && u.RemovedAt != nil {
					t.Errorf("an upgraded user is removed at %v", u.RemovedAt)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func jobIDsOf(js []store.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// TestVisibleToUsesIndexes: the visibility queries reach jobs, attempts,
// runners and members through indexes only, never by scanning a table (or
// a whole index) of them, and each arm of Jobs through the index of its
// way, not one of every job in a state. Plans are those of a database
// without statistics, as the hub's.
func TestVisibleToUsesIndexes(t *testing.T) {
	s := newTest(t)
	jobsQ := func(f store.JobFilter) func() (string, []any) {
		return func() (string, []any) { return dialect.JobsQuery(f) }
	}
	questionsQ := func(f store.QuestionFilter) func() (string, []any) {
		return func() (string, []any) { return sqlstore.OpenQuestionsQuery(f) }
	}
	ways := []string{"jobs_requester", "jobs_project", "project_members_user", "runners_owner", "attempts_runner_job"}
	for _, tc := range []struct {
		name  string
		query func() (string, []any)
		uses  []string // indexes the plan must use
	}{
		{"jobs", jobsQ(store.JobFilter{VisibleTo: "u-1"}), ways},
		{"jobs by state", jobsQ(store.JobFilter{VisibleTo: "u-1", State: job.Completed}), ways},
		{"jobs by requester", jobsQ(store.JobFilter{VisibleTo: "u-1", RequesterID: "u-2"}), ways},
		{"jobs by state and requester", jobsQ(store.JobFilter{VisibleTo: "u-1", State: job.Queued, RequesterID: "u-2", Limit: 5}), ways},
		{"open questions", questionsQ(store.QuestionFilter{VisibleTo: "u-1"}), nil},
		{"open questions by requester, expired", questionsQ(store.QuestionFilter{VisibleTo: "u-1", RequesterID: "u-2", ExpiredBefore: time.Now()}), nil},
	} {
		q, args := tc.query()
		rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		whole := strings.Join(plan, "\n")
		searched := 0
		for _, line := range plan {
			f := strings.Fields(line)
			if len(f) < 2 || !slices.Contains([]string{"jobs", "attempts", "runners", "project_members"}, f[1]) {
				continue
			}
			if f[0] != "SEARCH" || strings.Contains(line, "jobs_state") {
				t.Errorf("%s: plan step %q is not a search of the visible jobs; plan:\n%s", tc.name, line, whole)
			}
			searched++
		}
		if searched < 3 {
			t.Errorf("%s: plan has %d searches, want one per table at least; plan:\n%s", tc.name, searched, whole)
		}
		for _, index := range tc.uses {
			if !strings.Contains(whole, " "+index+" ") {
				t.Errorf("%s: plan does not use index %s; plan:\n%s", tc.name, index, whole)
			}
		}
	}
}

// TestRunnerAccessDefault: "" is stored as private, and a row holding ""
// anyway reads as private.
func TestRunnerAccessDefault(t *testing.T) {
	s := newTest(t)
	now := time.Now()
	if err := s.Write(t.Context(), func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(store.User{ID: "u-1", Name: "alice", CreatedAt: now}),
			tx.InsertRunner(store.Runner{ID: "r-1", Name: "box-1", OwnerID: "u-1", CreatedAt: now}),
		)
	}); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := s.r.QueryRowContext(t.Context(), `SELECT access FROM runners WHERE id = 'r-1'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != "private" {
		t.Errorf("access stored for \"\" = %q, want private", stored)
	}
	if _, err := s.w.ExecContext(t.Context(), `UPDATE runners SET access = '' WHERE id = 'r-1'`); err != nil {
		t.Fatal(err)
	}
	if err := s.Read(t.Context(), func(tx store.Tx) error {
		r, err := tx.Runner("r-1")
		if err == nil && r.Access != "private" {
			t.Errorf("access read from \"\" = %q, want private", r.Access)
		}
		return err
	}); err != nil {
		t.Fatal(err)
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

// TestFullDiskIsErrNoSpace: a write the disk cannot take fails with
// store.ErrNoSpace (which fsutil.IsNoSpace knows) and keeps nothing; once
// space is freed the same write succeeds.
func TestFullDiskIsErrNoSpace(t *testing.T) {
	mnt := disk.Tmpfs(t, 4<<20)
	s := openTest(t, filepath.Join(mnt, "drover.db"))
	value := strings.Repeat("x", 512<<10) // more than the WAL holds already
	write := func() error {
		return s.Write(t.Context(), func(tx store.Tx) error { return tx.SetMeta("big", value) })
	}
	free := disk.Fill(t, mnt, 0)
	err := write()
	if !errors.Is(err, store.ErrNoSpace) || !fsutil.IsNoSpace(err) {
		t.Fatalf("write on a full disk: %v (no space: %v)", err, fsutil.IsNoSpace(err))
	}
	free()
	if err := write(); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	if err := s.Read(t.Context(), func(tx store.Tx) error {
		v, err := tx.Meta("big")
		if err == nil && v != value {
			t.Errorf("after the retried write, the value is %d bytes", len(v))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestShareConsentMigration upgrades a version 22 database, whose shares
// were made without their recipients' consent: account shares, and
// runner shares with a project the runner's owner is a member of, stay in
// effect; runner shares with a user, or with a project its owner is not
// a member of, become pending.
func TestShareConsentMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	db := openVersion(t, path, 22)
	for _, q := range []string{
		`INSERT INTO users (id, name, admin, created_at) VALUES ('u-1', 'alice', 0, 1), ('u-2', 'bob', 0, 2)`,
		`INSERT INTO runners (id, name, owner_id, token_hash, slots, labels, created_at) VALUES ('r-1', 'box-1', 'u-1', 'h', 1, '{}', 4)`,
		`INSERT INTO projects (name, remote, owner_id, created_at, updated_at) VALUES ('web', '', 'u-2', 5, 5), ('api', '', 'u-2', 5, 5)`,
		`INSERT INTO project_members (project, user_id, created_at) VALUES ('web', 'u-2', 5), ('api', 'u-2', 5), ('web', 'u-1', 6)`,
		`INSERT INTO shares (runner_id, account_id, kind, subject, created_at) VALUES
			('r-1', '', 'user', 'u-2', 10), ('r-1', '', 'project', 'web', 11), ('r-1', '', 'project', 'api', 12),
			('r-1', 'acc-a', 'user', 'u-2', 13)`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			db.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, path)
	got := map[string]bool{} // account/kind/subject → pending
	if err := s.Read(t.Context(), func(tx store.Tx) error {
		shs, err := tx.Shares("r-1")
		for _, sh := range shs {
			got[sh.AccountID+"/"+string(sh.Kind)+"/"+sh.Subject] = sh.Pending()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"/user/u-2": true, "/project/web": false, "/project/api": true, "acc-a/user/u-2": false}
	if !maps.Equal(got, want) {
		t.Errorf("pending after the upgrade = %v, want %v", got, want)
	}
}

// Statements are prepared once beside the transaction that first runs
// them (which holds the write pool's only connection) and then bound by
// later transactions: reads and writes give the same rows either way, and
// every statement is counted.
func TestPreparedStatements(t *testing.T) {
	s := newTest(t)
	round := func(i int) {
		t.Helper()
		k, v := fmt.Sprintf("k%d", i%3), fmt.Sprint(i)
		if err := s.Write(t.Context(), func(tx store.Tx) error { return tx.SetMeta(k, v) }); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := s.Read(t.Context(), func(tx store.Tx) error {
			var err error
			got, err = tx.Meta(k)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got != v {
			t.Fatalf("round %d: %s = %q, want %q", i, k, got, v)
		}
	}
	round(0)
	for i := 1; s.ws.Prepared() == 0 || s.rs.Prepared() == 0; i++ {
		if i > 10000 {
			t.Fatalf("no statement prepared after %d rounds (write pool %d, read pool %d)", i, s.ws.Prepared(), s.rs.Prepared())
		}
		round(i)
	}
	before := s.Statements()
	for i := range 20 {
		round(100 + i)
	}
	if n := s.Statements() - before; n < 40 {
		t.Errorf("20 rounds of a write and a read ran %d statements; want at least 40 counted", n)
	}
}
