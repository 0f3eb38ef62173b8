package repo

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/hub"
	"drover/internal/job"
	"drover/internal/testkit"
)

// TestPublishHubKilledBetweenPushAndPullRequest: a hub SIGKILLed while its
// pull request call to the forge hangs, after the branch was pushed, carries
// the publication on at its next start: exactly one push and one pull
// request on a real Gitea. Then a job started from that pull request
// publishes back onto it, and the forge's token (the canary) is found
// nowhere but the hub's forges table: no output, log, event, argv, agent
// environment, other table, file of the hub's data directory or home, or
// file of the runner's home (its worktrees and sandbox leftovers).
func TestPublishHubKilledBetweenPushAndPullRequest(t *testing.T) {
	t.Parallel()
	g := testkit.StartGitea(t)
	g.CreateRepo(t, g.AdminUser, "app")
	repo := g.AdminUser + "/app"
	proxy := testkit.NewForgeProxy(t, g.URL)
	proxy.On(http.MethodPost, "/pulls", -1, testkit.Hold)

	hub := testkit.StartHub(t, bin)
	r1 := hub.StartRunner(t, "r1")
	c := hub.Client()

	// The project shares its history with the forge's repository.
	src := filepath.Join(t.TempDir(), "app")
	e2ekit.Git(t, t.TempDir(), "clone", "--quiet", g.URL+"/"+repo+".git", src)
	v := e2ekit.RunRepo(t, hub, "--repo", src, "--agent", "exec", "--", "sh", "-c", "env && echo from the job > job.txt")
	end := testkit.WaitJob(t, c, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if end.State != job.Completed || end.Head == "" || end.Head == end.Base {
		t.Fatalf("job ended %s (head %s):\n%s", end.State, end.Head, testkit.Log(t, c, v.ID, 0))
	}

	tokFile := filepath.Join(t.TempDir(), "gitea.token")
	if err := os.WriteFile(tokFile, []byte(g.AdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var outs []string // every CLI output, for the canary
	cli := func(args ...string) string {
		t.Helper()
		out, err := hub.CLI(args...)
		outs = append(outs, out)
		if err != nil {
			t.Fatalf("drover %v: %v\n%s", args, err, out)
		}
		return out
	}
	cli("forges", "add", "gt", "--kind", "gitea", "--url", proxy.URL, "--forge-token-file", tokFile)
	cli("projects", "config", end.Project, "--forge", "gt", "--forge-repo", repo)

	// drover publish waits in the hub's pull request call; the hub dies there.
	published := make(chan string, 1)
	go func() {
		out, _ := hub.CLI("publish", v.ID, "--json")
		published <- out
	}()
	select {
	case <-proxy.Seen(http.MethodPost, "/pulls"):
	case <-time.After(3 * time.Minute):
		t.Fatalf("the hub never asked for the pull request; pushes %d", proxy.Count(http.MethodPost, "/git-receive-pack"))
	}
	hub.Kill()
	outs = append(outs, <-published)

	branch := "drover/" + v.ID
	var b struct {
		Commit struct {
			ID string `json:"id"`
		} `json:"commit"`
	}
	g.API(t, g.AdminToken, http.MethodGet, "/repos/"+repo+"/branches/"+branch, nil, &b)
	if b.Commit.ID != end.Head {
		t.Fatalf("branch %s on Gitea at %q, want the job's head %s", branch, b.Commit.ID, end.Head)
	}
	if ps := pulls(t, g, repo); len(ps) != 0 {
		t.Fatalf("%d pull requests before the restart: %+v", len(ps), ps)
	}

	proxy.Clear()
	hub.Restart()
	var pub *apitypes.PublicationView
	testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool {
		if pids := testkit.Procs(t, g.AdminToken); len(pids) != 0 {
			t.Fatalf("the forge's token is in the argv of processes %v", pids)
		}
		pub = v.Publication
		return pub != nil && pub.State != "pending"
	})
	if pub.State != "done" || pub.Commit != end.Head || pub.Branch != branch {
		t.Fatalf("publication after the restart: %+v", pub)
	}
	ps := pulls(t, g, repo)
	if len(ps) != 1 || ps[0].Head.Ref != branch || ps[0].Head.Sha != end.Head || ps[0].Number != pub.PR {
		t.Fatalf("pull requests after the restart = %+v, want one of %s at %s (publication %+v)", ps, branch, end.Head, pub)
	}
	if n := proxy.Count(http.MethodPost, "/git-receive-pack"); n != 1 {
		t.Errorf("%d pushes through the forge proxy, want 1", n)
	}

	// The canary: the forge's token is nowhere a user or an operator reads.
	show := cli("show", v.ID, "--json")
	var shown apitypes.JobView
	if i := strings.Index(show, "{"); i < 0 || json.Unmarshal([]byte(show[i:]), &shown) != nil || shown.Publication == nil || shown.Publication.State != "done" {
		t.Errorf("drover show --json carries no done publication:\n%s", show)
	}

	// A job from the pull request, once the project has its forge: the hub
	// fetches the pull request's head with the token and pushes the result
	// back onto it. Its agent prints its environment into its log.
	fix := e2ekit.RunRepo(t, hub, "--project", end.Project, "--from-pr", fmt.Sprint(pub.PR), "--agent", "exec", "--",
		"sh", "-c", "env && echo fixed >> job.txt")
	fixed := testkit.WaitJob(t, c, fix.ID, 3*time.Minute, func(v apitypes.JobView) bool {
		return v.State.Terminal() && (v.State != job.Completed || v.Publication != nil && v.Publication.State != "pending")
	})
	if fixed.State != job.Completed || fixed.Publication == nil || fixed.Publication.State != "done" {
		t.Fatalf("the job from pull request %d ended %s, publication %+v:\n%s", pub.PR, fixed.State, fixed.Publication, testkit.Log(t, c, fix.ID, 0))
	}

	var evJSON []byte
	for _, id := range []string{v.ID, fix.ID} {
		if log := cli("logs", id); !strings.Contains(log, "PATH=") {
			t.Errorf("the log of %s shows no environment of its agent:\n%s", id, log)
		}
		evs, err := c.Events(t.Context(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(evs)
		evJSON = append(evJSON, b...)
	}
	for name, s := range map[string]string{"hub output": hub.Output(), "runner output": r1.Output(), "CLI output (logs and agent environments too)": strings.Join(outs, "\n"), "events": string(evJSON)} {
		if strings.Contains(s, g.AdminToken) {
			t.Errorf("the forge's token is in the %s", name)
		}
	}
	assertCanaryStoredOnlyInForges(t, hub, g.AdminToken)
	for _, dir := range []struct {
		name, path string
		empty      bool // may hold no file at all
	}{
		{"hub's data directory", hub.Data, false},
		{"hub's home", hub.Home(), true},
		{"runner's home", r1.Home, false},
	} {
		files, searched := filesHolding(t, dir.path, g.AdminToken, hub.Data)
		if len(files) != 0 {
			t.Errorf("the forge's token is in files of the %s: %v", dir.name, files)
		}
		if searched == 0 && !dir.empty {
			t.Errorf("no file in the %s (%s) to search", dir.name, dir.path)
		}
	}
}

// assertCanaryStoredOnlyInForges fails unless canary is in the secret of a
// row of the hub's forges table and in no other column of any table.
func assertCanaryStoredOnlyInForges(t *testing.T, h *testkit.Hub, canary string) {
	t.Helper()
	cells := dbCellsHolding(t, hub.StorePath(h.Data), canary)
	if !cells["forges.secret"] {
		t.Errorf("the forge's token is not in forges.secret (found in %v): the check is blind", cells)
	}
	delete(cells, "forges.secret")
	if len(cells) != 0 {
		t.Errorf("the forge's token is in columns of the hub's database: %v", cells)
	}
}

// dbCellsHolding is every table.column of the SQLite database at path that
// holds canary in some row, read without writing.
func dbCellsHolding(t *testing.T, path, canary string) map[string]bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatalf("open the hub's database: %v", err)
	}
	defer db.Close()
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatalf("list the hub's tables: %v", err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, tbl := range tables {
		rows, err := db.Query(`SELECT * FROM "` + tbl + `"`)
		if err != nil {
			t.Fatalf("dump table %s: %v", tbl, err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("dump table %s: %v", tbl, err)
			}
			for i, v := range vals {
				var cell []byte
				switch v := v.(type) {
				case string:
					cell = []byte(v)
				case []byte:
					cell = v
				}
				if bytes.Contains(cell, []byte(canary)) {
					found[tbl+"."+cols[i]] = true
				}
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatalf("dump table %s: %v", tbl, err)
		}
	}
	if len(tables) == 0 {
		t.Fatalf("the hub's database at %s has no tables", path)
	}
	return found
}

// filesHolding is every file under root whose bytes hold canary, but the
// database files of the hub whose data directory is data (its store is
// where the token belongs; dbCellsHolding looks into it), and how many
// files it searched.
func filesHolding(t *testing.T, root, canary, data string) (found []string, searched int) {
	t.Helper()
	db := hub.StorePath(data)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || path == db || path == db+"-wal" || path == db+"-shm" {
			return nil
		}
		searched++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(canary)) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("search %s: %v", root, err)
	}
	return found, searched
}

// giteaPull is a pull request as Gitea lists it.
type giteaPull struct {
	Number int `json:"number"`
	Head   struct {
		Ref string `json:"ref"`
		Sha string `json:"sha"`
	} `json:"head"`
}

// pulls lists every pull request of repo on g.
func pulls(t *testing.T, g *testkit.Gitea, repo string) []giteaPull {
	t.Helper()
	var ps []giteaPull
	g.API(t, g.AdminToken, http.MethodGet, "/repos/"+repo+"/pulls?state=all", nil, &ps)
	return ps
}
