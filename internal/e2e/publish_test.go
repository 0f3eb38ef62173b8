package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/testkit"
)

// TestPublishHubKilledBetweenPushAndPullRequest: a hub SIGKILLed while its
// pull request call to the forge hangs, after the branch was pushed, carries
// the publication on at its next start: exactly one push and one pull
// request on a real Gitea, and the forge's token in no output, log, event
// or argv.
func TestPublishHubKilledBetweenPushAndPullRequest(t *testing.T) {
	t.Parallel()
	g := testkit.StartGitea(t)
	g.CreateRepo(t, g.AdminUser, "app")
	repo := g.AdminUser + "/app"
	proxy := testkit.NewForgeProxy(t, g.URL)
	proxy.On(http.MethodPost, "/pulls", -1, testkit.Hold)

	hub := testkit.StartHub(t, bin)
	hub.StartRunner(t, "r1")
	c := hub.Client()

	// The project shares its history with the forge's repository.
	src := filepath.Join(t.TempDir(), "app")
	gitE(t, t.TempDir(), "clone", "--quiet", g.URL+"/"+repo+".git", src)
	v := runRepo(t, hub, "--repo", src, "--agent", "exec", "--", "sh", "-c", "echo from the job > job.txt")
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
	cli("logs", v.ID)
	evs, err := c.Events(t.Context(), v.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	evJSON, _ := json.Marshal(evs)
	for name, s := range map[string]string{"hub output": hub.Output(), "CLI output": strings.Join(outs, "\n"), "events": string(evJSON)} {
		if strings.Contains(s, g.AdminToken) {
			t.Errorf("the forge's token is in the %s", name)
		}
	}
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
