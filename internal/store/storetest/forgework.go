package storetest

import (
	"testing"

	"drover/internal/job"
	"drover/internal/store"
)

func testForgeWork(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		if err := tx.PutProject(store.Project{Name: "web", OwnerID: "u-1", CreatedAt: at(1), UpdatedAt: at(1)}); err != nil {
			return err
		}
		return tx.InsertJob(newJob("j-2", "u-1", job.Queued, 5))
	})

	// Triggers: one per project, found by hook, replaced keeping creation.
	tr := store.ForgeTrigger{Project: "web", HookID: "hk-1", Secret: "sec", Forge: "gt", Kind: "gitea", Repo: "acme/web",
		RemoteID: 17, Label: "drover:fix", Command: "/drover", Reviews: true, Assign: "bot", Agent: "claude", CreatedBy: "u-1",
		CreatedAt: at(1), UpdatedAt: at(2)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutForgeTrigger(tr) })
	equal(t, "ForgeTrigger", get(t, s, func(tx store.Tx) (store.ForgeTrigger, error) { return tx.ForgeTrigger("web") }), tr)
	again := tr
	again.Label, again.CreatedBy, again.CreatedAt, again.UpdatedAt = "", "u-2", at(8), at(9)
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutForgeTrigger(again) })
	again.CreatedBy, again.CreatedAt = tr.CreatedBy, tr.CreatedAt
	equal(t, "ForgeTriggerByHook", get(t, s, func(tx store.Tx) (store.ForgeTrigger, error) { return tx.ForgeTriggerByHook("hk-1") }), again)
	readErr(t, s, "unknown hook", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.ForgeTriggerByHook("hk-2"); return err })
	mustWrite(t, s, func(tx store.Tx) error { return tx.RemoveForgeTrigger("web") })
	writeErr(t, s, "second removal", store.ErrNotFound, func(tx store.Tx) error { return tx.RemoveForgeTrigger("web") })

	// Links: unique per (forge, login).
	l := store.ForgeLink{Forge: "gt", Login: "alice", UserID: "u-1", CreatedBy: "u-1", CreatedAt: at(3)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutForgeLink(l) })
	writeErr(t, s, "a linked login", store.ErrConflict, func(tx store.Tx) error { return tx.PutForgeLink(l) })
	l2 := store.ForgeLink{Forge: "gh", Login: "alice", UserID: "u-1", CreatedBy: "u-1", CreatedAt: at(4)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutForgeLink(l2) })
	equal(t, "ForgeLink", get(t, s, func(tx store.Tx) (store.ForgeLink, error) { return tx.ForgeLink("gt", "alice") }), l)
	equal(t, "ForgeLinksOf", get(t, s, func(tx store.Tx) ([]store.ForgeLink, error) { return tx.ForgeLinksOf("u-1") }), []store.ForgeLink{l2, l})
	mustWrite(t, s, func(tx store.Tx) error { return tx.RemoveForgeLink("gt", "alice") })
	writeErr(t, s, "missing link", store.ErrNotFound, func(tx store.Tx) error { return tx.RemoveForgeLink("gt", "alice") })

	// Deliveries: once per (hook, id); pending ones listed oldest first;
	// only finished ones pruned.
	d1 := store.ForgeDelivery{HookID: "hk-1", Delivery: "d-1", Event: `{"type":"labeled"}`, State: store.DeliveryPending,
		CreatedAt: at(10), UpdatedAt: at(10)}
	d2 := d1
	d2.Delivery, d2.CreatedAt, d2.UpdatedAt = "d-2", at(5), at(5)
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertForgeDelivery(d1) })
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertForgeDelivery(d2) })
	writeErr(t, s, "a redelivery", store.ErrConflict, func(tx store.Tx) error { return tx.InsertForgeDelivery(d1) })
	equal(t, "pending", get(t, s, func(tx store.Tx) ([]store.ForgeDelivery, error) {
		return tx.ForgeDeliveries(store.DeliveryPending, 10)
	}), []store.ForgeDelivery{d2, d1})
	d2.State, d2.JobID, d2.Reason, d2.Tries, d2.UpdatedAt = store.DeliveryDone, "j-2", "", 1, at(20)
	mustWrite(t, s, func(tx store.Tx) error { return tx.UpdateForgeDelivery(d2) })
	equal(t, "ForgeDelivery", get(t, s, func(tx store.Tx) (store.ForgeDelivery, error) { return tx.ForgeDelivery("hk-1", "d-2") }), d2)
	var pruned int64
	mustWrite(t, s, func(tx store.Tx) (err error) { pruned, err = tx.PruneForgeDeliveries(at(30)); return err })
	equal(t, "pruned", pruned, int64(1))
	equal(t, "left", get(t, s, func(tx store.Tx) ([]store.ForgeDelivery, error) {
		return tx.ForgeDeliveries(store.DeliveryPending, 10)
	}), []store.ForgeDelivery{d1})

}
