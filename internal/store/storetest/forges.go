package storetest

import (
	"testing"

	"drover/internal/job"
	"drover/internal/store"
)

func forge(name, secret string, appID int64, created, updated int64) store.Forge {
	return store.Forge{Name: name, Kind: "github", URL: "https://" + name + ".example", AppID: appID,
		Secret: secret, CreatedBy: "u-1", CreatedAt: at(created), UpdatedAt: at(updated)}
}

func testForges(t *testing.T, s store.Store) {
	list := func(secrets bool) []store.Forge {
		return get(t, s, func(tx store.Tx) ([]store.Forge, error) { return tx.Forges(secrets) })
	}
	one := func(name string) store.Forge {
		return get(t, s, func(tx store.Tx) (store.Forge, error) { return tx.Forge(name) })
	}
	equal(t, "Forges of none", list(true), nil)
	readErr(t, s, "Forge of a missing name", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.Forge("gh"); return err })

	app := forge("app", "-----BEGIN RSA PRIVATE KEY-----\nk\n-----END RSA PRIVATE KEY-----\n", 42, 1, 2)
	gh := forge("gh", "token-1", 0, 3, 4)
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutForge(gh) })
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutForge(app) })
	equal(t, "Forge", one("gh"), gh)

	// Put again: replaced, not added, its creation kept.
	again := store.Forge{Name: "gh", Kind: "gitea", URL: "", AppID: 7, Secret: "token-2",
		CreatedBy: "u-2", CreatedAt: at(8), UpdatedAt: at(9)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutForge(again) })
	gh2 := again
	gh2.CreatedBy, gh2.CreatedAt = gh.CreatedBy, gh.CreatedAt
	equal(t, "Forge replaced", one("gh"), gh2)
	equal(t, "Forges with secrets, by name", list(true), []store.Forge{app, gh2})
	app.Secret, gh2.Secret = "", ""
	equal(t, "Forges without secrets", list(false), []store.Forge{app, gh2})

	mustWrite(t, s, func(tx store.Tx) error { return tx.RemoveForge("app") })
	writeErr(t, s, "second removal", store.ErrNotFound, func(tx store.Tx) error { return tx.RemoveForge("app") })
	writeErr(t, s, "removal of a missing name", store.ErrNotFound, func(tx store.Tx) error { return tx.RemoveForge("nope") })
	equal(t, "Forges after removal", list(false), []store.Forge{gh2})
}

// publication has every field set; updated is its UpdatedAt.
func publication(jobID string, state store.PublicationState, updated int64) store.Publication {
	return store.Publication{
		JobID: jobID, Forge: "gh", Repo: "acme/web", Mode: "to_pr", Branch: "drover/" + jobID, Base: "main", ToPR: 7,
		Title: "Fix the bug ünïcode", Draft: true, Commit: "2222222222222222222222222222222222222222",
		Expect: "3333333333333333333333333333333333333333", Pushed: "4444444444444444444444444444444444444444",
		PRNumber: 12, PRURL: "https://gh.example/acme/web/pull/12", State: state, Code: "conflict", Reason: "the base moved",
		Tries: 3, By: "u-1", CreatedAt: at(1), UpdatedAt: at(updated),
	}
}

func testPublications(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		for _, id := range []string{"j-2", "j-3", "j-4"} {
			if err := tx.InsertJob(newJob(id, "u-1", job.Completed, 0)); err != nil {
				return err
			}
		}
		return nil
	})
	one := func(jobID string) store.Publication {
		return get(t, s, func(tx store.Tx) (store.Publication, error) { return tx.Publication(jobID) })
	}
	list := func(state store.PublicationState) []store.Publication {
		return get(t, s, func(tx store.Tx) ([]store.Publication, error) { return tx.Publications(state) })
	}
	readErr(t, s, "Publication of a job without one", store.ErrNotFound, func(tx store.Tx) error {
		_, err := tx.Publication("j-1")
		return err
	})

	// Listed by update, not by job id or insertion.
	p1, p2 := publication("j-1", store.PublicationPending, 5), publication("j-2", store.PublicationPending, 3)
	p3, p4 := publication("j-3", store.PublicationDone, 4), publication("j-4", store.PublicationFailed, 6)
	for _, p := range []store.Publication{p1, p3, p2, p4} {
		mustWrite(t, s, func(tx store.Tx) error { return tx.PutPublication(p) })
	}
	equal(t, "Publication", one("j-1"), p1)
	equal(t, "pending", list(store.PublicationPending), []store.Publication{p2, p1})
	equal(t, "failed", list(store.PublicationFailed), []store.Publication{p4})

	// Put again: replaced, its CreatedAt kept; zero values round-trip.
	done := store.Publication{JobID: "j-1", State: store.PublicationDone, CreatedAt: at(50), UpdatedAt: at(60)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutPublication(done) })
	done.CreatedAt = p1.CreatedAt
	equal(t, "Publication replaced", one("j-1"), done)
	equal(t, "pending after the replacement", list(store.PublicationPending), []store.Publication{p2})
	equal(t, "done, oldest update first", list(store.PublicationDone), []store.Publication{p3, done})
	equal(t, "a state without any", list("unknown"), nil)
}
