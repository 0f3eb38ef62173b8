package storetest

import (
	"errors"
	"testing"

	"drover/internal/store"
)

func testFleet(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertUser(user("u-1", "alice")), tx.InsertUser(user("u-2", "bob")),
			tx.InsertRunner(runner("r-1", "box-1", "u-1")))
	})
	l1 := store.Launch{ID: "l-1", OwnerID: "u-1", Target: "local", Labels: map[string]string{"pool": "a"},
		Slots: 2, Count: 3, CreatedAt: at(10), RevokedAt: ptr(at(30))}
	l2 := store.Launch{ID: "l-2", OwnerID: "u-2", Target: "ssh", Labels: map[string]string{}, Slots: 1, Count: 1, CreatedAt: at(5)}
	l3 := store.Launch{ID: "l-3", OwnerID: "u-1", Target: "local", Labels: map[string]string{}, Slots: 1, Count: 1, CreatedAt: at(20)}
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertLaunch(l1), tx.InsertLaunch(l2), tx.InsertLaunch(l3))
	})
	writeErr(t, s, "InsertLaunch of an existing id", store.ErrConflict, func(tx store.Tx) error { return tx.InsertLaunch(l1) })
	equal(t, "Launch", get(t, s, func(tx store.Tx) (store.Launch, error) { return tx.Launch("l-1") }), l1)
	readErr(t, s, "Launch(missing)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.Launch("l-9"); return err })
	equal(t, "Launches(all), oldest first", get(t, s, func(tx store.Tx) ([]store.Launch, error) { return tx.Launches("") }),
		[]store.Launch{l2, l1, l3})
	equal(t, "Launches(u-1)", get(t, s, func(tx store.Tx) ([]store.Launch, error) { return tx.Launches("u-1") }),
		[]store.Launch{l1, l3})

	// UpdateLaunch changes the revocation only.
	up := l3
	up.RevokedAt, up.Target, up.Count = ptr(at(40)), "ssh", 9
	mustWrite(t, s, func(tx store.Tx) error { return tx.UpdateLaunch(up) })
	want3 := l3
	want3.RevokedAt = ptr(at(40))
	equal(t, "Launch after UpdateLaunch", get(t, s, func(tx store.Tx) (store.Launch, error) { return tx.Launch("l-3") }), want3)
	writeErr(t, s, "UpdateLaunch(missing)", store.ErrNotFound, func(tx store.Tx) error {
		return tx.UpdateLaunch(store.Launch{ID: "l-9"})
	})

	g1 := store.Registration{Hash: "h-1", LaunchID: "l-1", Name: "l1-b", CreatedAt: at(11), ExpiresAt: at(100)}
	g2 := store.Registration{Hash: "h-2", LaunchID: "l-1", Name: "l1-a", CreatedAt: at(12), ExpiresAt: at(101)}
	g3 := store.Registration{Hash: "h-3", LaunchID: "l-2", Name: "l2-a", CreatedAt: at(13), ExpiresAt: at(102)}
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertRegistration(g1), tx.InsertRegistration(g2), tx.InsertRegistration(g3))
	})
	writeErr(t, s, "InsertRegistration of an existing hash", store.ErrConflict, func(tx store.Tx) error { return tx.InsertRegistration(g1) })
	equal(t, "Registration", get(t, s, func(tx store.Tx) (store.Registration, error) { return tx.Registration("h-1") }), g1)
	readErr(t, s, "Registration(missing)", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.Registration("h-9"); return err })
	equal(t, "Registrations(l-1), by name", get(t, s, func(tx store.Tx) ([]store.Registration, error) { return tx.Registrations("l-1") }),
		[]store.Registration{g2, g1})
	readErr(t, s, "RegistrationOfRunner before use", store.ErrNotFound, func(tx store.Tx) error {
		_, err := tx.RegistrationOfRunner("r-1")
		return err
	})

	mustWrite(t, s, func(tx store.Tx) error { return tx.UseRegistration("h-1", "r-1", at(50)) })
	used := g1
	used.UsedAt, used.RunnerID = ptr(at(50)), "r-1"
	equal(t, "Registration after use", get(t, s, func(tx store.Tx) (store.Registration, error) { return tx.Registration("h-1") }), used)
	equal(t, "RegistrationOfRunner", get(t, s, func(tx store.Tx) (store.Registration, error) { return tx.RegistrationOfRunner("r-1") }), used)
	// A second use changes nothing: single use is the store's rule too.
	writeErr(t, s, "UseRegistration twice", store.ErrConflict, func(tx store.Tx) error { return tx.UseRegistration("h-1", "r-2", at(60)) })
	equal(t, "Registration after a refused reuse", get(t, s, func(tx store.Tx) (store.Registration, error) { return tx.Registration("h-1") }), used)
	writeErr(t, s, "UseRegistration(missing)", store.ErrNotFound, func(tx store.Tx) error { return tx.UseRegistration("h-9", "r-1", at(60)) })

	testLaunchFailures(t, s)
}

// testLaunchFailures: one failure per owner, the latest; cleared by owner.
func testLaunchFailures(t *testing.T, s store.Store) {
	equal(t, "LaunchFailures(none)", get(t, s, func(tx store.Tx) ([]store.LaunchFailure, error) { return tx.LaunchFailures() }),
		[]store.LaunchFailure(nil))
	f1 := store.LaunchFailure{OwnerID: "u-1", LaunchID: "l-1", Target: "docker", Labels: map[string]string{"pool": "a"},
		Reason: "image drover:dev is missing", FailedAt: at(60)}
	f2 := store.LaunchFailure{OwnerID: "u-2", LaunchID: "l-2", Target: "ssh", Labels: map[string]string{}, Reason: "host unreachable", FailedAt: at(61)}
	mustWrite(t, s, func(tx store.Tx) error { return errors.Join(tx.PutLaunchFailure(f1), tx.PutLaunchFailure(f2)) })
	// A later failure of the same owner replaces the one before.
	f1b := store.LaunchFailure{OwnerID: "u-1", LaunchID: "l-3", Target: "local", Labels: map[string]string{}, Reason: "pull refused", FailedAt: at(70)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutLaunchFailure(f1b) })
	equal(t, "LaunchFailures, by owner", get(t, s, func(tx store.Tx) ([]store.LaunchFailure, error) { return tx.LaunchFailures() }),
		[]store.LaunchFailure{f1b, f2})
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.ClearLaunchFailure("u-1"), tx.ClearLaunchFailure("u-9"))
	})
	equal(t, "LaunchFailures after a clear", get(t, s, func(tx store.Tx) ([]store.LaunchFailure, error) { return tx.LaunchFailures() }),
		[]store.LaunchFailure{f2})
}
