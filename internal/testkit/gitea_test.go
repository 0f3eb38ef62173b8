package testkit

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"drover/internal/gitcmd"
)

// giteaPull is the part of Gitea's pull request the tests read.
type giteaPull struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	Head   struct {
		Ref string `json:"ref"`
		Sha string `json:"sha"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

// TestGiteaPullRequestsOverHTTP is the chain issue 26's Gitea publisher stands on: a real Gitea
// takes a branch pushed by drover's own git (token in a header through the environment, as
// gitcmd.HeaderEnv passes it), opens a pull request for it through the REST API, lists it, and
// opens an AGit pull request from a push to refs/for/main; a user made by CreateUser has a
// working token.
func TestGiteaPullRequestsOverHTTP(t *testing.T) {
	g := StartGitea(t)
	owner, repo := g.AdminUser, "demo"
	g.CreateRepo(t, owner, repo)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var git gitcmd.Git
	auth := gitcmd.HeaderEnv(g.AdminToken)
	run := func(dir string, args ...string) string {
		t.Helper()
		b, err := git.Run(ctx, gitcmd.Cmd{Dir: dir, Args: args, Env: auth})
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return string(b)
	}
	work := filepath.Join(t.TempDir(), "work")
	run(filepath.Dir(work), "clone", g.URL+"/"+owner+"/"+repo+".git", work)
	commit := func(file, msg string) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(work, file), []byte(msg+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		run(work, "add", file)
		run(work, "commit", "-q", "-m", msg)
		sha, err := git.Out(ctx, work, "rev-parse", "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}

	// A branch, then a pull request for it through the API.
	run(work, "switch", "-q", "-c", "drover/job-1")
	sha := commit("job-1.txt", "job 1's result")
	run(work, "push", "-q", "origin", "drover/job-1")
	var opened giteaPull
	g.API(t, g.AdminToken, http.MethodPost, "/repos/"+owner+"/"+repo+"/pulls",
		map[string]string{"head": "drover/job-1", "base": "main", "title": "job 1"}, &opened)
	if opened.Number == 0 || opened.Head.Sha != sha {
		t.Fatalf("opened pull %+v, want one whose head is %s", opened, sha)
	}
	pulls := g.openPulls(t, owner, repo)
	var found []giteaPull
	for _, p := range pulls {
		if p.Head.Ref == "drover/job-1" && p.Base.Ref == "main" {
			found = append(found, p)
		}
	}
	if len(found) != 1 || found[0].Number != opened.Number {
		t.Fatalf("open pulls with head drover/job-1 and base main: %+v, want just #%d", found, opened.Number)
	}

	// An AGit pull request: a push to refs/for/main with a topic opens it, no branch needed.
	run(work, "switch", "-q", "-c", "agit", "origin/main")
	agitSHA := commit("agit.txt", "agit result")
	run(work, "push", "-q", "origin", "HEAD:refs/for/main", "-o", "topic=drover-test")
	var agit []giteaPull
	for _, p := range g.openPulls(t, owner, repo) {
		if p.Head.Sha == agitSHA && p.Base.Ref == "main" {
			agit = append(agit, p)
		}
	}
	if len(agit) != 1 || agit[0].Number == opened.Number || agit[0].Title != "agit result" {
		t.Fatalf("open pulls for the AGit push %s: %+v, want one new one titled by its commit", agitSHA, agit)
	}

	// A second user's token works, and is theirs.
	tok := g.CreateUser(t, "alice")
	var me struct {
		Login string `json:"login"`
	}
	g.API(t, tok, http.MethodGet, "/user", nil, &me)
	if me.Login != "alice" {
		t.Fatalf("alice's token is %q's", me.Login)
	}
}

func (g *Gitea) openPulls(t *testing.T, owner, repo string) []giteaPull {
	t.Helper()
	var pulls []giteaPull
	g.API(t, g.AdminToken, http.MethodGet, "/repos/"+owner+"/"+repo+"/pulls?state=open&limit=50", nil, &pulls)
	return pulls
}
