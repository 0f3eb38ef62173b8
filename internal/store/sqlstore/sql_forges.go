package sqlstore

import (
	"strings"

	"drover/internal/store"
)

// Forges and Publications are the tables of publishing to forges.
var (
	Forges       = Table{"forges", []string{"name", "kind", "url", "app_id", "secret", "created_by", "created_at", "updated_at"}}
	Publications = Table{"publications", []string{
		"job_id", "forge", "repo", "mode", "branch", "base", "to_pr", "title", "draft", "head", "expect", "pushed",
		"pr_number", "pr_url", "state", "code", "reason", "tries", "asked_by", "created_at", "updated_at"}}
)

var (
	forges    = newTable(Forges)
	putForge  = forges.upsert("created_by", "created_at")
	forgeList = strings.Replace(forges.cols, "secret", "''", 1) // Forges without secrets does not read them
)

func scanForge(s Scanner) (f store.Forge, err error) {
	err = s.Scan(&f.Name, &f.Kind, &f.URL, &f.AppID, &f.Secret, &f.CreatedBy, TimeCol{&f.CreatedAt}, TimeCol{&f.UpdatedAt})
	return f, err
}

func (t *tx) PutForge(f store.Forge) error {
	_, err := t.exec("put forge "+f.Name, putForge,
		f.Name, f.Kind, f.URL, f.AppID, f.Secret, f.CreatedBy, Millis(f.CreatedAt), Millis(f.UpdatedAt))
	return err
}

func (t *tx) Forge(name string) (store.Forge, error) {
	return one(t, "forge "+name, scanForge, forges.query("WHERE name = ?"), name)
}

func (t *tx) Forges(secrets bool) ([]store.Forge, error) {
	q := forges.query("ORDER BY name")
	if !secrets {
		q = "SELECT " + forgeList + " FROM forges ORDER BY name"
	}
	return all(t, "forges", scanForge, q)
}

func (t *tx) RemoveForge(name string) error {
	what := "remove forge " + name
	res, err := t.exec(what, `DELETE FROM forges WHERE name = ?`, name)
	if err != nil {
		return err
	}
	return affected(what, res)
}

var (
	publications   = newTable(Publications)
	putPublication = publications.upsert("created_at")
)

func scanPublication(s Scanner) (p store.Publication, err error) {
	err = s.Scan(&p.JobID, &p.Forge, &p.Repo, &p.Mode, &p.Branch, &p.Base, &p.ToPR, &p.Title, &p.Draft, &p.Commit,
		&p.Expect, &p.Pushed, &p.PRNumber, &p.PRURL, &p.State, &p.Code, &p.Reason, &p.Tries, &p.By,
		TimeCol{&p.CreatedAt}, TimeCol{&p.UpdatedAt})
	return p, err
}

func (t *tx) PutPublication(p store.Publication) error {
	_, err := t.exec("put the publication of job "+p.JobID, putPublication,
		p.JobID, p.Forge, p.Repo, p.Mode, p.Branch, p.Base, p.ToPR, p.Title, p.Draft, p.Commit,
		p.Expect, p.Pushed, p.PRNumber, p.PRURL, string(p.State), p.Code, p.Reason, p.Tries, p.By,
		Millis(p.CreatedAt), Millis(p.UpdatedAt))
	return err
}

func (t *tx) Publication(jobID string) (store.Publication, error) {
	return one(t, "publication of job "+jobID, scanPublication, publications.query("WHERE job_id = ?"), jobID)
}

// Publications lists those in state, oldest update first (the job id
// breaking ties, so the order is stable).
func (t *tx) Publications(state store.PublicationState) ([]store.Publication, error) {
	return all(t, "publications "+string(state), scanPublication,
		publications.query("WHERE state = ? ORDER BY updated_at, job_id"), string(state))
}
