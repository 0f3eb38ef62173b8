package storetest

import (
	"testing"

	"drover/internal/store"
)

// testForgeOAuth: a forge's sign-in application is set, replaced, listed
// and removed; one for a forge not held is refused; removing the forge
// removes it.
func testForgeOAuth(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error {
		for _, n := range []string{"gh", "gt"} {
			if err := tx.PutForge(forge(n, "tok", 0, 1, 1)); err != nil {
				return err
			}
		}
		return nil
	})
	o := store.ForgeOAuth{Forge: "gt", ClientID: "cid", Secret: "s1", UpdatedBy: "u-1", UpdatedAt: at(2)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutForgeOAuth(o) })
	o.Secret, o.UpdatedAt = "s2", at(3)
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutForgeOAuth(o) })
	equal(t, "the forge's sign-in", get(t, s, func(tx store.Tx) (store.ForgeOAuth, error) { return tx.ForgeOAuth("gt") }), o)
	equal(t, "the sign-ins", get(t, s, func(tx store.Tx) ([]store.ForgeOAuth, error) { return tx.ForgeOAuths() }), []store.ForgeOAuth{o})
	readErr(t, s, "a forge without sign-in", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.ForgeOAuth("gh"); return err })
	if err := s.Write(ctx(t), func(tx store.Tx) error {
		return tx.PutForgeOAuth(store.ForgeOAuth{Forge: "nope", ClientID: "x", Secret: "y", UpdatedAt: at(4)})
	}); err == nil {
		t.Error("a sign-in for a forge not held was stored")
	}
	writeErr(t, s, "remove a sign-in not set", store.ErrNotFound, func(tx store.Tx) error { return tx.RemoveForgeOAuth("gh") })
	mustWrite(t, s, func(tx store.Tx) error { return tx.RemoveForge("gt") })
	readErr(t, s, "the removed forge's sign-in", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.ForgeOAuth("gt"); return err })
	mustWrite(t, s, func(tx store.Tx) error {
		return tx.PutForgeOAuth(store.ForgeOAuth{Forge: "gh", ClientID: "x", Secret: "y", UpdatedAt: at(5)})
	})
	mustWrite(t, s, func(tx store.Tx) error { return tx.RemoveForgeOAuth("gh") })
	equal(t, "no sign-ins", get(t, s, func(tx store.Tx) ([]store.ForgeOAuth, error) { return tx.ForgeOAuths() }), []store.ForgeOAuth(nil))
}
