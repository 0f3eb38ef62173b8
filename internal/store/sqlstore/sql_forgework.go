package sqlstore

import (
	"time"

	"drover/internal/store"
)

// The tables of forge triggers (internal/forgework).
var (
	ForgeTriggers = Table{"forge_triggers", []string{"project", "hook_id", "secret", "forge", "kind", "repo", "remote_id",
		"label", "command", "reviews", "assign", "agent", "created_by", "created_at", "updated_at"}}
	ForgeLinks      = Table{"forge_links", []string{"id", "forge", "login", "user_id", "created_by", "created_at"}}
	ForgeDeliveries = Table{"forge_deliveries", []string{"id", "hook_id", "delivery", "event", "state", "job_id", "reason",
		"tries", "created_at", "updated_at"}}
)

var (
	forgeTriggers   = newTable(ForgeTriggers)
	putForgeTrigger = forgeTriggers.upsert("created_by", "created_at")
	forgeLinks      = newTable(ForgeLinks)
	forgeDeliveries = newTable(ForgeDeliveries)
)

// pairKey is the one-column key of a row keyed by two names (neither
// holds a space: forge names, logins, hook ids and delivery ids are
// checked so).
func pairKey(a, b string) string { return a + " " + b }

func scanForgeTrigger(s Scanner) (f store.ForgeTrigger, err error) {
	err = s.Scan(&f.Project, &f.HookID, &f.Secret, &f.Forge, &f.Kind, &f.Repo, &f.RemoteID, &f.Label, &f.Command,
		&f.Reviews, &f.Assign, &f.Agent, &f.CreatedBy, TimeCol{&f.CreatedAt}, TimeCol{&f.UpdatedAt})
	return f, err
}

func (t *tx) PutForgeTrigger(f store.ForgeTrigger) error {
	_, err := t.exec("put the forge triggers of project "+f.Project, putForgeTrigger,
		f.Project, f.HookID, f.Secret, f.Forge, f.Kind, f.Repo, f.RemoteID, f.Label, f.Command, f.Reviews, f.Assign, f.Agent,
		f.CreatedBy, Millis(f.CreatedAt), Millis(f.UpdatedAt))
	return err
}

func (t *tx) ForgeTrigger(project string) (store.ForgeTrigger, error) {
	return one(t, "forge triggers of project "+project, scanForgeTrigger, forgeTriggers.query("WHERE project = ?"), project)
}

func (t *tx) ForgeTriggerByHook(hookID string) (store.ForgeTrigger, error) {
	return one(t, "forge hook "+hookID, scanForgeTrigger, forgeTriggers.query("WHERE hook_id = ?"), hookID)
}

func (t *tx) RemoveForgeTrigger(project string) error {
	what := "remove the forge triggers of project " + project
	res, err := t.exec(what, `DELETE FROM forge_triggers WHERE project = ?`, project)
	if err != nil {
		return err
	}
	return affected(what, res)
}

func scanForgeLink(s Scanner) (l store.ForgeLink, err error) {
	var id string
	err = s.Scan(&id, &l.Forge, &l.Login, &l.UserID, &l.CreatedBy, TimeCol{&l.CreatedAt})
	return l, err
}

func (t *tx) PutForgeLink(l store.ForgeLink) error {
	return t.insert(forgeLinks, "forge link "+l.Forge+" "+l.Login,
		[]any{pairKey(l.Forge, l.Login), l.Forge, l.Login, l.UserID, l.CreatedBy, Millis(l.CreatedAt)})
}

func (t *tx) ForgeLink(forge, login string) (store.ForgeLink, error) {
	return one(t, "forge link "+forge+" "+login, scanForgeLink, forgeLinks.query("WHERE id = ?"), pairKey(forge, login))
}

func (t *tx) ForgeLinksOf(userID string) ([]store.ForgeLink, error) {
	return all(t, "forge links of user "+userID, scanForgeLink,
		forgeLinks.query("WHERE user_id = ? ORDER BY forge, login"), userID)
}

func (t *tx) RemoveForgeLink(forge, login string) error {
	what := "remove forge link " + forge + " " + login
	res, err := t.exec(what, `DELETE FROM forge_links WHERE id = ?`, pairKey(forge, login))
	if err != nil {
		return err
	}
	return affected(what, res)
}

func scanForgeDelivery(s Scanner) (d store.ForgeDelivery, err error) {
	var id string
	err = s.Scan(&id, &d.HookID, &d.Delivery, &d.Event, &d.State, &d.JobID, &d.Reason, &d.Tries,
		TimeCol{&d.CreatedAt}, TimeCol{&d.UpdatedAt})
	return d, err
}

func deliveryArgs(d store.ForgeDelivery) []any {
	return []any{pairKey(d.HookID, d.Delivery), d.HookID, d.Delivery, d.Event, string(d.State), d.JobID, d.Reason, d.Tries,
		Millis(d.CreatedAt), Millis(d.UpdatedAt)}
}

func (t *tx) InsertForgeDelivery(d store.ForgeDelivery) error {
	return t.insert(forgeDeliveries, "delivery "+d.Delivery+" of hook "+d.HookID, deliveryArgs(d))
}

func (t *tx) ForgeDelivery(hookID, delivery string) (store.ForgeDelivery, error) {
	return one(t, "delivery "+delivery+" of hook "+hookID, scanForgeDelivery,
		forgeDeliveries.query("WHERE id = ?"), pairKey(hookID, delivery))
}

func (t *tx) UpdateForgeDelivery(d store.ForgeDelivery) error {
	what := "delivery " + d.Delivery + " of hook " + d.HookID
	res, err := t.exec("update "+what,
		`UPDATE forge_deliveries SET state = ?, job_id = ?, reason = ?, tries = ?, updated_at = ? WHERE id = ?`,
		string(d.State), d.JobID, d.Reason, d.Tries, Millis(d.UpdatedAt), pairKey(d.HookID, d.Delivery))
	if err != nil {
		return err
	}
	return affected("update "+what, res)
}

func (t *tx) ForgeDeliveries(state store.ForgeDeliveryState, limit int) ([]store.ForgeDelivery, error) {
	return all(t, "forge deliveries "+string(state), scanForgeDelivery,
		forgeDeliveries.query("WHERE state = ? ORDER BY created_at, id LIMIT ?"), string(state), limit)
}

func (t *tx) PruneForgeDeliveries(before time.Time) (int64, error) {
	res, err := t.exec("prune forge deliveries",
		`DELETE FROM forge_deliveries WHERE state != ? AND updated_at < ?`, string(store.DeliveryPending), Millis(before))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
