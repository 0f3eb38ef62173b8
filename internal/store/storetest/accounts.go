package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"drover/internal/store"
)

// account is a reported account (the fields a runner reports, as
// SyncRunnerAccounts takes them).
func account(id, agent string) store.Account {
	return store.Account{ID: id, Agent: agent, Label: "label " + id, Kind: "login", State: "ready"}
}

// stored is a as the store keeps it.
func stored(a store.Account, runnerID, ownerID string, rank int64, updated time.Time) store.Account {
	a.RunnerID, a.OwnerID, a.Rank, a.UpdatedAt = runnerID, ownerID, rank, updated
	return a
}

// seedAccountOwners inserts alice (u-1) with runners r-1 and r-2 and bob
// (u-2) with runner r-3.
func seedAccountOwners(t *testing.T, s store.Store) {
	t.Helper()
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(user("u-1", "alice")),
			tx.InsertUser(user("u-2", "bob")),
			tx.InsertRunner(runner("r-1", "box-1", "u-1")),
			tx.InsertRunner(runner("r-2", "box-2", "u-1")),
			tx.InsertRunner(runner("r-3", "box-3", "u-2")),
		)
	})
}

func syncAccounts(t *testing.T, s store.Store, runnerID string, now time.Time, accts ...store.Account) {
	t.Helper()
	mustWrite(t, s, func(tx store.Tx) error { return tx.SyncRunnerAccounts(runnerID, accts, now) })
}

func accountsOf(t *testing.T, s store.Store, ownerID string) []store.Account {
	t.Helper()
	return get(t, s, func(tx store.Tx) ([]store.Account, error) { return tx.AccountsOfOwner(ownerID) })
}

func ranks(t *testing.T, s store.Store) map[string]int64 {
	t.Helper()
	return get(t, s, func(tx store.Tx) (map[string]int64, error) { return tx.AccountRanks() })
}

func testAccounts(t *testing.T, s store.Store) {
	seedAccountOwners(t, s)
	a, b := account("acc-a", "claude"), account("acc-b", "codex")
	a.Kind = "api-key"
	// RunnerID, OwnerID and Rank of a report are ignored.
	junk := b
	junk.RunnerID, junk.OwnerID, junk.Rank = "r-9", "u-9", 77
	syncAccounts(t, s, "r-1", at(100), a, junk)
	r1a, r1b := stored(a, "r-1", "u-1", 1, at(100)), stored(b, "r-1", "u-1", 2, at(100))
	equal(t, "after first sync", accountsOf(t, s, "u-1"), []store.Account{r1a, r1b})

	// Another runner of the same owner: its accounts rank after the first
	// runner's, and the same id there is another account.
	c := account("acc-c", "gemini")
	syncAccounts(t, s, "r-2", at(200), a, c)
	r2a, r2c := stored(a, "r-2", "u-1", 3, at(200)), stored(c, "r-2", "u-1", 4, at(200))
	equal(t, "after second runner", accountsOf(t, s, "u-1"), []store.Account{r1a, r1b, r2a, r2c})

	// Ranks are per owner.
	x := account("acc-x", "opencode")
	syncAccounts(t, s, "r-3", at(300), x)
	r3x := stored(x, "r-3", "u-2", 1, at(300))
	equal(t, "bob's accounts", accountsOf(t, s, "u-2"), []store.Account{r3x})
	equal(t, "nobody's accounts", accountsOf(t, s, "u-9"), nil)

	// Resync: a missing account is deleted, a kept one keeps its rank with
	// its other fields updated, a new one ranks after every account of the
	// owner.
	b.Label, b.State, b.LimitedUntil = "b relabelled", "limited", ptr(at(5000))
	d := account("acc-d", "claude")
	syncAccounts(t, s, "r-1", at(400), d, b)
	r1b, r1d := stored(b, "r-1", "u-1", 2, at(400)), stored(d, "r-1", "u-1", 5, at(400))
	equal(t, "after resync", accountsOf(t, s, "u-1"), []store.Account{r1b, r2a, r2c, r1d})

	// And back: the limit cleared, both ways for the nullable column.
	b.State, b.LimitedUntil = "ready", nil
	syncAccounts(t, s, "r-1", at(500), b, d)
	r1b = stored(b, "r-1", "u-1", 2, at(500))
	equal(t, "after the limit cleared", accountsOf(t, s, "u-1"), []store.Account{r1b, r2a, r2c, r1d})

	equal(t, "AccountRanks", ranks(t, s), map[string]int64{
		store.AccountKey("r-1", "acc-b"): 2,
		store.AccountKey("r-2", "acc-a"): 3,
		store.AccountKey("r-2", "acc-c"): 4,
		store.AccountKey("r-1", "acc-d"): 5,
		store.AccountKey("r-3", "acc-x"): 1,
	})

	// An empty report deletes all of the runner's accounts, no other's.
	syncAccounts(t, s, "r-2", at(600))
	equal(t, "after an empty report", accountsOf(t, s, "u-1"), []store.Account{r1b, r1d})
	equal(t, "bob's accounts after alice's empty report", accountsOf(t, s, "u-2"), []store.Account{r3x})

	writeErr(t, s, "sync of a missing runner", store.ErrNotFound, func(tx store.Tx) error {
		return tx.SyncRunnerAccounts("r-9", []store.Account{a}, at(700))
	})
	equal(t, "AccountRanks after a failed sync", len(ranks(t, s)), 3)
}

func testAccountMoves(t *testing.T, s store.Store) {
	seedAccountOwners(t, s)
	syncAccounts(t, s, "r-1", at(100), account("a", "claude"), account("b", "claude"))
	syncAccounts(t, s, "r-2", at(100), account("a", "codex"), account("c", "codex"))
	syncAccounts(t, s, "r-3", at(100), account("x", "claude"), account("y", "claude"))
	order := func(ownerID string) []string {
		var out []string
		for i, a := range accountsOf(t, s, ownerID) {
			if a.Rank != int64(i+1) {
				t.Errorf("%s's account %d (%s) has rank %d, want %d", ownerID, i+1, a.ID, a.Rank, i+1)
			}
			out = append(out, a.RunnerID+"/"+a.ID)
		}
		return out
	}
	// Ranks start at 1..n here already; each move keeps them 1..n.
	for _, tc := range []struct {
		runnerID, id string
		position     int
		want         []string
	}{
		{"r-2", "c", 1, []string{"r-2/c", "r-1/a", "r-1/b", "r-2/a"}},  // up to the top
		{"r-2", "c", 3, []string{"r-1/a", "r-1/b", "r-2/c", "r-2/a"}},  // down
		{"r-1", "a", 4, []string{"r-1/b", "r-2/c", "r-2/a", "r-1/a"}},  // to the bottom
		{"r-2", "a", 99, []string{"r-1/b", "r-2/c", "r-1/a", "r-2/a"}}, // clamped to n
		{"r-2", "a", 0, []string{"r-2/a", "r-1/b", "r-2/c", "r-1/a"}},  // clamped to 1
		{"r-2", "a", -5, []string{"r-2/a", "r-1/b", "r-2/c", "r-1/a"}}, // already first
		{"r-2", "c", 3, []string{"r-2/a", "r-1/b", "r-2/c", "r-1/a"}},  // already there
		{"r-1", "a", 2, []string{"r-2/a", "r-1/a", "r-1/b", "r-2/c"}},  // the same id, the other runner's
	} {
		mustWrite(t, s, func(tx store.Tx) error { return tx.MoveAccount("u-1", tc.runnerID, tc.id, tc.position) })
		equal(t, fmt.Sprintf("after moving %s/%s to %d", tc.runnerID, tc.id, tc.position), order("u-1"), tc.want)
	}
	equal(t, "bob's accounts after alice's moves", order("u-2"), []string{"r-3/x", "r-3/y"})

	// A move renumbers, so ranks left with gaps by a deletion close up.
	syncAccounts(t, s, "r-1", at(200), account("b", "claude")) // r-1/a deleted
	mustWrite(t, s, func(tx store.Tx) error { return tx.MoveAccount("u-1", "r-2", "c", 1) })
	equal(t, "after a deletion and a move", order("u-1"), []string{"r-2/c", "r-2/a", "r-1/b"})

	// A moved account keeps its rank through a resync; new ones go last.
	syncAccounts(t, s, "r-2", at(300), account("a", "codex"), account("c", "codex"), account("e", "codex"))
	equal(t, "after a resync", order("u-1"), []string{"r-2/c", "r-2/a", "r-1/b", "r-2/e"})

	// Another owner's account, or none at all: not found, nothing changed.
	before := ranks(t, s)
	for _, tc := range []struct {
		name                string
		owner, runnerID, id string
	}{
		{"bob's account", "u-1", "r-3", "x"},
		{"alice's account by bob", "u-2", "r-1", "b"},
		{"an id on another of the owner's runners", "u-1", "r-1", "c"},
		{"a missing runner", "u-1", "r-9", "a"},
		{"an owner without accounts", "u-9", "r-1", "b"},
	} {
		writeErr(t, s, "move "+tc.name, store.ErrNotFound, func(tx store.Tx) error {
			return tx.MoveAccount(tc.owner, tc.runnerID, tc.id, 1)
		})
	}
	equal(t, "AccountRanks after refused moves", ranks(t, s), before)
}

func testAllAccounts(t *testing.T, s store.Store) {
	seedAccountOwners(t, s)
	all := func() []string {
		var out []string
		for _, a := range get(t, s, func(tx store.Tx) ([]store.Account, error) { return tx.Accounts() }) {
			out = append(out, fmt.Sprintf("%s:%d:%s/%s", a.OwnerID, a.Rank, a.RunnerID, a.ID))
		}
		return out
	}
	equal(t, "Accounts() of none", all(), nil)
	// Bob's first, so that neither insertion nor runner order is the
	// owner order; a move makes rank order differ from insertion order.
	syncAccounts(t, s, "r-3", at(100), account("x", "claude"), account("y", "claude"))
	syncAccounts(t, s, "r-2", at(100), account("c", "codex"))
	syncAccounts(t, s, "r-1", at(100), account("a", "claude"), account("b", "claude"))
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.MoveAccount("u-1", "r-1", "b", 1), tx.MoveAccount("u-2", "r-3", "y", 1))
	})
	equal(t, "Accounts()", all(), []string{
		"u-1:1:r-1/b", "u-1:2:r-2/c", "u-1:3:r-1/a",
		"u-2:1:r-3/y", "u-2:2:r-3/x",
	})
	// Every field, as AccountsOfOwner has it.
	got := get(t, s, func(tx store.Tx) ([]store.Account, error) { return tx.Accounts() })
	equal(t, "Accounts() of u-1", got[:3], accountsOf(t, s, "u-1"))
}
