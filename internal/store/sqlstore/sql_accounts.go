package sqlstore

import (
	"fmt"
	"time"

	"drover/internal/store"
)

var accounts = newTable(Accounts)

// upsertAccount inserts a new account ranked after every account of its
// owner (?3), or updates a kept one in place. A kept account keeps its rank
// unless the runner changed owner, when it goes last among the new owner's.
// A report that changes nothing writes nothing, so updated_at is when the
// hub last saw the account change.
const upsertAccount = `INSERT INTO accounts
	(runner_id, id, owner_id, agent, label, kind, state, limited_until, rank, updated_at)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,
		(SELECT coalesce(max(rank), 0) + 1 FROM accounts WHERE owner_id = ?3), ?9)
	ON CONFLICT (runner_id, id) DO UPDATE SET
		rank = CASE WHEN accounts.owner_id = excluded.owner_id THEN accounts.rank ELSE excluded.rank END,
		owner_id = excluded.owner_id, agent = excluded.agent, label = excluded.label,
		kind = excluded.kind, state = excluded.state, limited_until = excluded.limited_until,
		updated_at = excluded.updated_at
	WHERE accounts.owner_id IS DISTINCT FROM excluded.owner_id OR accounts.agent IS DISTINCT FROM excluded.agent
		OR accounts.label IS DISTINCT FROM excluded.label OR accounts.kind IS DISTINCT FROM excluded.kind
		OR accounts.state IS DISTINCT FROM excluded.state
		OR accounts.limited_until IS DISTINCT FROM excluded.limited_until`

// SyncRunnerAccounts makes accts the runner's accounts: missing ones are
// deleted, kept ones updated in place, new ones ranked last for the
// runner's owner (in the order given).
func (t *tx) SyncRunnerAccounts(runnerID string, accts []store.Account, now time.Time) error {
	what := "sync accounts of runner " + runnerID
	owner, err := one(t, "runner "+runnerID, Value[string], `SELECT owner_id FROM runners WHERE id = ?`, runnerID)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// Delete first, so that new accounts rank right after the ones kept.
	had, err := all(t, what, Value[string], `SELECT id FROM accounts WHERE runner_id = ?`, runnerID)
	if err != nil {
		return err
	}
	gone, err := SyncDeletes(what, had, accts)
	if err != nil {
		return err
	}
	for _, id := range gone {
		if _, err := t.exec(what+": delete account "+id,
			`DELETE FROM accounts WHERE runner_id = ? AND id = ?`, runnerID, id); err != nil {
			return err
		}
	}
	for _, a := range accts {
		if _, err := t.exec(what+": put account "+a.ID, upsertAccount,
			runnerID, a.ID, owner, a.Agent, a.Label, a.Kind, a.State, OptMillis(a.LimitedUntil),
			Millis(now)); err != nil {
			return err
		}
	}
	return nil
}

// AccountsOfOwner lists the owner's accounts across their runners, best
// rank first.
func (t *tx) AccountsOfOwner(ownerID string) ([]store.Account, error) {
	return all(t, "accounts of "+ownerID, ScanAccount,
		accounts.query("WHERE owner_id = ? ORDER BY rank, runner_id, id"), ownerID)
}

// AccountRanks maps AccountKey(runner, id) of every account to its rank.
func (t *tx) AccountRanks() (map[string]int64, error) {
	type ranked struct {
		key  string
		rank int64
	}
	rs, err := all(t, "account ranks", func(s Scanner) (r ranked, err error) {
		var runnerID, id string
		err = s.Scan(&runnerID, &id, &r.rank)
		r.key = store.AccountKey(runnerID, id)
		return r, err
	}, `SELECT runner_id, id, rank FROM accounts`)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rs))
	for _, r := range rs {
		out[r.key] = r.rank
	}
	return out, nil
}

// MoveAccount puts the owner's account (runnerID, id) at the 1-based
// position among the owner's accounts, clamped to [1, n], and renumbers
// the owner's accounts 1..n.
func (t *tx) MoveAccount(ownerID, runnerID, id string, position int) error {
	what := fmt.Sprintf("move account %s of runner %s", id, runnerID)
	refs, err := all(t, what, ScanRanked,
		`SELECT runner_id, id, rank FROM accounts WHERE owner_id = ? ORDER BY rank, runner_id, id`, ownerID)
	if err != nil {
		return err
	}
	changed, err := Move(what+" of "+ownerID, refs, runnerID, id, position)
	if err != nil {
		return err
	}
	for _, r := range changed {
		if _, err := t.exec(what, `UPDATE accounts SET rank = ? WHERE runner_id = ? AND id = ?`,
			r.Rank, r.RunnerID, r.ID); err != nil {
			return err
		}
	}
	return nil
}

// Accounts lists every account, by owner then best rank first.
func (t *tx) Accounts() ([]store.Account, error) {
	return all(t, "accounts", ScanAccount, accounts.query("ORDER BY owner_id, rank, runner_id, id"))
}
