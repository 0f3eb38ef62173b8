package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/childproc"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/testkit"
)

// TestHubOnPostgresRunsAJob: a hub process on a real Postgres runs a job
// to completion on a real runner, and its log and history survive a hub
// restart.
func TestHubOnPostgresRunsAJob(t *testing.T) {
	t.Parallel()
	url := testkit.StartPostgres(t)
	hub := testkit.StartHub(t, bin, "--db", url)
	c := hub.Client()
	r := hub.StartRunner(t, "r1")
	j := e2ekit.Submit(t, c, "sh", "-c", `for i in 1 2 3; do echo "line $i"; done`)
	v := testkit.WaitJob(t, c, j.ID, time.Minute, testkit.InState(job.Completed))
	const want = "line 1\nline 2\nline 3\n"
	if got := testkit.Log(t, c, j.ID, 1); got != want {
		t.Fatalf("log = %q, want %q", got, want)
	}
	if n := e2ekit.ClaimsOf(r)[j.ID]; n != 1 || len(v.Attempts) != 1 {
		t.Fatalf("claimed %d times, %d attempts; want once", n, len(v.Attempts))
	}
	hub.Restart()
	if got := testkit.Log(t, c, j.ID, 1); got != want {
		t.Fatalf("log after a restart = %q, want %q", got, want)
	}
}

// TestCopyDBMovesAHubToPostgres: after copy-db, the hub on Postgres sees
// the SQLite hub's users, tokens, jobs, attempts, logs and events, and
// goes on running jobs; a second copy into it is refused.
func TestCopyDBMovesAHubToPostgres(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	alice := hub.AddUser(t, "alice")
	hub.StartRunner(t, "r1")
	j := e2ekit.Submit(t, c, "sh", "-c", "echo copied")
	testkit.WaitJob(t, c, j.ID, time.Minute, testkit.InState(job.Completed))
	type seen struct {
		Alice  apitypes.Whoami
		Users  apitypes.UserList
		Job    apitypes.JobView
		Log    string
		Events apitypes.EventList
	}
	look := func() seen {
		var s seen
		var err error
		ctx := t.Context()
		if s.Users, err = c.Users(ctx); err != nil {
			t.Fatal(err)
		}
		if s.Alice, err = alice.Client().Whoami(ctx); err != nil { // her token still works
			t.Fatal(err)
		}
		if s.Job, err = c.Job(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if s.Events, err = c.Events(ctx, j.ID, 0); err != nil {
			t.Fatal(err)
		}
		s.Log = testkit.Log(t, c, j.ID, 1)
		return s
	}
	before := look()
	if before.Log != "copied\n" || len(before.Events.Events) == 0 {
		t.Fatalf("before the copy: log %q, %d events", before.Log, len(before.Events.Events))
	}

	url := testkit.StartPostgres(t)
	hub.Kill() // copy-db wants the hub stopped
	copyDB := func() (string, error) {
		out, err := exec.Command(bin, "hub", "copy-db", "--data", hub.Data, "--to", url).CombinedOutput()
		return string(out), err
	}
	if out, err := copyDB(); err != nil || !strings.Contains(out, "users 2") || !strings.Contains(out, "log_chunks 1") {
		t.Fatalf("copy-db: %v\n%s", err, out)
	}
	hub.RestartWith("--db", url)
	if after := look(); !reflect.DeepEqual(after, before) {
		t.Fatalf("the hub on Postgres sees\n%+v\nwant what the SQLite hub saw\n%+v", after, before)
	}
	// It goes on: the runner reconnects and runs a new job.
	j2 := e2ekit.Submit(t, c, "sh", "-c", "echo after")
	testkit.WaitJob(t, c, j2.ID, time.Minute, testkit.InState(job.Completed))
	if got := testkit.Log(t, c, j2.ID, 1); got != "after\n" {
		t.Fatalf("log of a job after the move = %q", got)
	}
	if out, err := copyDB(); err == nil || !strings.Contains(out, "not empty") {
		t.Fatalf("copy-db into a database with rows: %v\n%s; want it refused", err, out)
	}
}

// TestHubRefusesABadDatabase: a wrong or unreachable --db fails the hub's
// start at once, naming the host and the cause, never the password.
func TestHubRefusesABadDatabase(t *testing.T) {
	t.Parallel()
	closed, err := childproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	const secret = "pa55-w0rd-secret"
	for _, tc := range []struct{ db, want string }{
		{fmt.Sprintf("postgres://drover:%s@%s/drover", secret, closed), closed},
		{"mysql://drover:" + secret + "@" + closed + "/drover", "postgres:// URL"},
	} {
		cmd := exec.Command(bin, "hub", "--listen", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "hub"), "--db", tc.db)
		cmd.Env = childproc.Env(t.TempDir())
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("hub --db %s started", tc.db)
		}
		if !strings.Contains(string(out), tc.want) || strings.Contains(string(out), secret) {
			t.Errorf("hub --db with a bad database said %q; want %q named and no password", out, tc.want)
		}
	}
}
