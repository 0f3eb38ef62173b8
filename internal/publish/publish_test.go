package publish_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/publish"
	"drover/internal/retry"
	"drover/internal/store"
	"drover/internal/store/sqlite"
	"drover/internal/testkit"
)

// fakeCore is the hub's core as publishing sees it: jobs of one project,
// whose results are commits of a bare repository standing in for the
// hub's, and the events recorded.
type fakeCore struct {
	mu     sync.Mutex
	jobs   map[string]publish.Job
	events []string
}

func (f *fakeCore) Job(_ context.Context, c call.Caller, id string) (publish.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok || (c.Name != "alice" && !c.Admin) {
		return publish.Job{}, call.NotFound("no job %q", id)
	}
	return j, nil
}

func (f *fakeCore) JobByID(ctx context.Context, id string) (publish.Job, error) {
	return f.Job(ctx, call.Caller{Admin: true}, id)
}

func (f *fakeCore) Event(_ context.Context, jobID, kind, actor, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, jobID+" "+kind+" "+actor+": "+text)
	return nil
}

func (f *fakeCore) Lock(context.Context, string) (func(), error) { return func() {}, nil }

// bench is a real Gitea behind a ForgeProxy, a store, and a "hub
// repository" cloned from the Gitea repository.
type bench struct {
	t      testing.TB
	g      *testkit.Gitea
	proxy  *testkit.ForgeProxy
	st     store.Store
	core   *fakeCore
	repo   string // OWNER/REPO
	hubDir string // the bare repository jobs' commits are in
	work   string // a clone that makes commits
	base   string // main's commit
	git    gitcmd.Git
	n      int
	reg    *prometheus.Registry // the last service's metrics
	key    string               // the hub's signing key (rewrite_test.go)
	env    []string             // more environment of git calls (fixed commit dates)
}

func newBench(t testing.TB) *bench {
	t.Helper()
	g := testkit.StartGitea(t)
	g.CreateRepo(t, g.AdminUser, "app")
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := &bench{t: t, g: g, proxy: testkit.NewForgeProxy(t, g.URL), st: st, core: &fakeCore{jobs: map[string]publish.Job{}},
		repo: g.AdminUser + "/app", hubDir: filepath.Join(t.TempDir(), "hub.git"), work: filepath.Join(t.TempDir(), "work")}
	b.run("", "clone", "-q", "--bare", g.URL+"/"+b.repo+".git", b.hubDir)
	b.run("", "clone", "-q", g.URL+"/"+b.repo+".git", b.work)
	b.base = b.out(b.work, "rev-parse", "HEAD")
	if err := st.Write(t.Context(), func(tx store.Tx) error {
		return tx.InsertUser(store.User{ID: alice.UserID, Name: alice.Name, CreatedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// add puts j in the core, and a row for it in the store (publications
// belong to jobs).
func (b *bench) add(j publish.Job) {
	b.t.Helper()
	now := time.Now()
	if err := b.st.Write(b.t.Context(), func(tx store.Tx) error {
		return tx.InsertJob(store.Job{ID: j.View.ID, State: j.View.State, Agent: "exec", RequesterID: alice.UserID,
			CreatedAt: now, UpdatedAt: now, Project: "app", Base: j.View.Base, Head: j.View.Head, Mode: protocol.ModeFix})
	}); err != nil {
		b.t.Fatal(err)
	}
	b.core.mu.Lock()
	b.core.jobs[j.View.ID] = j
	b.core.mu.Unlock()
}

func (b *bench) run(dir string, args ...string) {
	b.t.Helper()
	if _, err := b.git.Run(b.t.Context(), gitcmd.Cmd{Dir: dir, Args: args, Env: append(gitcmd.HeaderEnv(b.g.AdminToken), b.env...)}); err != nil {
		b.t.Fatalf("git %v: %v", args, err)
	}
}

func (b *bench) out(dir string, args ...string) string {
	b.t.Helper()
	s, err := b.git.Out(b.t.Context(), dir, args...)
	if err != nil {
		b.t.Fatalf("git %v: %v", args, err)
	}
	return s
}

// commit makes a commit on parent in the work clone and puts it in the
// hub repository.
func (b *bench) commit(parent, msg string) string {
	b.t.Helper()
	b.n++
	b.run(b.work, "checkout", "-q", "--detach", parent)
	if err := os.WriteFile(filepath.Join(b.work, fmt.Sprintf("f%d.txt", b.n)), []byte(msg+"\n"), 0o600); err != nil {
		b.t.Fatal(err)
	}
	b.run(b.work, "add", ".")
	b.run(b.work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", msg)
	sha := b.out(b.work, "rev-parse", "HEAD")
	b.run(b.work, "push", "-q", b.hubDir, sha+":refs/drover/jobs/"+sha[:8])
	return sha
}

// job adds a completed job whose result is a new commit on main.
func (b *bench) job(id string, cfg store.ProjectConfig) publish.Job {
	b.t.Helper()
	head := b.commit(b.base, "work of "+id)
	if cfg.Forge == "" {
		cfg.Forge, cfg.ForgeRepo = "gitea", b.repo
	}
	j := publish.Job{View: apitypes.JobView{ID: id, State: job.Completed, Agent: "exec", Args: []string{"fix the *bug* <script>x</script>\x1b[31m"},
		Requester: "alice", Project: "app", Base: b.base, Head: head, Mode: protocol.ModeFix,
		Attempts: []apitypes.AttemptView{{Number: 1, Usage: &protocol.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.25}}},
		Summary:  "done ~~~ ```"}, Config: cfg, RepoDir: b.hubDir, URL: "http://hub.test/jobs/" + id}
	b.add(j)
	return j
}

var admin = call.Caller{Name: "admin", Admin: true, UserID: "u-admin"}
var alice = call.Caller{Name: "alice", UserID: "u-alice"}

// service is a publishing service over the bench, its forge connection
// through the proxy, retrying quickly.
func (b *bench) service(ctx context.Context) *publish.Service {
	b.t.Helper()
	b.reg = prometheus.NewRegistry()
	s := publish.New(ctx, b.core, publish.Config{Store: b.st, Metrics: publish.NewMetrics(b.reg), SigningKey: b.key,
		Retry: retry.Policy{First: 50 * time.Millisecond, Max: time.Second, Tries: 6}})
	if _, err := s.PutForge(ctx, admin, "gitea", apitypes.ForgeRequest{Kind: "gitea", URL: b.proxy.URL, Token: b.g.AdminToken}); err != nil {
		b.t.Fatal(err)
	}
	return s
}

type pull struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	State  string `json:"state"`
	Head   struct {
		Ref string `json:"ref"`
		Sha string `json:"sha"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

func (b *bench) pulls() []pull {
	b.t.Helper()
	var ps []pull
	b.g.API(b.t, b.g.AdminToken, http.MethodGet, "/repos/"+b.repo+"/pulls?state=all&limit=50", nil, &ps)
	return ps
}

func (b *bench) branch(name string) string {
	b.t.Helper()
	out, err := b.git.Run(b.t.Context(), gitcmd.Cmd{Args: []string{"ls-remote", b.g.URL + "/" + b.repo + ".git", "refs/heads/" + name},
		Env: gitcmd.HeaderEnv(b.g.AdminToken)})
	if err != nil {
		b.t.Fatal(err)
	}
	sha, _, _ := strings.Cut(string(out), "\t")
	return sha
}

const pushPath = "/git-receive-pack"

// TestPublishPullRequestExactlyOnce: a job's result becomes a branch
// drover/JOB and one pull request into the default branch, whose body
// escapes what the job said; publishing again answers the record with no
// forge call; a reply lost after Gitea made the pull request is retried
// into the same one.
func TestPublishPullRequestExactlyOnce(t *testing.T) {
	b := newBench(t)
	s := b.service(t.Context())
	j := b.job("j1", store.ProjectConfig{})
	b.proxy.On(http.MethodPost, "/pulls", 1, testkit.LoseReply)
	v, err := s.PublishJob(t.Context(), alice, "j1", apitypes.PublishRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.State != "done" || v.Code != "ok" || v.PR == 0 || v.Branch != "drover/j1" || v.Base != "main" || v.Pushed != j.View.Head {
		t.Fatalf("publication = %+v", v)
	}
	ps := b.pulls()
	if len(ps) != 1 || ps[0].Number != v.PR || ps[0].Head.Ref != "drover/j1" || ps[0].Head.Sha != j.View.Head || ps[0].Base.Ref != "main" {
		t.Fatalf("pull requests on Gitea = %+v, want one for %+v", ps, v)
	}
	// The prompt is text of a code block, its control characters escaped.
	if !strings.Contains(ps[0].Body, "~~~text\nfix the *bug* <script>x</script>\\x1b[31m\n~~~\n") || strings.Contains(ps[0].Body, "\x1b") ||
		!strings.Contains(ps[0].Body, "~~~~text\ndone ~~~ ```\n~~~~\n") ||
		!strings.Contains(ps[0].Body, "http://hub.test/jobs/j1") || !strings.Contains(ps[0].Body, "$0.25") {
		t.Errorf("pull request body is not the escaped summary of the job:\n%s", ps[0].Body)
	}
	if ps[0].Title != `fix the *bug* <script>x</script>\x1b[31m` {
		t.Errorf("title = %q", ps[0].Title)
	}
	if n := b.proxy.Count(http.MethodPost, pushPath); n != 1 {
		t.Errorf("%d pushes, want 1", n)
	}
	before := b.proxy.Count("", "")
	v2, err := s.PublishJob(t.Context(), alice, "j1", apitypes.PublishRequest{})
	if err != nil || v2.PR != v.PR || v2.State != "done" {
		t.Fatalf("publishing again = %+v, %v", v2, err)
	}
	if n := b.proxy.Count("", "") - before; n != 0 {
		t.Errorf("publishing again made %d forge requests, want 0", n)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"drover_forge_requests_total", map[string]string{"forge": "gitea", "op": "create_pr", "code": "ok"}, 1},
		{"drover_forge_requests_total", map[string]string{"forge": "gitea", "op": "create_pr", "code": "unavailable"}, 0},
		{"drover_forge_requests_total", map[string]string{"forge": "gitea", "op": "default_branch", "code": "ok"}, 1},
		{"drover_publications_total", map[string]string{"outcome": "ok"}, 1},
	} {
		if got := counter(t, b.reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, err := s.PublishJob(t.Context(), call.Caller{Name: "mallory", UserID: "u-m"}, "j1", apitypes.PublishRequest{}); err == nil ||
		!strings.Contains(err.Error(), "no job") {
		t.Errorf("a user who may not see the job publishes it: %v", err)
	}
}

// TestPublishResumesAfterACrashBetweenPushAndPullRequest: a hub that
// stops (its context ends) while the pull request call hangs, after the
// push, leaves the publication pending; the next start resumes it into one
// pull request, with no second push.
func TestPublishResumesAfterACrashBetweenPushAndPullRequest(t *testing.T) {
	b := newBench(t)
	hubCtx, kill := context.WithCancel(t.Context())
	s := b.service(hubCtx)
	j := b.job("j2", store.ProjectConfig{})
	b.proxy.On(http.MethodPost, "/pulls", -1, testkit.Hold)
	reqCtx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		<-b.proxy.Seen(http.MethodPost, "/pulls")
		kill() // the hub dies in the call
		cancel()
	}()
	v, err := s.PublishJob(reqCtx, alice, "j2", apitypes.PublishRequest{})
	if err != nil || v.State != "pending" {
		t.Fatalf("publication while the hub dies = %+v, %v; want pending", v, err)
	}
	s.Wait()
	if sha := b.branch("drover/j2"); sha != j.View.Head {
		t.Fatalf("branch drover/j2 = %q, want the pushed %s", sha, j.View.Head)
	}
	if n := len(b.pulls()); n != 0 {
		t.Fatalf("%d pull requests before the restart", n)
	}
	b.proxy.Clear()
	s2 := b.service(t.Context())
	if err := s2.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	s2.Wait()
	ps := b.pulls()
	if len(ps) != 1 || ps[0].Head.Sha != j.View.Head {
		t.Fatalf("pull requests after the restart = %+v, want one", ps)
	}
	if n := b.proxy.Count(http.MethodPost, pushPath); n != 1 {
		t.Errorf("%d pushes, want 1", n)
	}
	var p store.Publication
	if err := b.st.Read(t.Context(), func(tx store.Tx) error { p, err = tx.Publication("j2"); return err }); err != nil {
		t.Fatal(err)
	}
	if p.State != store.PublicationDone || p.PRNumber != ps[0].Number || p.Tries != 2 {
		t.Errorf("record after the restart = %+v", p)
	}
}

// TestPublishRefusesAMovedBranch: a branch someone else moved since
// drover last saw it ends the publication as remote_moved, without a
// push over it.
func TestPublishRefusesAMovedBranch(t *testing.T) {
	b := newBench(t)
	s := b.service(t.Context())
	b.job("j3", store.ProjectConfig{})
	other := b.commit(b.base, "someone else's")
	b.run(b.work, "push", "-q", b.g.URL+"/"+b.repo+".git", other+":refs/heads/drover/j3")
	v, err := s.PublishJob(t.Context(), alice, "j3", apitypes.PublishRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.State != "failed" || v.Code != publish.CodeRemoteMoved {
		t.Fatalf("publication = %+v, want failed remote_moved", v)
	}
	if sha := b.branch("drover/j3"); sha != other {
		t.Fatalf("branch moved to %s, want it left at %s", sha, other)
	}
	if len(b.pulls()) != 0 {
		t.Fatal("a pull request was opened")
	}
}

// TestPublishToPullRequestAndBase: a job's commit is pushed onto an open
// pull request's branch (fast-forward only, the base the pull request's),
// one that does not descend from its head is refused, a new pull request
// goes into the base asked for, and a branch publication to the default
// branch is refused unless the project allows it.
func TestPublishToPullRequestAndBase(t *testing.T) {
	b := newBench(t)
	s := b.service(t.Context())
	b.run(b.work, "push", "-q", b.g.URL+"/"+b.repo+".git", b.base+":refs/heads/dev")
	feature := b.commit(b.base, "feature")
	b.run(b.work, "push", "-q", b.g.URL+"/"+b.repo+".git", feature+":refs/heads/feature")
	var pr pull
	b.g.API(t, b.g.AdminToken, http.MethodPost, "/repos/"+b.repo+"/pulls",
		map[string]string{"head": "feature", "base": "dev", "title": "feature"}, &pr)

	follow := b.commit(feature, "follow-up")
	b.add(publish.Job{View: apitypes.JobView{ID: "j4", State: job.Completed, Args: []string{"more"}, Project: "app",
		Base: feature, Head: follow, Mode: protocol.ModeFix}, Config: store.ProjectConfig{Forge: "gitea", ForgeRepo: b.repo}, RepoDir: b.hubDir})
	v, err := s.PublishJob(t.Context(), alice, "j4", apitypes.PublishRequest{Mode: "to_pr", ToPR: pr.Number})
	if err != nil || v.State != "done" || v.PR != pr.Number || v.Branch != "feature" || v.Base != "dev" {
		t.Fatalf("push to pull request %d = %+v, %v", pr.Number, v, err)
	}
	if sha := b.branch("feature"); sha != follow {
		t.Fatalf("feature = %s, want %s", sha, follow)
	}

	j5 := b.job("j5", store.ProjectConfig{}) // on main, not on feature
	_ = j5
	v, err = s.PublishJob(t.Context(), alice, "j5", apitypes.PublishRequest{Mode: "to_pr", ToPR: pr.Number})
	if err != nil || v.State != "failed" || v.Code != publish.CodeNotFastForward {
		t.Fatalf("a push that is not a fast-forward = %+v, %v", v, err)
	}
	if sha := b.branch("feature"); sha != follow {
		t.Fatalf("feature moved to %s", sha)
	}

	v, err = s.PublishJob(t.Context(), alice, "j5", apitypes.PublishRequest{Base: "dev", Draft: true})
	if err != nil || v.State != "done" || v.Base != "dev" {
		t.Fatalf("publication into dev = %+v, %v", v, err)
	}

	b.job("j6", store.ProjectConfig{})
	v, err = s.PublishJob(t.Context(), alice, "j6", apitypes.PublishRequest{Mode: "branch", Branch: "main"})
	if err != nil || v.State != "failed" || v.Code != publish.CodeProtected {
		t.Fatalf("a push to main = %+v, %v", v, err)
	}
	if sha := b.branch("main"); sha != b.base {
		t.Fatalf("main moved to %s", sha)
	}

	// A branch the forge protects: its refusal is the outcome, said once.
	b.g.API(t, b.g.AdminToken, http.MethodPost, "/repos/"+b.repo+"/branch_protections",
		map[string]any{"rule_name": "release", "enable_push": false}, nil)
	pushes := b.proxy.Count(http.MethodPost, pushPath)
	v, err = s.PublishJob(t.Context(), alice, "j6", apitypes.PublishRequest{Mode: "branch", Branch: "release"})
	if err != nil || v.State != "failed" || v.Code != publish.CodePushRefused || !strings.Contains(v.Reason, "protected") {
		t.Fatalf("a push to a protected branch = %+v, %v", v, err)
	}
	if n := b.proxy.Count(http.MethodPost, pushPath) - pushes; n != 1 {
		t.Errorf("the refused push was tried %d times, want once", n)
	}
	if sha := b.branch("release"); sha != "" {
		t.Fatalf("release was made at %s", sha)
	}
}

// TestPublishAGit: an AGit publication opens a pull request with no
// branch, found again by its commit.
func TestPublishAGit(t *testing.T) {
	b := newBench(t)
	s := b.service(t.Context())
	j := b.job("j7", store.ProjectConfig{})
	v, err := s.PublishJob(t.Context(), alice, "j7", apitypes.PublishRequest{Mode: "agit"})
	if err != nil || v.State != "done" || v.PR == 0 {
		t.Fatalf("AGit publication = %+v, %v", v, err)
	}
	ps := b.pulls()
	if len(ps) != 1 || ps[0].Head.Sha != j.View.Head || ps[0].Base.Ref != "main" {
		t.Fatalf("pull requests = %+v", ps)
	}
}

// TestPublishBadRequests: what a publication refuses changes nothing.
func TestPublishBadRequests(t *testing.T) {
	b := newBench(t)
	s := b.service(t.Context())
	b.job("j8", store.ProjectConfig{})
	b.add(publish.Job{View: apitypes.JobView{ID: "unmapped", State: job.Completed, Project: "app", Base: b.base,
		Head: b.commit(b.base, "x"), Mode: protocol.ModeFix}, RepoDir: b.hubDir})
	b.add(publish.Job{View: apitypes.JobView{ID: "running", State: job.Running, Project: "app", Base: b.base,
		Head: b.base, Mode: protocol.ModeFix}, Config: store.ProjectConfig{Forge: "gitea", ForgeRepo: b.repo}, RepoDir: b.hubDir})
	for _, c := range []struct {
		id   string
		req  apitypes.PublishRequest
		want string
	}{
		{"j8", apitypes.PublishRequest{Mode: "merge"}, "publication mode"},
		{"j8", apitypes.PublishRequest{Branch: "bad..name"}, "head branch"},
		{"j8", apitypes.PublishRequest{Branch: "-x"}, "head branch"},
		{"j8", apitypes.PublishRequest{Title: "two\nlines"}, "control character"},
		{"j8", apitypes.PublishRequest{Mode: "to_pr"}, "number"},
		{"j8", apitypes.PublishRequest{Mode: "to_pr", ToPR: 1, Base: "dev"}, "give neither"},
		{"j8", apitypes.PublishRequest{Mode: "branch", Draft: true}, "draft"},
		{"unmapped", apitypes.PublishRequest{}, "mapped to no forge"},
		{"running", apitypes.PublishRequest{}, "only a completed job"},
	} {
		_, err := s.PublishJob(t.Context(), alice, c.id, c.req)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("publish %s %+v: %v, want %q", c.id, c.req, err, c.want)
		}
	}
	if n := b.proxy.Count("", ""); n != 0 {
		t.Errorf("refused requests made %d forge requests", n)
	}
	if err := b.st.Read(t.Context(), func(tx store.Tx) error {
		_, err := tx.Publication("j8")
		return err
	}); err == nil {
		t.Error("a refused request recorded a publication")
	}
}

// TestFromPRPublishesBack: a job started from a pull request starts at its
// head (fetched into the hub's repository) and, once completed, publishes
// back onto it: the intent recorded with the completion, carried on after.
func TestFromPRPublishesBack(t *testing.T) {
	b := newBench(t)
	s := b.service(t.Context())
	feature := b.commit(b.base, "feature")
	b.run(b.work, "push", "-q", b.g.URL+"/"+b.repo+".git", feature+":refs/heads/feature")
	var pr pull
	b.g.API(t, b.g.AdminToken, http.MethodPost, "/repos/"+b.repo+"/pulls",
		map[string]string{"head": "feature", "base": "main", "title": "feature"}, &pr)
	// The hub's repository has not seen the pull request's head.
	b.run(b.hubDir, "update-ref", "-d", "refs/drover/jobs/"+feature[:8])
	b.run(b.hubDir, "reflog", "expire", "--expire=now", "--all")
	b.run(b.hubDir, "gc", "-q", "--prune=now")
	if _, err := b.git.Out(t.Context(), b.hubDir, "cat-file", "-e", feature+"^{commit}"); err == nil {
		t.Fatal("the hub's repository holds the head before FromPR")
	}

	cfg := store.ProjectConfig{Forge: "gitea", ForgeRepo: b.repo}
	base, planned, err := s.FromPR(t.Context(), cfg, b.hubDir, pr.Number)
	if err != nil || base != feature || planned.State != store.PublicationPlanned || planned.Branch != "feature" || planned.ToPR != pr.Number {
		t.Fatalf("FromPR = %s, %+v, %v", base, planned, err)
	}
	if _, err := b.git.Out(t.Context(), b.hubDir, "cat-file", "-e", feature+"^{commit}"); err != nil {
		t.Fatalf("the head was not fetched: %v", err)
	}
	if _, _, err := s.FromPR(t.Context(), cfg, b.hubDir, 999); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Errorf("FromPR of a missing pull request: %v", err)
	}

	follow := b.commit(feature, "follow-up")
	b.add(publish.Job{View: apitypes.JobView{ID: "jp", State: job.Completed, Args: []string{"review fixes"}, Project: "app",
		Base: feature, Head: follow, Mode: protocol.ModeFix}, Config: cfg, RepoDir: b.hubDir})
	planned.JobID = "jp"
	now := time.Now()
	err = b.st.Write(t.Context(), func(tx store.Tx) error {
		if err := tx.PutPublication(planned); err != nil {
			return err
		}
		ok, err := publish.Intent(tx, store.Job{ID: "jp", State: job.Completed, Project: "app", Base: feature, Head: follow, Mode: protocol.ModeFix}, now)
		if err == nil && !ok {
			err = fmt.Errorf("no intent recorded")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.JobCompleted(t.Context(), "jp")
	s.Wait()
	if sha := b.branch("feature"); sha != follow {
		t.Fatalf("feature = %s, want the job's %s", sha, follow)
	}
	var p store.Publication
	if err := b.st.Read(t.Context(), func(tx store.Tx) error { p, err = tx.Publication("jp"); return err }); err != nil {
		t.Fatal(err)
	}
	if p.State != store.PublicationDone || p.PRNumber != pr.Number || len(b.pulls()) != 1 {
		t.Fatalf("publication back = %+v; pull requests %d", p, len(b.pulls()))
	}
}

// counter is the value of the counter name with labels in reg (0 when
// there is none).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
