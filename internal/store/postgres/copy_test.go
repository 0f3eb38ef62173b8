package postgres

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"drover/internal/job"
	"drover/internal/store"
	"drover/internal/store/sqlite"
	"drover/internal/store/sqlstore"
)

// TestCopyFromSQLite: a copy of a SQLite store reads the same through the
// store's interface, numbers new events after the copied ones, and is
// refused by a database that has rows.
func TestCopyFromSQLite(t *testing.T) {
	src, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	now := time.UnixMilli(1_750_000_000_123).UTC()
	later := now.Add(time.Minute)
	exit := 3
	if err := src.Write(t.Context(), func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(store.User{ID: "u-1", Name: "alice", Admin: true, CreatedAt: now}),
			tx.InsertUser(store.User{ID: "u-2", Name: "bob", CreatedAt: now, RemovedAt: &later}),
			tx.InsertToken(store.Token{Hash: "h-1", Kind: store.TokenUser, OwnerID: "u-1", CreatedAt: now}),
			tx.InsertRunner(store.Runner{ID: "r-1", Name: "box", OwnerID: "u-1", TokenHash: "h-r", Slots: 2,
				Labels: map[string]string{"os": "linux"}, CreatedAt: now, LastSeen: &later}),
			tx.PutProject(store.Project{Name: "web", OwnerID: "u-1", CreatedAt: now, UpdatedAt: now}),
			tx.InsertJob(store.Job{ID: "j-1", State: job.Completed, Agent: "exec", Args: []string{"echo", "hi"},
				Labels: map[string]string{}, RequesterID: "u-1", Epoch: 1, AttemptID: "a-1", Tools: true,
				ExitCode: &exit, CreatedAt: now, UpdatedAt: later, FinishedAt: &later, Project: "web"}),
			tx.InsertAttempt(store.Attempt{ID: "a-1", JobID: "j-1", Epoch: 1, RunnerID: "r-1", State: job.AttemptFailed,
				OfferedAt: now, LeaseUntil: later, LogSize: 6, ExitCode: &exit}),
			tx.AppendLog("a-1", 0, []byte("hel")),
			tx.AppendLog("a-1", 3, []byte("lo\n")),
			tx.SetMeta("admin_user_id", "u-1"),
			tx.PutShare(store.Share{RunnerID: "r-1", Kind: store.ShareUser, Subject: "u-2", CreatedAt: now}),
			tx.InsertContextFile("j-1", store.ContextFile{Name: "a.txt", Data: []byte("ctx")}),
			tx.PutRequest("r-1", "q-1", []byte(`{"ok":true}`), now),
			tx.PutForge(store.Forge{Name: "gh", Kind: "github", URL: "https://gh.example", AppID: 42, Secret: "key",
				CreatedBy: "u-1", CreatedAt: now, UpdatedAt: later}),
			tx.PutPublication(store.Publication{JobID: "j-1", Forge: "gh", Repo: "acme/web", Mode: "pr", Draft: true,
				PRNumber: 3, State: store.PublicationDone, Tries: 1, CreatedAt: now, UpdatedAt: later}),
			tx.PutForgeThread(store.ForgeThread{JobID: "j-1", Project: "web", Forge: "gh", Repo: "acme/web", Number: 3, IsPR: true,
				StatusID: 9, Shown: "done", Settled: true, Questions: map[string]int64{"q-1": 10}, CreatedAt: now, UpdatedAt: later}),
			tx.InsertPipeline(store.Pipeline{ID: "p-1", Name: "loop", File: "loop.yaml", Project: "web", RequesterID: "u-1",
				Key: "k", Spec: "{}", Params: "{}", Staged: true, State: store.PipelineDone, CreatedAt: now, UpdatedAt: later}),
			tx.PutPipelineRun(store.PipelineRun{PipelineID: "p-1", Key: "fix#1", Step: "fix", Round: 1, Item: -1, JobID: "j-1",
				Tries: 1, State: store.RunDone, Replayed: true, CostUSD: 0.25, Tokens: 9, CreatedAt: now, UpdatedAt: later}),
			tx.PutStepResult(store.StepResult{Project: "web", Hash: "h", JobID: "j-1", CostUSD: 0.25, Tokens: 9, CreatedAt: now}),
			tx.PutHub(store.Hub{ID: "h-1", Version: "v1", StartedAt: now, LastSeen: later, Conns: 1}),
			tx.HoldRunner("r-1", "h-1", now),
			func() error { _, err := tx.TakeLeader("h-1", now, later); return err }(),
		)
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := src.Write(t.Context(), func(tx store.Tx) error {
			_, err := tx.AddEvent(store.Event{JobID: "j-1", At: now, Kind: "created", Actor: "alice", Message: "m"})
			_, perr := tx.AddPipelineEvent(store.PipelineEvent{PipelineID: "p-1", At: now, Kind: "started", Step: "fix#1"})
			return errors.Join(err, perr)
		}); err != nil {
			t.Fatal(err)
		}
	}

	dst := openTest(t, migratedURL(t))
	copyAll := func() error {
		return src.Snapshot(t.Context(), func(tx *sql.Tx) error { _, err := dst.CopyFrom(t.Context(), tx); return err })
	}
	if err := copyAll(); err != nil {
		t.Fatalf("copy: %v", err)
	}
	// What the hub reads, from both.
	read := func(s store.Store) map[string]any {
		got := map[string]any{}
		if err := s.Read(t.Context(), func(tx store.Tx) error {
			var errs []error
			keep := func(k string, v any, err error) { got[k] = v; errs = append(errs, err) }
			v1, err := tx.Users()
			keep("users", v1, err)
			v2, err := tx.Token("h-1")
			keep("token", v2, err)
			v3, err := tx.Runners()
			for i := range v3 {
				v3[i].Held = nil // holdings are the source hub's, not moved (checked below)
			}
			keep("runners", v3, err)
			v4, err := tx.Jobs(store.JobFilter{})
			keep("jobs", v4, err)
			v5, err := tx.Attempts("j-1")
			keep("attempts", v5, err)
			v6, err := tx.ReadLog("a-1", 0, 100)
			keep("log", string(v6), err)
			v7, err := tx.Events("j-1", 0, 0)
			keep("events", v7, err)
			v8, err := tx.Shares("r-1")
			keep("shares", v8, err)
			v9, err := tx.Members("web")
			keep("members", v9, err)
			v10, err := tx.ContextFiles("j-1", true)
			keep("context", v10, err)
			v11, _, err := tx.Request("r-1", "q-1")
			keep("request", string(v11), err)
			v12, err := tx.Meta("admin_user_id")
			keep("meta", v12, err)
			v13, err := tx.QueuedHeads(0)
			keep("queue", v13, err)
			v14, err := tx.Forges(true)
			keep("forges", v14, err)
			v15, err := tx.Publication("j-1")
			keep("publication", v15, err)
			v16, err := tx.Pipelines(store.PipelineFilter{})
			keep("pipelines", v16, err)
			v17, err := tx.PipelineRuns("p-1")
			keep("runs", v17, err)
			v18, err := tx.StepResult("web", "h")
			keep("step result", v18, err)
			v19, err := tx.PipelineEvents("p-1", 0, 0)
			keep("pipeline events", v19, err)
			v20, err := tx.ForgeThread("j-1")
			keep("forge thread", v20, err)
			return errors.Join(errs...)
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want, got := read(src), read(dst)
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s after copy = %+v, want %+v", k, got[k], w)
		}
	}
	// The stopped source hub's own records are not moved: a hub on the
	// target leads at once, and no runner counts as held.
	if err := dst.Read(t.Context(), func(tx store.Tx) error {
		hs, err := tx.Hubs()
		if err != nil || len(hs) != 0 {
			return fmt.Errorf("hubs after copy: %v %v", hs, err)
		}
		if holder, err := tx.RunnerHolder("r-1", time.Time{}); err != nil || holder != "" {
			return fmt.Errorf("holder after copy: %q %v", holder, err)
		}
		if l, err := tx.Leader(); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("leader after copy: %+v %v", l, err)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if want["log"] != "hello\n" {
		t.Errorf("source log = %q: the fixture is wrong", want["log"])
	}
	var seq, pseq int64
	if err := dst.Write(t.Context(), func(tx store.Tx) (err error) {
		seq, err = tx.AddEvent(store.Event{JobID: "j-1", At: now, Kind: "note"})
		if err == nil {
			pseq, err = tx.AddPipelineEvent(store.PipelineEvent{PipelineID: "p-1", At: now, Kind: "note"})
		}
		return err
	}); err != nil || seq != 4 || pseq != 4 {
		t.Errorf("first events after the copy, a job's and a pipeline's: seq %d and %d, %v; want 4 and 4", seq, pseq, err)
	}
	if err := copyAll(); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("copy into a database with rows: %v, want ErrNotEmpty", err)
	}
}

// TestSchemaMatchesSQLite: both engines have the same tables with the same
// columns (the logical schema copy-db and sqlstore's statements rely on),
// so a migration added to one engine without the other fails here.
func TestSchemaMatchesSQLite(t *testing.T) {
	src, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	columns := func(tx *sql.Tx, query string) map[string][]string {
		t.Helper()
		rows, err := tx.QueryContext(t.Context(), query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string][]string{}
		for rows.Next() {
			var table, col string
			if err := rows.Scan(&table, &col); err != nil {
				t.Fatal(err)
			}
			out[table] = append(out[table], col)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, cols := range out {
			slices.Sort(cols)
		}
		return out
	}
	var want map[string][]string
	if err := src.Snapshot(t.Context(), func(tx *sql.Tx) error {
		want = columns(tx, `SELECT m.name, c.name FROM sqlite_master m, pragma_table_xinfo(m.name) c
			WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	dst := openTest(t, migratedURL(t))
	tx, err := dst.db.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	got := columns(tx, `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'`)
	copied := sqlstore.CopiedTables()
	for table := range want {
		if table != "schema_migrations" && !slices.Contains(copied, table) {
			t.Errorf("copy-db does not copy table %s: add it to sqlstore's copyTables", table)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Postgres tables and columns\n%v\ndiffer from SQLite's\n%v", got, want)
	}
	if len(want) < 15 {
		t.Errorf("SQLite has %d tables: the query found too few", len(want))
	}
}
