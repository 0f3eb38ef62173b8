package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
)

// The tenancy comparison (--owners N --sharing mixed): dispatch latency with
// the hub's access rules deciding, beside the same fleet and the same jobs
// with nothing to decide, measured in one run.
//
// Two hubs run side by side, each with the same number of connected
// runners, the same runner names, the same target runners and the same
// job shapes:
//
//   - the baseline hub: every runner approved by the admin, every job
//     submitted by the admin (the access rules with nothing to decide:
//     the admin owns every runner);
//   - the tenancy hub: Owners users own the runners, each approved with its
//     owner's token, shared in a mix (see mixedLayout), and every job is
//     submitted by a user who may use a target runner through one of the
//     four ways: their own runner, a runner shared with them, a runner
//     shared with a project they are a member of (the job is on that
//     project), or a hub-wide runner.
//
// Samples alternate between the hubs (baseline, tenancy, tenancy, baseline,
// ...) so that load on the machine hits both alike.

// SharingMixed is the one sharing mix: 40 % of runners private, 30 %
// shared with one to three named users, 20 % shared with a project, 10 %
// hub-wide (those belong to the admin).
const SharingMixed = "mixed"

// Runner kinds of the mix: how a runner is shared, and so how a job may
// reach it.
const (
	kindPrivate = "private"
	kindUsers   = "shared with users"
	kindProject = "shared with a project"
	kindHub     = "hub-wide"
)

var kinds = []string{kindPrivate, kindUsers, kindProject, kindHub}

// benchRunner is one runner of a layout.
type benchRunner struct {
	name    string
	owner   string // "" is the admin
	kind    string
	users   []string // kindUsers: whom it is shared with
	project string   // kindProject: the project it is shared with
	target  bool     // carries the target labels (the jobs go to targets only)
}

// route is one job shape of the mix: who submits it, on which project
// ("" for none), and which kind of target runner makes it runnable.
type route struct {
	user    string
	project string
	via     string // a kind
}

// layout is the tenancy hub's users, projects, runners and job mix.
type layout struct {
	users    []string
	projects []string
	members  map[string][]string // project → its members besides the admin (who maps, so owns, every project)
	runners  []benchRunner
	routes   []route
}

// mixedLayout builds the mixed layout of n runners and owners users,
// deterministically from seed. Of the runners, n/10 are hub-wide and the
// admin's; n/5 are shared with a project, 3n/10 with one to three other
// users, the rest private; the non-hub ones belong to the users in turn.
// Per kind, one runner in a hundred (at least one) is a target; each
// target gives the mix one route, a user who may use it through its kind.
func mixedLayout(n, owners int, seed uint64) (*layout, error) {
	if owners < 4 {
		return nil, fmt.Errorf("bench: --owners must be at least 4 (shares need other users), got %d", owners)
	}
	if n < 10 {
		return nil, fmt.Errorf("bench: --owners needs at least 10 runners (a tenth of them hub-wide), got %d", n)
	}
	if owners > n {
		return nil, fmt.Errorf("bench: %d owners for %d runners: every owner needs a runner", owners, n)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	l := &layout{members: map[string][]string{}}
	for i := range owners {
		l.users = append(l.users, fmt.Sprintf("owner-%03d", i))
	}
	for i := range max(2, owners/5) {
		l.projects = append(l.projects, fmt.Sprintf("project-%02d", i))
	}
	// Each user is a member of one or two projects; each project has at
	// least two members.
	for _, u := range l.users {
		for _, i := range rng.Perm(len(l.projects))[:1+rng.IntN(2)] {
			l.members[l.projects[i]] = append(l.members[l.projects[i]], u)
		}
	}
	for i, p := range l.projects {
		for j := 0; len(l.members[p]) < 2; j++ {
			if u := l.users[(i+j)%owners]; !slices.Contains(l.members[p], u) {
				l.members[p] = append(l.members[p], u)
			}
		}
	}

	hubN, projN, userN := n/10, n/5, n*3/10
	privN := n - hubN - projN - userN
	var order []string // kinds of the non-hub runners, shuffled
	for k, c := range map[string]int{kindPrivate: privN, kindUsers: userN, kindProject: projN} {
		for range c {
			order = append(order, k)
		}
	}
	slices.Sort(order) // map order is random; the seed alone decides
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	perOwner := map[string]int{}
	for i, k := range order {
		owner := l.users[i%owners]
		perOwner[owner]++
		r := benchRunner{name: fmt.Sprintf("%s-r%02d", owner, perOwner[owner]), owner: owner, kind: k}
		switch k {
		case kindUsers:
			for _, j := range rng.Perm(owners) {
				if u := l.users[j]; u != owner && len(r.users) < 1+i%3 {
					r.users = append(r.users, u)
				}
			}
		case kindProject:
			// A runner is shared only with a project its owner is a member of.
			var mine []string
			for _, p := range l.projects {
				if slices.Contains(l.members[p], owner) {
					mine = append(mine, p)
				}
			}
			r.project = mine[rng.IntN(len(mine))]
		}
		l.runners = append(l.runners, r)
	}
	for i := range hubN {
		l.runners = append(l.runners, benchRunner{name: fmt.Sprintf("admin-r%03d", i+1), kind: kindHub})
	}

	// Targets, and a route through each.
	count := map[string]int{kindPrivate: privN, kindUsers: userN, kindProject: projN, kindHub: hubN}
	byKind := map[string][]route{}
	for i := range l.runners {
		r := &l.runners[i]
		if len(byKind[r.kind]) >= max(1, count[r.kind]/100) {
			continue
		}
		r.target = true
		rt := route{via: r.kind}
		switch r.kind {
		case kindPrivate:
			rt.user = r.owner
		case kindUsers:
			rt.user = r.users[len(byKind[r.kind])%len(r.users)]
		case kindProject:
			rt.project = r.project
			ms := l.members[r.project]
			rt.user = ms[0]
			for _, m := range ms { // a member other than the owner where there is one
				if m != r.owner {
					rt.user = m
					break
				}
			}
		case kindHub:
			rt.user = l.users[rng.IntN(owners)]
		}
		byKind[r.kind] = append(byKind[r.kind], rt)
	}
	// The mix takes the kinds in turn, as many of each as it has targets.
	for i := 0; len(l.routes) < len(byKind[kindPrivate])+len(byKind[kindUsers])+len(byKind[kindProject])+len(byKind[kindHub]); i++ {
		for _, k := range kinds {
			if i < len(byKind[k]) {
				l.routes = append(l.routes, byKind[k][i])
			}
		}
	}
	return l, nil
}

// mayRun is the access rule the hub applies, for checking a layout: may
// runner r be offered a job of user on project?
func (l *layout) mayRun(r benchRunner, user, project string) bool {
	switch {
	case r.kind == kindHub || r.owner == user:
		return true
	case r.kind == kindUsers:
		return slices.Contains(r.users, user)
	case r.kind == kindProject:
		return project != "" && project == r.project && slices.Contains(l.members[project], user)
	}
	return false
}

// Tenancy is the comparison's result.
type Tenancy struct {
	Runners, Owners, Projects, Members int
	Kinds                              map[string]int // runners of each kind
	UserShares                         int            // (runner, user) shares
	Targets                            []TargetInfo
	Base, Tenant                       Latency
	// Per route kind: the baseline's jobs of the same shapes, and the
	// tenancy hub's.
	BaseByKind, TenantByKind map[string]Latency
	// Landed counts the tenancy hub's jobs by the kind of runner that ran
	// them (a job may reach several kinds: a hub-wide target is everyone's).
	Landed map[string]int
	Setup  time.Duration // creating users, projects, runners and shares on the tenancy hub
}

// TargetInfo describes one target runner of the tenancy hub.
type TargetInfo struct {
	Name, Owner, Kind string
}

// runTenancy runs the comparison at the largest --runners count.
func runTenancy(ctx context.Context, o Options, root string, res *Result) (err error) {
	n := o.maxRunners()
	l, err := mixedLayout(n, o.Owners, 1)
	if err != nil {
		return err
	}
	tn := &Tenancy{Runners: n, Owners: o.Owners, Projects: len(l.projects), Kinds: map[string]int{},
		BaseByKind: map[string]Latency{}, TenantByKind: map[string]Latency{}, Landed: map[string]int{}}
	for _, r := range l.runners {
		tn.Kinds[r.kind]++
		tn.UserShares += len(r.users)
		if r.target {
			owner := r.owner
			if owner == "" {
				owner = "admin"
			}
			tn.Targets = append(tn.Targets, TargetInfo{Name: r.name, Owner: owner, Kind: r.kind})
		}
	}
	for _, ms := range l.members {
		tn.Members += len(ms)
	}

	arms := make([]*arm, 2)
	defer func() {
		for _, a := range arms {
			if a != nil {
				if cerr := a.close(); err == nil && cerr != nil {
					err = cerr
				}
			}
		}
	}()
	for i, name := range []string{"baseline", "tenancy"} {
		progress(o, "starting the %s hub (data in %s)", name, filepath.Join(root, name))
		hp, err := startHub(ctx, o.Binary, filepath.Join(root, name, "hub"), res.Machine.ClockTick, false, "")
		if err != nil {
			return err
		}
		arms[i] = &arm{name: name, hp: hp, admin: newAPIClient(hp.url, hp.admin), clients: map[string]*apiClient{}}
	}
	base, ten := arms[0], arms[1]
	progress(o, "baseline hub: mapping %d projects, approving %d runners as the admin", len(l.projects), n)
	if err := base.setupBaseline(ctx, l); err != nil {
		return err
	}
	progress(o, "tenancy hub: %d users, %d projects (%d memberships), %d runners approved by their owners, %d user shares, %d project shares, %d hub-wide",
		len(l.users), len(l.projects), tn.Members, n, tn.UserShares, tn.Kinds[kindProject], tn.Kinds[kindHub])
	start := time.Now()
	if err := ten.setupTenancy(ctx, l); err != nil {
		return err
	}
	tn.Setup = time.Since(start)
	for _, a := range arms {
		progress(o, "%s hub: connecting %d runners (%d targets)", a.name, n, len(tn.Targets))
		if err := a.connect(ctx, l, root); err != nil {
			return err
		}
	}
	res.Heartbeat = ten.tgt.welcome.HeartbeatInterval.D()
	if err := ten.checkLayout(ctx, l); err != nil {
		return err
	}
	if err := sleep(ctx, o.Settle); err != nil {
		return err
	}
	progress(o, "warming up with %d jobs on each hub", warmupJobs)
	for i := range warmupJobs {
		for _, a := range arms {
			if _, err := a.sample(ctx, l, i); err != nil {
				return fmt.Errorf("%s warm-up: %w", a.name, err)
			}
		}
	}
	progress(o, "%d jobs on each hub, one at a time, alternating", o.Jobs)
	var bs, ts []sample
	var bk, tk = map[string][]sample{}, map[string][]sample{}
	bDone, tDone := map[string]int{}, map[string]int{}
	kindOf := map[string]string{}
	for _, r := range l.runners {
		kindOf[r.name] = r.kind
	}
	for i := range o.Jobs {
		order := arms
		if i%2 == 1 {
			order = []*arm{ten, base}
		}
		for _, a := range order {
			s, err := a.sample(ctx, l, i)
			if err != nil {
				return fmt.Errorf("%s hub: %w", a.name, err)
			}
			via := l.routes[i%len(l.routes)].via
			if a == base {
				bs, bk[via] = append(bs, s), append(bk[via], s)
				if s.completed {
					bDone[via]++
				}
			} else {
				ts, tk[via] = append(ts, s), append(tk[via], s)
				if s.completed {
					tDone[via]++
				}
				tn.Landed[kindOf[s.runner]]++
			}
		}
	}
	sum := func(m map[string]int) (t int) {
		for _, v := range m {
			t += v
		}
		return t
	}
	tn.Base, tn.Tenant = latencyOf(n, bs, sum(bDone)), latencyOf(n, ts, sum(tDone))
	for k := range bk {
		tn.BaseByKind[k], tn.TenantByKind[k] = latencyOf(n, bk[k], bDone[k]), latencyOf(n, tk[k], tDone[k])
	}
	for _, a := range arms {
		if err := checkFleet(a.hp, a.fl); err != nil {
			return fmt.Errorf("%s hub: %w", a.name, err)
		}
	}
	res.Tenancy = tn
	return nil
}

// arm is one of the two hubs with its fleet and its target runners.
type arm struct {
	name    string
	hp      *hubProc
	admin   *apiClient
	clients map[string]*apiClient // user → a client with their token
	tokens  []string              // runner tokens, as layout.runners
	fl      *fleet
	tgt     *target
}

func (a *arm) close() error {
	if a.tgt != nil {
		a.tgt.close()
	}
	if a.fl != nil {
		a.fl.close()
	}
	return a.hp.stop()
}

// as is a client acting as user ("" or "admin": the admin).
func (a *arm) as(user string) *apiClient {
	if c := a.clients[user]; c != nil {
		return c
	}
	return a.admin
}

// remote is the URL a bench project is mapped to: never fetched (the bench's
// runners do not fetch), so it only has to be well formed.
func remote(project string) apitypes.MapProjectRequest {
	return apitypes.MapProjectRequest{Remote: "https://example.invalid/bench/" + project + ".git"}
}

// setupBaseline maps the projects and approves every runner as the admin.
func (a *arm) setupBaseline(ctx context.Context, l *layout) error {
	if err := parallel(ctx, len(l.projects), func(i int) error {
		return a.admin.call(ctx, http.MethodPut, "/projects/"+l.projects[i], remote(l.projects[i]), nil)
	}); err != nil {
		return err
	}
	names := make([]string, len(l.runners))
	for i, r := range l.runners {
		names[i] = r.name
	}
	var err error
	a.tokens, err = approveRunners(ctx, a.admin, names)
	return err
}

// setupTenancy creates the layout's users, projects, members, runners (each
// approved by its owner) and shares, through the API as a team would.
func (a *arm) setupTenancy(ctx context.Context, l *layout) error {
	var mu sync.Mutex
	if err := parallel(ctx, len(l.users), func(i int) error {
		var r apitypes.NewUserResponse
		if err := a.admin.call(ctx, http.MethodPost, "/users", apitypes.NewUserRequest{Name: l.users[i]}, &r); err != nil {
			return err
		}
		mu.Lock()
		a.clients[l.users[i]] = &apiClient{base: a.admin.base, token: r.Token, hc: a.admin.hc}
		mu.Unlock()
		return nil
	}); err != nil {
		return err
	}
	if err := parallel(ctx, len(l.projects), func(i int) error {
		return a.admin.call(ctx, http.MethodPut, "/projects/"+l.projects[i], remote(l.projects[i]), nil)
	}); err != nil {
		return err
	}
	type member struct{ project, user string }
	var ms []member
	for _, p := range l.projects {
		for _, u := range l.members[p] {
			ms = append(ms, member{p, u})
		}
	}
	if err := parallel(ctx, len(ms), func(i int) error {
		return a.admin.call(ctx, http.MethodPost, "/projects/"+ms[i].project+"/members", apitypes.MemberRequest{User: ms[i].user}, nil)
	}); err != nil {
		return err
	}
	a.tokens = make([]string, len(l.runners))
	return parallel(ctx, len(l.runners), func(i int) error {
		r := l.runners[i]
		owner := a.as(r.owner)
		tok := auth.NewToken(auth.PrefixRunner)
		if err := owner.call(ctx, http.MethodPost, "/runners/approve", apitypes.ApproveRequest{Name: r.name, Key: auth.Hash(tok)}, nil); err != nil {
			return fmt.Errorf("approve runner %s as %s: %w", r.name, r.owner, err)
		}
		a.tokens[i] = tok
		var shares []apitypes.ShareRequest
		switch r.kind {
		case kindUsers:
			for _, u := range r.users {
				shares = append(shares, apitypes.ShareRequest{User: u})
			}
		case kindProject:
			shares = append(shares, apitypes.ShareRequest{Project: r.project})
		case kindHub:
			shares = append(shares, apitypes.ShareRequest{Hub: true})
		}
		for _, sh := range shares {
			if err := owner.call(ctx, http.MethodPost, "/runners/"+r.name+"/share", sh, nil); err != nil {
				return fmt.Errorf("share runner %s: %w", r.name, err)
			}
			if sh.Hub {
				continue
			}
			// Its recipient accepts: the user, or the admin (who owns every project).
			by, answer := a.admin, apitypes.AnswerShareRequest{Project: sh.Project}
			if sh.User != "" {
				by = a.as(sh.User)
			}
			if err := by.call(ctx, http.MethodPost, "/runners/"+r.name+"/accept", answer, nil); err != nil {
				return fmt.Errorf("accept the share of runner %s: %w", r.name, err)
			}
		}
		return nil
	})
}

// connect connects the layout's runners: the targets, then the rest idle.
func (a *arm) connect(ctx context.Context, l *layout, root string) error {
	var tokens, names, idle []string
	for i, r := range l.runners {
		if r.target {
			tokens, names = append(tokens, a.tokens[i]), append(names, r.name)
		} else {
			idle = append(idle, a.tokens[i])
		}
	}
	var err error
	if a.tgt, err = dialTarget(ctx, a.hp.url, tokens, names, filepath.Join(root, a.name, "journal")); err != nil {
		return err
	}
	a.fl = newFleet(ctx, a.hp.url)
	return a.fl.connect(ctx, idle)
}

// checkLayout compares the hub's runner list with the layout: every runner
// connected, with its owner and access.
func (a *arm) checkLayout(ctx context.Context, l *layout) error {
	var rl apitypes.RunnerList
	if err := a.admin.call(ctx, http.MethodGet, "/runners", nil, &rl); err != nil {
		return err
	}
	got := map[string]apitypes.RunnerView{}
	for _, v := range rl.Runners {
		got[v.Name] = v
	}
	for _, r := range l.runners {
		v, ok := got[r.name]
		owner, access, shares := r.owner, apitypes.AccessPrivate, len(r.users)
		if owner == "" {
			owner, access = "admin", apitypes.AccessHub
		}
		if r.kind == kindProject {
			shares = 1
		}
		switch {
		case !ok:
			return fmt.Errorf("tenancy hub: runner %s is not listed", r.name)
		case !v.Connected:
			return fmt.Errorf("tenancy hub: runner %s is not connected", r.name)
		case v.Owner != owner || v.Access != access || len(v.SharedWith) != shares:
			return fmt.Errorf("tenancy hub: runner %s is owned by %s, %s, shared with %v; want %s, %s, %d shares",
				r.name, v.Owner, v.Access, v.SharedWith, owner, access, shares)
		}
	}
	return nil
}

// sample runs job i of the mix: on the baseline hub as the admin, on the
// tenancy hub as the route's user; then checks it completed.
func (a *arm) sample(ctx context.Context, l *layout, i int) (sample, error) {
	rt := l.routes[i%len(l.routes)]
	c := a.admin
	if a.name == "tenancy" {
		c = a.as(rt.user)
	}
	req := benchJob()
	if rt.project != "" {
		req.Repo = &apitypes.SubmitRepo{Project: rt.project, Base: benchBase}
	}
	s, err := a.tgt.runJobAs(ctx, c, req)
	if err != nil {
		return s, err
	}
	var v struct {
		State string `json:"state"`
	}
	if err := c.call(ctx, http.MethodGet, "/jobs/"+s.job, nil, &v); err != nil {
		return s, fmt.Errorf("check job %s: %w", s.job, err)
	}
	s.completed = v.State == "completed"
	return s, nil
}

// benchBase is the base commit of the bench's project jobs: a mapped
// project's base is the runner's to fetch, and the bench's runners do not.
const benchBase = "0123456789abcdef0123456789abcdef01234567"

// latencyOf summarizes samples.
func latencyOf(runners int, ss []sample, completed int) Latency {
	lat := Latency{Runners: runners, Jobs: len(ss), Completed: completed}
	var dispatch, submit, offer, accept, claim, start []time.Duration
	for _, s := range ss {
		dispatch, submit = append(dispatch, s.dispatch), append(submit, s.submit)
		offer, accept, claim, start = append(offer, s.offer), append(accept, s.accept), append(claim, s.claim), append(start, s.start)
	}
	st := summarize(dispatch)
	lat.P50, lat.P90, lat.P99, lat.Max, lat.Mean = st.p50, st.p90, st.p99, st.max, st.mean
	lat.SubmitP50 = summarize(submit).p50
	lat.Offer, lat.Accept, lat.Claim, lat.Start = stageOf(offer), stageOf(accept), stageOf(claim), stageOf(start)
	return lat
}

// parallel runs fn(0..n-1), eight at a time (the hub serializes writes;
// this only overlaps round trips), and returns the first error.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the first is enough: they tend to repeat
		}
	}
	return ctx.Err()
}

// targetRatio is the tenancy target: dispatch with access rules deciding
// within 10 % of the same run without.
const targetRatio = 1.10

func ratioOf(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (tn *Tenancy) writeMarkdown(p func(format string, args ...any)) {
	b, t := tn.Base, tn.Tenant
	p("### Against the target")
	p("")
	p("| target | goal | no access rules to apply (the admin owns every runner and submits) | tenancy (%d owners, mixed sharing) | tenancy ÷ baseline | met |", tn.Owners)
	p("|---|---|---|---|---|---|")
	for _, row := range []struct {
		name string
		a, b time.Duration
	}{{"dispatch p50", b.P50, t.P50}, {"dispatch p99", b.P99, t.P99}} {
		r := ratioOf(row.b, row.a)
		p("| %s, %d runners | ≤ %.2f× | %s | %s | %.2f× | %s |", row.name, tn.Runners, targetRatio, ms(row.a), ms(row.b), r, yesNo(r <= targetRatio))
	}
	p("")
	p("### Dispatch latency")
	p("")
	p("From `POST /api/v1/jobs` returning to the agent process running (its own `date +%%s%%N`), one job at a time, as in")
	p("the runs above. Two hubs ran side by side, each with %d connected runners, the same runner names and the same %d", tn.Runners, len(tn.Targets))
	p("target runners (the only ones with the jobs' label; the rest are idle connections), and the same job shapes in")
	p("the same order; samples alternated between them. Nearest-rank percentiles.")
	p("")
	p("| hub | jobs | completed | p50 | p90 | p99 | max | mean | submit round trip p50 |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	row := func(name string, x Latency) {
		p("| %s | %d | %d | %s | %s | %s | %s | %s | %s |", name, x.Jobs, x.Completed, ms(x.P50), ms(x.P90), ms(x.P99), ms(x.Max), ms(x.Mean), ms(x.SubmitP50))
	}
	row("baseline: every runner the admin's, the admin submits", b)
	row(fmt.Sprintf("tenancy: %d owners, mixed sharing, the owners submit", tn.Owners), t)
	p("")
	p("In stages (p50 / p99 of each stage on its own):")
	p("")
	p("| hub | submit → offer at runner (hub: dispatch + offer commit) | offer → accept ok (hub: accept commit) | ok → claim durable (runner fsyncs) | claim → agent running (fork/exec) |")
	p("|---|---:|---:|---:|---:|")
	st := func(s Stage) string { return ms(s.P50) + " / " + ms(s.P99) }
	p("| baseline | %s | %s | %s | %s |", st(b.Offer), st(b.Accept), st(b.Claim), st(b.Start))
	p("| tenancy | %s | %s | %s | %s |", st(t.Offer), st(t.Accept), st(t.Claim), st(t.Start))
	p("")
	p("By how the job's requester may use a target runner (the baseline's jobs of the same shapes beside them; a")
	p("project route's jobs are on that project, the others on none):")
	p("")
	p("| route | jobs | baseline p50 / p99 | tenancy p50 / p99 | tenancy ÷ baseline, p50 |")
	p("|---|---:|---:|---:|---:|")
	routeName := map[string]string{kindPrivate: "own runner", kindUsers: "a runner shared with the user",
		kindProject: "a runner shared with a project of the user's", kindHub: "a hub-wide runner"}
	for _, k := range kinds {
		bx, tx := tn.BaseByKind[k], tn.TenantByKind[k]
		if tx.Jobs == 0 {
			continue
		}
		p("| %s | %d | %s / %s | %s / %s | %.2f× |", routeName[k], tx.Jobs, ms(bx.P50), ms(bx.P99), ms(tx.P50), ms(tx.P99), ratioOf(tx.P50, bx.P50))
	}
	p("")
	p("### The tenancy hub's fleet")
	p("")
	p("%d users (POST /users), each approving their own runners with their own token; %d projects mapped by the admin", tn.Owners, tn.Projects)
	p("with %d memberships (each user in one or two); shares made by the runners' owners (hub-wide: the admin).", tn.Members)
	p("")
	p("| runners | count | owned by | targets among them | tenancy jobs that ran on one |")
	p("|---|---:|---|---:|---:|")
	owner := map[string]string{kindPrivate: "the users", kindUsers: fmt.Sprintf("the users; %d user shares in all (1-3 each)", tn.UserShares),
		kindProject: "the users; one project each", kindHub: "the admin"}
	for _, k := range kinds {
		n := 0
		for _, tg := range tn.Targets {
			if tg.Kind == k {
				n++
			}
		}
		p("| %s | %d | %s | %d | %d |", k, tn.Kinds[k], owner[k], n, tn.Landed[k])
	}
	p("")
}

func (tn *Tenancy) writeText(p func(format string, args ...any)) {
	p("dispatch latency (submit returned → agent running), %d runners:", tn.Runners)
	for _, x := range []struct {
		name string
		l    Latency
	}{{"baseline (admin's runners)", tn.Base}, {fmt.Sprintf("tenancy (%d owners, mixed)", tn.Owners), tn.Tenant}} {
		p("  %-28s p50 %s  p90 %s  p99 %s  max %s  (%d/%d completed)", x.name, ms(x.l.P50), ms(x.l.P90), ms(x.l.P99), ms(x.l.Max), x.l.Completed, x.l.Jobs)
	}
	p("  tenancy ÷ baseline: p50 %.2f×, p99 %.2f× (target ≤ %.2f×)", ratioOf(tn.Tenant.P50, tn.Base.P50), ratioOf(tn.Tenant.P99, tn.Base.P99), targetRatio)
	for _, k := range kinds {
		if x := tn.TenantByKind[k]; x.Jobs > 0 {
			b := tn.BaseByKind[k]
			p("  via %-22s %3d jobs: baseline p50 %s p99 %s, tenancy p50 %s p99 %s", k+":", x.Jobs, ms(b.P50), ms(b.P99), ms(x.P50), ms(x.P99))
		}
	}
}
