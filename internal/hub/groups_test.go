package hub

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/attemptgroup"
	"drover/internal/attemptgroup/request"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// groupRunners are three scripted runners of claude and exec jobs, one
// slot each: a group's attempts spread across them.
func groupRunners(th *testHub) ([]*scriptRunner, []string) {
	var srs []*scriptRunner
	var toks []string
	for _, name := range []string{"r1", "r2", "r3"} {
		tok := th.registerRunner(name)
		sr, _ := th.dial(tok, protocol.Hello{Slots: 1, Agents: []string{"exec", "claude"},
			Accounts: []protocol.AccountInfo{{ID: "acct_" + name, Agent: "claude", Kind: "api-key", State: protocol.AccountReady}}})
		srs, toks = append(srs, sr), append(toks, tok)
	}
	return srs, toks
}

// nextOffer waits for an offer on any of srs, and says whose.
func nextOffer(t *testing.T, srs []*scriptRunner) (protocol.Offer, int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i, sr := range srs {
			f, err := sr.tryRead(50 * time.Millisecond)
			if err != nil || f.Type != protocol.TypeOffer {
				continue
			}
			var o protocol.Offer
			if err := f.Decode(&o); err != nil {
				t.Fatal(err)
			}
			return o, i
		}
	}
	t.Fatal("no offer")
	return protocol.Offer{}, 0
}

// runOffer plays one offered job to its end: a commit writing content to
// a.txt on base when content is not "", then exit code.
func runOffer(t *testing.T, th *testHub, sr *scriptRunner, tok string, o protocol.Offer, dir, base, content string, code int) {
	t.Helper()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	if content != "" {
		head := commitOn(t, dir, base, "a.txt", content)
		if a := th.publish(tok, o.AttemptRef, head, bundle(t, dir, head, base), "", false); a.code != http.StatusOK {
			t.Fatalf("publish: %+v", a)
		}
	}
	if o.Spec.Tools {
		wantOK(t, sr.request(protocol.TypeDeliver, protocol.Deliver{AttemptRef: o.AttemptRef, Summary: "done"}))
	}
	out := job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(code)}
	if code != 0 {
		out.State = job.AttemptFailed
	}
	wantOK(t, sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef, Outcome: out, LogSHA256: sum(nil)}))
}

// playAttempts plays a group's three attempts and their verify: the
// attempts, three jobs offered at once, one on each runner, each at the
// base, write "hello one", "hello two" and "bye three" to a.txt; then
// each attempt's verify, an exec job at its attempt's commit, passes but
// for the one that says bye. It returns each attempt's job's text.
func playAttempts(t *testing.T, th *testHub, srs []*scriptRunner, toks []string, dir, base string) map[string]string {
	t.Helper()
	content := map[string]string{}
	type offered struct {
		o protocol.Offer
		i int
	}
	var offers []offered
	seen := map[int]bool{}
	for i, c := range []string{"hello one\n", "hello two\n", "bye three\n"} {
		o, r := nextOffer(t, srs)
		if o.Spec.Agent != "claude" || o.Spec.Mode == protocol.ModeObserve || o.Spec.Repo == nil || o.Spec.Repo.Base != base || seen[r] {
			t.Fatalf("offer %d on runner %d: %+v, want a claude attempt at the base, one per runner", i, r, o.Spec)
		}
		seen[r] = true
		content[o.Job] = c
		offers = append(offers, offered{o, r})
	}
	for _, o := range offers {
		runOffer(t, th, srs[o.i], toks[o.i], o.o, dir, base, content[o.o.Job], 0)
	}
	for range 3 {
		o, r := nextOffer(t, srs)
		if o.Spec.Agent != "exec" {
			t.Fatalf("offer %+v, want a verify exec job", o.Spec)
		}
		code := 0
		if strings.HasPrefix(th.gitOut("web", "show", o.Spec.Repo.Base+":a.txt"), "bye") {
			code = 1
		}
		runOffer(t, th, srs[r], toks[r], o, dir, o.Spec.Repo.Base, "", code)
	}
	return content
}

// gitOut runs git in the hub's repository of project.
func (th *testHub) gitOut(project string, args ...string) string {
	th.t.Helper()
	out, err := tgit.Out(th.t.Context(), th.h.repos.Dir(project), args...)
	if err != nil {
		th.t.Fatalf("git %v: %v", args, err)
	}
	return out
}

func (th *testHub) group(token, id string) (apitypes.GroupView, int) {
	th.t.Helper()
	var v apitypes.GroupView
	code, e := th.call(token, "GET", "/groups/"+id, nil, &v)
	if code >= 500 {
		_, err := th.h.groups.CompareGroup(th.t.Context(), call.Caller{Admin: true, Name: "admin"}, id)
		th.t.Errorf("compare group %s: %d %v: %v", id, code, e, err)
	}
	return v, code
}

// drover run --attempts 3 --verify: three sibling claude jobs on one base,
// each verified by an exec job at its own commit; one attempt's verify
// fails and fails nothing else; compare shows three diffs side by side;
// pick keeps the chosen one at the group's ref and publishes its job (and
// only its job) through the project's forge.
func TestGroupOfThreeAttemptsIsComparedAndOnePicked(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	srs, toks := groupRunners(th)
	dir, base := sourceRepo(t)
	th.push(dir, "web", base)
	refusingForge(t, th)
	var g apitypes.GroupView
	req := apitypes.GroupRequest{Project: "web", Base: base, Prompt: "make a.txt say hello", Attempts: 3, Agent: "claude", Verify: "grep -q hello a.txt"}
	if code, e := th.call(th.admin, "POST", "/groups", req, &g); code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, e)
	}
	if len(g.Attempts) != 3 {
		t.Fatalf("%d attempts, want 3: %+v", len(g.Attempts), g)
	}
	content := playAttempts(t, th, srs, toks, dir, base)
	var v apitypes.GroupView
	waitFor(t, "the group to end", func() bool {
		v, _ = th.group(th.admin, g.ID)
		return v.State != "running"
	})
	if v.State != "done" {
		t.Fatalf("group %s: %s", v.State, v.Reason)
	}
	byText := map[string]apitypes.GroupAttempt{}
	for _, a := range v.Attempts {
		if a.State != "done" || a.Files != 1 || a.Added != 1 || a.Job == "" || !strings.Contains(a.Diff, "+++ b/a.txt") {
			t.Errorf("attempt %d: %+v, want done with a diff of one added line in a.txt", a.Number, a)
		}
		byText[strings.TrimSpace(content[a.Job])] = a
	}
	if byText["hello one"].Verify != "passed" || byText["hello two"].Verify != "passed" || byText["bye three"].Verify != "failed" {
		t.Errorf("verify: %+v", v.Attempts)
	}
	if !strings.Contains(byText["hello two"].Diff, "+hello two") {
		t.Errorf("attempt's diff %q, want its own line", byText["hello two"].Diff)
	}

	// Bad picks change nothing.
	bob := th.addUser("bob")
	for _, c := range []struct {
		token   string
		attempt int
		want    int
	}{{th.admin, 0, http.StatusBadRequest}, {th.admin, 4, http.StatusBadRequest}, {bob, byText["hello two"].Number, http.StatusNotFound}} {
		if code, e := th.call(c.token, "POST", "/groups/"+g.ID+"/pick", apitypes.GroupPickRequest{Attempt: c.attempt}, nil); code != c.want {
			t.Errorf("pick %d: %d %v, want %d", c.attempt, code, e, c.want)
		}
	}
	if _, code := th.group(bob, g.ID); code != http.StatusNotFound {
		t.Errorf("bob compared alice's group: %d, want 404", code)
	}
	if _, code := th.group(th.admin, "p-nosuch"); code != http.StatusNotFound {
		t.Errorf("an unknown group: %d, want 404", code)
	}
	if v, _ := th.group(th.admin, g.ID); v.Picked != 0 || v.Result != "" {
		t.Fatalf("a refused pick picked: %+v", v)
	}

	pick := byText["hello two"]
	var p apitypes.GroupView
	if code, e := th.call(th.admin, "POST", "/groups/"+g.ID+"/pick", apitypes.GroupPickRequest{Attempt: pick.Number}, &p); code != http.StatusOK {
		t.Fatalf("pick: %d %v", code, e)
	}
	if p.Picked != pick.Number || p.Result != pick.Commit || p.Ref != attemptgroup.RefPrefix+g.ID {
		t.Fatalf("picked %+v, want attempt %d at %s", p, pick.Number, pick.Commit)
	}
	if p.Publication == nil || p.Publication.Job != pick.Job {
		t.Fatalf("the pick's publication %+v, want attempt %d's job %s's", p.Publication, pick.Number, pick.Job)
	}
	if got := th.gitOut("web", "rev-parse", p.Ref); got != pick.Commit {
		t.Fatalf("the group's ref is at %q, want %s", got, pick.Commit)
	}
	// Picking it again is the same pick; another attempt is refused.
	if code, e := th.call(th.admin, "POST", "/groups/"+g.ID+"/pick", apitypes.GroupPickRequest{Attempt: pick.Number}, nil); code != http.StatusOK {
		t.Fatalf("the same pick again: %d %v", code, e)
	}
	other := byText["hello one"].Number
	if code, _ := th.call(th.admin, "POST", "/groups/"+g.ID+"/pick", apitypes.GroupPickRequest{Attempt: other}, nil); code != http.StatusConflict {
		t.Fatalf("a second pick: %d, want 409", code)
	}
	// Only the picked attempt's job is published.
	for _, a := range v.Attempts {
		err := th.h.store.Read(t.Context(), func(tx store.Tx) error {
			_, err := tx.Publication(a.Job)
			return err
		})
		if got := err == nil; got != (a.Number == pick.Number) {
			t.Errorf("attempt %d's job %s: publication recorded %v (%v)", a.Number, a.Job, got, err)
		}
	}
}

// A group request that is wrong starts nothing.
func TestBadGroupRequestsStartNothing(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	dir, base := sourceRepo(t)
	th.push(dir, "web", base)
	ok := apitypes.GroupRequest{Project: "web", Base: base, Prompt: "p", Attempts: 2, Agent: "claude"}
	for name, mod := range map[string]func(*apitypes.GroupRequest){
		"no attempts":      func(r *apitypes.GroupRequest) { r.Attempts = 0 },
		"negative":         func(r *apitypes.GroupRequest) { r.Attempts = -1 },
		"too many":         func(r *apitypes.GroupRequest) { r.Attempts = request.MaxAttempts + 1 },
		"unknown agent":    func(r *apitypes.GroupRequest) { r.Agent = "nosuch" },
		"agents count":     func(r *apitypes.GroupRequest) { r.Agents = []string{"claude", "codex", "claude"} },
		"agent in agents":  func(r *apitypes.GroupRequest) { r.Agents = []string{"claude", "nosuch"} },
		"no prompt":        func(r *apitypes.GroupRequest) { r.Prompt = " " },
		"exec takes none":  func(r *apitypes.GroupRequest) { r.Agent = "exec" },
		"unknown base":     func(r *apitypes.GroupRequest) { r.Base = strings.Repeat("a", 40) },
		"unknown project":  func(r *apitypes.GroupRequest) { r.Project = "nosuch" },
		"bad account name": func(r *apitypes.GroupRequest) { r.Agents = []string{"native:a\x1b", "claude"} },
	} {
		req := ok
		mod(&req)
		if code, e := th.call(th.admin, "POST", "/groups", req, nil); code < 400 || code >= 500 {
			t.Errorf("%s: %d %v, want a refusal", name, code, e)
		}
	}
	var l apitypes.PipelineList
	if code, e := th.call(th.admin, "GET", "/pipelines", nil, &l); code != http.StatusOK || len(l.Pipelines) != 0 {
		t.Fatalf("pipelines after refusals: %d %v %+v", code, e, l)
	}
	var jobs apitypes.JobList
	if code, e := th.call(th.admin, "GET", "/jobs", nil, &jobs); code != http.StatusOK || len(jobs.Jobs) != 0 {
		t.Fatalf("jobs after refusals: %d %v %+v", code, e, jobs)
	}
}

// A group started again with the same key is the same group: its attempts
// are not submitted twice.
func TestGroupKeyStartsOnce(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	dir, base := sourceRepo(t)
	th.push(dir, "web", base)
	req := apitypes.GroupRequest{Project: "web", Base: base, Prompt: "p", Attempts: 2, Agent: "claude", Key: "k1"}
	var first, again apitypes.GroupView
	if code, e := th.call(th.admin, "POST", "/groups", req, &first); code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, e)
	}
	if code, e := th.call(th.admin, "POST", "/groups", req, &again); code != http.StatusOK || again.ID != first.ID {
		t.Fatalf("start again: %d %v %s, want 200 and group %s", code, e, again.ID, first.ID)
	}
	var jobs apitypes.JobList
	waitFor(t, "the attempts' jobs", func() bool {
		th.call(th.admin, "GET", "/jobs", nil, &jobs)
		return len(jobs.Jobs) >= 2
	})
	if code, e := th.call(th.admin, "GET", "/jobs", nil, &jobs); code != http.StatusOK || len(jobs.Jobs) != 2 {
		t.Fatalf("jobs: %d %v, %d of them, want 2", code, e, len(jobs.Jobs))
	}
}
