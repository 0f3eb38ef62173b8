package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/store"
)

func hubRow(id string, started, seen int64, conns int) store.Hub {
	return store.Hub{ID: id, URL: "https://" + id + ".example", Version: "v1.0.0",
		StartedAt: at(started), LastSeen: at(seen), Conns: conns}
}

// testHubs: a hub's row is inserted, replaced by its heartbeat, deleted,
// and pruned once not seen.
func testHubs(t *testing.T, s store.Store) {
	hubs := func() []store.Hub { return get(t, s, func(tx store.Tx) ([]store.Hub, error) { return tx.Hubs() }) }
	equal(t, "no hubs", hubs(), nil)
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutHub(hubRow("h-b", 2, 2, 0)), tx.PutHub(hubRow("h-a", 1, 1, 0)), tx.PutHub(hubRow("h-c", 3, 3, 0)))
	})
	beat := hubRow("h-a", 1, 5_000, 7)
	beat.URL, beat.Version = "https://a2.example", "v1.0.1"
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutHub(beat) })
	equal(t, "hubs after a heartbeat", hubs(), []store.Hub{beat, hubRow("h-b", 2, 2, 0), hubRow("h-c", 3, 3, 0)})
	mustWrite(t, s, func(tx store.Tx) error { return errors.Join(tx.DeleteHub("h-b"), tx.DeleteHub("h-missing")) })
	equal(t, "hubs after a delete", hubs(), []store.Hub{beat, hubRow("h-c", 3, 3, 0)})
	mustWrite(t, s, func(tx store.Tx) error { return tx.PruneHubs(at(4)) })
	equal(t, "hubs after a prune", hubs(), []store.Hub{beat})
}

// testRunnerHolders: a runner is online only while a live hub holds it; a
// release by a hub that no longer holds it changes nothing; leases of
// offline runners are extended, those of held ones not.
func testRunnerHolders(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertRunner(runner("r-2", "box-2", "u-1")),
			tx.InsertRunner(runner("r-3", "box-3", "u-1")),
			tx.PutHub(hubRow("h-live", 0, 10_000, 2)),
			tx.PutHub(hubRow("h-dead", 0, 1_000, 1)),
			tx.InsertAttempt(attempt("a-1", "j-1", "r-1", 1, job.AttemptRunning, 2_000)),
			tx.InsertAttempt(attempt("a-2", "j-1", "r-2", 2, job.AttemptRunning, 2_000)),
			tx.InsertAttempt(attempt("a-3", "j-1", "r-3", 3, job.AttemptOffered, 2_000)),
			tx.HoldRunner("r-1", "h-dead", at(1)),
			tx.HoldRunner("r-1", "h-live", at(2)), // reconnected elsewhere
			tx.HoldRunner("r-2", "h-dead", at(1)),
		)
	})
	liveSince := at(5_000)
	held := func() map[string]string {
		return get(t, s, func(tx store.Tx) (map[string]string, error) { return tx.HeldRunners(liveSince) })
	}
	holder := func(id string) string {
		return get(t, s, func(tx store.Tx) (string, error) { return tx.RunnerHolder(id, liveSince) })
	}
	equal(t, "held runners", held(), map[string]string{"r-1": "h-live"})
	equal(t, "holder of r-1", holder("r-1"), "h-live")
	equal(t, "holder of r-2 (its hub is not live)", holder("r-2"), "")
	equal(t, "holder of r-3 (none)", holder("r-3"), "")
	equal(t, "holder of a missing runner", holder("r-9"), "")

	mustWrite(t, s, func(tx store.Tx) error { return tx.ExtendOfflineLeases(at(30_000), liveSince) })
	lease := func(id string) time.Time {
		return get(t, s, func(tx store.Tx) (store.Attempt, error) { return tx.Attempt(id) }).LeaseUntil
	}
	equal(t, "lease of the held runner's attempt", lease("a-1"), at(2_000))
	equal(t, "lease of the dead hub's runner's attempt", lease("a-2"), at(30_000))
	equal(t, "lease of the unheld runner's offer", lease("a-3"), at(30_000))

	// The old hub's late release leaves the new holder.
	mustWrite(t, s, func(tx store.Tx) error { return tx.ReleaseRunner("r-1", "h-dead") })
	equal(t, "holder of r-1 after a stale release", holder("r-1"), "h-live")
	mustWrite(t, s, func(tx store.Tx) error { return tx.ReleaseRunner("r-1", "h-live") })
	equal(t, "held runners after a release", held(), nil)

	// Deleting or pruning a hub forgets what it held.
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.HoldRunner("r-1", "h-live", at(3)), tx.HoldRunner("r-3", "h-live", at(3)))
	})
	equal(t, "held runners again", held(), map[string]string{"r-1": "h-live", "r-3": "h-live"})
	mustWrite(t, s, func(tx store.Tx) error { return tx.PruneHubs(liveSince) })
	equal(t, "r-2's row of the pruned hub", get(t, s, func(tx store.Tx) (string, error) { return tx.RunnerHolder("r-2", at(0)) }), "")
	mustWrite(t, s, func(tx store.Tx) error { return tx.DeleteHub("h-live") })
	equal(t, "held runners after the hub left", held(), nil)
	writeErr(t, s, "hold a missing runner", store.ErrNotFound, func(tx store.Tx) error { return tx.HoldRunner("r-9", "h-live", at(1)) })
}

// testRunnersLeft: a stopping hub's departures, more runners than one
// statement names: each one's last contact, its holding released unless
// another hub holds it now; unknown ids and other runners are untouched.
func testRunnersLeft(t *testing.T, s store.Store) {
	const n = 1203 // two full statements and a part
	ids := make([]string, 0, n+1)
	mustWrite(t, s, func(tx store.Tx) error {
		if err := errors.Join(tx.InsertUser(user("u-1", "alice")), tx.PutHub(hubRow("h-a", 0, 10_000, n)),
			tx.PutHub(hubRow("h-b", 0, 10_000, 1))); err != nil {
			return err
		}
		for i := range n {
			id := fmt.Sprintf("r-%04d", i)
			ids = append(ids, id)
			if err := errors.Join(tx.InsertRunner(runner(id, "box-"+id, "u-1")), tx.HoldRunner(id, "h-a", at(5))); err != nil {
				return err
			}
		}
		// r-0600 reconnected to h-b; r-stay is h-a's and does not leave.
		return errors.Join(tx.HoldRunner("r-0600", "h-b", at(6)), tx.InsertRunner(runner("r-stay", "box-stay", "u-1")),
			tx.HoldRunner("r-stay", "h-a", at(5)))
	})
	ids = append(ids, "r-gone") // removed meanwhile
	mustWrite(t, s, func(tx store.Tx) error { return tx.RunnersLeft(ids, "h-a", at(7_000)) })
	held := get(t, s, func(tx store.Tx) (map[string]string, error) { return tx.HeldRunners(at(0)) })
	equal(t, "held runners after the departures", held, map[string]string{"r-0600": "h-b", "r-stay": "h-a"})
	for _, id := range []string{"r-0000", "r-0499", "r-0500", "r-1202"} {
		r := get(t, s, func(tx store.Tx) (store.Runner, error) { return tx.Runner(id) })
		equal(t, "last contact of "+id, *r.LastSeen, at(7_000))
	}
	r := get(t, s, func(tx store.Tx) (store.Runner, error) { return tx.Runner("r-stay") })
	equal(t, "last contact of a runner that stayed", *r.LastSeen, at(3))
	mustWrite(t, s, func(tx store.Tx) error { return tx.RunnersLeft(nil, "h-a", at(8_000)) })
}

// testRunnerTokens: every runner not revoked, with its token's hash.
func testRunnerTokens(t *testing.T, s store.Store) {
	equal(t, "tokens of no runners", get(t, s, func(tx store.Tx) (map[string]string, error) { return tx.RunnerTokens() }), map[string]string{})
	mustWrite(t, s, func(tx store.Tx) error {
		live, other := runner("r-live", "box-live", "u-1"), runner("r-other", "box-other", "u-1")
		live.RevokedAt, other.RevokedAt = nil, nil
		return errors.Join(tx.InsertUser(user("u-1", "alice")), tx.InsertRunner(live), tx.InsertRunner(other),
			tx.InsertRunner(runner("r-revoked", "box-revoked", "u-1")))
	})
	equal(t, "tokens", get(t, s, func(tx store.Tx) (map[string]string, error) { return tx.RunnerTokens() }),
		map[string]string{"r-live": "hash-r-live", "r-other": "hash-r-other"})
}

// testTokenVersions: a runner update that replaces or revokes its token,
// and only such an update, moves the token version and names the runner
// with its new hash ("" revoked).
func testTokenVersions(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error {
		a, b := runner("r-a", "box-a", "u-1"), runner("r-b", "box-b", "u-1")
		a.RevokedAt, b.RevokedAt = nil, nil
		return errors.Join(tx.InsertUser(user("u-1", "alice")), tx.InsertRunner(a), tx.InsertRunner(b))
	})
	version := func() int64 { return get(t, s, func(tx store.Tx) (int64, error) { return tx.TokenVersion() }) }
	since := func(v int64) map[string]string {
		return get(t, s, func(tx store.Tx) (map[string]string, error) { return tx.TokensChangedSince(v) })
	}
	equal(t, "token version of new runners", version(), int64(0))
	equal(t, "changed since 0, before any change", since(0), map[string]string{})
	update := updateRunner
	for _, tc := range []struct {
		name    string
		write   func(store.Tx) error
		changed map[string]string // nil: the version stays
	}{
		{"connect: slots, labels, last seen, version", update("r-a", func(rn *store.Runner) {
			rn.Slots, rn.Labels, rn.LastSeen, rn.Version = 9, map[string]string{"os": "mac"}, ptr(at(50)), "v2"
		}), nil},
		{"rename, make private", update("r-a", func(rn *store.Runner) { rn.Name, rn.Access = "box-a2", apitypes.AccessPrivate }), nil},
		{"new token", update("r-a", func(rn *store.Runner) { rn.TokenHash = "hash-new" }), map[string]string{"r-a": "hash-new"}},
		{"revoke", update("r-b", func(rn *store.Runner) { rn.RevokedAt = ptr(at(60)) }), map[string]string{"r-b": ""}},
		{"revoked again later", update("r-b", func(rn *store.Runner) { rn.RevokedAt = ptr(at(70)) }), nil},
		{"approved again with a new token", update("r-b", func(rn *store.Runner) { rn.RevokedAt, rn.TokenHash = nil, "hash-b2" }),
			map[string]string{"r-b": "hash-b2"}},
	} {
		versionStep(t, s, "token version", tc.name, nil, tc.write, version, since, tc.changed, map[string]string{})
	}
	equal(t, "every runner whose token changed", since(0), map[string]string{"r-a": "hash-new", "r-b": "hash-b2"})
}

// testLeaderTerm: the first taker starts term 1; its renewals keep the
// term; another hub cannot take it before it expires, and can after; the
// stale holder's renewal then fails; a released term is free at once.
func testLeaderTerm(t *testing.T, s store.Store) {
	_, err := readLeader(t, s)
	wantErr(t, "leader before any term", err, store.ErrNotFound)
	take := func(hub string, now, until int64) store.Leader {
		t.Helper()
		var l store.Leader
		mustWrite(t, s, func(tx store.Tx) (err error) { l, err = tx.TakeLeader(hub, at(now), at(until)); return err })
		return l
	}
	a1 := store.Leader{Holder: "h-a", Term: 1, Since: at(0), Expires: at(1_000)}
	equal(t, "first take", take("h-a", 0, 1_000), a1)
	l, err := readLeader(t, s)
	wantErr(t, "leader", err, nil)
	equal(t, "leader after the first take", l, a1)
	a1.Expires = at(1_500)
	equal(t, "renewal", take("h-a", 500, 1_500), a1)
	equal(t, "another hub before expiry", take("h-b", 1_499, 2_499), a1)
	b2 := store.Leader{Holder: "h-b", Term: 2, Since: at(1_500), Expires: at(2_500)}
	equal(t, "another hub at expiry steals it", take("h-b", 1_500, 2_500), b2)
	equal(t, "the stale holder's renewal fails", take("h-a", 1_600, 2_600), b2)
	mustWrite(t, s, func(tx store.Tx) error { return tx.ReleaseLeader("h-a", at(1_700)) })
	equal(t, "a release by a non-holder changes nothing", take("h-a", 1_700, 2_700), b2)
	mustWrite(t, s, func(tx store.Tx) error { return tx.ReleaseLeader("h-b", at(1_800)) })
	a3 := store.Leader{Holder: "h-a", Term: 3, Since: at(1_800), Expires: at(2_800)}
	equal(t, "a released term is taken at once", take("h-a", 1_800, 2_800), a3)
	mustWrite(t, s, func(tx store.Tx) error { return tx.ReleaseLeader("", at(1_900)) })
	a4 := store.Leader{Holder: "h-a", Term: 4, Since: at(1_900), Expires: at(2_900)}
	equal(t, "its own lapsed term taken again is a new term", take("h-a", 1_900, 2_900), a4)
}

// testLeaderRace: hubs racing for a free term end with one holder, the
// one every racer saw win.
func testLeaderRace(t *testing.T, s store.Store) {
	const n = 8
	var wg sync.WaitGroup
	got := make([]store.Leader, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Write(ctx(t), func(tx store.Tx) (err error) {
				got[i], err = tx.TakeLeader(fmt.Sprintf("h-%d", i), at(0), at(1_000))
				return err
			})
		})
	}
	wg.Wait()
	l, err := readLeader(t, s)
	wantErr(t, "leader", err, nil)
	for i := range n {
		wantErr(t, fmt.Sprintf("take %d", i), errs[i], nil)
		equal(t, fmt.Sprintf("term racer %d saw", i), got[i], l)
	}
	equal(t, "term number", l.Term, int64(1))
}

func readLeader(t *testing.T, s store.Store) (store.Leader, error) {
	t.Helper()
	var l store.Leader
	err := s.Read(ctx(t), func(tx store.Tx) (err error) { l, err = tx.Leader(); return err })
	return l, err
}

// testRunnerStatus: the holding hub's recorded status and the runner's
// active attempts come with the runner while it is held; another hub's
// write changes nothing, a new holding starts with none, a release
// clears it.
func testRunnerStatus(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertRunner(runner("r-2", "box-2", "u-1")),
			tx.PutHub(hubRow("h-a", 0, 10_000, 1)),
			tx.PutHub(hubRow("h-b", 0, 10_000, 1)),
			tx.InsertAttempt(attempt("a-1", "j-1", "r-1", 1, job.AttemptRunning, 2_000)),
			tx.InsertAttempt(attempt("a-2", "j-1", "r-1", 2, job.AttemptOffered, 2_000)),
			tx.InsertAttempt(attempt("a-3", "j-1", "r-1", 3, job.AttemptCompleted, 2_000)),
			tx.HoldRunner("r-1", "h-b", at(1)),
		)
	})
	held := func(id string) *store.RunnerHeld {
		return get(t, s, func(tx store.Tx) (store.Runner, error) { return tx.Runner(id) }).Held
	}
	equal(t, "a new holding", held("r-1"), &store.RunnerHeld{Hub: "h-b", Running: 2, Status: store.RunnerStatus{Agents: []string{}, Accounts: []store.Account{}}})
	equal(t, "an unheld runner", held("r-2"), (*store.RunnerHeld)(nil))

	until := at(9_000)
	st := store.RunnerStatus{Agents: []string{"exec", "claude"}, NotReady: "no network",
		Accounts: []store.Account{{ID: "acc-1", Agent: "claude", Label: "work", Kind: "login", State: "limited", LimitedUntil: &until}}}
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.SetRunnerStatus("r-1", "h-b", st), tx.SetRunnerStatus("r-1", "h-a", store.RunnerStatus{Draining: true}),
			tx.SetRunnerStatus("r-2", "h-a", st))
	})
	want := &store.RunnerHeld{Hub: "h-b", Running: 2, Status: st}
	equal(t, "the holder's status (the other hub's write ignored)", held("r-1"), want)
	equal(t, "a status for an unheld runner", held("r-2"), (*store.RunnerHeld)(nil))
	byName := get(t, s, func(tx store.Tx) (store.Runner, error) { return tx.RunnerByName("box-1") })
	equal(t, "by name", byName.Held, want)
	list := get(t, s, func(tx store.Tx) ([]store.Runner, error) { return tx.Runners() })
	equal(t, "listed", []*store.RunnerHeld{list[0].Held, list[1].Held}, []*store.RunnerHeld{want, nil})

	mustWrite(t, s, func(tx store.Tx) error { return tx.HoldRunner("r-1", "h-a", at(2)) })
	equal(t, "held by another hub", held("r-1"), &store.RunnerHeld{Hub: "h-a", Running: 2, Status: store.RunnerStatus{Agents: []string{}, Accounts: []store.Account{}}})
	mustWrite(t, s, func(tx store.Tx) error { return tx.ReleaseRunner("r-1", "h-a") })
	equal(t, "released", held("r-1"), (*store.RunnerHeld)(nil))
}
