package sqlstore

import (
	"fmt"
	"time"

	"drover/internal/store"
)

// Who may see a job (JobFilter.VisibleTo, QuestionFilter.VisibleTo): its
// requester, the members of its project, and, for a job without a project,
// the owners of the runners it had an attempt on. visibleWays are the three as conditions on jobs, each
// taking the user id once; visibleJob is their disjunction on jobs.
var visibleWays = []string{
	"requester_id = ?",
	"project != '' AND project IN (SELECT project FROM project_members WHERE user_id = ?)",
	"project = '' AND id IN (SELECT attempts.job_id FROM runners JOIN attempts ON attempts.runner_id = runners.id WHERE runners.owner_id = ?)",
}

// visibleJob is the same rule for one jobs row (for the few rows another
// condition already picked): it names jobs columns qualified, and takes the
// user id three times.
const visibleJob = `(jobs.requester_id = ?
	OR (jobs.project != '' AND EXISTS (SELECT 1 FROM project_members
		WHERE project_members.project = jobs.project AND project_members.user_id = ?))
	OR (jobs.project = '' AND EXISTS (SELECT 1 FROM attempts JOIN runners ON runners.id = attempts.runner_id
		WHERE attempts.job_id = jobs.id AND runners.owner_id = ?)))`

func visibleArgs(userID string) []any {
	return []any{userID, userID, userID}
}

const shareCols = "SELECT " + ShareCols + " FROM shares "

// PutShare, AcceptShare, DeleteShare and DeleteSharesOf give the runners
// whose shares they change a new access version.
func (t *tx) PutShare(s store.Share) error {
	if err := t.insertNew("put "+ShareWhat(s),
		`INSERT INTO shares (`+ShareCols+`) VALUES (?, ?, ?, ?, ?, ?)`+onConflict,
		s.RunnerID, s.AccountID, s.Kind, s.Subject, Millis(s.CreatedAt), OptMillis(s.AcceptedAt)); err != nil {
		return err
	}
	return t.stampAccess("runner "+s.RunnerID, "id = ?", s.RunnerID)
}

func (t *tx) AcceptShare(s store.Share, at time.Time) error {
	what := "accept " + ShareWhat(s)
	res, err := t.exec(what,
		`UPDATE shares SET accepted_at = COALESCE(accepted_at, ?) WHERE runner_id = ? AND account_id = ? AND kind = ? AND subject = ?`,
		Millis(at), s.RunnerID, s.AccountID, s.Kind, s.Subject)
	if err != nil {
		return err
	}
	if err := affected(what, res); err != nil {
		return err
	}
	return t.stampAccess("runner "+s.RunnerID, "id = ?", s.RunnerID)
}

func (t *tx) DeleteShare(s store.Share) error {
	what := "delete " + ShareWhat(s)
	res, err := t.exec(what,
		`DELETE FROM shares WHERE runner_id = ? AND account_id = ? AND kind = ? AND subject = ?`,
		s.RunnerID, s.AccountID, s.Kind, s.Subject)
	if err != nil {
		return err
	}
	if err := affected(what, res); err != nil {
		return err
	}
	return t.stampAccess("runner "+s.RunnerID, "id = ?", s.RunnerID)
}

// Shares lists the runner's shares and its accounts', oldest first (the
// key breaks ties, so the order is stable).
func (t *tx) Shares(runnerID string) ([]store.Share, error) {
	return all(t, "shares of runner "+runnerID, ScanShare,
		shareCols+"WHERE runner_id = ? ORDER BY created_at, account_id, kind, subject", runnerID)
}

func (t *tx) AllShares() ([]store.Share, error) {
	return all(t, "shares", ScanShare, shareCols+"ORDER BY runner_id, created_at, account_id, kind, subject")
}

func (t *tx) DeleteSharesOf(kind store.ShareKind, subject string) error {
	what := fmt.Sprintf("shares with %s %s", kind, subject)
	if err := t.stampAccess("the runners of "+what, "id IN (SELECT runner_id FROM shares WHERE kind = ? AND subject = ?)", kind, subject); err != nil {
		return err
	}
	_, err := t.exec("delete "+what, `DELETE FROM shares WHERE kind = ? AND subject = ?`, kind, subject)
	return err
}

func (t *tx) AddMember(project, userID string, at time.Time) error {
	return t.insertNew(fmt.Sprintf("add %s to project %s", userID, project),
		`INSERT INTO project_members (project, user_id, created_at) VALUES (?, ?, ?)`+onConflict, project, userID, Millis(at))
}

func (t *tx) RemoveMember(project, userID string) error {
	what := fmt.Sprintf("remove %s from project %s", userID, project)
	res, err := t.exec(what, `DELETE FROM project_members WHERE project = ? AND user_id = ?`, project, userID)
	if err != nil {
		return err
	}
	return affected(what, res)
}

// Members lists the project's members, oldest membership first; a missing
// project has none.
func (t *tx) Members(project string) ([]string, error) {
	return all(t, "members of project "+project, Value[string],
		`SELECT user_id FROM project_members WHERE project = ? ORDER BY created_at, user_id`, project)
}

func (t *tx) ProjectsOf(userID string) ([]string, error) {
	return all(t, "projects of "+userID, Value[string],
		`SELECT project FROM project_members WHERE user_id = ? ORDER BY project`, userID)
}

func (t *tx) PutProjectSecret(s store.ProjectSecret) error {
	_, err := t.exec(fmt.Sprintf("put secret %s of project %s", s.Name, s.Project),
		`INSERT INTO project_secrets (project, name, upstream, header, prefix, value, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (project, name) DO UPDATE SET upstream = excluded.upstream, header = excluded.header, prefix = excluded.prefix,
			value = excluded.value, created_by = excluded.created_by, created_at = excluded.created_at`,
		s.Project, s.Name, s.Upstream, s.Header, s.Prefix, s.Value, s.CreatedBy, Millis(s.CreatedAt))
	return err
}

// ProjectSecrets lists a project's secrets by name; without values their
// values are not even read.
func (t *tx) ProjectSecrets(project string, values bool) ([]store.ProjectSecret, error) {
	value := "''"
	if values {
		value = "value"
	}
	return all(t, "secrets of project "+project, func(s Scanner) (ps store.ProjectSecret, err error) {
		err = s.Scan(&ps.Project, &ps.Name, &ps.Upstream, &ps.Header, &ps.Prefix, &ps.Value, &ps.CreatedBy, TimeCol{&ps.CreatedAt})
		return ps, err
	}, `SELECT project, name, upstream, header, prefix, `+value+`, created_by, created_at FROM project_secrets WHERE project = ? ORDER BY name`, project)
}

func (t *tx) RemoveProjectSecret(project, name string) error {
	what := fmt.Sprintf("remove secret %s of project %s", name, project)
	res, err := t.exec(what, `DELETE FROM project_secrets WHERE project = ? AND name = ?`, project, name)
	if err != nil {
		return err
	}
	return affected(what, res)
}
