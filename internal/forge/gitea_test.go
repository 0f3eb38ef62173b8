package forge_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/forge"
	"drover/internal/gitcmd"
	"drover/internal/testkit"
)

// TestGiteaPullRequests runs every Client operation against a real Gitea: a branch pushed
// with drover's git gets one pull request however often CreatePR is called, GetPR reads it, an
// AGit push is found by its head, and a wrong token or a missing repository fail with their
// codes and no token in the error.
func TestGiteaPullRequests(t *testing.T) {
	g := testkit.StartGitea(t)
	repo := forge.Repo{Owner: g.AdminUser, Name: "demo"}
	g.CreateRepo(t, repo.Owner, repo.Name)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	work, sha, push := cloneAndCommit(ctx, t, g, repo, "drover/job-1")
	push("drover/job-1")

	c, err := forge.NewGitea(g.URL, g.AdminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.FindPR(ctx, repo, "drover/job-1", "main"); err != nil || ok {
		t.Fatalf("FindPR before any pull request: found %v, %v", ok, err)
	}
	n := forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1", Body: "job 1's result\n\nby drover"}
	pr, err := c.CreatePR(ctx, repo, n)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Number == 0 || pr.HeadSHA != sha || pr.HeadBranch != "drover/job-1" || pr.Base != "main" ||
		pr.State != "open" || pr.Draft || !strings.HasPrefix(pr.URL, g.URL+"/") {
		t.Fatalf("CreatePR: %+v, want an open pull request of drover/job-1 at %s into main", pr, sha)
	}
	if found, ok, err := c.FindPR(ctx, repo, "drover/job-1", "main"); err != nil || !ok || found != pr {
		t.Fatalf("FindPR after CreatePR: %+v, %v, %v; want %+v", found, ok, err, pr)
	}
	again, err := c.CreatePR(ctx, repo, n)
	if err != nil || again.Number != pr.Number {
		t.Fatalf("CreatePR again: %+v, %v; want #%d again", again, err, pr.Number)
	}
	if got, err := c.GetPR(ctx, repo, pr.Number); err != nil || got != pr {
		t.Fatalf("GetPR(%d): %+v, %v; want %+v", pr.Number, got, err, pr)
	}
	var pulls []struct {
		Number int `json:"number"`
	}
	g.API(t, g.AdminToken, http.MethodGet, "/repos/"+repo.String()+"/pulls?state=all&limit=50", nil, &pulls)
	if len(pulls) != 1 {
		t.Fatalf("pull requests after two CreatePR: %+v, want just #%d", pulls, pr.Number)
	}

	// A draft, from a second branch.
	run(ctx, t, g, work, "switch", "-q", "-c", "drover/job-2", "origin/main")
	commit(ctx, t, work, "job-2.txt", "job 2's result")
	push("drover/job-2")
	draft, err := c.CreatePR(ctx, repo, forge.NewPR{Head: "drover/job-2", Base: "main", Title: "job 2", Draft: true})
	if err != nil || !draft.Draft || draft.Number == pr.Number {
		t.Fatalf("CreatePR of a draft: %+v, %v", draft, err)
	}

	// An AGit pull request has no branch: it is found by its head.
	run(ctx, t, g, work, "switch", "-q", "-c", "agit", "origin/main")
	agitSHA := commit(ctx, t, work, "agit.txt", "agit result")
	run(ctx, t, g, work, "push", "-q", "origin", "HEAD:refs/for/main", "-o", "topic=drover-x")
	agit, ok, err := c.FindPRByHeadSHA(ctx, repo, agitSHA)
	if err != nil || !ok || agit.HeadSHA != agitSHA || agit.Base != "main" || agit.Number == pr.Number || agit.Number == draft.Number {
		t.Fatalf("FindPRByHeadSHA(%s): %+v, %v, %v; want the AGit pull request", agitSHA, agit, ok, err)
	}
	if _, ok, err := c.FindPRByHeadSHA(ctx, repo, strings.Repeat("0", 40)); err != nil || ok {
		t.Fatalf("FindPRByHeadSHA of no pull request's head: found %v, %v", ok, err)
	}

	// A wrong token: unauthorized, and the token in no error.
	const canary = "canary0123456789abcdef0123456789abcdef01"
	bad, err := forge.NewGitea(g.URL, canary, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = bad.FindPR(ctx, repo, "drover/job-1", "main")
	wantCode(t, err, forge.CodeUnauthorized)
	_, err = bad.CreatePR(ctx, repo, n)
	wantCode(t, err, forge.CodeUnauthorized)

	// A missing repository (its pair lookup cannot tell it from a missing pull request, and
	// the create that follows says it), and a missing pull request.
	_, err = c.DefaultBranch(ctx, forge.Repo{Owner: g.AdminUser, Name: "nope"})
	wantCode(t, err, forge.CodeNotFound)
	_, err = c.CreatePR(ctx, forge.Repo{Owner: g.AdminUser, Name: "nope"}, n)
	wantCode(t, err, forge.CodeNotFound)
	_, err = c.GetPR(ctx, repo, 9999)
	wantCode(t, err, forge.CodeNotFound)
}

// wantCode fails unless err is a *forge.Error with code, and checks no error carries the
// canary token of the wrong-token calls.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	fe, ok := errors.AsType[*forge.Error](err)
	if !ok || fe.Code != code {
		t.Fatalf("error %v, want a forge.Error with code %s", err, code)
	}
	if strings.Contains(err.Error(), "canary") || strings.Contains(fe.Msg, "canary") {
		t.Fatalf("error %q holds the token", err)
	}
}

func run(ctx context.Context, t *testing.T, g *testkit.Gitea, dir string, args ...string) {
	t.Helper()
	var git gitcmd.Git
	if _, err := git.Run(ctx, gitcmd.Cmd{Dir: dir, Args: args, Env: gitcmd.HeaderEnv(g.AdminToken)}); err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
}

func commit(ctx context.Context, t *testing.T, work, file, msg string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(work, file), []byte(msg+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var git gitcmd.Git
	for _, args := range [][]string{{"add", file}, {"commit", "-q", "-m", msg}} {
		if _, err := git.Run(ctx, gitcmd.Cmd{Dir: work, Args: args}); err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
	}
	sha, err := git.Out(ctx, work, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

// cloneAndCommit clones repo, commits on a new branch, and returns the clone, the commit and
// a push of a branch.
func cloneAndCommit(ctx context.Context, t *testing.T, g *testkit.Gitea, repo forge.Repo, branch string) (string, string, func(string)) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	run(ctx, t, g, filepath.Dir(work), "clone", "-q", g.URL+"/"+repo.String()+".git", work)
	run(ctx, t, g, work, "switch", "-q", "-c", branch)
	sha := commit(ctx, t, work, "job-1.txt", "job 1's result")
	return work, sha, func(b string) { run(ctx, t, g, work, "push", "-q", "origin", b) }
}
