package hub

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/job"
	"drover/internal/localrepo"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// Tenancy: three users (admin, alice, bob) on one hub. Each rule of the
// access model (access.go) is shown by a scripted runner or the HTTP API.
// Absence is never waited for with a sleep: a job that must not be offered
// is shown queued with the dispatcher's reason (set by the pass that looked
// at it), next to a positive control that was offered.

// Why-texts of the dispatcher (whyText) the tests wait for.
const (
	waitNotYours  = "no connected runner runs your jobs"
	waitBusy      = "every runner that can take it is busy"
	waitNoAccount = "has a ready claude account you may use"
)

// submitAs submits a job as the user with token; an exec job running
// "true" unless req says otherwise.
func (th *testHub) submitAs(token string, req apitypes.SubmitRequest) apitypes.JobView {
	th.t.Helper()
	if req.Agent == "" {
		req.Agent = "exec"
	}
	if len(req.Args) == 0 {
		req.Args = []string{"true"}
	}
	var v apitypes.JobView
	if code, e := th.call(token, "POST", "/jobs", req, &v); code != http.StatusCreated {
		th.t.Fatalf("submit %+v: %d %+v", req, code, e)
	}
	return v
}

// waitQueued waits until a dispatcher pass has looked at the queued job
// and left it queued with a reason containing why. The job leaving the
// queue fails the test at once.
func (th *testHub) waitQueued(id, why string) apitypes.JobView {
	th.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v := th.job(id)
		if v.State != job.Queued {
			th.t.Fatalf("job %s is %s (runner %q), want it queued because %q", id, v.State, v.Runner, why)
		}
		if strings.Contains(v.Waiting, why) {
			return v
		}
		if time.Now().After(deadline) {
			th.t.Fatalf("job %s waits %q, want a reason containing %q", id, v.Waiting, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantQueued checks that jobs are (still) queued.
func (th *testHub) wantQueued(ids ...string) {
	th.t.Helper()
	for _, id := range ids {
		if v := th.job(id); v.State != job.Queued {
			th.t.Fatalf("job %s is %s (runner %q), want it still queued", id, v.State, v.Runner)
		}
	}
}

// offerFor reads the next offer and checks it is for the job.
func (sr *scriptRunner) offerFor(jobID string) protocol.Offer {
	sr.t.Helper()
	o := sr.offer()
	if o.Job != jobID {
		sr.t.Fatalf("offer for job %s, want %s", o.Job, jobID)
	}
	return o
}

// noOfferYet fails if an offer already arrived (the job's state is the
// authority; this only catches a frame in flight).
func (sr *scriptRunner) noOfferYet() {
	sr.t.Helper()
	for {
		select {
		case f := <-sr.frames:
			if f.Type == protocol.TypeOffer {
				var o protocol.Offer
				_ = f.Decode(&o)
				sr.t.Fatalf("unexpected offer of job %s", o.Job)
			}
		default:
			return
		}
	}
}

// waitClosed reads until the hub closes the connection and returns the
// close status.
func (sr *scriptRunner) waitClosed() websocket.StatusCode {
	sr.t.Helper()
	for {
		if _, err := sr.tryRead(10 * time.Second); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

// dialStatus tries to open a runner connection and returns the HTTP status
// of a refusal (0 when it connected).
func (th *testHub) dialStatus(token string) int {
	th.t.Helper()
	ws, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(th.srv.URL, "http")+apitypes.APIPrefix+"/runner/connect",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err == nil {
		ws.CloseNow()
		return 0
	}
	if resp == nil {
		th.t.Fatalf("dial: %v", err)
	}
	return resp.StatusCode
}

// share changes a runner's access as the user with token.
func (th *testHub) share(token, runner string, share bool, req apitypes.ShareRequest) apitypes.RunnerView {
	th.t.Helper()
	path := "/runners/" + runner + "/share"
	if !share {
		path = "/runners/" + runner + "/unshare"
	}
	var v apitypes.RunnerView
	if code, e := th.call(token, "POST", path, req, &v); code != http.StatusOK {
		th.t.Fatalf("%s %+v: %d %+v", path, req, code, e)
	}
	return v
}

// accept accepts, as the user with token, the share of runner with them
// (project "") or with project.
func (th *testHub) accept(token, runner, project string) apitypes.RunnerView {
	th.t.Helper()
	var v apitypes.RunnerView
	if code, e := th.call(token, "POST", "/runners/"+runner+"/accept", apitypes.AnswerShareRequest{Project: project}, &v); code != http.StatusOK {
		th.t.Fatalf("accept %s (project %q): %d %+v", runner, project, code, e)
	}
	return v
}

// shareAccount shares or unshares a runner's account as the user with token.
func (th *testHub) shareAccount(token string, share bool, req apitypes.AccountShareRequest) apitypes.AccountList {
	th.t.Helper()
	path := "/accounts/share"
	if !share {
		path = "/accounts/unshare"
	}
	var l apitypes.AccountList
	if code, e := th.call(token, "POST", path, req, &l); code != http.StatusOK {
		th.t.Fatalf("%s %+v: %d %+v", path, req, code, e)
	}
	return l
}

// runnersOf lists the runners as the user with token sees them, by name.
func (th *testHub) runnersOf(token string) map[string]apitypes.RunnerView {
	th.t.Helper()
	var l apitypes.RunnerList
	if code, e := th.call(token, "GET", "/runners", nil, &l); code != http.StatusOK {
		th.t.Fatalf("list runners: %d %+v", code, e)
	}
	out := map[string]apitypes.RunnerView{}
	for _, r := range l.Runners {
		out[r.Name] = r
	}
	return out
}

// projectsOf lists the projects as the user with token sees them, by name.
func (th *testHub) projectsOf(token string) map[string]apitypes.ProjectView {
	th.t.Helper()
	var l apitypes.ProjectList
	if code, e := th.call(token, "GET", "/projects", nil, &l); code != http.StatusOK {
		th.t.Fatalf("list projects: %d %+v", code, e)
	}
	out := map[string]apitypes.ProjectView{}
	for _, p := range l.Projects {
		out[p.Name] = p
	}
	return out
}

// jobIDs lists the ids of the jobs the user with token sees.
func (th *testHub) jobIDs(token string) []string {
	th.t.Helper()
	var l apitypes.JobList
	if code, e := th.call(token, "GET", "/jobs", nil, &l); code != http.StatusOK {
		th.t.Fatalf("list jobs: %d %+v", code, e)
	}
	ids := []string{}
	for _, j := range l.Jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	return ids
}

func sortedIDs(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// members lists a project's members as the user with token; code is the
// HTTP status.
func (th *testHub) members(token, project string) (apitypes.MemberList, int) {
	th.t.Helper()
	var l apitypes.MemberList
	code, _ := th.call(token, "GET", "/projects/"+project+"/members", nil, &l)
	return l, code
}

// addMember adds user to project as the user with token.
func (th *testHub) addMember(token, project, user string) {
	th.t.Helper()
	if code, e := th.call(token, "POST", "/projects/"+project+"/members", apitypes.MemberRequest{User: user}, nil); code != http.StatusOK {
		th.t.Fatalf("add %s to %s: %d %+v", user, project, code, e)
	}
}

// removeMember removes user from project as the user with token.
func (th *testHub) removeMember(token, project, user string) {
	th.t.Helper()
	if code, e := th.call(token, "DELETE", "/projects/"+project+"/members/"+user, nil, nil); code != http.StatusOK {
		th.t.Fatalf("remove %s from %s: %d %+v", user, project, code, e)
	}
}

// pushAs pushes commit from dir to project as an upload, as the user with
// token, returning git's error.
func (th *testHub) pushAs(token, dir, project, commit string) error {
	th.t.Helper()
	co := localrepo.Checkout{Git: tgit, Dir: dir}
	return co.Push(context.Background(), th.gitURL(project), token, commit, gitcmd.UploadRefPrefix+"t-"+commit[:8]+"-"+token[len(token)-6:])
}

// hostProject pushes a fresh source as the user with token, who becomes the
// project's owner; it returns the source directory and its commit.
func (th *testHub) hostProject(token, project string) (string, string) {
	th.t.Helper()
	dir, base := sourceRepo(th.t)
	if err := th.pushAs(token, dir, project, base); err != nil {
		th.t.Fatalf("push %s: %v", project, err)
	}
	return dir, base
}

func onRepo(project, base string) *apitypes.SubmitRepo {
	return &apitypes.SubmitRepo{Project: project, Base: base}
}

// startTenants starts a hub with alice and bob; it returns their tokens.
func startTenants(t *testing.T) (*testHub, string, string) {
	t.Helper()
	th := startHub(t, Config{})
	return th, th.addUser("alice"), th.addUser("bob")
}

// A runner runs its owner's jobs, and others' only as far as its owner (or
// an admin, hub-wide) shared it: free slots never win over access, a share
// and an unshare take effect at once, and a reconnecting runner is
// checked again.
func TestDispatchFollowsRunnerAccess(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	aTok := th.registerRunnerOf(alice, "a-box")
	bTok := th.registerRunnerOf(bob, "b-box")
	aBox, _ := th.dial(aTok, protocol.Hello{Slots: 1})
	bBox, _ := th.dial(bTok, protocol.Hello{Slots: 4})

	// bob's idle runner with four free slots never gets alice's jobs: they
	// go to her one slot, and wait for it while it is busy.
	j1 := th.submitAs(alice, apitypes.SubmitRequest{})
	o1 := aBox.offerFor(j1.ID)
	j2 := th.submitAs(alice, apitypes.SubmitRequest{})
	th.waitQueued(j2.ID, waitBusy)
	bBox.noOfferYet()
	runToEnd(t, aBox, o1, "one\n", 0)
	runToEnd(t, aBox, aBox.offerFor(j2.ID), "two\n", 0)
	if v := th.job(j1.ID); v.Runner != "a-box" || len(v.Attempts) != 1 {
		t.Fatalf("alice's first job: %+v", v)
	}

	// With only bob's runner connected, alice's job waits, and says why.
	aBox.ws.CloseNow()
	th.waitRunner("a-box", false)
	j3 := th.submitAs(alice, apitypes.SubmitRequest{})
	th.waitQueued(j3.ID, waitNotYours)

	// Shared with alice, bob's runner is offered her job once she accepts.
	if v := th.share(bob, "b-box", true, apitypes.ShareRequest{User: "alice"}); v.Access != apitypes.AccessPrivate ||
		!slices.Equal(v.SharedWith, []apitypes.Share{{User: "alice", Pending: true}}) {
		t.Fatalf("shared runner: %+v", v)
	}
	th.accept(alice, "b-box", "")
	runToEnd(t, bBox, bBox.offerFor(j3.ID), "three\n", 0)

	// Unshared, it is private again.
	if v := th.share(bob, "b-box", false, apitypes.ShareRequest{User: "alice"}); len(v.SharedWith) != 0 {
		t.Fatalf("unshared runner: %+v", v)
	}
	j4 := th.submitAs(alice, apitypes.SubmitRequest{})
	th.waitQueued(j4.ID, waitNotYours)

	// Only an admin makes a runner hub-wide; then it runs everyone's jobs.
	if code, e := th.call(bob, "POST", "/runners/b-box/share", apitypes.ShareRequest{Hub: true}, nil); code != http.StatusForbidden || e.Message == "" {
		t.Fatalf("bob makes his runner hub-wide: %d %+v", code, e)
	}
	if v := th.runnersOf(bob)["b-box"]; v.Access != apitypes.AccessPrivate {
		t.Fatalf("refused hub share changed the runner: %+v", v)
	}
	// Not even an admin makes bob's machine run everyone's jobs.
	if code, e := th.call(th.admin, "POST", "/runners/b-box/share", apitypes.ShareRequest{Hub: true}, nil); code != http.StatusForbidden || e.Message == "" {
		t.Fatalf("the admin makes bob's runner hub-wide: %d %+v", code, e)
	}
	if v := th.runnersOf(bob)["b-box"]; v.Access != apitypes.AccessPrivate {
		t.Fatalf("refused hub share changed the runner: %+v", v)
	}
	th.waitQueued(j4.ID, waitNotYours)
	hBox, _ := th.dial(th.registerRunner("h-box"), protocol.Hello{Slots: 1})
	if v := th.share(th.admin, "h-box", true, apitypes.ShareRequest{Hub: true}); v.Access != apitypes.AccessHub {
		t.Fatalf("hub-wide runner: %+v", v)
	}
	runToEnd(t, hBox, hBox.offerFor(j4.ID), "four\n", 0)
	if v := th.share(th.admin, "h-box", false, apitypes.ShareRequest{Hub: true}); v.Access != apitypes.AccessPrivate {
		t.Fatalf("runner made private again: %+v", v)
	}
	j5 := th.submitAs(alice, apitypes.SubmitRequest{})
	th.waitQueued(j5.ID, waitNotYours)

	// A runner unshared while it was away is checked again when it comes
	// back: alice's older job is not offered, bob's newer one is.
	th.share(bob, "b-box", true, apitypes.ShareRequest{User: "alice"})
	th.accept(alice, "b-box", "")
	runToEnd(t, bBox, bBox.offerFor(j5.ID), "five\n", 0)
	bBox.ws.CloseNow()
	th.waitRunner("b-box", false)
	th.share(bob, "b-box", false, apitypes.ShareRequest{User: "alice"})
	j6 := th.submitAs(alice, apitypes.SubmitRequest{})
	th.waitQueued(j6.ID, waitNotYours)
	bBox2, _ := th.dial(bTok, protocol.Hello{Slots: 4})
	j7 := th.submitAs(alice, apitypes.SubmitRequest{})
	th.waitQueued(j7.ID, waitNotYours)
	mine := th.submitAs(bob, apitypes.SubmitRequest{})
	bBox2.offerFor(mine.ID)
	th.wantQueued(j6.ID, j7.ID)
}

// A project share runs the jobs on that project of its members only: not
// their jobs without a project, not a non-member's job on the project
// (an admin's, or one whose requester left the project since).
func TestProjectShareRunsMembersJobsOnTheProject(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	_, base := th.hostProject(alice, "web")
	aBox, _ := th.dial(th.registerRunnerOf(alice, "a-box"), protocol.Hello{Slots: 1})
	if v := th.share(alice, "a-box", true, apitypes.ShareRequest{Project: "web"}); !slices.Equal(v.SharedWith, []apitypes.Share{{Project: "web"}}) {
		t.Fatalf("project share: %+v", v)
	}

	// A non-member cannot even submit on the project.
	code, e := th.call(bob, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Repo: onRepo("web", base)}, nil)
	if code != http.StatusForbidden || !strings.Contains(e.Message, "not a member of project web") {
		t.Fatalf("non-member submit: %d %+v", code, e)
	}
	if ids := th.jobIDs(th.admin); len(ids) != 0 {
		t.Fatalf("a refused submit made jobs: %v", ids)
	}

	th.addMember(alice, "web", "bob")
	member := th.submitAs(bob, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	o := aBox.offerFor(member.ID)
	wantOK(t, aBox.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))

	// While a-box is busy: bob's job on web waits for it, his job without
	// a project and the admin's (a non-member) on web wait for a runner.
	noProject := th.submitAs(bob, apitypes.SubmitRequest{})
	onWeb := th.submitAs(bob, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	admins := th.submitAs(th.admin, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	th.waitQueued(noProject.ID, waitNotYours)
	th.waitQueued(onWeb.ID, waitBusy)
	th.waitQueued(admins.ID, waitNotYours)

	// bob leaves the project: his queued job there no longer fits a-box.
	th.removeMember(alice, "web", "bob")
	th.waitQueued(onWeb.ID, waitNotYours)

	// The freed slot goes to alice's newer job, none of the older ones.
	runToEnd(t, aBox, o, "x", 1)
	hers := th.submitAs(alice, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	aBox.offerFor(hers.ID)
	th.wantQueued(noProject.ID, onWeb.ID, admins.ID)
}

// A share pushed onto a user runs none of their jobs until they accept it
// (issue 24, item 8): alice's bigger runner, shared with bob unasked, would
// otherwise take his jobs, read his repository and report results as his.
// Once he accepts, it may run them, after his own runner; declined, it
// runs none again.
func TestShareRunsNothingUntilItsRecipientAccepts(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	aBox, _ := th.dial(th.registerRunnerOf(alice, "a-box"), protocol.Hello{Slots: 4})
	bBox, _ := th.dial(th.registerRunnerOf(bob, "b-box"), protocol.Hello{Slots: 1})
	pending := []apitypes.Share{{User: "bob", Pending: true}}
	if v := th.share(alice, "a-box", true, apitypes.ShareRequest{User: "bob"}); !slices.Equal(v.SharedWith, pending) {
		t.Fatalf("alice's unaccepted share: %+v", v.SharedWith)
	}
	// bob sees it waiting for him; alice sees it pending.
	if v, ok := th.runnersOf(bob)["a-box"]; !ok || !slices.Equal(v.Offered, pending) || v.SharedWith != nil {
		t.Fatalf("bob sees a-box %+v (listed %v), want it offered to him", v, ok)
	}
	if v := th.runnersOf(alice)["a-box"]; !slices.Equal(v.SharedWith, pending) || v.Offered != nil {
		t.Fatalf("alice sees a-box %+v", v)
	}

	// bob's jobs go to his own runner, and wait for it while it is busy.
	j1 := th.submitAs(bob, apitypes.SubmitRequest{})
	o1 := bBox.offerFor(j1.ID)
	wantOK(t, bBox.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o1.AttemptRef}))
	j2 := th.submitAs(bob, apitypes.SubmitRequest{})
	th.waitQueued(j2.ID, waitBusy)
	aBox.noOfferYet()
	// Nor may anyone else accept for him.
	for _, tok := range []string{alice, th.admin} {
		if code, e := th.call(tok, "POST", "/runners/a-box/accept", apitypes.AnswerShareRequest{}, nil); code != http.StatusNotFound || e.Message == "" {
			t.Fatalf("accept for bob by another: %d %+v", code, e)
		}
	}
	th.waitQueued(j2.ID, waitBusy)

	// Accepted, a-box takes the job his busy runner cannot.
	if v := th.accept(bob, "a-box", ""); v.Name != "a-box" || v.Offered != nil {
		t.Fatalf("bob's accept answers %+v", v)
	}
	if v := th.runnersOf(alice)["a-box"]; !slices.Equal(v.SharedWith, []apitypes.Share{{User: "bob"}}) {
		t.Fatalf("alice's accepted share: %+v", v.SharedWith)
	}
	o2 := aBox.offerFor(j2.ID)
	runToEnd(t, bBox, o1, "one\n", 0)
	runToEnd(t, aBox, o2, "two\n", 0)
	// With both idle, his own runner comes first, however many slots
	// the shared one has.
	j3 := th.submitAs(bob, apitypes.SubmitRequest{})
	runToEnd(t, bBox, bBox.offerFor(j3.ID), "three\n", 0)

	// Declined, the share is gone: a-box runs none of his jobs again.
	th.call(bob, "POST", "/runners/a-box/decline", apitypes.AnswerShareRequest{}, nil)
	if _, ok := th.runnersOf(bob)["a-box"]; ok {
		t.Fatal("bob still lists a-box after declining it")
	}
	if v := th.runnersOf(alice)["a-box"]; len(v.SharedWith) != 0 {
		t.Fatalf("alice's declined share: %+v", v.SharedWith)
	}
	bBox.ws.CloseNow()
	th.waitRunner("b-box", false)
	j4 := th.submitAs(bob, apitypes.SubmitRequest{})
	th.waitQueued(j4.ID, waitNotYours)
	if code, e := th.call(bob, "POST", "/runners/a-box/accept", apitypes.AnswerShareRequest{}, nil); code != http.StatusNotFound || e.Message == "" {
		t.Fatalf("accept a declined share: %d %+v", code, e)
	}
	th.waitQueued(j4.ID, waitNotYours)
}

// A runner is shared with a project only by a member of it, and runs its
// jobs once the project's owner (or an admin) accepts; a project the
// sharer may not see is refused exactly as one that does not exist
// (issue 24, items 8 and 14), and the share goes when its owner leaves.
func TestProjectShareNeedsMembershipAndTheOwnersConsent(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	aBox, _ := th.dial(th.registerRunnerOf(alice, "a-box"), protocol.Hello{Slots: 4})
	shareWeb := func(token string) (int, []byte) {
		return th.send(token, "POST", apitypes.APIPrefix+"/runners/a-box/share", strings.NewReader(`{"project":"web"}`))
	}
	missingCode, missing := shareWeb(alice)
	_, base := th.hostProject(bob, "web")
	hiddenCode, hidden := shareWeb(alice)
	if missingCode != http.StatusNotFound || hiddenCode != missingCode || string(hidden) != string(missing) {
		t.Fatalf("share with a hidden project: %d %s; with a missing one: %d %s; want the same 404",
			hiddenCode, hidden, missingCode, missing)
	}
	// An admin sees web, but alice is no member: refused too.
	if code, e := th.call(th.admin, "POST", "/runners/a-box/share", apitypes.ShareRequest{Project: "web"}, nil); code != http.StatusForbidden ||
		!strings.Contains(e.Message, "not a member of project web") {
		t.Fatalf("admin shares a non-member's runner with web: %d %+v", code, e)
	}
	if v := th.runnersOf(alice)["a-box"]; len(v.SharedWith) != 0 {
		t.Fatalf("refused project shares changed a-box: %+v", v.SharedWith)
	}

	// A member's share waits for the project's owner.
	th.addMember(bob, "web", "alice")
	th.share(alice, "a-box", true, apitypes.ShareRequest{Project: "web"})
	onWeb := th.submitAs(bob, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	th.waitQueued(onWeb.ID, waitNotYours)
	if v := th.runnersOf(bob)["a-box"]; !slices.Equal(v.Offered, []apitypes.Share{{Project: "web", Pending: true}}) {
		t.Fatalf("bob, web's owner, sees a-box %+v", v)
	}
	// alice, a member but not its owner, may not accept for it.
	if code, e := th.call(alice, "POST", "/runners/a-box/accept", apitypes.AnswerShareRequest{Project: "web"}, nil); code != http.StatusForbidden || e.Message == "" {
		t.Fatalf("a member accepts for web: %d %+v", code, e)
	}
	th.waitQueued(onWeb.ID, waitNotYours)
	th.accept(bob, "a-box", "web")
	runToEnd(t, aBox, aBox.offerFor(onWeb.ID), "web\n", 0)

	// alice leaves web: her runner's share with it goes.
	th.removeMember(bob, "web", "alice")
	if v := th.runnersOf(alice)["a-box"]; len(v.SharedWith) != 0 {
		t.Fatalf("a-box still shared with web after alice left it: %+v", v.SharedWith)
	}
	again := th.submitAs(bob, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	th.waitQueued(again.ID, waitNotYours)
}

// A runner's accounts spend only for its owner's jobs and for whom the
// owner shared them: a vendor job waits, naming the account problem, on a
// runner it may use without an account it may use; the offer names the
// shared account, the owner's own job the owner's best one. An admin's
// hub-wide runner does not share its accounts with it.
func TestVendorJobsUseOnlyAccountsTheRequesterMayUse(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	claude := func(accts ...protocol.AccountInfo) protocol.Hello {
		return protocol.Hello{Slots: 2, Agents: []string{"exec", "claude"}, Accounts: accts}
	}
	ready := func(id, label string) protocol.AccountInfo {
		return protocol.AccountInfo{ID: id, Label: label, Agent: "claude", Kind: "api-key", State: protocol.AccountReady}
	}
	aBox, _ := th.dial(th.registerRunnerOf(alice, "a-box", "bob"), claude(ready("acct-1", "work"), ready("acct-2", "spare")))
	// alice prefers acct-2.
	if code, e := th.call(alice, "POST", "/accounts/move", apitypes.MoveAccountRequest{Runner: "a-box", ID: "acct-2", Position: 1}, nil); code != http.StatusOK {
		t.Fatalf("move: %d %+v", code, e)
	}
	// bob's own runner is offline; its account only shows in his list.
	th.registerRunnerOf(bob, "b-box")
	th.seedAccounts("b-box", ready("acct-b", ""))
	prompt := apitypes.SubmitRequest{Agent: "claude", Args: []string{"write hello.txt"}}

	// a-box is shared with bob, its accounts are not: his job waits.
	first := th.submitAs(bob, prompt)
	th.waitQueued(first.ID, waitNoAccount)
	aBox.noOfferYet()

	// Shared with bob, acct-1 is used for his job, alice's preference
	// notwithstanding; alice's own job gets her best, acct-2.
	l := th.shareAccount(alice, true, apitypes.AccountShareRequest{Runner: "a-box", Account: "work", User: "bob"})
	if got := accountOrder(t, l.Accounts); !slices.Equal(got, []string{"a-box/acct-2", "a-box/acct-1"}) {
		t.Fatalf("alice's accounts after the share: %v", got)
	}
	o := aBox.offerFor(first.ID)
	if o.Account != "acct-1" || o.Spec.Requester != "bob" {
		t.Fatalf("bob's offer: account %q, requester %q; want acct-1 for bob", o.Account, o.Spec.Requester)
	}
	runToEnd(t, aBox, o, "x", 1)
	own := th.submitAs(alice, prompt)
	if o := aBox.offerFor(own.ID); o.Account != "acct-2" {
		t.Fatalf("alice's offer names account %q, want her first, acct-2", o.Account)
	} else {
		runToEnd(t, aBox, o, "x", 1)
	}

	// GET /accounts: bob sees his own and the one shared with him, with
	// its owner and not whom it is shared with; alice sees that on hers.
	bobs := th.accounts(bob)
	if len(bobs) != 2 || bobs[0].Runner != "b-box" || bobs[0].ID != "acct-b" || bobs[0].Owner != "bob" ||
		bobs[1].Runner != "a-box" || bobs[1].ID != "acct-1" || bobs[1].Owner != "alice" || bobs[1].SharedWith != nil {
		t.Fatalf("bob's accounts: %+v", bobs)
	}
	hers := th.accounts(alice)
	if len(hers) != 2 || hers[0].ID != "acct-2" || hers[0].SharedWith != nil ||
		hers[1].ID != "acct-1" || !slices.Equal(hers[1].SharedWith, []apitypes.Share{{User: "bob"}}) || hers[1].Owner != "alice" {
		t.Fatalf("alice's accounts: %+v", hers)
	}

	// An admin's hub-wide runner runs bob's jobs, but spends its unshared
	// account for none of them; neither does a-box once acct-1 is unshared.
	hTok := th.registerRunner("h-box")
	th.share(th.admin, "h-box", true, apitypes.ShareRequest{Hub: true})
	hHello := claude(ready("acct-h", ""))
	hHello.Labels = map[string]string{"box": "h"}
	hBox, _ := th.dial(hTok, hHello)
	l = th.shareAccount(alice, false, apitypes.AccountShareRequest{Runner: "a-box", Account: "acct-1", User: "bob"})
	if a := l.Accounts[1]; a.ID != "acct-1" || a.SharedWith != nil {
		t.Fatalf("unshared account: %+v", a)
	}
	exec := th.submitAs(bob, apitypes.SubmitRequest{Labels: map[string]string{"box": "h"}})
	runToEnd(t, hBox, hBox.offerFor(exec.ID), "ok\n", 0)
	second := th.submitAs(bob, prompt)
	th.waitQueued(second.ID, waitNoAccount)
	if got := th.accounts(bob); len(got) != 1 {
		t.Fatalf("bob's accounts after the unshare: %+v", got)
	}
	th.shareAccount(th.admin, true, apitypes.AccountShareRequest{Runner: "h-box", Account: "acct-h", User: "bob"})
	if o := hBox.offerFor(second.ID); o.Account != "acct-h" {
		t.Fatalf("offer on the hub-wide runner names %q, want acct-h", o.Account)
	}
	aBox.noOfferYet()
}

// A job is seen by its requester, its project's members, the owners of
// the runners that ran it, and admins; to anyone else it does not exist:
// every call on it answers exactly as for a job that does not exist.
func TestJobsAreVisibleOnlyToThoseAllowed(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	_, base := th.hostProject(alice, "web")
	aBox, _ := th.dial(th.registerRunnerOf(alice, "a-box"), protocol.Hello{Slots: 1})
	tools := apitypes.SubmitRequest{Agent: "exec", Args: []string{"work"}, Tools: true}

	// alice's private job, waiting on its question.
	private := th.submitAs(alice, tools)
	askAndFinish(t, aBox, aBox.offerFor(private.ID), "Which port?", nil, "")
	before := th.job(private.ID)
	if before.State != job.Waiting {
		t.Fatalf("alice's job: %+v", before)
	}

	const missing = "j-0000000000000000nope"
	calls := []struct {
		name, method, suffix string
		body                 any
	}{
		{"show", "GET", "", nil},
		{"show with events", "GET", "?events=1", nil},
		{"log", "GET", "/log", nil},
		{"events", "GET", "/events", nil},
		{"cancel", "POST", "/cancel", nil},
		{"retry", "POST", "/retry", nil},
		{"answer", "POST", "/answer", apitypes.AnswerRequest{Text: "8080"}},
		{"approve", "POST", "/approve", nil},
		{"restart", "POST", "/restart", nil},
	}
	for _, c := range calls {
		codeMissing, eMissing := th.call(bob, c.method, "/jobs/"+missing+c.suffix, c.body, nil)
		code, e := th.call(bob, c.method, "/jobs/"+private.ID+c.suffix, c.body, nil)
		if codeMissing != http.StatusNotFound || code != http.StatusNotFound || e.Code != rules.ErrNotFound ||
			e.Message != strings.ReplaceAll(eMissing.Message, missing, private.ID) {
			t.Errorf("bob's %s of alice's job: %d %+v; of a job that does not exist: %d %+v", c.name, code, e, codeMissing, eMissing)
		}
	}
	if after := th.job(private.ID); after.State != before.State || len(after.Attempts) != len(before.Attempts) ||
		len(after.Questions) != 1 || after.Questions[0].Answer != nil {
		t.Fatalf("bob's refused calls changed alice's job: %+v", after)
	}
	if got := th.questions(bob); len(got) != 0 {
		t.Fatalf("bob sees questions: %+v", got)
	}
	if got := th.questions(alice); len(got) != 1 || got[0].Job != private.ID {
		t.Fatalf("alice's questions: %+v", got)
	}

	// alice's job on web: hidden from bob until he is a member.
	onWeb := th.submitAs(alice, apitypes.SubmitRequest{Agent: "exec", Args: []string{"work"}, Tools: true, Repo: onRepo("web", base)})
	askAndFinish(t, aBox, aBox.offerFor(onWeb.ID), "Which branch?", nil, "")
	bobs := th.submitAs(bob, apitypes.SubmitRequest{Labels: map[string]string{"gpu": "yes"}})
	if got, want := th.jobIDs(bob), sortedIDs(bobs.ID); !slices.Equal(got, want) {
		t.Fatalf("bob lists %v, want only his %v", got, want)
	}
	if got, want := th.jobIDs(th.admin), sortedIDs(private.ID, onWeb.ID, bobs.ID); !slices.Equal(got, want) {
		t.Fatalf("the admin lists %v, want every job %v", got, want)
	}
	if code, _ := th.call(bob, "GET", "/jobs/"+onWeb.ID, nil, nil); code != http.StatusNotFound {
		t.Fatalf("bob reads alice's job on web before he is a member: %d", code)
	}
	th.addMember(alice, "web", "bob")
	if got, want := th.jobIDs(bob), sortedIDs(bobs.ID, onWeb.ID); !slices.Equal(got, want) {
		t.Fatalf("member bob lists %v, want %v", got, want)
	}
	for _, suffix := range []string{"", "/log", "/events"} {
		if code, e := th.call(bob, "GET", "/jobs/"+onWeb.ID+suffix, nil, nil); code != http.StatusOK {
			t.Fatalf("member bob reads %s of the project's job: %d %+v", suffix, code, e)
		}
	}
	if code, _ := th.call(bob, "GET", "/jobs/"+private.ID, nil, nil); code != http.StatusNotFound {
		t.Fatalf("membership of web shows bob alice's job without a project: %d", code)
	}
	qs := th.questions(bob)
	if len(qs) != 1 || qs[0].Job != onWeb.ID || qs[0].Requester != "alice" {
		t.Fatalf("member bob's questions: %+v", qs)
	}
	// His answer waits for alice's approval.
	var v apitypes.JobView
	if code, e := th.call(bob, "POST", "/jobs/"+onWeb.ID+"/answer", apitypes.AnswerRequest{Text: "main"}, &v); code != http.StatusOK || v.State != job.Waiting {
		t.Fatalf("member bob answers: %d %+v %s", code, e, v.State)
	}

	// The owner of a runner that ran a job sees it, from its first offer.
	ran := th.submitAs(alice, apitypes.SubmitRequest{Labels: map[string]string{"box": "bob"}})
	if code, _ := th.call(bob, "GET", "/jobs/"+ran.ID, nil, nil); code != http.StatusNotFound {
		t.Fatalf("bob reads alice's job before his runner got it: %d", code)
	}
	bBox, _ := th.dial(th.registerRunnerOf(bob, "b-box", "alice"), protocol.Hello{Slots: 1, Labels: map[string]string{"box": "bob"}})
	runToEnd(t, bBox, bBox.offerFor(ran.ID), "ran\n", 0)
	if code, e := th.call(bob, "GET", "/jobs/"+ran.ID+"/log", nil, nil); code != http.StatusOK {
		t.Fatalf("bob reads the log of a job his runner ran: %d %+v", code, e)
	}
	if got, want := th.jobIDs(bob), sortedIDs(bobs.ID, onWeb.ID, ran.ID); !slices.Equal(got, want) {
		t.Fatalf("bob lists %v, want %v", got, want)
	}
	// A project's jobs stay with its members, whoever's runner ran them.
	_, apiBase := th.hostProject(alice, "api")
	ranOnAPI := th.submitAs(alice, apitypes.SubmitRequest{Labels: map[string]string{"box": "bob"}, Repo: onRepo("api", apiBase)})
	runToEnd(t, bBox, bBox.offerFor(ranOnAPI.ID), "ran\n", 0)
	if code, _ := th.call(bob, "GET", "/jobs/"+ranOnAPI.ID, nil, nil); code != http.StatusNotFound {
		t.Fatalf("bob reads a job on a project he is not a member of, run by his runner: %d", code)
	}
	if got, want := th.jobIDs(bob), sortedIDs(bobs.ID, onWeb.ID, ran.ID); !slices.Equal(got, want) {
		t.Fatalf("bob lists %v, want %v", got, want)
	}
	// Only the requester and admins control it.
	if code, e := th.call(bob, "POST", "/jobs/"+ran.ID+"/retry", nil, nil); code != http.StatusForbidden {
		t.Fatalf("runner owner retries another's job: %d %+v", code, e)
	}
}

// Git reads and pushes of a project need membership; a discovery request
// never creates a project, the first accepted push does, for its pusher.
func TestGitAccessFollowsProjectMembership(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	dir, base := th.hostProject(alice, "web")
	clone := t.TempDir()
	gitT(t, clone, "init", "--quiet", "--bare", clone)
	fetch := func(token string) error {
		return gitAs(t, clone, token, "fetch", "--quiet", th.gitURL("web"), "+"+base+":refs/t/x")
	}

	if err := fetch(alice); err != nil {
		t.Fatalf("the owner's fetch: %v", err)
	}
	if err := fetch(bob); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("bob's fetch of alice's project: %v", err)
	}
	if err := th.pushAs(bob, dir, "web", commitOn(t, dir, base, "b.txt", "bob\n")); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("bob's push to alice's project: %v", err)
	}
	if _, ok := th.projectsOf(bob)["web"]; ok {
		t.Fatal("bob lists alice's project")
	}
	if p := th.projectsOf(alice)["web"]; p.Owner != "alice" || !p.Hosted {
		t.Fatalf("alice's project: %+v", p)
	}
	if p := th.projectsOf(th.admin)["web"]; p.Owner != "alice" {
		t.Fatalf("the admin's view of web: %+v", p)
	}

	th.addMember(alice, "web", "bob")
	if err := fetch(bob); err != nil {
		t.Fatalf("member bob's fetch: %v", err)
	}
	if err := th.pushAs(bob, dir, "web", commitOn(t, dir, base, "b2.txt", "bob\n")); err != nil {
		t.Fatalf("member bob's push: %v", err)
	}
	if p := th.projectsOf(bob)["web"]; p.Owner != "alice" {
		t.Fatalf("member bob's view of web: %+v", p)
	}

	// bob's discovery for a new name: no project, and not his.
	req, _ := http.NewRequest("GET", th.gitURL("fresh")+"/info/refs?service=git-receive-pack", nil)
	req.Header.Set("Authorization", "Bearer "+bob)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	adv, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(adv, []byte("001f# service=git-receive-pack\n0000")) {
		t.Fatalf("discovery: %d %q", resp.StatusCode, adv)
	}
	// Nor a repository: a name anyone may ask about costs no disk.
	if _, err := os.Stat(th.h.repos.Dir("fresh")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a discovery left a repository: %v", err)
	}
	// A push that is refused (a ref users may not write) makes none either.
	co := localrepo.Checkout{Git: tgit, Dir: dir}
	if err := co.Push(context.Background(), th.gitURL("fresh"), bob, base, "refs/heads/main"); err == nil {
		t.Fatal("a push to refs/heads/main was taken")
	}
	if _, err := os.Stat(th.h.repos.Dir("fresh")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused push left a repository: %v", err)
	}
	// Nor git's probe before a large push (no ref updates).
	req, _ = http.NewRequest("POST", th.gitURL("fresh")+"/git-receive-pack", strings.NewReader("0000"))
	req.Header.Set("Authorization", "Bearer "+bob)
	req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := os.Stat(th.h.repos.Dir("fresh")); resp.StatusCode != http.StatusOK || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("probe: %d, repository: %v", resp.StatusCode, err)
	}
	if p, ok := th.projectsOf(th.admin)["fresh"]; ok && p.Owner != "" {
		t.Fatalf("a discovery made a project with an owner: %+v", p)
	}
	if _, ok := th.projectsOf(bob)["fresh"]; ok {
		t.Fatal("a discovery made bob a member of a project")
	}
	if _, code := th.members(th.admin, "fresh"); code != http.StatusNotFound {
		t.Fatalf("members of a discovered name: %d", code)
	}
	if code, _ := th.call(bob, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Repo: onRepo("fresh", base)}, nil); code != http.StatusBadRequest {
		t.Fatalf("submit on a discovered name: %d", code)
	}

	// alice's first push after it makes her the owner and only member.
	if err := th.pushAs(alice, dir, "fresh", base); err != nil {
		t.Fatalf("first push: %v", err)
	}
	if l, code := th.members(alice, "fresh"); code != http.StatusOK || l.Owner != "alice" || !slices.Equal(l.Members, []string{"alice"}) {
		t.Fatalf("members after the first push: %d %+v", code, l)
	}
	if p := th.projectsOf(th.admin)["fresh"]; p.Owner != "alice" {
		t.Fatalf("the admin's view of fresh: %+v", p)
	}
	if err := th.pushAs(bob, dir, "fresh", base); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("bob's push to alice's new project: %v", err)
	}

	// A first push too large for git's buffer is probed before its pack is
	// sent: the probe is answered without a repository, the push taken.
	noise := make([]byte, 256<<10)
	rand.Read(noise)
	big := commitOn(t, dir, base, "noise.bin", string(noise))
	if err := gitAs(t, dir, bob, "-c", "http.postBuffer=65520", "push", "--quiet", th.gitURL("big"), big+":"+gitcmd.UploadRefPrefix+"big"); err != nil {
		t.Fatalf("a large first push: %v", err)
	}
	if l, code := th.members(bob, "big"); code != http.StatusOK || l.Owner != "bob" {
		t.Fatalf("members after a large first push: %d %+v", code, l)
	}
}

// Project members: listed by members and admins, changed by the owner and
// admins; every refusal says why and changes nothing.
func TestProjectMembers(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	th.hostProject(alice, "web")
	want := func(members ...string) {
		t.Helper()
		l, code := th.members(alice, "web")
		if code != http.StatusOK || l.Project != "web" || l.Owner != "alice" || !slices.Equal(l.Members, members) {
			t.Fatalf("members: %d %+v, want %v", code, l, members)
		}
	}
	want("alice")
	refuse := func(name, token, method, path string, body any, status int, members ...string) {
		t.Helper()
		code, e := th.call(token, method, path, body, nil)
		if code != status || e.Message == "" {
			t.Errorf("%s: %d %+v, want %d with a message", name, code, e, status)
		}
		want(members...)
	}
	add := func(user string) apitypes.MemberRequest { return apitypes.MemberRequest{User: user} }

	refuse("non-member lists", bob, "GET", "/projects/web/members", nil, http.StatusForbidden, "alice")
	refuse("non-member adds himself", bob, "POST", "/projects/web/members", add("bob"), http.StatusForbidden, "alice")
	refuse("unknown project", alice, "GET", "/projects/nope/members", nil, http.StatusNotFound, "alice")
	refuse("add to an unknown project", alice, "POST", "/projects/nope/members", add("bob"), http.StatusNotFound, "alice")
	refuse("add an unknown user", alice, "POST", "/projects/web/members", add("carol"), http.StatusNotFound, "alice")
	refuse("add no user", alice, "POST", "/projects/web/members", add(""), http.StatusBadRequest, "alice")
	refuse("remove the owner", alice, "DELETE", "/projects/web/members/alice", nil, http.StatusBadRequest, "alice")
	refuse("admin removes the owner", th.admin, "DELETE", "/projects/web/members/alice", nil, http.StatusBadRequest, "alice")
	refuse("remove a non-member", alice, "DELETE", "/projects/web/members/bob", nil, http.StatusNotFound, "alice")
	refuse("remove an unknown user", alice, "DELETE", "/projects/web/members/carol", nil, http.StatusNotFound, "alice")

	var l apitypes.MemberList
	if code, e := th.call(alice, "POST", "/projects/web/members", add("bob"), &l); code != http.StatusOK || !slices.Equal(l.Members, []string{"alice", "bob"}) {
		t.Fatalf("owner adds bob: %d %+v %+v", code, e, l)
	}
	th.addMember(alice, "web", "bob") // again: nothing changes
	want("alice", "bob")
	if l, code := th.members(bob, "web"); code != http.StatusOK || !slices.Equal(l.Members, []string{"alice", "bob"}) {
		t.Fatalf("member bob lists: %d %+v", code, l)
	}
	refuse("member adds", bob, "POST", "/projects/web/members", add("admin"), http.StatusForbidden, "alice", "bob")
	refuse("member removes the owner", bob, "DELETE", "/projects/web/members/alice", nil, http.StatusForbidden, "alice", "bob")
	refuse("member removes himself", bob, "DELETE", "/projects/web/members/bob", nil, http.StatusForbidden, "alice", "bob")
	code, e := th.call(bob, "POST", "/projects/web/members", add("admin"), nil)
	if !strings.Contains(e.Message, "owner") {
		t.Errorf("a member's refusal does not name the owner: %d %+v", code, e)
	}

	// An admin changes any project's members.
	th.addMember(th.admin, "web", "admin")
	want("alice", "bob", "admin")
	th.removeMember(th.admin, "web", "admin")
	th.removeMember(alice, "web", "bob")
	want("alice")
	refuse("former member lists", bob, "GET", "/projects/web/members", nil, http.StatusForbidden, "alice")
	if l, code := th.members(th.admin, "web"); code != http.StatusOK || !slices.Equal(l.Members, []string{"alice"}) {
		t.Fatalf("the admin lists: %d %+v", code, l)
	}
}

// Users: listed (an admin all, others themselves), removed by an admin
// (tokens refused at once, runners cut off, jobs cancelled, shares gone),
// and their tokens rotated by themselves or an admin.
func TestUsersRemoveAndRotate(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	names := func(token string) []string {
		t.Helper()
		var l apitypes.UserList
		if code, e := th.call(token, "GET", "/users", nil, &l); code != http.StatusOK {
			t.Fatalf("list users: %d %+v", code, e)
		}
		var out []string
		for _, u := range l.Users {
			out = append(out, u.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := names(th.admin); !slices.Equal(got, []string{"admin", "alice", "bob"}) {
		t.Fatalf("the admin lists users %v", got)
	}
	if got := names(bob); !slices.Equal(got, []string{"bob"}) {
		t.Fatalf("bob lists users %v", got)
	}

	// Rotation: the new token works at once, the old one no longer.
	whoami := func(token string) int {
		t.Helper()
		code, _ := th.call(token, "GET", "/whoami", nil, nil)
		return code
	}
	rotate := func(token, name string) (string, int) {
		t.Helper()
		var r apitypes.NewUserResponse
		code, _ := th.call(token, "POST", "/users/"+name+"/token", nil, &r)
		return r.Token, code
	}
	if _, code := rotate(bob, "alice"); code != http.StatusForbidden {
		t.Fatalf("bob rotates alice's token: %d", code)
	}
	if whoami(alice) != http.StatusOK {
		t.Fatal("a refused rotation changed alice's token")
	}
	newBob, code := rotate(bob, "bob")
	if code != http.StatusOK || whoami(newBob) != http.StatusOK || whoami(bob) != http.StatusUnauthorized {
		t.Fatalf("bob rotates his own token: %d, new %d, old %d", code, whoami(newBob), whoami(bob))
	}
	bob = newBob
	th.tokens["bob"] = bob
	newAlice, code := rotate(th.admin, "alice")
	if code != http.StatusOK || whoami(newAlice) != http.StatusOK || whoami(alice) != http.StatusUnauthorized {
		t.Fatalf("the admin rotates alice's token: %d, new %d, old %d", code, whoami(newAlice), whoami(alice))
	}
	alice = newAlice
	th.tokens["alice"] = alice
	if _, code := rotate(th.admin, "carol"); code != http.StatusNotFound {
		t.Fatalf("rotate an unknown user: %d", code)
	}

	// bob: a connected runner, a job queued, alice's runner and one of its
	// accounts shared with him.
	bTok := th.registerRunnerOf(bob, "b-box")
	bBox, _ := th.dial(bTok, protocol.Hello{Slots: 1})
	queued := th.submitAs(bob, apitypes.SubmitRequest{Labels: map[string]string{"gpu": "yes"}})
	th.registerRunnerOf(alice, "a-box", "bob")
	th.seedAccounts("a-box", protocol.AccountInfo{ID: "acct-1", Agent: "claude", Kind: "login", State: protocol.AccountReady})
	th.shareAccount(alice, true, apitypes.AccountShareRequest{Runner: "a-box", Account: "acct-1", User: "bob"})

	for _, c := range []struct {
		name, token, user string
		status            int
	}{
		{"non-admin removes", alice, "bob", http.StatusForbidden},
		{"user removes himself", bob, "bob", http.StatusForbidden},
		{"admin removes herself", th.admin, "admin", http.StatusBadRequest},
		{"unknown user", th.admin, "carol", http.StatusNotFound},
	} {
		if code, e := th.call(c.token, "DELETE", "/users/"+c.user, nil, nil); code != c.status || e.Message == "" {
			t.Errorf("%s: %d %+v, want %d", c.name, code, e, c.status)
		}
	}
	if whoami(bob) != http.StatusOK || th.job(queued.ID).State != job.Queued || len(th.runnersOf(alice)["a-box"].SharedWith) != 1 {
		t.Fatal("a refused removal changed something")
	}

	var removed apitypes.UserView
	if code, e := th.call(th.admin, "DELETE", "/users/bob", nil, &removed); code != http.StatusOK || removed.RemovedAt == nil {
		t.Fatalf("remove bob: %d %+v %+v", code, e, removed)
	}
	if code, e := th.call(bob, "GET", "/jobs", nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("removed bob's token: %d %+v", code, e)
	}
	if st := bBox.waitClosed(); st != protocol.CloseRevoked {
		t.Fatalf("bob's runner connection closed with %d, want %d", st, protocol.CloseRevoked)
	}
	if code := th.dialStatus(bTok); code != http.StatusUnauthorized {
		t.Fatalf("bob's runner reconnects: %d", code)
	}
	if v := th.job(queued.ID); v.State != job.Cancelled {
		t.Fatalf("bob's queued job: %+v", v)
	}
	if v := th.runnersOf(alice)["a-box"]; len(v.SharedWith) != 0 {
		t.Fatalf("alice's runner still shared with removed bob: %+v", v.SharedWith)
	}
	if l := th.accounts(alice); len(l) != 1 || l[0].SharedWith != nil {
		t.Fatalf("alice's account still shared with removed bob: %+v", l)
	}
	if v := th.runnersOf(th.admin)["b-box"]; !v.Revoked {
		t.Fatalf("removed bob's runner: %+v", v)
	}
	var l apitypes.UserList
	th.call(th.admin, "GET", "/users", nil, &l)
	for _, u := range l.Users {
		if (u.Name == "bob") != (u.RemovedAt != nil) {
			t.Fatalf("users after removing bob: %+v", l.Users)
		}
	}
	// A removed user is no one to share with, add, rotate or remove.
	if code, _ := th.call(alice, "POST", "/runners/a-box/share", apitypes.ShareRequest{User: "bob"}, nil); code != http.StatusNotFound {
		t.Fatalf("share with a removed user: %d", code)
	}
	if _, code := rotate(th.admin, "bob"); code != http.StatusNotFound {
		t.Fatalf("rotate a removed user: %d", code)
	}
	if code, _ := th.call(th.admin, "DELETE", "/users/bob", nil, nil); code != http.StatusNotFound {
		t.Fatalf("remove bob again: %d", code)
	}
}

// Share and unshare refusals: 404 for what does not exist, 403 for what is
// not the caller's, 400 for a request naming no one or two; none changes
// anything. Whom a runner is shared with shows to its owner and admins.
func TestShareRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	th.hostProject(alice, "web")
	th.hostProject(alice, "api")
	th.registerRunnerOf(alice, "a-box", "bob")
	th.share(alice, "a-box", true, apitypes.ShareRequest{Project: "web"})
	th.registerRunnerOf(bob, "b-box")
	th.seedAccounts("a-box", protocol.AccountInfo{ID: "acct-1", Agent: "claude", Kind: "login", State: protocol.AccountReady})
	th.shareAccount(alice, true, apitypes.AccountShareRequest{Runner: "a-box", Account: "acct-1", Project: "web"})
	shared := []apitypes.Share{{User: "bob"}, {Project: "web"}}

	check := func(name string) {
		t.Helper()
		mine := th.runnersOf(alice)["a-box"]
		if mine.Owner != "alice" || mine.Access != apitypes.AccessPrivate || !slices.Equal(mine.SharedWith, shared) {
			t.Fatalf("%s: alice sees a-box %+v", name, mine)
		}
		if v := th.runnersOf(th.admin)["a-box"]; !slices.Equal(v.SharedWith, shared) {
			t.Fatalf("%s: the admin sees a-box %+v", name, v)
		}
		theirs, ok := th.runnersOf(bob)["a-box"]
		if !ok || theirs.Owner != "alice" || theirs.Access != apitypes.AccessPrivate || theirs.SharedWith != nil {
			t.Fatalf("%s: bob sees a-box %+v (listed %v)", name, theirs, ok)
		}
		if v := th.runnersOf(bob)["b-box"]; v.Owner != "bob" || v.Access != apitypes.AccessPrivate || len(v.SharedWith) != 0 {
			t.Fatalf("%s: bob sees b-box %+v", name, v)
		}
		if _, ok := th.runnersOf(alice)["b-box"]; ok {
			t.Fatalf("%s: alice lists bob's private runner", name)
		}
		if l := th.accounts(alice); len(l) != 1 || !slices.Equal(l[0].SharedWith, []apitypes.Share{{Project: "web"}}) {
			t.Fatalf("%s: alice's accounts %+v", name, l)
		}
	}
	check("before")

	type share = apitypes.ShareRequest
	type acct = apitypes.AccountShareRequest
	for _, c := range []struct {
		name, token, path string
		body              any
		status            int
	}{
		{"unknown runner", alice, "/runners/nope/share", share{User: "bob"}, http.StatusNotFound},
		{"another owner's runner", bob, "/runners/a-box/share", share{User: "admin"}, http.StatusForbidden},
		{"another owner's unshare", bob, "/runners/a-box/unshare", share{User: "bob"}, http.StatusForbidden},
		{"user and project", alice, "/runners/a-box/share", share{User: "admin", Project: "web"}, http.StatusBadRequest},
		{"hub and user", th.admin, "/runners/a-box/share", share{User: "admin", Hub: true}, http.StatusBadRequest},
		{"no one", alice, "/runners/a-box/share", share{}, http.StatusBadRequest},
		{"unknown user", alice, "/runners/a-box/share", share{User: "carol"}, http.StatusNotFound},
		{"unknown project", alice, "/runners/a-box/share", share{Project: "nope"}, http.StatusNotFound},
		{"the owner herself", alice, "/runners/a-box/share", share{User: "alice"}, http.StatusBadRequest},
		{"hub by its owner", alice, "/runners/a-box/share", share{Hub: true}, http.StatusForbidden},
		{"hub by an admin for a user's runner", th.admin, "/runners/a-box/share", share{Hub: true}, http.StatusForbidden},
		{"unshare a user never shared", alice, "/runners/a-box/unshare", share{User: "admin"}, http.StatusNotFound},
		{"unshare a project never shared", alice, "/runners/a-box/unshare", share{Project: "api"}, http.StatusNotFound},
		{"unshare another owner's runner from a project", alice, "/runners/b-box/unshare", share{Project: "web"}, http.StatusForbidden},
		{"unshare no one", alice, "/runners/a-box/unshare", share{}, http.StatusBadRequest},
		{"account: unknown runner", alice, "/accounts/share", acct{Runner: "nope", Account: "acct-1", User: "bob"}, http.StatusNotFound},
		{"account: another owner's", bob, "/accounts/share", acct{Runner: "a-box", Account: "acct-1", User: "bob"}, http.StatusForbidden},
		{"account: unknown account", alice, "/accounts/share", acct{Runner: "a-box", Account: "acct-9", User: "bob"}, http.StatusNotFound},
		{"account: no runner", alice, "/accounts/share", acct{Account: "acct-1", User: "bob"}, http.StatusBadRequest},
		{"account: no account", alice, "/accounts/share", acct{Runner: "a-box", User: "bob"}, http.StatusBadRequest},
		{"account: user and project", alice, "/accounts/share", acct{Runner: "a-box", Account: "acct-1", User: "bob", Project: "web"}, http.StatusBadRequest},
		{"account: no one", alice, "/accounts/share", acct{Runner: "a-box", Account: "acct-1"}, http.StatusBadRequest},
		{"account: unknown user", alice, "/accounts/share", acct{Runner: "a-box", Account: "acct-1", User: "carol"}, http.StatusNotFound},
		{"account: the owner herself", alice, "/accounts/share", acct{Runner: "a-box", Account: "acct-1", User: "alice"}, http.StatusBadRequest},
		{"account: unshare never shared", alice, "/accounts/unshare", acct{Runner: "a-box", Account: "acct-1", User: "bob"}, http.StatusNotFound},
	} {
		code, e := th.call(c.token, "POST", c.path, c.body, nil)
		if code != c.status || e.Message == "" {
			t.Errorf("%s: %d %+v, want %d with a message", c.name, code, e, c.status)
		}
		check(c.name)
	}

	// A share made twice is one share; the answer shows it to the owner.
	if v := th.share(alice, "a-box", true, share{User: "bob"}); !slices.Equal(v.SharedWith, shared) || v.Owner != "alice" {
		t.Fatalf("share again: %+v", v)
	}
	check("after a repeated share")
	// An admin's runner made hub-wide: the others see its access, not
	// whom else it is shared with.
	th.registerRunnerOf(th.admin, "h-box", "bob")
	if v := th.share(th.admin, "h-box", true, share{Hub: true}); v.Access != apitypes.AccessHub || v.Owner != "admin" ||
		!slices.Equal(v.SharedWith, []apitypes.Share{{User: "bob"}}) {
		t.Fatalf("admin makes h-box hub-wide: %+v", v)
	}
	for _, token := range []string{alice, bob} {
		if v, ok := th.runnersOf(token)["h-box"]; !ok || v.Access != apitypes.AccessHub || v.Owner != "admin" || v.SharedWith != nil {
			t.Fatalf("a user sees the hub-wide h-box: %+v (listed %v)", v, ok)
		}
	}
}

// An offer the hub sends again to a runner's new connection (the old one
// was replaced before the hub saw it drop) follows the same rules as the
// first: it names the account the requester may use, not none (which lets
// the runner pick any of its owner's accounts), and it is withdrawn, back
// to the queue, when the runner's access no longer covers it.
func TestResentOfferFollowsAccess(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	hello := protocol.Hello{Slots: 1, Agents: []string{"exec", "claude"}, Accounts: []protocol.AccountInfo{
		{ID: "acct-2", Agent: "claude", Kind: "api-key", State: protocol.AccountReady},
		{ID: "acct-1", Agent: "claude", Kind: "api-key", State: protocol.AccountReady},
	}}
	aTok := th.registerRunnerOf(alice, "a-box", "bob")
	aBox, _ := th.dial(aTok, hello)
	th.shareAccount(alice, true, apitypes.AccountShareRequest{Runner: "a-box", Account: "acct-1", User: "bob"})
	prompt := apitypes.SubmitRequest{Agent: "claude", Args: []string{"write hello.txt"}}

	j := th.submitAs(bob, prompt)
	o := aBox.offerFor(j.ID)
	if o.Account != "acct-1" {
		t.Fatalf("first offer names %q, want acct-1", o.Account)
	}
	// A new connection of a-box replaces the old one: the offer it never
	// answered comes again, for the same account.
	aBox2, _ := th.dial(aTok, hello)
	if o2 := aBox2.offerFor(j.ID); o2.AttemptRef != o.AttemptRef || o2.Account != "acct-1" {
		t.Fatalf("re-sent offer %+v names account %q, want attempt %+v on acct-1", o2.AttemptRef, o2.Account, o.AttemptRef)
	}

	// acct-1 unshared while the offer waits: the next connection is not
	// sent it again; the job goes back to the queue and waits there.
	th.shareAccount(alice, false, apitypes.AccountShareRequest{Runner: "a-box", Account: "acct-1", User: "bob"})
	aBox3, _ := th.dial(aTok, hello)
	th.waitQueued(j.ID, waitNoAccount)
	// Its slot is free again: alice's own job is offered there.
	own := th.submitAs(alice, prompt)
	o3 := aBox3.offerFor(own.ID)
	if o3.Account != "acct-2" {
		t.Fatalf("alice's offer names %q, want acct-2", o3.Account)
	}
	runToEnd(t, aBox3, o3, "x", 1)

	// The runner unshared from bob while his offer waits: withdrawn too.
	exec := th.submitAs(bob, apitypes.SubmitRequest{})
	aBox3.offerFor(exec.ID)
	th.share(alice, "a-box", false, apitypes.ShareRequest{User: "bob"})
	aBox4, _ := th.dial(aTok, hello)
	th.waitQueued(exec.ID, waitNotYours)
	aBox4.offerFor(th.submitAs(alice, apitypes.SubmitRequest{}).ID)
	th.wantQueued(j.ID, exec.ID)
}
