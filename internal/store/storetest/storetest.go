// Package storetest is the conformance suite every store implementation
// must pass. It checks the behaviour the hub relies on, not any schema.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/store"
)

// Run runs the suite. open must return a new, empty store on every call,
// may be called from parallel subtests, and must close the store when its
// test ends (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"Users", testUsers},
		{"Tokens", testTokens},
		{"Runners", testRunners},
		{"Jobs", testJobs},
		{"JobKeys", testJobKeys},
		{"JobLists", testJobLists},
		{"JobListLimits", testJobListLimits},
		{"QueuedHeads", testQueuedHeads},
		{"ActiveByRequester", testActiveByRequester},
		{"Claims", testClaims},
		{"Attempts", testAttempts},
		{"Leases", testLeases},
		{"MissingReferences", testMissingReferences},
		{"Logs", testLogs},
		{"LogsRandom", testLogsRandom},
		{"Events", testEvents},
		{"Requests", testRequests},
		{"Meta", testMeta},
		{"Projects", testProjects},
		{"ProjectConfig", testProjectConfig},
		{"ContextFiles", testContextFiles},
		{"Questions", testQuestions},
		{"OpenQuestions", testOpenQuestions},
		{"Accounts", testAccounts},
		{"AccountMoves", testAccountMoves},
		{"AllAccounts", testAllAccounts},
		{"Fleet", testFleet},
		{"Shares", testShares},
		{"AccessVersions", testAccessVersions},
		{"AccessVersionRace", testAccessVersionRace},
		{"ProjectMembers", testProjectMembers},
		{"ProjectSecrets", testProjectSecrets},
		{"Forges", testForges},
		{"Publications", testPublications},
		{"Pipelines", testPipelines},
		{"PipelineRuns", testPipelineRuns},
		{"StepResults", testStepResults},
		{"PipelineEvents", testPipelineEvents},
		{"Evals", testEvals},
		{"ForgeThreads", testForgeThreads},
		{"ForgeWork", testForgeWork},
		{"ActiveJobs", testActiveJobs},
		{"VisibleJobs", testVisibleJobs},
		{"VisibleQuestions", testVisibleQuestions},
		{"WriteErrorRollsBack", testWriteErrorRollsBack},
		{"CancelledContext", testCancelledContext},
		{"ReadDuringWrite", testReadDuringWrite},
		{"ReadEach", testReadEach},
		{"ConcurrentWrites", testConcurrentWrites},
		{"Hubs", testHubs},
		{"RunnerHolders", testRunnerHolders},
		{"RunnersLeft", testRunnersLeft},
		{"RunnerTokens", testRunnerTokens},
		{"TokenVersions", testTokenVersions},
		{"RunnerStatus", testRunnerStatus},
		{"LeaderTerm", testLeaderTerm},
		{"LeaderRace", testLeaderRace},
		// Outbound webhooks.
		{"Webhooks", testWebhooks},
		{"JobChanges", testJobChanges},
		{"WebhookDeliveries", testWebhookDeliveries},
		// Sign-in with a forge.
		{"ForgeOAuth", testForgeOAuth},
		// Sign-in with an OpenID Connect provider.
		{"OIDC", testOIDC},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

// Fixtures. Every field is set, so a column a store forgets shows up.

// at returns a fixed instant plus ms milliseconds, at millisecond precision
// and deliberately not in UTC: stores must keep the instant, not the zone.
func at(ms int64) time.Time {
	return time.Date(2025, 6, 1, 12, 0, 0, 123_000_000, time.FixedZone("X", 3600)).Add(time.Duration(ms) * time.Millisecond)
}

func ptr[T any](v T) *T { return &v }

func user(id, name string) store.User {
	return store.User{ID: id, Name: name, Admin: true, CreatedAt: at(1)}
}

func runner(id, name, owner string) store.Runner {
	return store.Runner{
		ID: id, Name: name, OwnerID: owner, TokenHash: "hash-" + id, Slots: 3,
		Labels:    map[string]string{"os": "linux", "gpu": "none"},
		CreatedAt: at(2), LastSeen: ptr(at(3)), RevokedAt: ptr(at(4)), Access: apitypes.AccessHub, Version: "v1.2.3",
	}
}

func newJob(id, requester string, state job.State, created int64) store.Job {
	return store.Job{
		ID: id, State: state, Agent: "claude", Args: []string{"-p", "fix the bug", "ünïcode"},
		Labels: map[string]string{"repo": "drover"}, RequesterID: requester, Key: "key-" + id,
		Epoch: 2, AttemptID: "a-" + id, Cancelling: true, Reason: job.ReasonExited,
		ExitCode: ptr(0), LogCap: 1 << 20,
		CreatedAt: at(created), UpdatedAt: at(created + 1), FinishedAt: ptr(at(created + 2)),
		Project: "drover", Base: "1111111111111111111111111111111111111111",
		Head: "2222222222222222222222222222222222222222", Mode: "fix",
		RepoURL: "https://git.example/drover.git", Checkpoints: 3,
		Tools: true, ResumeAttempt: "a-0-" + id, Account: "work", Network: []string{"go", "npm"}, Model: "m-1",
		Sparse: []string{"docs", "src/api"},
	}
}

func attempt(id, jobID, runnerID string, epoch int64, state job.AttemptState, lease int64) store.Attempt {
	return store.Attempt{
		ID: id, JobID: jobID, Epoch: epoch, RunnerID: runnerID, State: state,
		Reason: job.ReasonExited, ExitCode: ptr(3), Message: "exit status 3",
		OfferedAt: at(10), AcceptedAt: ptr(at(11)), FinishedAt: ptr(at(12)), LeaseUntil: at(lease),
		LogSize: 42, LogSHA256: "abc123", Isolation: `{"kind":"none"}`, Usage: `{"input_tokens":1}`, Session: "sess-" + id, Summary: "did " + id,
		Account: "acct-" + id,
	}
}

// seed inserts user u-1 (alice), runner r-1 and job j-1 for tests that need
// rows to refer to.
func seed(t *testing.T, s store.Store) {
	t.Helper()
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(user("u-1", "alice")),
			tx.InsertRunner(runner("r-1", "box-1", "u-1")),
			tx.InsertJob(newJob("j-1", "u-1", job.Running, 0)),
		)
	})
}

// Transaction helpers.

func ctx(t *testing.T) context.Context { return t.Context() }

func mustWrite(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Write(ctx(t), fn); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func mustRead(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Read(ctx(t), fn); err != nil {
		t.Fatalf("Read: %v", err)
	}
}

// get reads one value in its own read transaction.
func get[T any](t *testing.T, s store.Store, fn func(store.Tx) (T, error)) T {
	t.Helper()
	var v T
	mustRead(t, s, func(tx store.Tx) (err error) {
		v, err = fn(tx)
		return err
	})
	return v
}

// wantErr checks that err matches target (nil meaning success).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	switch {
	case target == nil && err != nil:
		t.Errorf("%s: unexpected error %v", what, err)
	case target != nil && !errors.Is(err, target):
		t.Errorf("%s: got error %v, want %v", what, err, target)
	}
}

// writeErr runs fn in a Write and checks the error it ends with.
func writeErr(t *testing.T, s store.Store, what string, target error, fn func(store.Tx) error) {
	t.Helper()
	wantErr(t, what, s.Write(ctx(t), fn), target)
}

// readErr runs fn in a Read and checks the error it ends with.
func readErr(t *testing.T, s store.Store, what string, target error, fn func(store.Tx) error) {
	t.Helper()
	wantErr(t, what, s.Read(ctx(t), fn), target)
}

// Comparison.

// equal compares after canon, printing both sides as JSON so that pointers
// show their values.
func equal[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	g, w := canon(got), canon(want)
	if !reflect.DeepEqual(g, w) {
		gj, _ := json.MarshalIndent(g, "", "  ")
		wj, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("%s:\n got %s\nwant %s", what, gj, wj)
	}
}

// canon returns a copy of v with every time in UTC without a monotonic
// reading, and every empty map or slice nil: stores keep instants, not
// zones, and need not tell nil from empty.
func canon[T any](v T) T {
	c := reflect.New(reflect.TypeOf(&v).Elem()).Elem()
	c.Set(reflect.ValueOf(&v).Elem())
	canonValue(c)
	return c.Interface().(T)
}

func canonValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if tm, ok := v.Interface().(time.Time); ok {
			v.Set(reflect.ValueOf(tm.Round(0).UTC()))
			return
		}
		for i := range v.NumField() {
			canonValue(v.Field(i))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			c := reflect.New(v.Type().Elem())
			c.Elem().Set(v.Elem())
			canonValue(c.Elem())
			v.Set(c)
		}
	case reflect.Map:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(it.Value())
			canonValue(e)
			c.SetMapIndex(it.Key(), e)
		}
		v.Set(c)
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		for i := range c.Len() {
			canonValue(c.Index(i))
		}
		v.Set(c)
	}
}

func ids[T any](vs []T, id func(T) string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = id(v)
	}
	return out
}

func jobIDs(js []store.Job) []string { return ids(js, func(j store.Job) string { return j.ID }) }
func attemptIDs(as []store.Attempt) []string {
	return ids(as, func(a store.Attempt) string { return a.ID })
}

func sortedAttemptIDs(as []store.Attempt) []string {
	s := attemptIDs(as)
	sort.Strings(s)
	return s
}

// Tests.

func testUsers(t *testing.T, s store.Store) {
	alice := user("u-1", "alice")
	bob := store.User{ID: "u-2", Name: "bob", Admin: false, CreatedAt: at(5)}
	carol := store.User{ID: "u-0", Name: "carol", CreatedAt: at(6), RemovedAt: ptr(at(7))}
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertUser(bob), tx.InsertUser(carol), tx.InsertUser(alice))
	})
	equal(t, "User(u-1)", get(t, s, func(tx store.Tx) (store.User, error) { return tx.User("u-1") }), alice)
	equal(t, "UserByName(bob)", get(t, s, func(tx store.Tx) (store.User, error) { return tx.UserByName("bob") }), bob)
	equal(t, "UserByName(carol), removed", get(t, s, func(tx store.Tx) (store.User, error) { return tx.UserByName("carol") }), carol)
	users := func() []store.User { return get(t, s, func(tx store.Tx) ([]store.User, error) { return tx.Users() }) }
	equal(t, "Users() by name, removed included", users(), []store.User{alice, bob, carol})

	// UpdateUser sets name, admin and removal, both ways; never the
	// creation time.
	bobby := store.User{ID: "u-2", Name: "bobby", Admin: true, CreatedAt: at(99), RemovedAt: ptr(at(8))}
	carol.RemovedAt, carol.Admin = nil, true
	mustWrite(t, s, func(tx store.Tx) error { return errors.Join(tx.UpdateUser(bobby), tx.UpdateUser(carol)) })
	bobby.CreatedAt = bob.CreatedAt
	equal(t, "updated User(u-2)", get(t, s, func(tx store.Tx) (store.User, error) { return tx.User("u-2") }), bobby)
	equal(t, "Users() after updates", users(), []store.User{alice, bobby, carol})
	readErr(t, s, "UserByName(old name)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.UserByName("bob"); return err })
	writeErr(t, s, "UpdateUser(missing)", store.ErrNotFound, func(tx store.Tx) error { return tx.UpdateUser(user("u-9", "zed")) })
	writeErr(t, s, "rename a user onto a taken name", store.ErrConflict, func(tx store.Tx) error {
		return tx.UpdateUser(store.User{ID: "u-2", Name: "alice", CreatedAt: at(5)})
	})
	equal(t, "Users() after refused updates", users(), []store.User{alice, bobby, carol})

	readErr(t, s, "User(missing)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.User("u-9"); return err })
	readErr(t, s, "UserByName(missing)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.UserByName("dan"); return err })
	for _, tc := range []struct {
		name string
		u    store.User
	}{
		{"duplicate name", user("u-3", "alice")},
		{"duplicate id", user("u-1", "dan")},
	} {
		writeErr(t, s, tc.name, store.ErrConflict, func(tx store.Tx) error { return tx.InsertUser(tc.u) })
	}
}

func testTokens(t *testing.T, s store.Store) {
	live := store.Token{Hash: "h-live", Kind: store.TokenUser, OwnerID: "u-1", CreatedAt: at(1)}
	live2 := store.Token{Hash: "h-live2", Kind: store.TokenUser, OwnerID: "u-1", CreatedAt: at(2)}
	old := store.Token{Hash: "h-old", Kind: store.TokenUser, OwnerID: "u-1", CreatedAt: at(0), RevokedAt: ptr(at(50))}
	other := store.Token{Hash: "h-other", Kind: store.TokenUser, OwnerID: "u-2", CreatedAt: at(3)}
	runnerTok := store.Token{Hash: "h-runner", Kind: store.TokenRunner, OwnerID: "u-1", CreatedAt: at(4)}
	all := []store.Token{live, live2, old, other, runnerTok}
	mustWrite(t, s, func(tx store.Tx) error {
		var errs []error
		for _, k := range all {
			errs = append(errs, tx.InsertToken(k))
		}
		return errors.Join(errs...)
	})
	for _, k := range all {
		equal(t, "Token("+k.Hash+")", get(t, s, func(tx store.Tx) (store.Token, error) { return tx.Token(k.Hash) }), k)
	}
	readErr(t, s, "Token(missing)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.Token("h-none"); return err })
	writeErr(t, s, "duplicate hash", store.ErrConflict, func(tx store.Tx) error {
		return tx.InsertToken(store.Token{Hash: "h-live", Kind: store.TokenRunner, OwnerID: "r-1", CreatedAt: at(9)})
	})

	// Revoking u-1's user tokens leaves the earlier revocation, the other
	// user's token and u-1's token of another kind alone.
	mustWrite(t, s, func(tx store.Tx) error { return tx.RevokeTokens(store.TokenUser, "u-1", at(100)) })
	live.RevokedAt, live2.RevokedAt = ptr(at(100)), ptr(at(100))
	for _, k := range []store.Token{live, live2, old, other, runnerTok} {
		equal(t, "after revoke, Token("+k.Hash+")", get(t, s, func(tx store.Tx) (store.Token, error) { return tx.Token(k.Hash) }), k)
	}

	// RevokeToken revokes one live token only; a revoked or missing one is
	// not found.
	mustWrite(t, s, func(tx store.Tx) error { return tx.RevokeToken(runnerTok.Hash, at(200)) })
	runnerTok.RevokedAt = ptr(at(200))
	equal(t, "after RevokeToken", get(t, s, func(tx store.Tx) (store.Token, error) { return tx.Token(runnerTok.Hash) }), runnerTok)
	for _, h := range []string{runnerTok.Hash, "h-none"} {
		writeErr(t, s, "RevokeToken("+h+") again", store.ErrNotFound, func(tx store.Tx) error { return tx.RevokeToken(h, at(300)) })
	}
	equal(t, "other token after RevokeToken", get(t, s, func(tx store.Tx) (store.Token, error) { return tx.Token(other.Hash) }), other)
}

func testRunners(t *testing.T, s store.Store) {
	r1 := runner("r-1", "box-1", "u-1")
	r1.RevokedAt = nil
	r2 := store.Runner{ID: "r-2", Name: "box-2", OwnerID: "u-1", TokenHash: "h2", Slots: 1, CreatedAt: at(7)}
	r3 := runner("r-3", "box-0", "u-1")
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertUser(user("u-1", "alice")),
			tx.InsertRunner(r1), tx.InsertRunner(r2), tx.InsertRunner(r3))
	})
	r2.Access = apitypes.AccessPrivate // the default
	for _, r := range []store.Runner{r1, r2, r3} {
		equal(t, "Runner("+r.ID+")", get(t, s, func(tx store.Tx) (store.Runner, error) { return tx.Runner(r.ID) }), r)
		equal(t, "RunnerByName("+r.Name+")", get(t, s, func(tx store.Tx) (store.Runner, error) { return tx.RunnerByName(r.Name) }), r)
	}
	list := get(t, s, func(tx store.Tx) ([]store.Runner, error) { return tx.Runners() })
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	equal(t, "Runners()", list, []store.Runner{r1, r2, r3})

	// Update sets every field, pointers both ways.
	r1.Name, r1.TokenHash, r1.Slots = "box-1b", "h1b", 8
	r1.Labels = map[string]string{"os": "darwin"}
	r1.LastSeen, r1.RevokedAt, r1.Access = ptr(at(30)), ptr(at(31)), apitypes.AccessPrivate
	r3.LastSeen, r3.RevokedAt, r3.Labels, r3.Access = nil, nil, nil, ""
	mustWrite(t, s, func(tx store.Tx) error { return errors.Join(tx.UpdateRunner(r1), tx.UpdateRunner(r3)) })
	r3.Access = apitypes.AccessPrivate // "" is the default
	for _, r := range []store.Runner{r1, r3} {
		equal(t, "updated Runner("+r.ID+")", get(t, s, func(tx store.Tx) (store.Runner, error) { return tx.Runner(r.ID) }), r)
	}

	readErr(t, s, "Runner(missing)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.Runner("r-9"); return err })
	readErr(t, s, "RunnerByName(old name)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.RunnerByName("box-1"); return err })
	writeErr(t, s, "UpdateRunner(missing)", store.ErrNotFound, func(tx store.Tx) error {
		return tx.UpdateRunner(runner("r-9", "box-9", "u-1"))
	})
	writeErr(t, s, "duplicate runner name", store.ErrConflict, func(tx store.Tx) error {
		return tx.InsertRunner(runner("r-4", "box-2", "u-1"))
	})
	writeErr(t, s, "duplicate runner id", store.ErrConflict, func(tx store.Tx) error {
		return tx.InsertRunner(runner("r-2", "box-4", "u-1"))
	})
	r2.Name = "box-1b"
	writeErr(t, s, "rename runner onto a taken name", store.ErrConflict, func(tx store.Tx) error { return tx.UpdateRunner(r2) })
}

func testJobs(t *testing.T, s store.Store) {
	full := newJob("j-1", "u-1", job.Completed, 0)
	bare := store.Job{ID: "j-2", State: job.Queued, Agent: "codex", RequesterID: "u-1", LogCap: 10,
		CreatedAt: at(5), UpdatedAt: at(5)}
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertUser(user("u-1", "alice")), tx.InsertJob(full), tx.InsertJob(bare))
	})
	for _, j := range []store.Job{full, bare} {
		equal(t, "Job("+j.ID+")", get(t, s, func(tx store.Tx) (store.Job, error) { return tx.Job(j.ID) }), j)
	}
	readErr(t, s, "Job(missing)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.Job("j-9"); return err })

	// Update sets every field, pointers both ways (ExitCode 0 is not nil).
	full.State, full.Agent, full.Args, full.Labels = job.Failed, "aider", []string{"x"}, map[string]string{"a": "b"}
	full.Key, full.Epoch, full.AttemptID, full.Cancelling = "new-key", 7, "a-7", false
	full.Reason, full.ExitCode, full.LogCap = job.ReasonTimeout, nil, 99
	full.UpdatedAt, full.FinishedAt = at(60), nil
	full.Head, full.Mode, full.Checkpoints, full.RepoURL = "3333333333333333333333333333333333333333", "observe", 4, ""
	full.Tools, full.ResumeAttempt = false, ""
	full.Network = []string{} // no network, which is not nil (the project's)
	full.Sparse = nil
	bare.ExitCode, bare.FinishedAt, bare.State = ptr(0), ptr(at(61)), job.Unknown
	mustWrite(t, s, func(tx store.Tx) error { return errors.Join(tx.UpdateJob(full), tx.UpdateJob(bare)) })
	for _, j := range []store.Job{full, bare} {
		equal(t, "updated Job("+j.ID+")", get(t, s, func(tx store.Tx) (store.Job, error) { return tx.Job(j.ID) }), j)
	}
	writeErr(t, s, "UpdateJob(missing)", store.ErrNotFound, func(tx store.Tx) error {
		return tx.UpdateJob(newJob("j-9", "u-1", job.Queued, 0))
	})
	writeErr(t, s, "duplicate job id", store.ErrConflict, func(tx store.Tx) error {
		j := newJob("j-1", "u-1", job.Queued, 0)
		j.Key = ""
		return tx.InsertJob(j)
	})
}

func testJobKeys(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertUser(user("u-1", "alice")), tx.InsertUser(user("u-2", "bob")))
	})
	withKey := func(id, requester, key string) store.Job {
		j := newJob(id, requester, job.Queued, 0)
		j.Key = key
		return j
	}
	first := withKey("j-1", "u-1", "k")
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertJob(first) })
	for _, tc := range []struct {
		name string
		j    store.Job
		want error
	}{
		{"same key, same requester", withKey("j-2", "u-1", "k"), store.ErrConflict},
		{"same key, other requester", withKey("j-3", "u-2", "k"), nil},
		{"other key, same requester", withKey("j-4", "u-1", "k2"), nil},
		{"empty key", withKey("j-5", "u-1", ""), nil},
		{"second empty key", withKey("j-6", "u-1", ""), nil},
	} {
		writeErr(t, s, tc.name, tc.want, func(tx store.Tx) error { return tx.InsertJob(tc.j) })
	}
	equal(t, "JobByKey(u-1, k)", get(t, s, func(tx store.Tx) (store.Job, error) { return tx.JobByKey("u-1", "k") }), first)
	equal(t, "JobByKey(u-2, k).ID", get(t, s, func(tx store.Tx) (store.Job, error) { return tx.JobByKey("u-2", "k") }).ID, "j-3")
	readErr(t, s, "JobByKey(missing key)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.JobByKey("u-1", "zzz"); return err })
	readErr(t, s, "JobByKey(empty key)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.JobByKey("u-1", ""); return err })

	// Updating a job onto a taken key conflicts too.
	j4 := withKey("j-4", "u-1", "k")
	writeErr(t, s, "update onto a taken key", store.ErrConflict, func(tx store.Tx) error { return tx.UpdateJob(j4) })
}

func testJobLists(t *testing.T, s store.Store) {
	// Inserted out of order; j-c and j-d share a creation time, so FIFO
	// falls back to the id.
	specs := []struct {
		id, requester string
		state         job.State
		created       int64
	}{
		{"j-e", "u-1", job.Queued, 500},
		{"j-a", "u-1", job.Queued, 100},
		{"j-d", "u-2", job.Queued, 300},
		{"j-b", "u-2", job.Running, 200},
		{"j-c", "u-1", job.Queued, 300},
		{"j-f", "u-2", job.Completed, 600},
	}
	mustWrite(t, s, func(tx store.Tx) error {
		errs := []error{tx.InsertUser(user("u-1", "alice")), tx.InsertUser(user("u-2", "bob"))}
		for _, sp := range specs {
			errs = append(errs, tx.InsertJob(newJob(sp.id, sp.requester, sp.state, sp.created)))
		}
		return errors.Join(errs...)
	})
	queued := func(limit int) func(store.Tx) ([]store.Job, error) {
		return func(tx store.Tx) ([]store.Job, error) { return tx.QueuedJobs(limit) }
	}
	equal(t, "QueuedJobs(10)", jobIDs(get(t, s, queued(10))), []string{"j-a", "j-c", "j-d", "j-e"})
	equal(t, "QueuedJobs(2)", jobIDs(get(t, s, queued(2))), []string{"j-a", "j-c"})
	equal(t, "QueuedJobs(10)[0]", get(t, s, queued(10))[0], newJob("j-a", "u-1", job.Queued, 100))
	equal(t, "JobCounts()", get(t, s, func(tx store.Tx) (map[job.State]int64, error) { return tx.JobCounts() }),
		map[job.State]int64{job.Queued: 4, job.Running: 1, job.Completed: 1})

	for _, tc := range []struct {
		name string
		f    store.JobFilter
		want []string
	}{
		{"all", store.JobFilter{}, []string{"j-f", "j-e", "j-d", "j-c", "j-b", "j-a"}},
		{"queued", store.JobFilter{State: job.Queued}, []string{"j-e", "j-d", "j-c", "j-a"}},
		{"requester", store.JobFilter{RequesterID: "u-2"}, []string{"j-f", "j-d", "j-b"}},
		{"queued of requester", store.JobFilter{State: job.Queued, RequesterID: "u-2"}, []string{"j-d"}},
		{"limit", store.JobFilter{Limit: 2}, []string{"j-f", "j-e"}},
		{"no match", store.JobFilter{State: job.Failed}, nil},
	} {
		got := get(t, s, func(tx store.Tx) ([]store.Job, error) { return tx.Jobs(tc.f) })
		equal(t, "Jobs("+tc.name+")", jobIDs(got), tc.want)
	}
}

func testJobListLimits(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error {
		errs := []error{tx.InsertUser(user("u-1", "alice"))}
		for i := range 1005 {
			j := newJob(fmt.Sprintf("j-%04d", i), "u-1", job.Queued, int64(i))
			j.Key = ""
			errs = append(errs, tx.InsertJob(j))
		}
		return errors.Join(errs...)
	})
	for _, tc := range []struct {
		limit, want int
		first       string
	}{
		{0, 100, "j-1004"},
		{-1, 100, "j-1004"},
		{5000, 1000, "j-1004"},
	} {
		got := get(t, s, func(tx store.Tx) ([]store.Job, error) { return tx.Jobs(store.JobFilter{Limit: tc.limit}) })
		if len(got) != tc.want || got[0].ID != tc.first {
			t.Errorf("Jobs(Limit: %d): %d jobs starting %s, want %d starting %s", tc.limit, len(got), got[0].ID, tc.want, tc.first)
		}
	}
	if got := get(t, s, func(tx store.Tx) ([]store.Job, error) { return tx.QueuedJobs(0) }); len(got) != 1005 {
		t.Errorf("QueuedJobs(0): %d jobs, want all 1005", len(got))
	}
}

func testAttempts(t *testing.T, s store.Store) {
	seed(t, s)
	second := attempt("a-2", "j-1", "r-1", 2, job.AttemptRunning, 100)
	second.ExitCode, second.AcceptedAt, second.FinishedAt, second.Message, second.Reason = nil, nil, nil, "", job.ReasonNone
	first := attempt("a-1", "j-1", "r-1", 1, job.AttemptFailed, 50)
	first.ExitCode = ptr(0)
	mustWrite(t, s, func(tx store.Tx) error { return errors.Join(tx.InsertAttempt(second), tx.InsertAttempt(first)) })
	for _, a := range []store.Attempt{first, second} {
		equal(t, "Attempt("+a.ID+")", get(t, s, func(tx store.Tx) (store.Attempt, error) { return tx.Attempt(a.ID) }), a)
	}
	equal(t, "Attempts(j-1)", get(t, s, func(tx store.Tx) ([]store.Attempt, error) { return tx.Attempts("j-1") }),
		[]store.Attempt{first, second})
	equal(t, "Attempts(missing job)", len(get(t, s, func(tx store.Tx) ([]store.Attempt, error) { return tx.Attempts("j-9") })), 0)
	readErr(t, s, "Attempt(missing)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.Attempt("a-9"); return err })
	// AttemptWithJob is Attempt and Job in one read.
	mustRead(t, s, func(tx store.Tx) error {
		a, j, err := tx.AttemptWithJob(second.ID)
		if err != nil {
			return err
		}
		wantJob, err := tx.Job(second.JobID)
		equal(t, "AttemptWithJob("+second.ID+"): the attempt", a, second)
		equal(t, "AttemptWithJob("+second.ID+"): its job", j, wantJob)
		return err
	})
	readErr(t, s, "AttemptWithJob(missing)", store.ErrNotFound, func(tx store.Tx) error { _, _, err := tx.AttemptWithJob("a-9"); return err })

	second.State, second.Reason, second.ExitCode, second.Message = job.AttemptCompleted, job.ReasonExited, ptr(0), "ok"
	second.AcceptedAt, second.FinishedAt, second.LogSize, second.LogSHA256 = ptr(at(20)), ptr(at(30)), 1000, "ff"
	second.LeaseUntil, second.Session, second.Summary = at(200), "sess-2b", "summary ünïcode\nline 2"
	first.ExitCode, first.FinishedAt = nil, nil
	mustWrite(t, s, func(tx store.Tx) error { return errors.Join(tx.UpdateAttempt(second), tx.UpdateAttempt(first)) })
	for _, a := range []store.Attempt{first, second} {
		equal(t, "updated Attempt("+a.ID+")", get(t, s, func(tx store.Tx) (store.Attempt, error) { return tx.Attempt(a.ID) }), a)
	}

	writeErr(t, s, "UpdateAttempt(missing)", store.ErrNotFound, func(tx store.Tx) error {
		return tx.UpdateAttempt(attempt("a-9", "j-1", "r-1", 9, job.AttemptRunning, 0))
	})

	// UpdateAttemptAndJob is UpdateAttempt, UpdateJob and AddEvent in one:
	// all written, or ErrNotFound (and none kept) when the attempt or the
	// job is missing.
	kinds := func(jobID string) []string {
		es := get(t, s, func(tx store.Tx) ([]store.Event, error) { return tx.Events(jobID, 0, 0) })
		return ids(es, func(e store.Event) string { return e.Kind + " " + e.Message })
	}
	ev := func(kind string) store.Event {
		return store.Event{JobID: "j-1", At: at(300), Kind: kind, Actor: "box-1", Message: "attempt " + kind}
	}
	j1 := get(t, s, func(tx store.Tx) (store.Job, error) { return tx.Job("j-1") })
	first.Message, j1.Reason, j1.UpdatedAt = "both", job.ReasonExited, at(300)
	mustWrite(t, s, func(tx store.Tx) error { return tx.UpdateAttemptAndJob(first, j1, ev("started")) })
	equal(t, "Attempt after UpdateAttemptAndJob", get(t, s, func(tx store.Tx) (store.Attempt, error) { return tx.Attempt(first.ID) }), first)
	equal(t, "Job after UpdateAttemptAndJob", get(t, s, func(tx store.Tx) (store.Job, error) { return tx.Job(j1.ID) }), j1)
	equal(t, "events after UpdateAttemptAndJob", kinds("j-1"), []string{"started attempt started"})
	missingJob := j1
	missingJob.ID = "j-9"
	writeErr(t, s, "UpdateAttemptAndJob(missing attempt)", store.ErrNotFound, func(tx store.Tx) error {
		return tx.UpdateAttemptAndJob(attempt("a-9", "j-1", "r-1", 9, job.AttemptRunning, 0), j1, ev("lost"))
	})
	writeErr(t, s, "UpdateAttemptAndJob(missing job)", store.ErrNotFound, func(tx store.Tx) error {
		return tx.UpdateAttemptAndJob(first, missingJob, ev("lost"))
	})

	// OfferAttempt is InsertAttempt, UpdateJobAt and AddEvent in one: all
	// written while the job is at the epoch, none kept when it is not.
	was := j1.Epoch
	offered := attempt("a-5", "j-1", "r-1", was+5, job.AttemptOffered, 400)
	offered.ExitCode, offered.AcceptedAt, offered.FinishedAt, offered.Message, offered.Reason = nil, nil, nil, "", job.ReasonNone
	j1.Epoch, j1.AttemptID, j1.UpdatedAt = offered.Epoch, offered.ID, at(400)
	mustWrite(t, s, func(tx store.Tx) error { return tx.OfferAttempt(offered, j1, was, ev("offered")) })
	equal(t, "Attempt after OfferAttempt", get(t, s, func(tx store.Tx) (store.Attempt, error) { return tx.Attempt(offered.ID) }), offered)
	equal(t, "Job after OfferAttempt", get(t, s, func(tx store.Tx) (store.Job, error) { return tx.Job(j1.ID) }), j1)
	stale := attempt("a-6", "j-1", "r-1", j1.Epoch+1, job.AttemptOffered, 500)
	moved := j1
	moved.Epoch, moved.AttemptID = stale.Epoch, stale.ID
	err := s.Write(ctx(t), func(tx store.Tx) error { return tx.OfferAttempt(stale, moved, was, ev("lost")) })
	if !errors.Is(err, store.ErrConflict) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("OfferAttempt at a stale epoch: got %v, want ErrConflict and ErrNotFound", err)
	}
	readErr(t, s, "the attempt of an OfferAttempt at a stale epoch", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.Attempt(stale.ID); return err })
	writeErr(t, s, "OfferAttempt of an existing attempt", store.ErrConflict, func(tx store.Tx) error {
		again := moved
		again.Epoch = j1.Epoch
		return tx.OfferAttempt(offered, again, j1.Epoch, ev("lost"))
	})
	equal(t, "events after OfferAttempt", kinds("j-1"), []string{"started attempt started", "offered attempt offered"})
	writeErr(t, s, "duplicate attempt id", store.ErrConflict, func(tx store.Tx) error {
		return tx.InsertAttempt(attempt("a-1", "j-1", "r-1", 3, job.AttemptRunning, 0))
	})
	writeErr(t, s, "duplicate epoch within a job", store.ErrConflict, func(tx store.Tx) error {
		return tx.InsertAttempt(attempt("a-3", "j-1", "r-1", 2, job.AttemptRunning, 0))
	})
}

func testLeases(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertRunner(runner("r-2", "box-2", "u-1")),
			tx.InsertAttempt(attempt("a-offered", "j-1", "r-1", 1, job.AttemptOffered, 10_000)),
			tx.InsertAttempt(attempt("a-running", "j-1", "r-1", 2, job.AttemptRunning, 60_000)),
			tx.InsertAttempt(attempt("a-done", "j-1", "r-1", 3, job.AttemptCompleted, 5_000)),
			tx.InsertAttempt(attempt("a-other", "j-1", "r-2", 4, job.AttemptRunning, 10_000)),
			tx.InsertAttempt(attempt("a-lost", "j-1", "r-2", 5, job.AttemptUnknown, 1_000)),
		)
	})
	active := get(t, s, func(tx store.Tx) ([]store.Attempt, error) { return tx.ActiveAttempts() })
	equal(t, "ActiveAttempts", sortedAttemptIDs(active), []string{"a-offered", "a-other", "a-running"})
	mine := get(t, s, func(tx store.Tx) ([]store.Attempt, error) { return tx.RunnerActiveAttempts("r-1") })
	equal(t, "RunnerActiveAttempts(r-1)", sortedAttemptIDs(mine), []string{"a-offered", "a-running"})
	other := get(t, s, func(tx store.Tx) ([]store.Attempt, error) { return tx.RunnerActiveAttempts("r-2") })
	equal(t, "RunnerActiveAttempts(r-2)", sortedAttemptIDs(other), []string{"a-other"})

	expired := func(now int64) []string {
		return sortedAttemptIDs(get(t, s, func(tx store.Tx) ([]store.Attempt, error) { return tx.ExpiredAttempts(at(now)) }))
	}
	equal(t, "ExpiredAttempts(10s)", expired(10_000), nil) // a lease ending exactly now has not expired
	equal(t, "ExpiredAttempts(10.001s)", expired(10_001), []string{"a-offered", "a-other"})
	equal(t, "ExpiredAttempts(61s)", expired(61_000), []string{"a-offered", "a-other", "a-running"})

	leases := func() map[string]time.Time {
		m := map[string]time.Time{}
		for _, id := range []string{"a-offered", "a-running", "a-done", "a-other", "a-lost"} {
			m[id] = get(t, s, func(tx store.Tx) (store.Attempt, error) { return tx.Attempt(id) }).LeaseUntil
		}
		return m
	}
	// Only r-1's active attempts move, and only forward.
	mustWrite(t, s, func(tx store.Tx) error { return tx.ExtendLeases("r-1", at(30_000)) })
	equal(t, "leases after ExtendLeases(r-1, 30s)", leases(), map[string]time.Time{
		"a-offered": at(30_000), "a-running": at(60_000), "a-done": at(5_000), "a-other": at(10_000), "a-lost": at(1_000),
	})
	mustWrite(t, s, func(tx store.Tx) error { return tx.ExtendLeases("r-1", at(20_000)) })
	equal(t, "ExtendLeases never shortens", leases()["a-offered"], at(30_000))
	mustWrite(t, s, func(tx store.Tx) error { return tx.ExtendLeases("r-9", at(90_000)) })

	// No hub holds a runner: every runner is offline.
	mustWrite(t, s, func(tx store.Tx) error { return tx.ExtendOfflineLeases(at(45_000), at(0)) })
	equal(t, "leases after ExtendOfflineLeases(45s)", leases(), map[string]time.Time{
		"a-offered": at(45_000), "a-running": at(60_000), "a-done": at(5_000), "a-other": at(45_000), "a-lost": at(1_000),
	})
}

// testMissingReferences: a row that names a missing parent is refused as
// not found, so dangling attempts, logs and events cannot exist.
func testMissingReferences(t *testing.T, s store.Store) {
	seed(t, s)
	for _, tc := range []struct {
		name string
		fn   func(store.Tx) error
	}{
		{"runner of missing owner", func(tx store.Tx) error { return tx.InsertRunner(runner("r-2", "box-2", "u-9")) }},
		{"job of missing requester", func(tx store.Tx) error { return tx.InsertJob(newJob("j-2", "u-9", job.Queued, 0)) }},
		{"attempt of missing job", func(tx store.Tx) error {
			return tx.InsertAttempt(attempt("a-1", "j-9", "r-1", 1, job.AttemptOffered, 0))
		}},
		{"attempt on missing runner", func(tx store.Tx) error {
			return tx.InsertAttempt(attempt("a-1", "j-1", "r-9", 1, job.AttemptOffered, 0))
		}},
		{"log of missing attempt", func(tx store.Tx) error { return tx.AppendLog("a-9", 0, []byte("x")) }},
		{"context file of missing job", func(tx store.Tx) error {
			return tx.InsertContextFile("j-9", store.ContextFile{Name: "a.txt", Data: []byte("x")})
		}},
		{"question of missing job", func(tx store.Tx) error {
			return tx.InsertQuestion(question("q-1", "j-9", "a-1", 0))
		}},
		{"question of missing attempt", func(tx store.Tx) error {
			return tx.InsertQuestion(question("q-1", "j-1", "a-9", 0))
		}},
		{"event of missing job", func(tx store.Tx) error {
			_, err := tx.AddEvent(store.Event{JobID: "j-9", At: at(0), Kind: "created"})
			return err
		}},
		{"share of missing runner", func(tx store.Tx) error {
			return tx.PutShare(store.Share{RunnerID: "r-9", Kind: store.ShareUser, Subject: "u-1", CreatedAt: at(0)})
		}},
		{"publication of missing job", func(tx store.Tx) error {
			return tx.PutPublication(publication("j-9", store.PublicationPending, 0))
		}},
		{"pipeline of missing requester", func(tx store.Tx) error {
			return tx.InsertPipeline(pipeline("p-1", "u-9", "web", store.PipelineRunning, 0))
		}},
		{"run of missing pipeline", func(tx store.Tx) error { return tx.PutPipelineRun(pipelineRun("p-9", "fix#1", "j-1", 0)) }},
		{"event of missing pipeline", func(tx store.Tx) error {
			_, err := tx.AddPipelineEvent(store.PipelineEvent{PipelineID: "p-9", At: at(0), Kind: "started"})
			return err
		}},
		{"member of missing project", func(tx store.Tx) error { return tx.AddMember("nope", "u-1", at(0)) }},
		{"missing member of project", func(tx store.Tx) error {
			return errors.Join(tx.PutProject(store.Project{Name: "web", CreatedAt: at(0), UpdatedAt: at(0)}),
				tx.AddMember("web", "u-9", at(0)))
		}},
		{"project of missing owner", func(tx store.Tx) error {
			return tx.PutProject(store.Project{Name: "web", OwnerID: "u-9", CreatedAt: at(0), UpdatedAt: at(0)})
		}},
	} {
		writeErr(t, s, tc.name, store.ErrNotFound, tc.fn)
	}
}

func testLogs(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertAttempt(attempt("a-1", "j-1", "r-1", 1, job.AttemptRunning, 0)),
			tx.InsertAttempt(attempt("a-2", "j-1", "r-1", 2, job.AttemptRunning, 0)),
			tx.AppendLog("a-1", 0, []byte("hello ")),
			tx.AppendLog("a-2", 0, []byte("other attempt")),
		)
	})
	// Appends in separate transactions, as a runner streams them.
	mustWrite(t, s, func(tx store.Tx) error { return tx.AppendLog("a-1", 6, []byte("wonderful ")) })
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.AppendLog("a-1", 16, []byte("world")), tx.AppendLog("a-1", 21, nil))
	})
	const whole = "hello wonderful world"
	for _, tc := range []struct {
		offset int64
		max    int
		want   string
	}{
		{0, 100, whole},
		{0, 21, whole},
		{0, 3, "hel"},
		{0, 6, "hello "},
		{3, 5, "lo wo"},
		{6, 10, "wonderful "},
		{10, 20, "erful world"},
		{5, 12, " wonderful w"},
		{20, 100, "d"},
		{21, 10, ""},
		{100, 10, ""},
		{0, 0, ""},
	} {
		got := get(t, s, func(tx store.Tx) ([]byte, error) { return tx.ReadLog("a-1", tc.offset, tc.max) })
		if string(got) != tc.want || got == nil {
			t.Errorf("ReadLog(a-1, %d, %d) = %q (nil %v), want %q", tc.offset, tc.max, got, got == nil, tc.want)
		}
	}
	equal(t, "ReadLog(a-2)", string(get(t, s, func(tx store.Tx) ([]byte, error) { return tx.ReadLog("a-2", 0, 100) })), "other attempt")
	writeErr(t, s, "append at an existing offset", store.ErrConflict, func(tx store.Tx) error {
		return tx.AppendLog("a-1", 16, []byte("again"))
	})

	// A deleted log is empty and can be sent again from 0; other attempts
	// keep theirs.
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.DeleteLog("a-1"), tx.DeleteLog("a-1"), tx.DeleteLog("a-9"))
	})
	equal(t, "ReadLog(a-1) after DeleteLog", string(get(t, s, func(tx store.Tx) ([]byte, error) { return tx.ReadLog("a-1", 0, 100) })), "")
	mustWrite(t, s, func(tx store.Tx) error { return tx.AppendLog("a-1", 0, []byte("resent")) })
	equal(t, "ReadLog(a-1) after resend", string(get(t, s, func(tx store.Tx) ([]byte, error) { return tx.ReadLog("a-1", 0, 100) })), "resent")
	equal(t, "ReadLog(a-2) after DeleteLog(a-1)", string(get(t, s, func(tx store.Tx) ([]byte, error) { return tx.ReadLog("a-2", 0, 100) })), "other attempt")
}

// testLogsRandom appends random chunks and reads random windows, checking
// them against the same bytes kept in memory.
func testLogsRandom(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		return tx.InsertAttempt(attempt("a-1", "j-1", "r-1", 1, job.AttemptRunning, 0))
	})
	rng := rand.New(rand.NewPCG(1, 2))
	var want []byte
	mustWrite(t, s, func(tx store.Tx) error {
		for range 60 {
			chunk := make([]byte, rng.IntN(300))
			for i := range chunk {
				chunk[i] = byte(rng.IntN(256))
			}
			if err := tx.AppendLog("a-1", int64(len(want)), chunk); err != nil {
				return err
			}
			want = append(want, chunk...)
		}
		return nil
	})
	mustRead(t, s, func(tx store.Tx) error {
		for range 200 {
			off := rng.Int64N(int64(len(want)) + 10)
			n := rng.IntN(1000) + 1
			got, err := tx.ReadLog("a-1", off, n)
			if err != nil {
				return err
			}
			w := []byte{}
			if off < int64(len(want)) {
				w = want[off:min(int64(len(want)), off+int64(n))]
			}
			if !bytes.Equal(got, w) {
				t.Errorf("ReadLog(%d, %d): %d bytes, want %d", off, n, len(got), len(w))
			}
		}
		return nil
	})
}

func testEvents(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertJob(newJob("j-2", "u-1", job.Queued, 0)) })
	// Events of two jobs interleaved.
	want := addNumbered(t, s, "AddEvent", []string{"j-1", "j-2", "j-1", "j-1", "j-2"},
		func(tx store.Tx, i int, jobID string) (e store.Event, err error) {
			e = store.Event{JobID: jobID, At: at(int64(i)), Kind: fmt.Sprintf("kind-%d", i), Actor: "u-1", Message: "msg " + jobID}
			e.Seq, err = tx.AddEvent(e)
			return e, err
		}, func(e store.Event) int64 { return e.Seq })
	events := func(afterSeq int64, limit int) []store.Event {
		return get(t, s, func(tx store.Tx) ([]store.Event, error) { return tx.Events("j-1", afterSeq, limit) })
	}
	equal(t, "Events(j-1, 0, 0)", events(0, 0), want)
	equal(t, "Events(j-1, 0, 2)", events(0, 2), want[:2])
	equal(t, "Events(j-1, after first)", events(want[0].Seq, 0), want[1:])
	equal(t, "Events(j-1, after last)", len(events(want[2].Seq, 10)), 0)
	equal(t, "Events(missing job)", len(get(t, s, func(tx store.Tx) ([]store.Event, error) { return tx.Events("j-9", 0, 0) })), 0)
}

// addNumbered adds one event per owner with add, each in its own
// transaction, checks that their numbers (seq) increase, and returns the
// events of owners[0].
func addNumbered[E any](t *testing.T, s store.Store, what string, owners []string,
	add func(tx store.Tx, i int, owner string) (E, error), seq func(E) int64) []E {
	t.Helper()
	var mine []E
	var seqs []int64
	for i, owner := range owners {
		var e E
		mustWrite(t, s, func(tx store.Tx) (err error) { e, err = add(tx, i, owner); return err })
		seqs = append(seqs, seq(e))
		if owner == owners[0] {
			mine = append(mine, e)
		}
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Errorf("%s sequence numbers %v do not increase", what, seqs)
			break
		}
	}
	return mine
}

func testRequests(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.PutRequest("r-1", "q-1", []byte(`{"ok":true}`), at(100)),
			tx.PutRequest("r-1", "q-2", []byte("second"), at(200)),
			tx.PutRequest("r-2", "q-1", []byte("other runner"), at(50)),
			tx.PutRequest("r-2", "q-empty", nil, at(300)),
		)
	})
	type result struct {
		Response string
		Found    bool
	}
	lookup := func(runnerID, requestID string) result {
		return get(t, s, func(tx store.Tx) (result, error) {
			resp, found, err := tx.Request(runnerID, requestID)
			return result{string(resp), found}, err
		})
	}
	equal(t, "Request(r-1, q-1)", lookup("r-1", "q-1"), result{`{"ok":true}`, true})
	equal(t, "Request(r-2, q-1)", lookup("r-2", "q-1"), result{"other runner", true})
	equal(t, "Request(r-2, q-empty)", lookup("r-2", "q-empty"), result{"", true})
	equal(t, "Request(missing)", lookup("r-1", "q-9"), result{"", false})
	writeErr(t, s, "PutRequest twice", store.ErrConflict, func(tx store.Tx) error {
		return tx.PutRequest("r-1", "q-1", []byte("again"), at(400))
	})

	mustWrite(t, s, func(tx store.Tx) error { return tx.PruneRequests(at(200)) })
	for _, tc := range []struct {
		runner, request string
		found           bool
	}{
		{"r-2", "q-1", false},
		{"r-1", "q-1", false},
		{"r-1", "q-2", true}, // recorded exactly at the cut-off: kept
		{"r-2", "q-empty", true},
	} {
		equal(t, "after prune, Request("+tc.runner+", "+tc.request+") found", lookup(tc.runner, tc.request).Found, tc.found)
	}
}

func testMeta(t *testing.T, s store.Store) {
	readErr(t, s, "Meta(missing)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.Meta("admin"); return err })
	mustWrite(t, s, func(tx store.Tx) error { return errors.Join(tx.SetMeta("admin", "u-1"), tx.SetMeta("other", "")) })
	equal(t, "Meta(admin)", get(t, s, func(tx store.Tx) (string, error) { return tx.Meta("admin") }), "u-1")
	equal(t, "Meta(other)", get(t, s, func(tx store.Tx) (string, error) { return tx.Meta("other") }), "")
	mustWrite(t, s, func(tx store.Tx) error { return tx.SetMeta("admin", "u-2") })
	equal(t, "Meta(admin) overwritten", get(t, s, func(tx store.Tx) (string, error) { return tx.Meta("admin") }), "u-2")
}

type testError struct{ code int }

func (e *testError) Error() string { return fmt.Sprintf("test error %d", e.code) }

func testWriteErrorRollsBack(t *testing.T, s store.Store) {
	seed(t, s)
	sentinel := &testError{code: 7}
	err := s.Write(ctx(t), func(tx store.Tx) error {
		j := newJob("j-1", "u-1", job.Failed, 0)
		j.Epoch = 99
		if err := errors.Join(
			tx.InsertUser(user("u-2", "bob")),
			tx.UpdateJob(j),
			tx.InsertJob(newJob("j-2", "u-1", job.Queued, 0)),
			tx.SetMeta("k", "v"),
			tx.PutRequest("r-1", "q-1", []byte("x"), at(0)),
		); err != nil {
			return err
		}
		if _, err := tx.AddEvent(store.Event{JobID: "j-1", At: at(0), Kind: "k"}); err != nil {
			return err
		}
		return sentinel
	})
	if err != error(sentinel) { // the very error, not wrapped: callers use errors.As on it
		t.Fatalf("Write returned %v, want the fn's error unchanged", err)
	}
	mustRead(t, s, func(tx store.Tx) error {
		if _, err := tx.User("u-2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("user inserted in a failed Write exists (err %v)", err)
		}
		if _, err := tx.Job("j-2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("job inserted in a failed Write exists (err %v)", err)
		}
		if j, err := tx.Job("j-1"); err != nil || j.Epoch != 2 || j.State != job.Running {
			t.Errorf("job updated in a failed Write changed: %+v, %v", j, err)
		}
		if _, err := tx.Meta("k"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("meta set in a failed Write exists (err %v)", err)
		}
		if _, found, err := tx.Request("r-1", "q-1"); found || err != nil {
			t.Errorf("request put in a failed Write exists (err %v)", err)
		}
		if es, err := tx.Events("j-1", 0, 0); len(es) != 0 || err != nil {
			t.Errorf("events added in a failed Write exist: %v, %v", es, err)
		}
		return nil
	})
	// The store still works after the rollback.
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertUser(user("u-2", "bob")) })
}

func testCancelledContext(t *testing.T, s store.Store) {
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	ran := false
	err := s.Write(c, func(tx store.Tx) error {
		ran = true
		return tx.InsertUser(user("u-1", "alice"))
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a cancelled context: %v, want context.Canceled", err)
	}
	if err := s.Read(c, func(store.Tx) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with a cancelled context: %v, want context.Canceled", err)
	}
	if ran {
		t.Errorf("Write ran fn with a cancelled context")
	}
	readErr(t, s, "user of a cancelled Write", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.User("u-1"); return err })
}

// testReadDuringWrite: a Read neither waits for an open Write nor sees its
// uncommitted rows.
func testReadDuringWrite(t *testing.T, s store.Store) {
	seed(t, s)
	readDuringWrite(t, s, "Read", s.Read)
}

// readDuringWrite checks that read, while a Write is open, neither waits
// for it nor sees what it has not committed.
func readDuringWrite(t *testing.T, s store.Store, what string, read func(context.Context, func(store.Tx) error) error) {
	c, cancel := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel()
	mustWrite(t, s, func(tx store.Tx) error {
		if err := tx.InsertUser(user("u-2", "bob")); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() {
			done <- read(c, func(rtx store.Tx) error {
				if _, err := rtx.User("u-2"); !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("uncommitted user visible to a %s (err %v)", what, err)
				}
				_, err := rtx.User("u-1")
				return err
			})
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s during Write: %v", what, err)
			}
		case <-c.Done():
			t.Errorf("%s blocked behind an open Write", what)
		}
		return nil
	})
}

// testReadEach: ReadEach sees what was committed, never what an open
// Write has not, does not wait for that Write, returns fn's error mapped,
// and refuses a write.
func testReadEach(t *testing.T, s store.Store) {
	er, ok := s.(store.EachReader) // every engine's
	if !ok {
		t.Fatalf("%T has no ReadEach", s)
	}
	seed(t, s)
	if err := er.ReadEach(ctx(t), func(tx store.Tx) error {
		u, err := tx.User("u-1")
		if err == nil && u.Name != "alice" {
			err = fmt.Errorf("user u-1 is %q, want alice", u.Name)
		}
		return err
	}); err != nil {
		t.Errorf("ReadEach of a committed user: %v", err)
	}
	err := er.ReadEach(ctx(t), func(tx store.Tx) error { _, err := tx.User("u-9"); return err })
	wantErr(t, "ReadEach of a missing user", err, store.ErrNotFound)
	if err := er.ReadEach(ctx(t), func(tx store.Tx) error { return tx.InsertUser(user("u-3", "carol")) }); err == nil {
		t.Errorf("a write in ReadEach went through")
	}
	readErr(t, s, "the user a ReadEach wrote", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.User("u-3"); return err })
	readDuringWrite(t, s, "ReadEach", er.ReadEach)
}

// testConcurrentWrites: read-modify-write transactions from many goroutines
// lose no update, so writes are serialized; readers meanwhile only ever see
// committed, increasing values.
func testConcurrentWrites(t *testing.T, s store.Store) {
	ConcurrentWrites(t, s, s, s, s, s, s, s, s, s)
}

// ConcurrentWrites seeds s, then runs one goroutine of read-modify-write
// increments of one row per writer (the same store several times, or
// several stores on one database, as several hubs are) while s reads: no
// update may be lost, and reads see only committed, increasing values.
func ConcurrentWrites(t *testing.T, s store.Store, writers ...store.Store) {
	seed(t, s)
	const perWorker = 15
	workers := len(writers)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readerErr error
	var readerWG sync.WaitGroup
	readerWG.Go(func() {
		last := int64(-1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var epoch int64
			if err := s.Read(ctx(t), func(tx store.Tx) error {
				j, err := tx.Job("j-1")
				epoch = j.Epoch
				return err
			}); err != nil {
				readerErr = err
				return
			}
			if epoch < last {
				readerErr = fmt.Errorf("epoch went back from %d to %d", last, epoch)
				return
			}
			last = epoch
		}
	})
	errs := make(chan error, workers)
	for _, w := range writers {
		wg.Go(func() {
			for range perWorker {
				if err := w.Write(ctx(t), func(tx store.Tx) error {
					j, err := tx.Job("j-1")
					if err != nil {
						return err
					}
					j.Epoch++
					return tx.UpdateJob(j)
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readerWG.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Write: %v", err)
	}
	if readerErr != nil {
		t.Errorf("concurrent Read: %v", readerErr)
	}
	j := get(t, s, func(tx store.Tx) (store.Job, error) { return tx.Job("j-1") })
	if want := int64(2 + workers*perWorker); j.Epoch != want {
		t.Errorf("after %d increments from 2, epoch = %d, want %d", workers*perWorker, j.Epoch, want)
	}
}

func testProjects(t *testing.T, s store.Store) {
	readErr(t, s, "Project(missing)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.Project("p"); return err })
	hosted := store.Project{Name: "web", OwnerID: "u-1", CreatedAt: at(1), UpdatedAt: at(1)}
	mapped := store.Project{Name: "api", Remote: "https://git.example/api.git", CreatedAt: at(2), UpdatedAt: at(3)}
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertUser(user("u-1", "alice")), tx.PutProject(hosted), tx.PutProject(mapped))
	})
	equal(t, "Project(web)", get(t, s, func(tx store.Tx) (store.Project, error) { return tx.Project("web") }), hosted)
	equal(t, "Projects()", get(t, s, func(tx store.Tx) ([]store.Project, error) { return tx.Projects() }),
		[]store.Project{mapped, hosted})

	// Putting again replaces the remote and the update time, never the
	// creation time nor the owner (testProjectMembers has more).
	again := store.Project{Name: "web", Remote: "file:///srv/web.git", CreatedAt: at(50), UpdatedAt: at(51)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutProject(again) })
	again.CreatedAt, again.OwnerID = hosted.CreatedAt, hosted.OwnerID
	equal(t, "Project(web) mapped", get(t, s, func(tx store.Tx) (store.Project, error) { return tx.Project("web") }), again)
	again.Remote, again.UpdatedAt = "", at(60)
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutProject(again) })
	equal(t, "Project(web) unmapped", get(t, s, func(tx store.Tx) (store.Project, error) { return tx.Project("web") }), again)
}

// A project's config is replaced whole by SetProjectConfig and kept by
// PutProject; a project that does not exist has none to set.
func testProjectConfig(t *testing.T, s store.Store) {
	prj := store.Project{Name: "web", OwnerID: "u-1", CreatedAt: at(1), UpdatedAt: at(1)}
	mustWrite(t, s, func(tx store.Tx) error { return errors.Join(tx.InsertUser(user("u-1", "alice")), tx.PutProject(prj)) })
	cfg := store.ProjectConfig{SetupNetwork: []string{"go", "npm"}, AgentNetwork: []string{"go"},
		SetupCommands: []string{"go mod download", "npm ci"}, SetupTimeout: 90 * time.Second, Caches: []string{"go", "vendor/x"},
		Large: true, Sparse: []string{"src"}}
	mustWrite(t, s, func(tx store.Tx) error { return tx.SetProjectConfig("web", cfg, at(5)) })
	prj.Config, prj.UpdatedAt = cfg, at(5)
	equal(t, "Project(web) configured", get(t, s, func(tx store.Tx) (store.Project, error) { return tx.Project("web") }), prj)

	again := store.Project{Name: "web", Remote: "file:///srv/web.git", CreatedAt: at(50), UpdatedAt: at(51)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutProject(again) })
	prj.Remote, prj.UpdatedAt = again.Remote, again.UpdatedAt
	equal(t, "Project(web) remapped keeps its config", get(t, s, func(tx store.Tx) (store.Project, error) { return tx.Project("web") }), prj)

	mustWrite(t, s, func(tx store.Tx) error { return tx.SetProjectConfig("web", store.ProjectConfig{}, at(60)) })
	prj.Config, prj.UpdatedAt = store.ProjectConfig{}, at(60)
	equal(t, "Project(web) cleared", get(t, s, func(tx store.Tx) (store.Project, error) { return tx.Project("web") }), prj)
	writeErr(t, s, "SetProjectConfig(missing)", store.ErrNotFound, func(tx store.Tx) error {
		return tx.SetProjectConfig("nope", cfg, at(70))
	})
}

func testContextFiles(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertJob(newJob("j-2", "u-1", job.Queued, 5)) })
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, 1<<18) // 1 MiB with NULs and high bytes
	files := []store.ContextFile{
		{Name: "notes/b.md", Size: 5, Data: []byte("hello")},
		{Name: "a.bin", Size: int64(len(big)), Data: big},
		{Name: "empty.txt", Size: 0, Data: []byte{}},
	}
	mustWrite(t, s, func(tx store.Tx) error {
		var errs []error
		for _, f := range files {
			errs = append(errs, tx.InsertContextFile("j-1", f))
		}
		return errors.Join(errs...)
	})
	want := []store.ContextFile{files[1], files[2], files[0]} // by name
	got := get(t, s, func(tx store.Tx) ([]store.ContextFile, error) { return tx.ContextFiles("j-1", true) })
	if len(got) != len(want) {
		t.Fatalf("ContextFiles: got %d files, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Size != want[i].Size || !bytes.Equal(got[i].Data, want[i].Data) || got[i].Data == nil {
			t.Errorf("ContextFiles[%d]: got %s (%d bytes), want %s (%d bytes)", i, got[i].Name, got[i].Size, want[i].Name, want[i].Size)
		}
	}
	names := get(t, s, func(tx store.Tx) ([]store.ContextFile, error) { return tx.ContextFiles("j-1", false) })
	for i := range want {
		want[i].Data = nil
	}
	equal(t, "ContextFiles without data", names, want)
	equal(t, "ContextFiles of another job", get(t, s, func(tx store.Tx) ([]store.ContextFile, error) {
		return tx.ContextFiles("j-2", true)
	}), nil)
	writeErr(t, s, "duplicate context file", store.ErrConflict, func(tx store.Tx) error {
		return tx.InsertContextFile("j-1", store.ContextFile{Name: "a.bin", Data: []byte("x")})
	})
}

func question(id, jobID, attemptID string, asked int64) store.Question {
	return store.Question{
		ID: id, JobID: jobID, AttemptID: attemptID, Text: "Which database?\nünïcode", Choices: []string{"sqlite", "postgres"},
		AskedAt: at(asked), ExpiresAt: ptr(at(asked + 1000)), Answer: "sqlite", Choice: ptr(1),
		AnsweredBy: "u-1", AnsweredAt: ptr(at(asked + 10)), ApprovedBy: "u-1", ApprovedAt: ptr(at(asked + 20)),
	}
}

func testQuestions(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertAttempt(attempt("a-1", "j-1", "r-1", 1, job.AttemptAsked, 0)),
			tx.InsertAttempt(attempt("a-2", "j-1", "r-1", 2, job.AttemptAsked, 0)),
		)
	})
	full := question("q-1", "j-1", "a-1", 5)
	bare := store.Question{ID: "q-2", JobID: "j-1", AttemptID: "a-2", Text: "Go on?", AskedAt: at(3)}
	mustWrite(t, s, func(tx store.Tx) error { return errors.Join(tx.InsertQuestion(full), tx.InsertQuestion(bare)) })
	equal(t, "Questions(j-1)", get(t, s, func(tx store.Tx) ([]store.Question, error) { return tx.Questions("j-1") }),
		[]store.Question{bare, full})
	equal(t, "Questions(missing job)", len(get(t, s, func(tx store.Tx) ([]store.Question, error) { return tx.Questions("j-9") })), 0)

	// Answering and approving are updates; a choice of 0 is not nil, and
	// every optional field goes back to nil.
	bare.Answer, bare.Choice, bare.AnsweredBy, bare.AnsweredAt = "yes", ptr(0), "u-1", ptr(at(7))
	full.ExpiresAt, full.Choice, full.AnsweredAt, full.ApprovedAt, full.Answer, full.AnsweredBy, full.ApprovedBy = nil, nil, nil, nil, "", "", ""
	mustWrite(t, s, func(tx store.Tx) error { return errors.Join(tx.UpdateQuestion(bare), tx.UpdateQuestion(full)) })
	equal(t, "updated Questions(j-1)", get(t, s, func(tx store.Tx) ([]store.Question, error) { return tx.Questions("j-1") }),
		[]store.Question{bare, full})

	writeErr(t, s, "UpdateQuestion(missing)", store.ErrNotFound, func(tx store.Tx) error {
		return tx.UpdateQuestion(question("q-9", "j-1", "a-1", 0))
	})
	writeErr(t, s, "duplicate question id", store.ErrConflict, func(tx store.Tx) error {
		return tx.InsertQuestion(question("q-1", "j-1", "a-2", 0))
	})
	writeErr(t, s, "second question of one attempt", store.ErrConflict, func(tx store.Tx) error {
		return tx.InsertQuestion(question("q-3", "j-1", "a-1", 0))
	})
}

func testOpenQuestions(t *testing.T, s store.Store) {
	seed(t, s)
	// j-1 (alice) and j-2 (bob) wait on the questions of their current
	// attempts; j-3 asked earlier but runs again; j-4 waits, but its answer
	// is approved (about to be requeued in the same transaction).
	open := func(id, jobID, attemptID string, asked int64, expires *time.Time) store.Question {
		return store.Question{ID: id, JobID: jobID, AttemptID: attemptID, Text: "?", AskedAt: at(asked), ExpiresAt: expires}
	}
	q1 := open("q-1", "j-1", "a-1", 10, ptr(at(100)))
	q2 := open("q-2", "j-2", "a-2", 5, nil)
	q3 := open("q-3", "j-3", "a-3", 1, ptr(at(50)))
	q4 := open("q-4", "j-4", "a-4", 2, ptr(at(50)))
	q4.Answer, q4.AnsweredBy, q4.AnsweredAt, q4.ApprovedBy, q4.ApprovedAt = "ok", "u-1", ptr(at(3)), "u-1", ptr(at(3))
	q2b := open("q-2b", "j-2", "a-2b", 1, ptr(at(1))) // an earlier attempt's question
	mustWrite(t, s, func(tx store.Tx) error {
		errs := []error{tx.InsertUser(user("u-2", "bob"))}
		for _, j := range []struct{ id, owner, attempt string }{
			{"j-1", "u-1", "a-1"}, {"j-2", "u-2", "a-2"}, {"j-3", "u-1", "a-3"}, {"j-4", "u-1", "a-4"},
		} {
			jj := newJob(j.id, j.owner, job.Waiting, 0)
			jj.AttemptID = j.attempt
			if j.id == "j-1" {
				errs = append(errs, tx.UpdateJob(jj))
			} else {
				if j.id == "j-3" {
					jj.State = job.Running
				}
				errs = append(errs, tx.InsertJob(jj))
			}
		}
		for _, a := range []struct{ id, jobID string }{{"a-1", "j-1"}, {"a-2", "j-2"}, {"a-2b", "j-2"}, {"a-3", "j-3"}, {"a-4", "j-4"}} {
			errs = append(errs, tx.InsertAttempt(attempt(a.id, a.jobID, "r-1", int64(len(a.id)), job.AttemptAsked, 0)))
		}
		for _, q := range []store.Question{q1, q2, q3, q4, q2b} {
			errs = append(errs, tx.InsertQuestion(q))
		}
		return errors.Join(errs...)
	})
	list := func(f store.QuestionFilter) []string {
		qs := get(t, s, func(tx store.Tx) ([]store.Question, error) { return tx.OpenQuestions(f) })
		return ids(qs, func(q store.Question) string { return q.ID })
	}
	equal(t, "OpenQuestions(all)", list(store.QuestionFilter{}), []string{"q-2", "q-1"})
	equal(t, "OpenQuestions(alice)", list(store.QuestionFilter{RequesterID: "u-1"}), []string{"q-1"})
	equal(t, "OpenQuestions(bob)", list(store.QuestionFilter{RequesterID: "u-2"}), []string{"q-2"})
	equal(t, "OpenQuestions(expired by 100)", list(store.QuestionFilter{ExpiredBefore: at(100)}), nil)
	equal(t, "OpenQuestions(expired by 101)", list(store.QuestionFilter{ExpiredBefore: at(101)}), []string{"q-1"})

	// Another user's answer is not an approval: the question stays open.
	q2.Answer, q2.AnsweredBy, q2.AnsweredAt = "maybe", "u-1", ptr(at(20))
	mustWrite(t, s, func(tx store.Tx) error { return tx.UpdateQuestion(q2) })
	equal(t, "OpenQuestions(bob) with an unapproved answer", list(store.QuestionFilter{RequesterID: "u-2"}), []string{"q-2"})
}

// Opened is what an implementation's test helper returns for its Open: s,
// closed when the test ends, or the test fails on err.
func Opened[S store.Store](t testing.TB, s S, err error) S {
	t.Helper()
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}
