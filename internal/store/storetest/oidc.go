package storetest

import (
	"testing"

	"drover/internal/store"
)

// testOIDC: an OpenID Connect provider is set, replaced, listed and
// removed; a subject links to one user once; removing the provider
// removes its links.
func testOIDC(t *testing.T, s store.Store) {
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertUser(user("u-1", "alice")) })
	p := store.OIDCProvider{Name: "corp", Issuer: "https://id.example/", ClientID: "cid", Secret: "s1", UpdatedBy: "u-1", UpdatedAt: at(2)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutOIDCProvider(p) })
	p.Secret, p.UpdatedAt = "s2", at(3)
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutOIDCProvider(p) })
	equal(t, "the provider", get(t, s, func(tx store.Tx) (store.OIDCProvider, error) { return tx.OIDCProvider("corp") }), p)
	equal(t, "the providers", get(t, s, func(tx store.Tx) ([]store.OIDCProvider, error) { return tx.OIDCProviders() }), []store.OIDCProvider{p})
	readErr(t, s, "a provider not held", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.OIDCProvider("nope"); return err })

	l := store.OIDCLink{Provider: "corp", Subject: "sub 1", UserID: "u-1", CreatedBy: "u-1", CreatedAt: at(4)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutOIDCLink(l) })
	writeErr(t, s, "a linked subject again", store.ErrConflict, func(tx store.Tx) error { return tx.PutOIDCLink(l) })
	if err := s.Write(ctx(t), func(tx store.Tx) error {
		return tx.PutOIDCLink(store.OIDCLink{Provider: "nope", Subject: "x", UserID: "u-1", CreatedAt: at(4)})
	}); err == nil {
		t.Error("a link of a provider not held was stored")
	}
	equal(t, "the link", get(t, s, func(tx store.Tx) (store.OIDCLink, error) { return tx.OIDCLink("corp", "sub 1") }), l)
	equal(t, "the user's links", get(t, s, func(tx store.Tx) ([]store.OIDCLink, error) { return tx.OIDCLinksOf("u-1") }), []store.OIDCLink{l})
	readErr(t, s, "another subject", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.OIDCLink("corp", "sub"); return err })
	writeErr(t, s, "remove a link not made", store.ErrNotFound, func(tx store.Tx) error { return tx.RemoveOIDCLink("corp", "sub") })
	mustWrite(t, s, func(tx store.Tx) error { return tx.RemoveOIDCLink("corp", "sub 1") })
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutOIDCLink(l) })

	writeErr(t, s, "remove a provider not held", store.ErrNotFound, func(tx store.Tx) error { return tx.RemoveOIDCProvider("nope") })
	mustWrite(t, s, func(tx store.Tx) error { return tx.RemoveOIDCProvider("corp") })
	readErr(t, s, "the removed provider's link", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.OIDCLink("corp", "sub 1"); return err })
	equal(t, "no providers", get(t, s, func(tx store.Tx) ([]store.OIDCProvider, error) { return tx.OIDCProviders() }), []store.OIDCProvider(nil))
}
