package hub

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// The access model, in one place (docs/operator.md, "Access model"):
//   - a runner belongs to the user who approved it; it runs its owner's
//     jobs, those of the users it is shared with, those on the projects it
//     is shared with (when their requester is a member), or everyone's when
//     an admin made it hub-wide;
//   - a runner's share takes effect only once its recipient accepted it (a
//     user for themself; a project's owner or an admin for the project),
//     since whoever runs a job reads its repository and reports its result;
//     a project share needs the runner's owner to be a member of the
//     project, and goes when they leave it;
//   - a requester's own runners are offered their jobs before any shared
//     with them (pickRunner);
//   - a runner's accounts spend only for its owner's jobs, and for the users
//     and projects the owner shared the account with (a hub-wide runner's
//     accounts too);
//   - a job is seen by its requester, the members of its project (a job
//     without one: the owners of the runners that ran it), and admins;
//   - a setup's credentials reach only runners trusted with them: the
//     operator's registry credentials runners owned by an admin, a
//     project's secrets runners owned by an admin or the project's owner
//     (runnerAccess.mayReceive); other runners are not offered the job.

// shareSet is whom one runner, or one account, is shared with.
type shareSet struct {
	users    map[string]bool // user ids
	projects map[string]bool // project names
}

// allows: a job of requester on project (a member of it, or not).
func (s *shareSet) allows(requester, project string, member bool) bool {
	if s == nil {
		return false
	}
	return s.users[requester] || (project != "" && member && s.projects[project])
}

func (s *shareSet) add(sh store.Share) {
	if s.users == nil {
		s.users, s.projects = map[string]bool{}, map[string]bool{}
	}
	switch sh.Kind {
	case store.ShareUser:
		s.users[sh.Subject] = true
	case store.ShareProject:
		s.projects[sh.Subject] = true
	}
}

// runnerAccess is a runner's access as the dispatcher reads it: loaded when
// the runner connects and replaced whenever its owner or shares change.
// Immutable once built.
type runnerAccess struct {
	owner      string
	ownerAdmin bool   // set by loadRunnerAccess: its owner is an admin
	ident      string // set by loadRunnerAccess: "OWNER/RUNNER", as the hub's config names runners
	hub        bool
	runner     shareSet
	accounts   map[string]*shareSet // account id → its shares
}

func newRunnerAccess(rn store.Runner, shares []store.Share) *runnerAccess {
	ra := &runnerAccess{owner: rn.OwnerID, hub: rn.Access == apitypes.AccessHub, accounts: map[string]*shareSet{}}
	for _, sh := range shares {
		if sh.AccountID == "" {
			if !sh.Pending() {
				ra.runner.add(sh)
			}
			continue
		}
		s := ra.accounts[sh.AccountID]
		if s == nil {
			s = &shareSet{}
			ra.accounts[sh.AccountID] = s
		}
		s.add(sh)
	}
	return ra
}

// mayRun: may the runner be offered a job of requester on project?
func (ra *runnerAccess) mayRun(requester, project string, member bool) bool {
	return ra != nil && (ra.hub || ra.owner == requester || ra.runner.allows(requester, project, member))
}

// mayUseAccount: may the runner's account spend for such a job?
func (ra *runnerAccess) mayUseAccount(account, requester, project string, member bool) bool {
	return ra != nil && (ra.owner == requester || ra.accounts[account].allows(requester, project, member))
}

// loadRunnerAccess reads a runner's access from the store.
func loadRunnerAccess(tx store.Tx, runnerID string) (*runnerAccess, error) {
	rn, shares, err := tx.RunnerShares(runnerID)
	if err != nil {
		return nil, fmt.Errorf("read runner %s: %w", runnerID, err)
	}
	owner, err := tx.User(rn.OwnerID)
	if err != nil {
		return nil, fmt.Errorf("read owner of runner %s: %w", rn.Name, err)
	}
	return runnerAccessOf(rn, shares, owner), nil
}

// runnerAccessOf is the access of runner rn with its shares and owner.
func runnerAccessOf(rn store.Runner, shares []store.Share, owner store.User) *runnerAccess {
	ra := newRunnerAccess(rn, shares)
	ra.ownerAdmin = owner.Admin && owner.RemovedAt == nil
	ra.ident = owner.Name + "/" + rn.Name
	return ra
}

// credNeed is what credentials the setup of a job's project brings: their
// names only, never their keys.
type credNeed struct {
	operator     []string   // the operator's registry credentials
	trusted      [][]string // per operator credential, the runners the operator named for it
	secrets      []string   // the project's own secrets
	projectOwner string     // user id of the project's owner
	ownerName    string
}

func (n credNeed) any() bool { return len(n.operator)+len(n.secrets) > 0 }

// mayReceive: may the runner be given the credentials n names? An admin's
// runner may; a project owner's runner may hold that project's secrets;
// another runner an operator's credential only when the hub's config
// names it for that credential.
func (ra *runnerAccess) mayReceive(n credNeed) bool {
	if !n.any() {
		return true
	}
	if ra == nil {
		return false
	}
	if ra.ownerAdmin {
		return true
	}
	if len(n.secrets) > 0 && ra.owner != n.projectOwner {
		return false
	}
	for _, t := range n.trusted {
		if !slices.Contains(t, ra.ident) {
			return false
		}
	}
	return true
}

// waitText says which runners a job needing n waits for.
func (n credNeed) waitText() string {
	var what []string
	if len(n.operator) > 0 {
		what = append(what, "the hub's registry credential(s) "+strings.Join(n.operator, ", "))
	}
	if len(n.secrets) > 0 {
		what = append(what, "project secret(s) "+strings.Join(n.secrets, ", "))
	}
	who := "an admin"
	if len(n.operator) == 0 {
		who = "an admin or the project's owner " + n.ownerName
	} else if slices.ContainsFunc(n.trusted, func(t []string) bool { return len(t) > 0 }) {
		who = "an admin (or named for them in the hub's config)"
	}
	return fmt.Sprintf("its project's setup needs %s, which only runners owned by %s receive: no such runner you may use is connected", strings.Join(what, " and "), who)
}

// isMember reports whether the user is a member of the project.
func isMember(tx store.Tx, project, userID string) (bool, error) {
	if project == "" {
		return false, nil
	}
	ms, err := tx.Members(project)
	if err != nil {
		return false, fmt.Errorf("read members of project %s: %w", project, err)
	}
	for _, m := range ms {
		if m == userID {
			return true, nil
		}
	}
	return false, nil
}

// canSee reports whether p may see the job: its requester, an admin, a
// member of its project, or, for a job without a project, the owner of a
// runner that ran an attempt (a project's jobs stay with its members).
func canSee(tx store.Tx, p call.Caller, j store.Job) (bool, error) {
	if p.Admin || j.RequesterID == p.UserID || j.Project != "" {
		return seesProjectWork(tx, p, j.RequesterID, j.Project)
	}
	atts, err := tx.Attempts(j.ID)
	if err != nil {
		return false, err
	}
	owners := map[string]bool{}
	for _, a := range atts {
		if _, seen := owners[a.RunnerID]; seen {
			continue
		}
		rn, err := tx.Runner(a.RunnerID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
		owners[a.RunnerID] = err == nil && rn.OwnerID == p.UserID
		if owners[a.RunnerID] {
			return true, nil
		}
	}
	return false, nil
}

// visibleJob reads a job the caller may see; one the caller may not see
// is "no job", exactly like one that does not exist.
func visibleJob(tx store.Tx, p call.Caller, id string) (store.Job, error) {
	j, err := tx.Job(id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Job{}, call.NotFound("no job %q", id)
	}
	if err != nil {
		return store.Job{}, err
	}
	ok, err := canSee(tx, p, j)
	if err != nil {
		return store.Job{}, err
	}
	if !ok {
		return store.Job{}, call.NotFound("no job %q", id)
	}
	return j, nil
}

// seesProjectWork says whether p may see work of requesterID on project
// (a job, a pipeline): its requester, an admin, or a member of the project.
func seesProjectWork(tx store.Tx, p call.Caller, requesterID, project string) (bool, error) {
	if p.Admin || requesterID == p.UserID {
		return true, nil
	}
	return isMember(tx, project, p.UserID)
}

// jobFilterFor narrows a job listing to what p may see.
func jobFilterFor(p call.Caller, f store.JobFilter) store.JobFilter {
	if !p.Admin {
		f.VisibleTo = p.UserID
	}
	return f
}

// mayUseRunner: may p see the runner in listings (owner, admin, or a user
// it is shared with, directly, hub-wide or through a project)?
func mayUseRunner(p call.Caller, ra *runnerAccess, projects map[string]bool) bool {
	if p.Admin || ra.mayRun(p.UserID, "", false) {
		return true
	}
	for prj := range ra.runner.projects {
		if projects[prj] {
			return true
		}
	}
	return false
}

// mayUseAccountOf: may p use the account (own it, or have it shared with
// them or with one of their projects)?
func mayUseAccountOf(p call.Caller, ra *runnerAccess, account string, projects map[string]bool) bool {
	if ra.mayUseAccount(account, p.UserID, "", false) {
		return true
	}
	if s := ra.accounts[account]; s != nil {
		for prj := range s.projects {
			if projects[prj] {
				return true
			}
		}
	}
	return false
}

// sharesView lists a share set for the API, with user names.
func sharesView(n *namer, shares []store.Share, account string) []apitypes.Share {
	var out []apitypes.Share
	for _, sh := range shares {
		if sh.AccountID == account {
			out = append(out, shareView(n, sh))
		}
	}
	return out
}

func shareView(n *namer, sh store.Share) apitypes.Share {
	v := apitypes.Share{Pending: sh.Pending()}
	switch sh.Kind {
	case store.ShareUser:
		v.User = n.user(sh.Subject)
	case store.ShareProject:
		v.Project = sh.Subject
	}
	return v
}

// userProjects is the set of projects the user is a member of.
func userProjects(tx store.Tx, userID string) (map[string]bool, error) {
	ps, err := tx.ProjectsOf(userID)
	if err != nil {
		return nil, fmt.Errorf("read projects of user %s: %w", userID, err)
	}
	out := make(map[string]bool, len(ps))
	for _, p := range ps {
		out[p] = true
	}
	return out, nil
}

// noProject is the refusal of a project that does not exist and of one
// the caller may not see alike.
func noProject(name string) error { return call.NotFound("no project named %q", name) }

// visibleProject reads a project p may see (a member, or an admin); one
// p may not see is "no project", exactly like one that does not exist.
func visibleProject(tx store.Tx, p call.Caller, name string) (store.Project, error) {
	prj, err := readProject(tx, name)
	if err != nil {
		return store.Project{}, err
	}
	if p.Admin {
		return prj, nil
	}
	if ok, err := isMember(tx, name, p.UserID); err != nil {
		return store.Project{}, err
	} else if !ok {
		return store.Project{}, noProject(name)
	}
	return prj, nil
}

// mayUseProject: members of a project (and admins) read it, push to it and
// run jobs on it.
func mayUseProject(tx store.Tx, p call.Caller, prj store.Project) error {
	if p.Admin {
		return nil
	}
	ok, err := isMember(tx, prj.Name, p.UserID)
	if err != nil {
		return err
	}
	if !ok {
		owner := newNamer(tx).user(prj.OwnerID)
		return call.Forbidden("you are not a member of project %s; its owner %s or an admin can add you (drover projects members add %s %s)",
			prj.Name, owner, prj.Name, p.Name)
	}
	return nil
}

// mayConfigureProject: only a project's owner (and admins) choose its
// network policies, setup and caches; members only read them.
func mayConfigureProject(tx store.Tx, p call.Caller, prj store.Project) error {
	if p.Admin || (prj.OwnerID != "" && prj.OwnerID == p.UserID) {
		return nil
	}
	if err := mayUseProject(tx, p, prj); err != nil {
		return err
	}
	return call.Forbidden("only project %s's owner, %s, or an admin can change its network policies, setup and caches, and see or set its secrets",
		prj.Name, newNamer(tx).user(prj.OwnerID))
}
