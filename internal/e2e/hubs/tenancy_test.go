package hubs

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/e2e/e2ekit"
	"drover/internal/gitcmd"
	"drover/internal/job"
	"drover/internal/localrepo"
	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
)

// Three users on one hub: the admin (the hub's first user), alice and bob,
// each with their own token and their own runners.

// tenants starts a hub with the users alice and bob.
func tenants(t *testing.T) (*testkit.Hub, *testkit.User, *testkit.User) {
	t.Helper()
	h := testkit.StartHub(t, bin)
	return h, h.AddUser(t, "alice"), h.AddUser(t, "bob")
}

// submitAs submits an exec job as u through the API.
func submitAs(t *testing.T, u *testkit.User, req apitypes.SubmitRequest) apitypes.JobView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if req.Agent == "" {
		req.Agent = "exec"
	}
	v, _, err := u.Client().Submit(ctx, req)
	if err != nil {
		t.Fatalf("submit as %s: %v", u.Name, err)
	}
	return v
}

// submitMany submits n exec jobs running argv as u and returns their ids.
func submitMany(t *testing.T, u *testkit.User, n int, argv ...string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = submitAs(t, u, apitypes.SubmitRequest{Args: argv}).ID
	}
	return ids
}

// completedOn waits for each job to complete and returns, per job, the
// runners its attempts were offered to.
func completedOn(t *testing.T, c *client.Client, ids []string) map[string][]string {
	t.Helper()
	on := map[string][]string{}
	for _, id := range ids {
		v := testkit.WaitJob(t, c, id, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
		if v.State != job.Completed {
			t.Fatalf("job %s ended %s (%s)", id, v.State, v.Reason)
		}
		for _, a := range v.Attempts {
			on[id] = append(on[id], a.Runner)
		}
	}
	return on
}

// bob's runner, with more free slots than alice's, never gets her private
// jobs; once bob shares it with alice it runs some of them, and once he
// takes the share back it runs none again. The runners' own journals say
// what each one claimed.
func TestTenancyRunnerRunsOnlyTheJobsItIsSharedFor(t *testing.T) {
	t.Parallel()
	_, alice, bob := tenants(t)
	ac := alice.Client()
	ar := alice.StartRunner(t, "alices", "--slots", "1")
	br := bob.StartRunner(t, "bobs", "--slots", "4")

	// bob's runner works: his own job runs there.
	bj := submitAs(t, bob, apitypes.SubmitRequest{Args: []string{"echo", "bob"}})
	if on := completedOn(t, bob.Client(), []string{bj.ID}); !slices.Equal(on[bj.ID], []string{"bobs"}) {
		t.Fatalf("bob's job ran on %v", on[bj.ID])
	}
	ar.WaitConnected(time.Minute)

	// Private: all of alice's jobs queue for her one slot while bob's
	// runner has four free.
	private := submitMany(t, alice, 6, "sh", "-c", "sleep 0.2; echo alice")
	busy := testkit.WaitJob(t, ac, private[len(private)-1], time.Minute, func(v apitypes.JobView) bool {
		return v.Waiting != "" || v.State != job.Queued
	})
	if busy.State == job.Queued && !strings.Contains(busy.Waiting, "busy") {
		t.Errorf("alice's queued job waits because %q, want her busy runner", busy.Waiting)
	}
	for id, on := range completedOn(t, ac, private) {
		if !slices.Equal(on, []string{"alices"}) {
			t.Errorf("alice's private job %s was offered to %v", id, on)
		}
	}
	claims, bobs := e2ekit.ClaimsOf(ar, br), e2ekit.ClaimsOf(br)
	for _, id := range private {
		if bobs[id] != 0 {
			t.Errorf("bob's runner claimed alice's private job %s", id)
		}
		if claims[id] != 1 {
			t.Errorf("job %s claimed %d times", id, claims[id])
		}
	}
	// bob sees none of them: he is not their requester, nor does he own a
	// runner that ran them.
	if _, err := bob.Client().Job(context.Background(), private[0]); testkit.Status(err) != http.StatusNotFound {
		t.Errorf("bob reading alice's job: %v, want 404", err)
	}

	// Shared with alice, bob's runner takes none of her jobs until she
	// accepts; then, once her own runner is busy, it takes some.
	e2ekit.Must(t, bob.CLI, "runners", "share", "bobs", "--user", "alice")
	if out := e2ekit.Must(t, alice.CLI, "runners"); !strings.Contains(out, "drover runners accept bobs") {
		t.Errorf("alice's runner list does not offer bob's share:\n%s", out)
	}
	e2ekit.Must(t, alice.CLI, "runners", "accept", "bobs")
	rl := e2ekit.CLIJSON[apitypes.RunnerList](t, alice.CLI, "runners")
	if i := slices.IndexFunc(rl.Runners, func(r apitypes.RunnerView) bool { return r.Name == "bobs" }); i < 0 || rl.Runners[i].Owner != "bob" {
		t.Errorf("alice's runner list lacks bob's shared runner: %+v", rl.Runners)
	}
	shared := submitMany(t, alice, 8, "sh", "-c", "sleep 1; echo alice")
	onBob := 0
	for id, on := range completedOn(t, ac, shared) {
		if len(on) != 1 {
			t.Errorf("shared job %s had attempts on %v", id, on)
		}
		if on[0] == "bobs" {
			onBob++
		}
	}
	bobClaims := e2ekit.ClaimsOf(br)
	n := 0
	for _, id := range shared {
		n += bobClaims[id]
	}
	if onBob == 0 || n != onBob {
		t.Fatalf("after the share bob's runner ran %d of alice's %d jobs (its journal: %d), want some", onBob, len(shared), n)
	}
	// bob sees a job his runner ran; alice's own runner's stay hers.
	for _, id := range shared {
		_, err := bob.Client().Job(context.Background(), id)
		if ranByBob := bobClaims[id] > 0; ranByBob != (err == nil) {
			t.Errorf("bob reading alice's job %s (ran on his runner: %v): %v", id, ranByBob, err)
		}
	}

	// Unshared: private again.
	e2ekit.Must(t, bob.CLI, "runners", "unshare", "bobs", "--user", "alice")
	again := submitMany(t, alice, 3, "sh", "-c", "sleep 0.2; echo alice")
	done := completedOn(t, ac, again)
	bobs = e2ekit.ClaimsOf(br)
	for id, on := range done {
		if !slices.Equal(on, []string{"alices"}) || bobs[id] != 0 {
			t.Errorf("after the unshare alice's job %s was offered to %v", id, on)
		}
	}
}

// alice's runner has a Claude account of hers. bob's Claude job is not
// offered there while the runner is not shared with him, nor while the
// runner is but the account is not: it stays queued, saying why, and the
// model never sees it. alice's own job on that runner runs with her
// account; once she shares the account with bob, his runs too.
func TestTenancyVendorJobUsesOnlyAccountsSharedWithItsRequester(t *testing.T) {
	t.Parallel()
	h, alice, bob := tenants(t)
	deliver := func(who string) fakemodel.Turn {
		return fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": "said hello for " + who})
	}
	// One conversation after the other: alice's, then bob's.
	fake := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		deliver("alice"), fakemodel.Text("Done."),
		deliver("bob"), fakemodel.Text("Done."),
	}, fakemodel.RequireKey(e2ekit.RealKey))
	ar := alice.LoginRunner(t, "alices", h.URL)
	ar.Env = []string{"PATH=" + testkit.AgentCLI(t, "claude") + ":" + os.Getenv("PATH")}
	e2ekit.AddAccount(t, ar, "claude", "main", fake.URL)
	ar.Start()
	bc := bob.Client()

	const bobPrompt = "Say hello for bob-7f3e."
	bj := bob.Run(t, "--agent", "claude", "--", bobPrompt)
	v := testkit.WaitJob(t, bc, bj.ID, time.Minute, e2ekit.Waiting("runs your jobs"))
	t.Logf("bob's job, alice's runner private: %s", v.Waiting)

	e2ekit.Must(t, alice.CLI, "runners", "share", "alices", "--user", "bob")
	e2ekit.Must(t, bob.CLI, "runners", "accept", "alices")
	v = testkit.WaitJob(t, bc, bj.ID, time.Minute, e2ekit.Waiting("account"))
	t.Logf("bob's job, alice's runner shared, her account not: %s", v.Waiting)

	aj := alice.Run(t, "--agent", "claude", "--", "Say hello for alice.")
	ac := alice.Client()
	done := testkit.WaitJob(t, ac, aj.ID, 4*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	alog := testkit.Log(t, ac, aj.ID, 0)
	if done.State != job.Completed || done.Attempts[0].Runner != "alices" || !strings.Contains(alog, "with account main") {
		t.Fatalf("alice's job: %s/%s on %v\n%s\nmodel:\n%s", done.State, done.Reason, done.Attempts, alog, fake.Dump())
	}

	// Still: bob's job was never offered, claimed, or shown to the model.
	shown := e2ekit.CLIJSON[apitypes.JobView](t, bob.CLI, "show", bj.ID)
	if shown.State != job.Queued || len(shown.Attempts) != 0 || !strings.Contains(shown.Waiting, "account") {
		t.Fatalf("bob's job with alice's account unshared: %s, %d attempts, waiting %q", shown.State, len(shown.Attempts), shown.Waiting)
	}
	if n := e2ekit.ClaimsOf(ar)[bj.ID]; n != 0 {
		t.Fatalf("alice's runner claimed bob's job %d times", n)
	}
	for _, r := range fake.Requests() {
		if strings.Contains(string(r.Body), bobPrompt) {
			t.Fatalf("the model got bob's prompt under alice's account:\n%.2000s", r.Body)
		}
	}

	e2ekit.Must(t, alice.CLI, "accounts", "share", "alices", "main", "--user", "bob")
	done = testkit.WaitJob(t, bc, bj.ID, 4*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if blog := testkit.Log(t, bc, bj.ID, 0); done.State != job.Completed || !strings.Contains(blog, "with account main") {
		t.Fatalf("bob's job after alice shared her account: %s/%s\n%s\nmodel:\n%s", done.State, done.Reason, blog, fake.Dump())
	}
}

// alice's project, pushed by her `drover run --repo`, is hers: bob cannot
// read its jobs, logs or git refs, nor push to it, and does not see it in
// his lists, until alice makes him a member.
func TestTenancyPrivateProjectStaysWithItsMembers(t *testing.T) {
	t.Parallel()
	h, alice, bob := tenants(t)
	alice.StartRunner(t, "alices")
	src := e2ekit.SourceCheckout(t)
	const secret = "alice-secret-0c1d"
	v := alice.Run(t, "--repo", src, "--agent", "exec", "--", "sh", "-c", "echo "+secret+" && echo "+secret+" > a.txt")
	ac := alice.Client()
	end := testkit.WaitJob(t, ac, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if end.State != job.Completed || end.Project != "demo" || end.Head == end.Base {
		t.Fatalf("alice's job: %s on %q, head %s base %s", end.State, end.Project, end.Head, end.Base)
	}
	fetch := func(token, project string) error {
		dir := t.TempDir()
		e2ekit.Git(t, dir, "init", "--quiet", "--bare", dir)
		_, err := (localrepo.Checkout{Git: gitcmd.Git{}, Dir: dir}).FetchRef(context.Background(),
			h.URL+"/git/"+project, token, gitcmd.JobRef(v.ID), "refs/heads/result")
		return err
	}
	// alice reads it all.
	if log := e2ekit.Must(t, alice.CLI, "logs", v.ID); !strings.Contains(log, secret) {
		t.Fatalf("alice's log:\n%s", log)
	}
	if err := fetch(alice.Token, "demo"); err != nil {
		t.Fatalf("alice's git fetch: %v", err)
	}

	// bob reads nothing of it.
	for _, args := range [][]string{{"show", v.ID}, {"show", v.ID, "--json"}, {"logs", v.ID}, {"projects", "members", "list", "demo"}} {
		if out := e2ekit.Refused(t, bob.CLI, args...); strings.Contains(out, secret) {
			t.Fatalf("drover %v as bob shows alice's output:\n%s", args, out)
		}
	}
	if _, err := bob.Client().Events(context.Background(), v.ID, 0); testkit.Status(err) != http.StatusNotFound {
		t.Errorf("bob reading the job's events: %v, want 404", err)
	}
	if err := fetch(bob.Token, "demo"); err == nil {
		t.Fatal("bob fetched alice's job ref with plain git")
	} else {
		t.Logf("bob's git fetch: %v", err)
	}
	if jl := e2ekit.CLIJSON[apitypes.JobList](t, bob.CLI, "jobs"); slices.ContainsFunc(jl.Jobs, func(j apitypes.JobView) bool { return j.ID == v.ID }) {
		t.Errorf("bob's job list has alice's job")
	}
	if pl := e2ekit.CLIJSON[apitypes.ProjectList](t, bob.CLI, "projects"); slices.ContainsFunc(pl.Projects, func(p apitypes.ProjectView) bool { return p.Name == "demo" }) {
		t.Errorf("bob's project list has alice's project: %+v", pl.Projects)
	}
	// Nor can he push to it: his own checkout of the same name is refused.
	bobsrc := filepath.Join(t.TempDir(), "demo")
	e2ekit.Git(t, src, "clone", "--quiet", src, bobsrc)
	if err := os.WriteFile(filepath.Join(bobsrc, "b.txt"), []byte("bob\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e2ekit.Git(t, bobsrc, "add", "-A")
	e2ekit.Git(t, bobsrc, "commit", "--quiet", "-m", "bob's")
	e2ekit.Refused(t, bob.CLI, "run", "--repo", bobsrc, "--agent", "exec", "--", "true")
	// A discovery request for a project nobody pushed creates nothing.
	if err := fetch(bob.Token, "nosuch"); err == nil {
		t.Fatal("bob fetched from a project that does not exist")
	}
	if pl := e2ekit.CLIJSON[apitypes.ProjectList](t, h.CLI, "projects"); slices.ContainsFunc(pl.Projects, func(p apitypes.ProjectView) bool { return p.Name == "nosuch" }) {
		t.Errorf("a git request made a project: %+v", pl.Projects)
	}

	// A member reads it.
	e2ekit.Must(t, alice.CLI, "projects", "members", "add", "demo", "bob")
	if log := e2ekit.Must(t, bob.CLI, "logs", v.ID); !strings.Contains(log, secret) {
		t.Fatalf("bob as a member reads the log:\n%s", log)
	}
	if err := fetch(bob.Token, "demo"); err != nil {
		t.Fatalf("bob as a member fetches: %v", err)
	}
}

// tokenRE finds a user token in a command's output.
var tokenRE = regexp.MustCompile(`(?m)^drv_u_\S+$`)

// A removed user's token is refused at once and their runner, which ran
// alice's jobs while shared with her, is disconnected as revoked and runs
// nothing more; their queued job is cancelled. A rotated token works and
// the one before it does not.
func TestTenancyRemovedUserAndRotatedTokens(t *testing.T) {
	t.Parallel()
	h, alice, bob := tenants(t)
	ar := alice.StartRunner(t, "alices", "--slots", "1")
	br := bob.StartRunner(t, "bobs", "--slots", "4", "--labels", "box=bobs")
	e2ekit.Must(t, bob.CLI, "runners", "share", "bobs", "--user", "alice")
	e2ekit.Must(t, alice.CLI, "runners", "accept", "bobs")
	ar.WaitConnected(time.Minute)
	br.WaitConnected(time.Minute)
	ac := alice.Client()
	first := []string{submitAs(t, alice, apitypes.SubmitRequest{Args: []string{"echo", "first"}, Labels: map[string]string{"box": "bobs"}}).ID}
	if on := completedOn(t, ac, first); !slices.Equal(on[first[0]], []string{"bobs"}) {
		t.Fatalf("bob's shared runner, the only one with the label, should take alice's job; it ran on %v", on[first[0]])
	}
	// Nobody has the label: bob's job waits.
	stuck := submitAs(t, bob, apitypes.SubmitRequest{Args: []string{"true"}, Labels: map[string]string{"tenancy": "nobody"}})
	// bob cannot rotate alice's token.
	e2ekit.Refused(t, bob.CLI, "users", "token", "rotate", "alice")

	out := e2ekit.Must(t, h.CLI, "users", "remove", "bob")
	t.Logf("users remove: %s", strings.TrimSpace(out))
	ctx := context.Background()
	if _, err := bob.Client().Whoami(ctx); testkit.Status(err) != http.StatusUnauthorized {
		t.Fatalf("bob's token right after his removal: %v, want 401", err)
	}
	e2ekit.Refused(t, bob.CLI, "jobs")
	if err := br.Wait(time.Minute); err == nil || !strings.Contains(br.Output(), "revoked") {
		t.Fatalf("bob's runner after his removal: exit %v\n%s", err, br.Output())
	}
	if v := testkit.WaitJob(t, h.Client(), stuck.ID, time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() }); v.State != job.Cancelled {
		t.Errorf("the removed user's queued job is %s, want cancelled", v.State)
	}
	ul := e2ekit.CLIJSON[apitypes.UserList](t, h.CLI, "users")
	if i := slices.IndexFunc(ul.Users, func(u apitypes.UserView) bool { return u.Name == "bob" }); i < 0 || ul.Users[i].RemovedAt == nil || ul.Users[i].Runners != 0 {
		t.Errorf("users after the removal: %+v", ul.Users)
	}
	after := submitMany(t, alice, 3, "echo", "after")
	for id, on := range completedOn(t, ac, after) {
		if !slices.Equal(on, []string{"alices"}) {
			t.Errorf("after bob's removal alice's job %s was offered to %v", id, on)
		}
	}
	if claims := e2ekit.ClaimsOf(br); len(claims) != 1 || claims[first[0]] != 1 {
		t.Errorf("bob's runner claimed %v, want only alice's first job", claims)
	}
	if claims := e2ekit.ClaimsOf(ar); len(claims) != len(after) {
		t.Errorf("alice's runner claimed %v, want her %d jobs after the removal", claims, len(after))
	}

	// alice rotates her own token: the new one works, the old one not.
	old := alice.Token
	rot := e2ekit.Must(t, alice.CLI, "users", "token", "rotate")
	alice.Token = tokenRE.FindString(rot)
	if alice.Token == "" {
		t.Fatalf("users token rotate printed no token:\n%s", rot)
	}
	if w, err := alice.Client().Whoami(ctx); err != nil || w.Name != "alice" {
		t.Fatalf("alice's new token: %+v, %v", w, err)
	}
	oldc, err := client.New(h.URL, old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oldc.Whoami(ctx); testkit.Status(err) != http.StatusUnauthorized {
		t.Fatalf("alice's token before the rotation: %v, want 401", err)
	}
	e2ekit.Must(t, alice.CLI, "jobs")

	// The admin rotates hers; alice cannot rotate the admin's.
	e2ekit.Refused(t, alice.CLI, "users", "token", "rotate", "admin")
	prev := alice.Token
	alice.Token = tokenRE.FindString(e2ekit.Must(t, h.CLI, "users", "token", "rotate", "alice"))
	if _, err := alice.Client().Whoami(ctx); err != nil {
		t.Fatalf("the token the admin gave alice: %v", err)
	}
	prevc, err := client.New(h.URL, prev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prevc.Whoami(ctx); testkit.Status(err) != http.StatusUnauthorized {
		t.Fatalf("alice's token before the admin's rotation: %v, want 401", err)
	}
}
