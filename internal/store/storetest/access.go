package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/store"
)

// testAccessVersions: every write that changes a runner's access (its
// owner, name or access, its owner's user row, its shares) and only those
// move the access version and name the runners it changed.
func testAccessVersions(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(user("u-1", "alice")), tx.InsertUser(user("u-2", "bob")),
			tx.InsertRunner(runner("r-1", "box-1", "u-1")), tx.InsertRunner(runner("r-2", "box-2", "u-1")),
			tx.InsertRunner(runner("r-3", "box-3", "u-2")))
	})
	version := func() int64 { return get(t, s, func(tx store.Tx) (int64, error) { return tx.AccessVersion() }) }
	since := func(v int64) []string {
		return get(t, s, func(tx store.Tx) ([]string, error) { return tx.AccessChangedSince(v) })
	}
	equal(t, "access version of new runners", version(), int64(0))
	equal(t, "changed since 0, before any change", since(0), nil)
	update := updateRunner
	share := func(runnerID, accountID, subject string) store.Share {
		return store.Share{RunnerID: runnerID, AccountID: accountID, Kind: store.ShareUser, Subject: subject, CreatedAt: at(5)}
	}
	removed := user("u-1", "alice")
	removed.RemovedAt = ptr(at(9))
	for _, tc := range []struct {
		name    string
		write   func(store.Tx) error
		err     error
		changed []string // nil: the version stays
	}{
		{"share a runner", func(tx store.Tx) error { return tx.PutShare(share("r-1", "", "u-2")) }, nil, []string{"r-1"}},
		{"share an account", func(tx store.Tx) error { return tx.PutShare(share("r-2", "acc-a", "u-2")) }, nil, []string{"r-2"}},
		{"share again (conflict)", func(tx store.Tx) error { return tx.PutShare(share("r-1", "", "u-2")) }, store.ErrConflict, nil},
		{"accept a share", func(tx store.Tx) error { return tx.AcceptShare(share("r-1", "", "u-2"), at(60)) }, nil, []string{"r-1"}},
		{"accept a missing share", func(tx store.Tx) error { return tx.AcceptShare(share("r-3", "", "u-1"), at(60)) }, store.ErrNotFound, nil},
		{"unshare a missing share", func(tx store.Tx) error { return tx.DeleteShare(share("r-3", "", "u-1")) }, store.ErrNotFound, nil},
		{"unshare", func(tx store.Tx) error { return tx.DeleteShare(share("r-1", "", "u-2")) }, nil, []string{"r-1"}},
		{"connect: slots, labels, last seen, version", update("r-3", func(rn *store.Runner) {
			rn.Slots, rn.Labels, rn.LastSeen, rn.Version = 9, map[string]string{"os": "mac"}, ptr(at(50)), "v2"
		}), nil, nil},
		{"revoke, new token", update("r-3", func(rn *store.Runner) { rn.RevokedAt, rn.TokenHash = nil, "hash-new" }), nil, nil},
		{"make private", update("r-3", func(rn *store.Runner) { rn.Access = apitypes.AccessPrivate }), nil, []string{"r-3"}},
		{"rename", update("r-3", func(rn *store.Runner) { rn.Name = "box-3b" }), nil, []string{"r-3"}},
		{"give to another owner", update("r-3", func(rn *store.Runner) { rn.OwnerID = "u-1" }), nil, []string{"r-3"}},
		{"owner removed", func(tx store.Tx) error { return tx.UpdateUser(removed) }, nil, []string{"r-1", "r-2", "r-3"}},
		{"user without runners changed", func(tx store.Tx) error { return tx.UpdateUser(user("u-2", "bobby")) }, nil, nil},
		{"shares of a user deleted", func(tx store.Tx) error { return tx.DeleteSharesOf(store.ShareUser, "u-2") }, nil, []string{"r-2"}},
		{"shares of nobody deleted", func(tx store.Tx) error { return tx.DeleteSharesOf(store.ShareUser, "u-9") }, nil, nil},
	} {
		versionStep(t, s, "access version", tc.name, tc.err, tc.write, version, since, tc.changed, nil)
	}
}

// updateRunner is a write that changes the runner id's row.
func updateRunner(id string, change func(*store.Runner)) func(store.Tx) error {
	return func(tx store.Tx) error {
		rn, err := tx.Runner(id)
		if err != nil {
			return err
		}
		change(&rn)
		return tx.UpdateRunner(rn)
	}
}

// versionStep runs one write (what failing with err) and checks the
// version it must move, when changed is not nil, naming exactly changed
// since the old version and none since the new; or else keep.
func versionStep[T any](t *testing.T, s store.Store, kind, name string, err error, write func(store.Tx) error,
	version func() int64, since func(int64) T, changed, none T) {
	t.Helper()
	v := version()
	writeErr(t, s, name, err, write)
	after := version()
	if reflect.ValueOf(changed).IsNil() {
		equal(t, name+": "+kind, after, v)
		return
	}
	if after <= v {
		t.Errorf("%s: %s %d, was %d: want it greater", name, kind, after, v)
	}
	equal(t, name+": runners changed", since(v), changed)
	equal(t, name+": runners changed since the new version", since(after), none)
}

func testAccessVersionRace(t *testing.T, s store.Store) {
	AccessVersionRace(t, s, s, s, s, s, s, s, s, s)
}

// AccessVersionRace: concurrent writers (the same store several times, or
// several stores on s's database, as several hubs are) each changing one
// runner's access each get a version of their own, so the greatest grows
// by one per write (two that stamped the same would leave it short).
func AccessVersionRace(t *testing.T, s store.Store, writers ...store.Store) {
	n := len(writers)
	mustWrite(t, s, func(tx store.Tx) error {
		errs := []error{tx.InsertUser(user("u-1", "alice")), tx.InsertUser(user("u-2", "bob"))}
		for i := range n {
			errs = append(errs, tx.InsertRunner(runner(fmt.Sprintf("r-%d", i), fmt.Sprintf("box-%d", i), "u-1")))
		}
		return errors.Join(errs...)
	})
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = writers[i].Write(ctx(t), func(tx store.Tx) error {
				err := tx.PutShare(store.Share{RunnerID: fmt.Sprintf("r-%d", i), Kind: store.ShareUser, Subject: "u-2", CreatedAt: at(int64(i))})
				// Commit later, so the others' stamps overlap this one.
				time.Sleep(2 * time.Millisecond)
				return err
			})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		wantErr(t, fmt.Sprintf("share %d", i), err, nil)
	}
	equal(t, "access version after n racing shares", get(t, s, func(tx store.Tx) (int64, error) { return tx.AccessVersion() }), int64(n))
	equal(t, "runners changed", len(get(t, s, func(tx store.Tx) ([]string, error) { return tx.AccessChangedSince(0) })), n)
}
