package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"drover/internal/job"
	"drover/internal/store"
)

func testShares(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(user("u-1", "alice")),
			tx.InsertUser(user("u-2", "bob")),
			tx.InsertRunner(runner("r-2", "box-2", "u-1")),
			tx.InsertRunner(runner("r-1", "box-1", "u-1")),
		)
	})
	share := func(runnerID, accountID string, kind store.ShareKind, subject string, created int64) store.Share {
		return store.Share{RunnerID: runnerID, AccountID: accountID, Kind: kind, Subject: subject, CreatedAt: at(created)}
	}
	// s4 names the same subject as s1 but of the other kind, s5 the same
	// as s1 but for an account: each is a share of its own.
	s1 := share("r-1", "", store.ShareUser, "u-2", 10)
	s2 := share("r-1", "acc-a", store.ShareProject, "web", 5)
	s3 := share("r-2", "", store.ShareProject, "web", 1)
	s4 := share("r-1", "", store.ShareProject, "u-2", 20)
	s5 := share("r-1", "acc-a", store.ShareUser, "u-2", 15)
	mustWrite(t, s, func(tx store.Tx) error {
		var errs []error
		for _, sh := range []store.Share{s1, s2, s3, s4, s5} {
			errs = append(errs, tx.PutShare(sh))
		}
		return errors.Join(errs...)
	})
	shares := func(runnerID string) []store.Share {
		return get(t, s, func(tx store.Tx) ([]store.Share, error) { return tx.Shares(runnerID) })
	}
	allShares := func() []store.Share {
		return get(t, s, func(tx store.Tx) ([]store.Share, error) { return tx.AllShares() })
	}
	equal(t, "Shares(r-1), oldest first", shares("r-1"), []store.Share{s2, s1, s5, s4})
	equal(t, "Shares(r-2)", shares("r-2"), []store.Share{s3})
	equal(t, "Shares(missing runner)", shares("r-9"), nil)
	equal(t, "AllShares(), by runner then oldest first", allShares(), []store.Share{s2, s1, s5, s4, s3})
	// RunnerShares is Runner (Held nil) and Shares in one read.
	for _, id := range []string{"r-1", "r-2"} {
		want := get(t, s, func(tx store.Tx) (store.Runner, error) { return tx.Runner(id) })
		want.Held = nil
		wantShares := shares(id)
		mustRead(t, s, func(tx store.Tx) error {
			rn, got, err := tx.RunnerShares(id)
			equal(t, "RunnerShares("+id+"): the runner", rn, want)
			equal(t, "RunnerShares("+id+"): its shares", got, wantShares)
			return err
		})
	}
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertRunner(runner("r-3", "box-3", "u-2")) })
	equal(t, "RunnerShares(r-3 without shares): its shares", get(t, s, func(tx store.Tx) ([]store.Share, error) {
		_, sh, err := tx.RunnerShares("r-3")
		return sh, err
	}), []store.Share{})
	readErr(t, s, "RunnerShares(missing)", store.ErrNotFound, func(tx store.Tx) error { _, _, err := tx.RunnerShares("r-9"); return err })

	again := s1
	again.CreatedAt = at(99)
	writeErr(t, s, "PutShare of an existing share", store.ErrConflict, func(tx store.Tx) error { return tx.PutShare(again) })

	// A share is pending until accepted; accepting again keeps the first
	// time, and a share that does not exist is not accepted.
	accepted := func(sh store.Share, ms int64) store.Share {
		a := at(ms)
		sh.AcceptedAt = &a
		return sh
	}
	mustWrite(t, s, func(tx store.Tx) error { return tx.AcceptShare(s3, at(30)) })
	mustWrite(t, s, func(tx store.Tx) error { return tx.AcceptShare(s3, at(40)) })
	writeErr(t, s, "AcceptShare of a missing share", store.ErrNotFound, func(tx store.Tx) error {
		return tx.AcceptShare(share("r-2", "", store.ShareUser, "u-2", 1), at(30))
	})
	equal(t, "Shares(r-2) after AcceptShare", shares("r-2"), []store.Share{accepted(s3, 30)})
	s3 = accepted(s3, 30)
	s6 := accepted(share("r-2", "", store.ShareUser, "u-1", 2), 3) // put accepted
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutShare(s6) })
	equal(t, "Shares(r-2) with one put accepted", shares("r-2"), []store.Share{s3, s6})
	mustWrite(t, s, func(tx store.Tx) error { return tx.DeleteShare(s6) })

	// DeleteShare matches runner, account, kind and subject, not the time.
	for _, tc := range []struct {
		name string
		sh   store.Share
	}{
		{"other runner", share("r-2", "", store.ShareUser, "u-2", 10)},
		{"other account", share("r-1", "acc-b", store.ShareUser, "u-2", 10)},
		{"other kind", share("r-2", "", store.ShareUser, "web", 1)},
		{"other subject", share("r-1", "", store.ShareUser, "u-1", 10)},
		{"missing runner", share("r-9", "", store.ShareUser, "u-2", 10)},
	} {
		writeErr(t, s, "DeleteShare("+tc.name+")", store.ErrNotFound, func(tx store.Tx) error { return tx.DeleteShare(tc.sh) })
	}
	equal(t, "AllShares() after refused deletes", allShares(), []store.Share{s2, s1, s5, s4, s3})
	mustWrite(t, s, func(tx store.Tx) error { return tx.DeleteShare(again) })
	equal(t, "Shares(r-1) after DeleteShare(s1)", shares("r-1"), []store.Share{s2, s5, s4})
	writeErr(t, s, "DeleteShare twice", store.ErrNotFound, func(tx store.Tx) error { return tx.DeleteShare(s1) })

	// DeleteSharesOf removes the subject's shares of that kind only, on
	// every runner and account.
	mustWrite(t, s, func(tx store.Tx) error { return tx.DeleteSharesOf(store.ShareProject, "web") })
	equal(t, "AllShares() after DeleteSharesOf(project web)", allShares(), []store.Share{s5, s4})
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.DeleteSharesOf(store.ShareUser, "u-2"), tx.DeleteSharesOf(store.ShareUser, "u-9"))
	})
	equal(t, "AllShares() after DeleteSharesOf(user u-2)", allShares(), []store.Share{s4})
}

func testProjectMembers(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(user("u-1", "alice")),
			tx.InsertUser(user("u-2", "bob")),
			tx.InsertUser(user("u-3", "carol")),
			// Out of name order; zoo has no owner.
			tx.PutProject(store.Project{Name: "zoo", CreatedAt: at(1), UpdatedAt: at(1)}),
			tx.PutProject(store.Project{Name: "web", OwnerID: "u-1", CreatedAt: at(2), UpdatedAt: at(2)}),
			tx.PutProject(store.Project{Name: "api", OwnerID: "u-2", CreatedAt: at(3), UpdatedAt: at(3)}),
		)
	})
	members := func(project string) []string {
		return get(t, s, func(tx store.Tx) ([]string, error) { return tx.Members(project) })
	}
	projectsOf := func(userID string) []string {
		return get(t, s, func(tx store.Tx) ([]string, error) { return tx.ProjectsOf(userID) })
	}
	owner := func(project string) string {
		return get(t, s, func(tx store.Tx) (store.Project, error) { return tx.Project(project) }).OwnerID
	}
	equal(t, "owner of web", owner("web"), "u-1")
	equal(t, "Members(web): the owner, with the project", members("web"), []string{"u-1"})
	equal(t, "Members(zoo) without an owner", members("zoo"), nil)

	// Oldest membership first, not by id.
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.AddMember("web", "u-2", at(50)), tx.AddMember("web", "u-3", at(40)), tx.AddMember("zoo", "u-2", at(5)))
	})
	equal(t, "Members(web)", members("web"), []string{"u-1", "u-3", "u-2"})
	equal(t, "ProjectsOf(u-2), by name", projectsOf("u-2"), []string{"api", "web", "zoo"})
	equal(t, "ProjectsOf(u-1)", projectsOf("u-1"), []string{"web"})
	equal(t, "ProjectsOf(nobody)", projectsOf("u-9"), nil)
	equal(t, "Members(missing project)", members("nope"), nil)

	for _, tc := range []struct {
		name     string
		project  string
		userID   string
		wantErr  error
		isRemove bool
	}{
		{"AddMember of a member", "web", "u-2", store.ErrConflict, false},
		{"AddMember of the owner", "api", "u-2", store.ErrConflict, false},
		{"AddMember of a missing user", "web", "u-9", store.ErrNotFound, false},
		{"AddMember to a missing project", "nope", "u-2", store.ErrNotFound, false},
		{"RemoveMember of a non-member", "api", "u-1", store.ErrNotFound, true},
		{"RemoveMember of a missing project", "nope", "u-1", store.ErrNotFound, true},
	} {
		writeErr(t, s, tc.name, tc.wantErr, func(tx store.Tx) error {
			if tc.isRemove {
				return tx.RemoveMember(tc.project, tc.userID)
			}
			return tx.AddMember(tc.project, tc.userID, at(60))
		})
	}
	equal(t, "Members(web) after refused changes", members("web"), []string{"u-1", "u-3", "u-2"})

	mustWrite(t, s, func(tx store.Tx) error { return tx.RemoveMember("web", "u-3") })
	equal(t, "Members(web) after RemoveMember(u-3)", members("web"), []string{"u-1", "u-2"})
	equal(t, "ProjectsOf(u-3) after RemoveMember", projectsOf("u-3"), nil)
	writeErr(t, s, "RemoveMember twice", store.ErrNotFound, func(tx store.Tx) error { return tx.RemoveMember("web", "u-3") })

	// A put keeps the first owner, and adds no one else as a member: a
	// remap names no owner, or another one.
	for _, o := range []string{"", "u-3"} {
		mustWrite(t, s, func(tx store.Tx) error {
			return tx.PutProject(store.Project{Name: "web", OwnerID: o, Remote: "https://git.example/web.git", CreatedAt: at(70), UpdatedAt: at(70)})
		})
		equal(t, fmt.Sprintf("owner of web after a put with owner %q", o), owner("web"), "u-1")
		equal(t, fmt.Sprintf("Members(web) after a put with owner %q", o), members("web"), []string{"u-1", "u-2"})
	}
	// A project without an owner takes the first one given, as a member.
	mustWrite(t, s, func(tx store.Tx) error {
		return tx.PutProject(store.Project{Name: "zoo", OwnerID: "u-3", CreatedAt: at(80), UpdatedAt: at(80)})
	})
	equal(t, "owner of zoo", owner("zoo"), "u-3")
	equal(t, "Members(zoo) after it got an owner", members("zoo"), []string{"u-2", "u-3"})
}

func testActiveJobs(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error {
		errs := []error{tx.InsertUser(user("u-1", "alice")), tx.InsertUser(user("u-2", "bob"))}
		// One of alice's jobs in every state, newest first, so that neither
		// insertion nor state order is the oldest-first order.
		for i, st := range job.States {
			errs = append(errs, tx.InsertJob(newJob("j-"+string(st), "u-1", st, int64(1000-i))))
		}
		errs = append(errs, tx.InsertJob(newJob("j-bob", "u-2", job.Queued, 0)))
		return errors.Join(errs...)
	})
	var want []string
	for i := len(job.States) - 1; i >= 0; i-- {
		if !job.States[i].Terminal() {
			want = append(want, "j-"+string(job.States[i]))
		}
	}
	equal(t, "the states that have not ended", want, []string{"j-waiting", "j-running", "j-offered", "j-queued"})
	active := func(requesterID string) []string {
		return jobIDs(get(t, s, func(tx store.Tx) ([]store.Job, error) { return tx.ActiveJobsOf(requesterID) }))
	}
	equal(t, "ActiveJobsOf(u-1)", active("u-1"), want)
	equal(t, "ActiveJobsOf(u-2)", active("u-2"), []string{"j-bob"})
	equal(t, "ActiveJobsOf(nobody)", active("u-9"), nil)
	equal(t, "ActiveJobsOf(u-1)[0]", get(t, s, func(tx store.Tx) ([]store.Job, error) { return tx.ActiveJobsOf("u-1") })[0],
		newJob("j-waiting", "u-1", job.Waiting, int64(1000-3)))
}

// seedTenants inserts alice (u-1), bob (u-2), carol (u-3), dave (u-4) and
// erin (u-5); projects web (alice's, carol a member) and api (bob's); and
// runners r-a (alice's), r-c (carol's) and r-e (erin's).
func seedTenants(t *testing.T, s store.Store) {
	t.Helper()
	mustWrite(t, s, func(tx store.Tx) error {
		errs := []error{}
		for i, name := range []string{"alice", "bob", "carol", "dave", "erin"} {
			errs = append(errs, tx.InsertUser(user(fmt.Sprintf("u-%d", i+1), name)))
		}
		return errors.Join(append(errs,
			tx.PutProject(store.Project{Name: "web", OwnerID: "u-1", CreatedAt: at(1), UpdatedAt: at(1)}),
			tx.AddMember("web", "u-3", at(2)),
			tx.PutProject(store.Project{Name: "api", OwnerID: "u-2", CreatedAt: at(1), UpdatedAt: at(1)}),
			tx.InsertRunner(runner("r-a", "box-a", "u-1")),
			tx.InsertRunner(runner("r-c", "box-c", "u-3")),
			tx.InsertRunner(runner("r-e", "box-e", "u-5")),
		)...)
	})
}

// jobOn is a job of the requester on a project ("" for none).
func jobOn(id, requester, project string, state job.State, created int64) store.Job {
	j := newJob(id, requester, state, created)
	j.Project = project
	return j
}

func testVisibleJobs(t *testing.T, s store.Store) {
	seedTenants(t, s)
	// Who sees each job, and why: R requester, M member of its project,
	// O owner of a runner it had an attempt on (only for a job without a
	// project; o marks an owner who does not see a project's job).
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertJob(jobOn("j-1", "u-1", "", job.Queued, 100)),       // alice R
			tx.InsertJob(jobOn("j-2", "u-2", "web", job.Completed, 200)), // bob R, alice M, carol M
			tx.InsertJob(jobOn("j-3", "u-4", "", job.Running, 300)),      // dave R, carol O
			tx.InsertJob(jobOn("j-4", "u-2", "api", job.Queued, 400)),    // bob R M
			tx.InsertJob(jobOn("j-5", "u-4", "mobile", job.Queued, 500)), // dave R (alice o, carol o; no such project)
			tx.InsertJob(jobOn("j-6", "u-1", "web", job.Queued, 600)),    // alice R M o, carol M
			tx.InsertJob(jobOn("j-7", "u-2", "", job.Completed, 700)),    // bob R
			tx.InsertJob(jobOn("j-8", "u-4", "api", job.Waiting, 800)),   // dave R, bob M
			tx.InsertAttempt(attempt("a-3", "j-3", "r-c", 1, job.AttemptRunning, 0)),
			tx.InsertAttempt(attempt("a-5a", "j-5", "r-a", 1, job.AttemptExpired, 0)),
			tx.InsertAttempt(attempt("a-5c", "j-5", "r-c", 2, job.AttemptOffered, 0)),
			tx.InsertAttempt(attempt("a-6", "j-6", "r-a", 1, job.AttemptCompleted, 0)),
			// A member of a project named "" (which the hub never makes)
			// sees no job for it: a job without a project has none.
			tx.PutProject(store.Project{Name: "", OwnerID: "u-4", CreatedAt: at(1), UpdatedAt: at(1)}),
		)
	})
	jobs := func(f store.JobFilter) []string {
		return jobIDs(get(t, s, func(tx store.Tx) ([]store.Job, error) { return tx.Jobs(f) }))
	}
	for _, tc := range []struct {
		name string
		f    store.JobFilter
		want []string
	}{
		{"alice", store.JobFilter{VisibleTo: "u-1"}, []string{"j-6", "j-2", "j-1"}},
		{"bob", store.JobFilter{VisibleTo: "u-2"}, []string{"j-8", "j-7", "j-4", "j-2"}},
		{"carol", store.JobFilter{VisibleTo: "u-3"}, []string{"j-6", "j-3", "j-2"}},
		{"dave", store.JobFilter{VisibleTo: "u-4"}, []string{"j-8", "j-5", "j-3"}},
		{"erin, with a runner nobody used", store.JobFilter{VisibleTo: "u-5"}, nil},
		{"a missing user", store.JobFilter{VisibleTo: "u-9"}, nil},
		{"queued, alice", store.JobFilter{VisibleTo: "u-1", State: job.Queued}, []string{"j-6", "j-1"}},
		{"completed, alice", store.JobFilter{VisibleTo: "u-1", State: job.Completed}, []string{"j-2"}},
		{"running, alice", store.JobFilter{VisibleTo: "u-1", State: job.Running}, nil},
		{"limit 2, carol", store.JobFilter{VisibleTo: "u-3", Limit: 2}, []string{"j-6", "j-3"}},
		{"limit 3, carol", store.JobFilter{VisibleTo: "u-3", Limit: 3}, []string{"j-6", "j-3", "j-2"}},
		{"limit 1, bob", store.JobFilter{VisibleTo: "u-2", Limit: 1}, []string{"j-8"}},
		{"limit 2, dave, all requested", store.JobFilter{VisibleTo: "u-4", Limit: 2}, []string{"j-8", "j-5"}},
		{"queued, limit 1, carol", store.JobFilter{VisibleTo: "u-3", State: job.Queued, Limit: 1}, []string{"j-6"}},
		{"dave's, bob", store.JobFilter{VisibleTo: "u-2", RequesterID: "u-4"}, []string{"j-8"}},
		{"bob's, bob", store.JobFilter{VisibleTo: "u-2", RequesterID: "u-2"}, []string{"j-7", "j-4", "j-2"}},
		{"alice's, dave", store.JobFilter{VisibleTo: "u-4", RequesterID: "u-1"}, nil},
		{"dave's queued, carol", store.JobFilter{VisibleTo: "u-3", RequesterID: "u-4", State: job.Queued}, nil},
		{"dave's, carol", store.JobFilter{VisibleTo: "u-3", RequesterID: "u-4"}, []string{"j-3"}},
		{"everyone's", store.JobFilter{}, []string{"j-8", "j-7", "j-6", "j-5", "j-4", "j-3", "j-2", "j-1"}},
	} {
		equal(t, "Jobs(VisibleTo "+tc.name+")", jobs(tc.f), tc.want)
	}
	equal(t, "Jobs(VisibleTo alice)[0]", get(t, s, func(tx store.Tx) ([]store.Job, error) {
		return tx.Jobs(store.JobFilter{VisibleTo: "u-1", Limit: 1})
	}), []store.Job{jobOn("j-6", "u-1", "web", job.Queued, 600)})

	// Visibility follows membership and attempts as they change.
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.RemoveMember("web", "u-3"),
			tx.AddMember("api", "u-5", at(900)),
			tx.InsertAttempt(attempt("a-7", "j-7", "r-e", 1, job.AttemptCompleted, 0)),
		)
	})
	equal(t, "Jobs(VisibleTo carol) after leaving web", jobs(store.JobFilter{VisibleTo: "u-3"}), []string{"j-3"})
	equal(t, "Jobs(VisibleTo erin) after joining api and running j-7", jobs(store.JobFilter{VisibleTo: "u-5"}),
		[]string{"j-8", "j-7", "j-4"})
}

func testVisibleQuestions(t *testing.T, s store.Store) {
	seedTenants(t, s)
	// Each job waits on its question, asked by an attempt on erin's runner
	// except q-3's, on carol's; q-1 and q-3 expire at 50.
	type spec struct {
		id, requester, project, runner string
		expires                        *time.Time
	}
	specs := []spec{
		{"1", "u-1", "", "r-e", ptr(at(50))}, // alice R, erin O
		{"2", "u-2", "web", "r-e", nil},      // bob R, alice M, carol M (erin o)
		{"3", "u-4", "", "r-c", ptr(at(50))}, // dave R, carol O
		{"4", "u-2", "api", "r-e", nil},      // bob R M (erin o)
	}
	mustWrite(t, s, func(tx store.Tx) error {
		var errs []error
		for i, sp := range specs {
			j := jobOn("j-"+sp.id, sp.requester, sp.project, job.Waiting, int64(i))
			j.AttemptID = "a-" + sp.id
			errs = append(errs,
				tx.InsertJob(j),
				tx.InsertAttempt(attempt("a-"+sp.id, "j-"+sp.id, sp.runner, 1, job.AttemptAsked, 0)),
				tx.InsertQuestion(store.Question{ID: "q-" + sp.id, JobID: "j-" + sp.id, AttemptID: "a-" + sp.id,
					Text: "?", AskedAt: at(int64(100 - i)), ExpiresAt: sp.expires}))
		}
		// As in testVisibleJobs: dave, a member of a project named "",
		// sees no question of a job without a project.
		errs = append(errs, tx.PutProject(store.Project{Name: "", OwnerID: "u-4", CreatedAt: at(1), UpdatedAt: at(1)}))
		return errors.Join(errs...)
	})
	open := func(f store.QuestionFilter) []string {
		qs := get(t, s, func(tx store.Tx) ([]store.Question, error) { return tx.OpenQuestions(f) })
		return ids(qs, func(q store.Question) string { return q.ID })
	}
	for _, tc := range []struct {
		name string
		f    store.QuestionFilter
		want []string
	}{
		{"alice", store.QuestionFilter{VisibleTo: "u-1"}, []string{"q-2", "q-1"}},
		{"bob", store.QuestionFilter{VisibleTo: "u-2"}, []string{"q-4", "q-2"}},
		{"carol", store.QuestionFilter{VisibleTo: "u-3"}, []string{"q-3", "q-2"}},
		{"dave", store.QuestionFilter{VisibleTo: "u-4"}, []string{"q-3"}},
		{"erin", store.QuestionFilter{VisibleTo: "u-5"}, []string{"q-1"}},
		{"a missing user", store.QuestionFilter{VisibleTo: "u-9"}, nil},
		{"bob's, carol", store.QuestionFilter{VisibleTo: "u-3", RequesterID: "u-2"}, []string{"q-2"}},
		{"alice's, carol", store.QuestionFilter{VisibleTo: "u-3", RequesterID: "u-1"}, nil},
		{"expired, erin", store.QuestionFilter{VisibleTo: "u-5", ExpiredBefore: at(51)}, []string{"q-1"}},
		{"expired, dave", store.QuestionFilter{VisibleTo: "u-4", ExpiredBefore: at(51)}, []string{"q-3"}},
		{"expired, bob", store.QuestionFilter{VisibleTo: "u-2", ExpiredBefore: at(51)}, nil},
		{"everyone's", store.QuestionFilter{}, []string{"q-4", "q-3", "q-2", "q-1"}},
	} {
		equal(t, "OpenQuestions(VisibleTo "+tc.name+")", open(tc.f), tc.want)
	}
}

func testProjectSecrets(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertUser(user("u-1", "alice")),
			tx.PutProject(store.Project{Name: "web", OwnerID: "u-1", CreatedAt: at(1), UpdatedAt: at(1)}),
			tx.PutProject(store.Project{Name: "api", OwnerID: "u-1", CreatedAt: at(1), UpdatedAt: at(1)}))
	})
	sec := func(name, value string, when int64) store.ProjectSecret {
		return store.ProjectSecret{Project: "web", Name: name, Upstream: "https://r.example", Header: "Authorization", Prefix: "Bearer ",
			Value: value, CreatedBy: "u-1", CreatedAt: at(when)}
	}
	list := func(project string, values bool) []store.ProjectSecret {
		return get(t, s, func(tx store.Tx) ([]store.ProjectSecret, error) { return tx.ProjectSecrets(project, values) })
	}
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutProjectSecret(sec("npm", "v1", 2)), tx.PutProjectSecret(sec("go", "v2", 3)))
	})
	// Set again: replaced, not added.
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutProjectSecret(sec("npm", "v3", 4)) })
	equal(t, "ProjectSecrets with values, by name", list("web", true), []store.ProjectSecret{sec("go", "v2", 3), sec("npm", "v3", 4)})
	equal(t, "ProjectSecrets without values", list("web", false), []store.ProjectSecret{sec("go", "", 3), sec("npm", "", 4)})
	equal(t, "another project's", list("api", true), nil)
	mustWrite(t, s, func(tx store.Tx) error { return tx.RemoveProjectSecret("web", "go") })
	if err := s.Write(context.Background(), func(tx store.Tx) error { return tx.RemoveProjectSecret("web", "go") }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second removal: %v, want ErrNotFound", err)
	}
	equal(t, "after removal", list("web", true), []store.ProjectSecret{sec("npm", "v3", 4)})
}
