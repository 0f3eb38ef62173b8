package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"drover/internal/store"
)

// Hubs, RunnerHubs and LeaderTerm are the tables of several hubs on one
// database: who is running, who holds which runner, who leads.
var (
	Hubs       = Table{"hubs", []string{"id", "url", "version", "started_at", "last_seen", "conns"}}
	RunnerHubs = Table{"runner_hubs", []string{"runner_id", "hub_id", "since", "agents", "accounts", "not_ready", "draining"}}
	LeaderTerm = Table{"leader", []string{"name", "holder", "term", "since", "expires_at"}}
)

// leaderName keys the one leader row (a name, so other terms could follow).
const leaderName = "hub"

var hubs = newTable(Hubs)

func scanHub(s Scanner) (h store.Hub, err error) {
	err = s.Scan(&h.ID, &h.URL, &h.Version, TimeCol{&h.StartedAt}, TimeCol{&h.LastSeen}, &h.Conns)
	return h, err
}

func (t *tx) PutHub(h store.Hub) error {
	_, err := t.exec("record hub "+h.ID,
		`INSERT INTO hubs (`+hubs.cols+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET url = excluded.url, version = excluded.version,
			started_at = excluded.started_at, last_seen = excluded.last_seen, conns = excluded.conns`,
		h.ID, h.URL, h.Version, Millis(h.StartedAt), Millis(h.LastSeen), h.Conns)
	return err
}

func (t *tx) Hubs() ([]store.Hub, error) {
	return all(t, "hubs", scanHub, hubs.query("ORDER BY started_at, id"))
}

func (t *tx) DeleteHub(id string) error {
	if _, err := t.exec("forget the runners of hub "+id, `DELETE FROM runner_hubs WHERE hub_id = ?`, id); err != nil {
		return err
	}
	_, err := t.exec("forget hub "+id, `DELETE FROM hubs WHERE id = ?`, id)
	return err
}

func (t *tx) PruneHubs(before time.Time) error {
	ms := Millis(before)
	if _, err := t.exec("forget the runners of hubs gone",
		`DELETE FROM runner_hubs WHERE hub_id NOT IN (SELECT id FROM hubs WHERE last_seen >= ?)`, ms); err != nil {
		return err
	}
	_, err := t.exec("forget hubs gone", `DELETE FROM hubs WHERE last_seen < ?`, ms)
	return err
}

func (t *tx) HoldRunner(runnerID, hubID string, at time.Time) error {
	_, err := t.exec("record that hub "+hubID+" holds runner "+runnerID,
		`INSERT INTO runner_hubs (runner_id, hub_id, since) VALUES (?, ?, ?)
		ON CONFLICT (runner_id) DO UPDATE SET hub_id = excluded.hub_id, since = excluded.since,
			agents = excluded.agents, accounts = excluded.accounts, not_ready = excluded.not_ready, draining = excluded.draining`,
		runnerID, hubID, Millis(at))
	return err
}

func (t *tx) SetRunnerStatus(runnerID, hubID string, st store.RunnerStatus) error {
	_, err := t.exec("record the status of runner "+runnerID,
		`UPDATE runner_hubs SET agents = ?, accounts = ?, not_ready = ?, draining = ? WHERE runner_id = ? AND hub_id = ?`,
		JSONArg{orEmpty(st.Agents)}, JSONArg{orEmpty(st.Accounts)}, st.NotReady, st.Draining, runnerID, hubID)
	return err
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// runnersHeld selects runners with their holding row (h) and, while held,
// their active attempts; activeArgs come first.
var runnersHeld = "SELECT runners." + strings.Join(Runners.Cols, ", runners.") +
	", h.hub_id, h.agents, h.accounts, h.not_ready, h.draining, CASE WHEN h.hub_id IS NULL THEN 0 ELSE " +
	"(SELECT COUNT(*) FROM attempts a WHERE a.runner_id = runners.id AND a." + activeState + ") END " +
	"FROM runners LEFT JOIN runner_hubs h ON h.runner_id = runners.id "

// scanMore scans the columns of a row that follow those s's user scans.
type scanMore struct {
	s    Scanner
	more []any
}

func (m scanMore) Scan(dest ...any) error { return m.s.Scan(append(dest, m.more...)...) }

func scanRunnerHeld(s Scanner) (store.Runner, error) {
	var (
		hub, agents, accounts, notReady sql.NullString
		draining                        sql.NullBool
		running                         int
	)
	r, err := ScanRunner(scanMore{s, []any{&hub, &agents, &accounts, &notReady, &draining, &running}})
	if err != nil || !hub.Valid {
		return r, err
	}
	held := &store.RunnerHeld{Hub: hub.String, Running: running,
		Status: store.RunnerStatus{NotReady: notReady.String, Draining: draining.Bool}}
	if err := errors.Join(JSONCol{&held.Status.Agents}.Scan(agents.String), JSONCol{&held.Status.Accounts}.Scan(accounts.String)); err != nil {
		return r, fmt.Errorf("status of runner %s: %w", r.ID, err)
	}
	r.Held = held
	return r, nil
}

func (t *tx) ReleaseRunner(runnerID, hubID string) error {
	_, err := t.exec("forget that hub "+hubID+" holds runner "+runnerID,
		`DELETE FROM runner_hubs WHERE runner_id = ? AND hub_id = ?`, runnerID, hubID)
	return err
}

// leftChunk is how many runners one statement of RunnersLeft names: the
// list is padded to it (an id twice is the same match), so the statement
// has one text and stays prepared.
const leftChunk = 500

var leftIn = "(" + strings.Repeat("?, ", leftChunk-1) + "?)"

func (t *tx) RunnersLeft(ids []string, hubID string, at time.Time) error {
	for chunk := range slices.Chunk(ids, leftChunk) {
		args := make([]any, 1, leftChunk+1)
		args[0] = Millis(at)
		for i := range leftChunk {
			args = append(args, chunk[min(i, len(chunk)-1)])
		}
		if _, err := t.exec("record runners' last contact", `UPDATE runners SET last_seen = ? WHERE id IN `+leftIn, args...); err != nil {
			return err
		}
		args[0] = hubID
		if _, err := t.exec("forget that hub "+hubID+" holds runners", `DELETE FROM runner_hubs WHERE hub_id = ? AND runner_id IN `+leftIn, args...); err != nil {
			return err
		}
	}
	return nil
}

// heldBy selects the runner_hubs rows (r) of live hubs (h); it takes the
// liveSince instant as its first argument.
const heldBy = `FROM runner_hubs r JOIN hubs h ON h.id = r.hub_id WHERE h.last_seen >= ?`

type holding struct{ runner, hub string }

func scanHolding(s Scanner) (h holding, err error) {
	err = s.Scan(&h.runner, &h.hub)
	return h, err
}

func (t *tx) HeldRunners(liveSince time.Time) (map[string]string, error) {
	return stringMap(t, "runners held by live hubs", `SELECT r.runner_id, r.hub_id `+heldBy, Millis(liveSince))
}

func (t *tx) RunnerHolder(runnerID string, liveSince time.Time) (string, error) {
	h, err := one(t, "holder of runner "+runnerID, scanHolding,
		`SELECT r.runner_id, r.hub_id `+heldBy+` AND r.runner_id = ?`, Millis(liveSince), runnerID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return h.hub, err
}

func (t *tx) ExtendOfflineLeases(until, liveSince time.Time) error {
	ms := Millis(until)
	_, err := t.exec("extend the leases of offline runners",
		"UPDATE attempts SET lease_until = ? WHERE "+activeState+" AND lease_until < ? AND runner_id NOT IN (SELECT r.runner_id "+heldBy+")",
		append([]any{ms}, activeArgs(ms, Millis(liveSince))...)...)
	return err
}

var leaderTerm = newTable(LeaderTerm)

func scanLeader(s Scanner) (l store.Leader, err error) {
	var name string
	err = s.Scan(&name, &l.Holder, &l.Term, TimeCol{&l.Since}, TimeCol{&l.Expires})
	return l, err
}

func (t *tx) Leader() (store.Leader, error) {
	return one(t, "leader term", scanLeader, leaderTerm.query("WHERE name = ?"), leaderName)
}

// TakeLeader is one upsert: the row changes only for its holder or once
// it has expired, so of hubs racing for a lapsed term one wins (the
// others' serialized writes then see it held).
func (t *tx) TakeLeader(hubID string, now, until time.Time) (store.Leader, error) {
	_, err := t.exec("take the leader term for hub "+hubID,
		`INSERT INTO leader (`+leaderTerm.cols+`) VALUES (?1, ?2, 1, ?3, ?4)
		ON CONFLICT (name) DO UPDATE SET
			term = CASE WHEN leader.holder = excluded.holder AND leader.expires_at > ?3 THEN leader.term ELSE leader.term + 1 END,
			since = CASE WHEN leader.holder = excluded.holder AND leader.expires_at > ?3 THEN leader.since ELSE excluded.since END,
			holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leader.holder = excluded.holder OR leader.expires_at <= ?3`,
		leaderName, hubID, Millis(now), Millis(until))
	if err != nil {
		return store.Leader{}, err
	}
	l, err := t.Leader()
	if err != nil {
		return l, fmt.Errorf("take the leader term for hub %s: %w", hubID, err)
	}
	return l, nil
}

func (t *tx) ReleaseLeader(hubID string, at time.Time) error {
	_, err := t.exec("release the leader term of hub "+hubID,
		`UPDATE leader SET expires_at = ? WHERE name = ? AND (holder = ? OR ? = '') AND expires_at > ?`,
		Millis(at), leaderName, hubID, hubID, Millis(at))
	return err
}
