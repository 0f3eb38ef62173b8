package hub

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/netpolicy"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// A project's owner chooses its network from the operator's policies;
// members read the choice, others may not; a refused choice or job changes
// nothing; a job narrows the agent's policies and the offer carries what
// they resolve to.
func TestProjectNetworkPolicies(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{Network: netpolicy.Catalog{Policies: map[string][]string{
		"go":  {"proxy.golang.org", "sum.golang.org"},
		"npm": {"registry.npmjs.org"},
	}}})
	alice, bob, carol := th.addUser("alice"), th.addUser("bob"), th.addUser("carol")
	_, base := th.hostProject(alice, "web")
	th.addMember(alice, "web", "bob")

	config := func(token string) (apitypes.ProjectConfig, int) {
		var c apitypes.ProjectConfig
		code, _ := th.call(token, "GET", "/projects/web/config", nil, &c)
		return c, code
	}
	set := func(token string, req apitypes.ProjectConfigRequest) (int, rules.Error) {
		return th.call(token, "PUT", "/projects/web/config", req, nil)
	}
	names := func(n ...string) *[]string { return &n }

	if code, _ := set(alice, apitypes.ProjectConfigRequest{SetupNetwork: names("npm", "go"), AgentNetwork: names("go")}); code != http.StatusOK {
		t.Fatalf("owner sets the network: %d", code)
	}
	want := func() {
		t.Helper()
		c, code := config(bob)
		if code != http.StatusOK || !slices.Equal(c.SetupNetwork, []string{"go", "npm"}) || !slices.Equal(c.AgentNetwork, []string{"go"}) ||
			len(c.Policies) != 2 {
			t.Fatalf("config as a member sees it: %d %+v", code, c)
		}
	}
	want()
	digest := protocol.SetupFileHash([]byte("echo setup\n"))
	for name, tc := range map[string]struct {
		token  string
		req    apitypes.ProjectConfigRequest
		status int
	}{
		"a member who is not the owner": {bob, apitypes.ProjectConfigRequest{AgentNetwork: names("npm")}, http.StatusForbidden},
		"a non-member":                  {carol, apitypes.ProjectConfigRequest{AgentNetwork: names("npm")}, http.StatusForbidden},
		"an unknown policy":             {alice, apitypes.ProjectConfigRequest{AgentNetwork: names("pip")}, http.StatusBadRequest},
		"open while it is off":          {alice, apitypes.ProjectConfigRequest{AgentNetwork: names("open")}, http.StatusBadRequest},
		"a bad cache with a good policy": {alice, apitypes.ProjectConfigRequest{AgentNetwork: names("npm"),
			Caches: names("../x")}, http.StatusBadRequest},
		"a bad key file":                      {alice, apitypes.ProjectConfigRequest{SetupKeys: names("/etc/passwd")}, http.StatusBadRequest},
		"a setup file outside the repository": {alice, apitypes.ProjectConfigRequest{SetupFile: ptr("../setup.sh")}, http.StatusBadRequest},
		"a member enables a setup file":       {bob, apitypes.ProjectConfigRequest{SetupFile: ptr(".drover/setup.sh")}, http.StatusForbidden},
		"a member marks it large":             {bob, apitypes.ProjectConfigRequest{Large: ptr(true)}, http.StatusForbidden},
		"a member approves a setup script":    {bob, apitypes.ProjectConfigRequest{ApproveSetup: []string{digest}}, http.StatusForbidden},
		"a setup script digest that is not one": {alice, apitypes.ProjectConfigRequest{ApproveSetup: []string{digest, "abc"}},
			http.StatusBadRequest},
		"unapproving a digest not approved":    {alice, apitypes.ProjectConfigRequest{UnapproveSetup: []string{digest}}, http.StatusBadRequest},
		"a sparse path outside the repository": {alice, apitypes.ProjectConfigRequest{Sparse: names("src", "../x")}, http.StatusBadRequest},
		"a sparse pattern":                     {alice, apitypes.ProjectConfigRequest{Sparse: names("src/*")}, http.StatusBadRequest},
		"a publish author not requester":       {alice, apitypes.ProjectConfigRequest{PublishAuthor: ptr("bob")}, http.StatusBadRequest},
		"a publish email not an address":       {alice, apitypes.ProjectConfigRequest{PublishEmail: ptr("{user} <x@y>")}, http.StatusBadRequest},
		"a member asks for signed commits":     {bob, apitypes.ProjectConfigRequest{PublishSign: ptr(true)}, http.StatusForbidden},
	} {
		if code, e := set(tc.token, tc.req); code != tc.status || e.Message == "" {
			t.Errorf("%s: %d %+v, want %d with a message", name, code, e, tc.status)
		}
		want()
	}
	if _, code := config(carol); code != http.StatusForbidden {
		t.Errorf("a non-member reads the config: %d", code)
	}
	if code, e := set(alice, apitypes.ProjectConfigRequest{PublishAuthor: ptr("requester"), PublishEmail: ptr("{user}@acme.test"),
		PublishSign: ptr(true)}); code != http.StatusOK {
		t.Fatalf("owner asks for requester-authored, signed commits: %d %+v", code, e)
	}
	if c, _ := config(bob); c.PublishAuthor != "requester" || c.PublishEmail != "{user}@acme.test" || !c.PublishSign {
		t.Errorf("config after asking for signed commits: %+v", c)
	}

	// A job narrows, never widens; without a project only "none" is.
	before := len(th.jobIDs(alice))
	for name, req := range map[string]apitypes.SubmitRequest{
		"widen":                  {Agent: "exec", Args: []string{"true"}, Repo: onRepo("web", base), Network: []string{"npm"}},
		"no project":             {Agent: "exec", Args: []string{"true"}, Network: []string{"go"}},
		"none and another":       {Agent: "exec", Args: []string{"true"}, Repo: onRepo("web", base), Network: []string{"none", "go"}},
		"sparse, no repo":        {Agent: "exec", Args: []string{"true"}, Sparse: []string{"src"}},
		"sparse outside":         {Agent: "exec", Args: []string{"true"}, Repo: onRepo("web", base), Sparse: []string{"../src"}},
		"sparse, no such folder": {Agent: "exec", Args: []string{"true"}, Repo: onRepo("web", base), Sparse: []string{"src", "docs"}},
		"sparse on a file":       {Agent: "exec", Args: []string{"true"}, Repo: onRepo("web", base), Sparse: []string{"README"}},
	} {
		if code, e := th.call(alice, "POST", "/jobs", req, nil); code/100 != 4 || e.Message == "" {
			t.Errorf("%s: %d %+v, want a refusal", name, code, e)
		}
	}
	if n := len(th.jobIDs(alice)); n != before {
		t.Fatalf("refused submissions made jobs: %d, were %d", n, before)
	}

	// A setup file alone is a setup, and the offer names it with the
	// digests of its versions the owner approved.
	if code, e := set(alice, apitypes.ProjectConfigRequest{SetupFile: ptr(".drover/setup.sh"),
		ApproveSetup: []string{strings.ToUpper(digest), digest}}); code != http.StatusOK {
		t.Fatalf("owner enables and approves a setup file: %d %+v", code, e)
	}
	if c, _ := config(bob); !slices.Equal(c.SetupApproved, []string{digest}) {
		t.Fatalf("config after --approve: %+v", c)
	}
	box, _ := th.dial(th.registerRunnerOf(alice, "a-box"), protocol.Hello{Slots: 1})
	withFile := th.submitAs(alice, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	if o := box.offerFor(withFile.ID); o.Spec.Setup == nil || o.Spec.Setup.File != ".drover/setup.sh" || len(o.Spec.Setup.Commands) != 0 ||
		!slices.Equal(o.Spec.Setup.FileApproved, []string{digest}) {
		t.Fatalf("offer setup = %+v", o.Spec.Setup)
	} else {
		runToEnd(t, box, o, "", 0)
	}
	// A large project's offers tell the runner to fetch a partial clone.
	if code, e := set(alice, apitypes.ProjectConfigRequest{Large: ptr(true), Sparse: names("src", "docs", "src")}); code != http.StatusOK {
		t.Fatalf("owner marks the project large and sparse: %d %+v", code, e)
	}
	if c, _ := config(bob); !c.Large || !slices.Equal(c.Sparse, []string{"docs", "src"}) {
		t.Fatalf("config after --large --sparse: %+v", c)
	}
	large := th.submitAs(alice, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	if o := box.offerFor(large.ID); o.Spec.Repo == nil || !o.Spec.Repo.Large || !slices.Equal(o.Spec.Repo.Sparse, []string{"docs", "src"}) {
		t.Fatalf("offer of a large project: repo %+v", o.Spec.Repo)
	} else {
		runToEnd(t, box, o, "", 0)
	}
	// A job's own sparse folders win over the project's.
	own := th.submitAs(alice, apitypes.SubmitRequest{Repo: onRepo("web", base), Sparse: []string{"src"}})
	if o := box.offerFor(own.ID); !slices.Equal(o.Spec.Repo.Sparse, []string{"src"}) {
		t.Fatalf("offer of a job with its own sparse folders: repo %+v", o.Spec.Repo)
	} else {
		runToEnd(t, box, o, "", 0)
	}
	if code, e := set(alice, apitypes.ProjectConfigRequest{Large: ptr(false), Sparse: names()}); code != http.StatusOK {
		t.Fatalf("owner unmarks the project: %d %+v", code, e)
	}
	if code, e := set(alice, apitypes.ProjectConfigRequest{SetupFile: ptr("")}); code != http.StatusOK {
		t.Fatalf("owner turns the setup file off: %d %+v", code, e)
	}
	none := th.submitAs(alice, apitypes.SubmitRequest{Repo: onRepo("web", base), Network: []string{"none"}})
	if none.Network == nil || len(none.Network) != 0 {
		t.Fatalf("job network = %#v, want none", none.Network)
	}
	o := box.offerFor(none.ID)
	n := o.Spec.Network
	if n == nil || len(n.Agent.Policies) != 0 || len(n.Agent.Allow) != 0 || n.Agent.Open ||
		!slices.Equal(n.Setup.Policies, []string{"go", "npm"}) ||
		!slices.Equal(n.Setup.Allow, []string{"proxy.golang.org:443", "registry.npmjs.org:443", "sum.golang.org:443"}) {
		t.Fatalf("offer network = %+v", n)
	}
	runToEnd(t, box, o, "", 0)
	def := th.submitAs(alice, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	o = box.offerFor(def.ID)
	if !slices.Equal(o.Spec.Network.Agent.Allow, []string{"proxy.golang.org:443", "sum.golang.org:443"}) {
		t.Fatalf("default agent network = %+v", o.Spec.Network.Agent)
	}

	// The denials a finish reports become events, and the job's view
	// says for each the command that allows it; a malformed one is refused.
	wantOK(t, box.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	fin := protocol.Finish{AttemptRef: o.AttemptRef, Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)},
		LogSize: 0, LogSHA256: sum(nil), Isolation: &protocol.Isolation{Kind: "bwrap", Policy: "setup: go,npm; agent: go",
			Denials: []protocol.Denial{{Host: "no port", Phase: "agent", Count: 1}}}}
	if rep := box.request(protocol.TypeFinish, fin); rep.OK {
		t.Fatal("a malformed denial was taken")
	}
	fin.Isolation.Denials = []protocol.Denial{{Host: "registry.npmjs.org:443", Phase: "agent", Count: 2}, {Host: "example.org:443", Phase: "setup", Count: 1}}
	wantOK(t, box.request(protocol.TypeFinish, fin))
	var v apitypes.JobView
	if code, e := th.call(alice, "GET", "/jobs/"+def.ID+"?events=1", nil, &v); code != http.StatusOK {
		t.Fatalf("job view: %d %+v", code, e)
	}
	ds := v.Attempts[0].Isolation.Denials
	if len(ds) != 2 || ds[0].Allow != "drover projects network web --agent go,npm" ||
		!strings.Contains(ds[1].Allow, "no network policy on this hub allows example.org:443") {
		t.Fatalf("denials = %+v", ds)
	}
	events := 0
	for _, e := range v.Events {
		if e.Kind == "egress_denied" {
			events++
		}
	}
	if events != 2 {
		t.Fatalf("%d egress_denied events, want 2: %+v", events, v.Events)
	}
}

// heard collects the frames a scripted runner receives for d, as the raw
// bytes the hub sent.
func (sr *scriptRunner) heard(d time.Duration) string {
	sr.t.Helper()
	var b strings.Builder
	deadline := time.After(d)
	for {
		select {
		case f := <-sr.frames:
			raw, _ := json.Marshal(f)
			b.Write(raw)
		case <-deadline:
			return b.String()
		}
	}
}

// The operator's registry credential reaches only an admin's runner or
// one the hub's config names for it: a job whose setup brings it is not
// offered to the project owner's runner or to another user's runner
// shared with the project (no frame they get holds the key), waits saying
// what it needs, and runs on the named runner or an admin's runner shared
// hub-wide, whose offers carry the key.
func TestSetupCredentialsReachOnlyTrustedRunners(t *testing.T) {
	t.Parallel()
	const key = "operator-key-9d2e71"
	th := startHub(t, Config{Network: netpolicy.Catalog{Policies: map[string][]string{"private": {"registry.corp.example"}}},
		Credentials: []protocol.SetupCredential{{Name: "corp", Policy: "private", Upstream: "https://registry.corp.example",
			Header: "Authorization", Prefix: "Bearer ", Key: key, KeyEnv: "CORP_KEY", BaseURLEnv: "CORP_URL"}},
		CredentialRunners: map[string][]string{"corp": {"carol/c-box"}}})
	alice, bob, carol := th.addUser("alice"), th.addUser("bob"), th.addUser("carol")
	_, base := th.hostProject(alice, "web")
	th.addMember(alice, "web", "bob")
	th.addMember(alice, "web", "carol")
	cmds, setupNet := []string{"fetch-deps"}, []string{"private"}
	if code, e := th.call(alice, "PUT", "/projects/web/config", apitypes.ProjectConfigRequest{SetupNetwork: &setupNet, SetupCommands: &cmds}, nil); code != http.StatusOK {
		t.Fatalf("set config: %d %+v", code, e)
	}
	own, _ := th.dial(th.registerRunnerOf(alice, "a-box"), protocol.Hello{Slots: 1})
	bobs := th.registerRunnerOf(bob, "b-box")
	th.share(bob, "b-box", true, apitypes.ShareRequest{Project: "web"})
	th.accept(alice, "b-box", "web")
	shared, _ := th.dial(bobs, protocol.Hello{Slots: 1})

	j := th.submitAs(alice, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	v := th.waitQueued(j.ID, "needs the hub's registry credential(s) corp, which only runners owned by an admin (or named for them in the hub's config) receive")
	if strings.Contains(v.Waiting, key) {
		t.Fatalf("the waiting reason holds the key: %q", v.Waiting)
	}
	// A job without setup credentials still runs on alice's own runner.
	plain := th.submitAs(alice, apitypes.SubmitRequest{Args: []string{"echo", "no-setup"}})
	runToEnd(t, own, own.offerFor(plain.ID), "", 0)
	for name, sr := range map[string]*scriptRunner{"the project owner's runner": own, "a member's runner shared with the project": shared} {
		if got := sr.heard(300 * time.Millisecond); strings.Contains(got, key) || strings.Contains(got, `"offer"`) {
			t.Fatalf("%s heard an offer or the key: %s", name, got)
		}
	}
	th.wantQueued(j.ID)

	carols := th.registerRunnerOf(carol, "c-box")
	th.share(carol, "c-box", true, apitypes.ShareRequest{Project: "web"})
	th.accept(alice, "c-box", "web")
	named, _ := th.dial(carols, protocol.Hello{Slots: 1})
	held := named.offerFor(j.ID)
	if held.Spec.Setup == nil || len(held.Spec.Setup.Credentials) != 1 || held.Spec.Setup.Credentials[0].Key != key {
		t.Fatalf("the runner the config names got setup %+v", held.Spec.Setup)
	}
	j2 := th.submitAs(alice, apitypes.SubmitRequest{Repo: onRepo("web", base)})
	th.waitQueued(j2.ID, "every runner that can take it is busy")
	admins := th.registerRunner("h-box")
	th.share(th.admin, "h-box", true, apitypes.ShareRequest{Hub: true})
	hub, _ := th.dial(admins, protocol.Hello{Slots: 1})
	o := hub.offerFor(j2.ID)
	if o.Spec.Setup == nil || len(o.Spec.Setup.Credentials) != 1 || o.Spec.Setup.Credentials[0].Key != key {
		t.Fatalf("the admin's runner got setup %+v", o.Spec.Setup)
	}
	runToEnd(t, hub, o, "", 0)
	runToEnd(t, named, held, "", 0)
}

func ptr[T any](v T) *T { return &v }
