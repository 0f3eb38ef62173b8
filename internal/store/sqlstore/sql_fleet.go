package sqlstore

import (
	"fmt"
	"time"

	"drover/internal/store"
)

// Launches and Registrations are the fleet's tables.
var (
	Launches       = Table{"launches", []string{"id", "owner_id", "target", "labels", "slots", "count", "created_at", "revoked_at"}}
	Registrations  = Table{"registrations", []string{"hash", "launch_id", "name", "created_at", "expires_at", "used_at", "runner_id"}}
	LaunchFailures = Table{"launch_failures", []string{"owner_id", "launch_id", "target", "labels", "reason", "failed_at"}}
)

var launches = newTable(Launches)

func launchArgs(l store.Launch) []any {
	return []any{l.ID, l.OwnerID, l.Target, JSONArg{l.Labels}, l.Slots, l.Count, Millis(l.CreatedAt), OptMillis(l.RevokedAt)}
}

func scanLaunch(s Scanner) (l store.Launch, err error) {
	err = s.Scan(&l.ID, &l.OwnerID, &l.Target, JSONCol{&l.Labels}, &l.Slots, &l.Count, TimeCol{&l.CreatedAt}, OptTimeCol{&l.RevokedAt})
	return l, err
}

func (t *tx) InsertLaunch(l store.Launch) error {
	return t.insert(launches, "launch "+l.ID, launchArgs(l))
}

func (t *tx) UpdateLaunch(l store.Launch) error {
	what := "update launch " + l.ID
	res, err := t.exec(what, `UPDATE launches SET revoked_at = ? WHERE id = ?`, OptMillis(l.RevokedAt), l.ID)
	if err != nil {
		return err
	}
	return affected(what, res)
}

func (t *tx) Launch(id string) (store.Launch, error) {
	return one(t, "launch "+id, scanLaunch, launches.query("WHERE id = ?"), id)
}

func (t *tx) Launches(ownerID string) ([]store.Launch, error) {
	if ownerID == "" {
		return all(t, "launches", scanLaunch, launches.query("ORDER BY created_at, id"))
	}
	return all(t, "launches of "+ownerID, scanLaunch, launches.query("WHERE owner_id = ? ORDER BY created_at, id"), ownerID)
}

var registrations = newTable(Registrations)

func registrationArgs(r store.Registration) []any {
	return []any{r.Hash, r.LaunchID, r.Name, Millis(r.CreatedAt), Millis(r.ExpiresAt), OptMillis(r.UsedAt), r.RunnerID}
}

func scanRegistration(s Scanner) (r store.Registration, err error) {
	err = s.Scan(&r.Hash, &r.LaunchID, &r.Name, TimeCol{&r.CreatedAt}, TimeCol{&r.ExpiresAt}, OptTimeCol{&r.UsedAt}, &r.RunnerID)
	return r, err
}

// Registration errors name only a prefix of the hash, like TokenWhat.
func registrationWhat(hash string) string { return "registration " + hash[:min(len(hash), 8)] }

func (t *tx) InsertRegistration(r store.Registration) error {
	return t.insert(registrations, registrationWhat(r.Hash), registrationArgs(r))
}

func (t *tx) Registration(hash string) (store.Registration, error) {
	return one(t, registrationWhat(hash), scanRegistration, registrations.query("WHERE hash = ?"), hash)
}

func (t *tx) RegistrationOfRunner(runnerID string) (store.Registration, error) {
	if runnerID == "" {
		return store.Registration{}, store.ErrNotFound
	}
	return one(t, "registration of runner "+runnerID, scanRegistration, registrations.query("WHERE runner_id = ?"), runnerID)
}

func (t *tx) Registrations(launchID string) ([]store.Registration, error) {
	return all(t, "registrations of launch "+launchID, scanRegistration,
		registrations.query("WHERE launch_id = ? ORDER BY name, hash"), launchID)
}

func (t *tx) UseRegistration(hash, runnerID string, at time.Time) error {
	what := "use " + registrationWhat(hash)
	res, err := t.exec(what, `UPDATE registrations SET used_at = ?, runner_id = ? WHERE hash = ? AND used_at IS NULL`,
		Millis(at), runnerID, hash)
	if err != nil {
		return err
	}
	if err := affected(what, res); err == nil {
		return nil
	}
	if _, err := t.Registration(hash); err != nil {
		return err
	}
	return fmt.Errorf("%s: used already: %w", what, store.ErrConflict)
}

var launchFailures = newTable(LaunchFailures)

func scanLaunchFailure(s Scanner) (f store.LaunchFailure, err error) {
	err = s.Scan(&f.OwnerID, &f.LaunchID, &f.Target, JSONCol{&f.Labels}, &f.Reason, TimeCol{&f.FailedAt})
	return f, err
}

func (t *tx) PutLaunchFailure(f store.LaunchFailure) error {
	_, err := t.exec("record the launch failure of "+f.LaunchID,
		`INSERT INTO launch_failures (`+launchFailures.cols+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (owner_id) DO UPDATE SET launch_id = excluded.launch_id, target = excluded.target,
			labels = excluded.labels, reason = excluded.reason, failed_at = excluded.failed_at`,
		f.OwnerID, f.LaunchID, f.Target, JSONArg{f.Labels}, f.Reason, Millis(f.FailedAt))
	return err
}

func (t *tx) ClearLaunchFailure(ownerID string) error {
	_, err := t.exec("clear the launch failure of "+ownerID, `DELETE FROM launch_failures WHERE owner_id = ?`, ownerID)
	return err
}

func (t *tx) LaunchFailures() ([]store.LaunchFailure, error) {
	return all(t, "launch failures", scanLaunchFailure, launchFailures.query("ORDER BY owner_id"))
}
