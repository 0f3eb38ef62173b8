package sqlstore

import (
	"fmt"
	"strings"

	"drover/internal/store"
)

// Pipelines, PipelineRuns and StepResults are the tables of pipelines of
// steps (internal/pipeline); a pipeline's log is pipeline_events.
var (
	Pipelines = Table{"pipelines", []string{
		"id", "name", "file", "project", "base", "requester_id", "key", "spec", "params", "staged",
		"state", "reason", "result", "created_at", "updated_at"}}
	PipelineRuns = Table{"pipeline_runs", []string{
		"pipeline_id", "key", "step", "round", "item", "item_value", "hash", "input", "job_id", "tries",
		"state", "replayed", "head", "summary", "reason", "cost_usd", "tokens", "created_at", "updated_at"}}
	StepResults = Table{"step_results", []string{
		"project", "hash", "job_id", "head", "summary", "cost_usd", "tokens", "created_at"}}
)

// PipelineEventCols are a pipeline event's columns, for a SELECT scanned
// by scanPipelineEvent.
const PipelineEventCols = "seq, pipeline_id, at, kind, step, actor, message"

var (
	pipelines      = newTable(Pipelines)
	pipelineRuns   = newTable(PipelineRuns)
	putPipelineRun = pipelineRuns.upsertOn(2, "created_at")
	stepResults    = newTable(StepResults)
)

func scanPipeline(s Scanner) (p store.Pipeline, err error) {
	err = s.Scan(&p.ID, &p.Name, &p.File, &p.Project, &p.Base, &p.RequesterID, &p.Key, &p.Spec, &p.Params, &p.Staged,
		&p.State, &p.Reason, &p.Result, TimeCol{&p.CreatedAt}, TimeCol{&p.UpdatedAt})
	return p, err
}

func (t *tx) InsertPipeline(p store.Pipeline) error {
	return t.insert(pipelines, "pipeline "+p.ID, []any{
		p.ID, p.Name, p.File, p.Project, p.Base, p.RequesterID, p.Key, p.Spec, p.Params, p.Staged,
		string(p.State), p.Reason, p.Result, Millis(p.CreatedAt), Millis(p.UpdatedAt)})
}

func (t *tx) Pipeline(id string) (store.Pipeline, error) {
	return one(t, "pipeline "+id, scanPipeline, pipelines.query("WHERE id = ?"), id)
}

func (t *tx) PipelineByKey(requesterID, key string) (store.Pipeline, error) {
	return one(t, "pipeline with key "+key+" of "+requesterID, scanPipeline,
		pipelines.query("WHERE requester_id = ? AND key = ? AND key != ''"), requesterID, key)
}

// UpdatePipeline writes only what changes as a pipeline runs; the rest is
// as it was inserted.
func (t *tx) UpdatePipeline(p store.Pipeline) error {
	what := "update pipeline " + p.ID
	res, err := t.exec(what, `UPDATE pipelines SET state = ?, reason = ?, result = ?, updated_at = ? WHERE id = ?`,
		string(p.State), p.Reason, p.Result, Millis(p.UpdatedAt), p.ID)
	if err != nil {
		return err
	}
	return affected(what, res)
}

// Pipelines lists those f selects, newest first (the id breaking ties);
// a Limit of 0 lists them all.
func (t *tx) Pipelines(f store.PipelineFilter) ([]store.Pipeline, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, v string }{
		{"requester_id", f.RequesterID}, {"project", f.Project}, {"state", string(f.State)},
	} {
		if c.v != "" {
			where, args = append(where, c.col+" = ?"), append(args, c.v)
		}
	}
	q := ""
	if len(where) > 0 {
		q = "WHERE " + strings.Join(where, " AND ") + " "
	}
	return all(t, "pipelines", scanPipeline,
		pipelines.query(q+"ORDER BY created_at DESC, id DESC LIMIT ?"), append(args, noLimit(f.Limit))...)
}

func scanPipelineRun(s Scanner) (r store.PipelineRun, err error) {
	err = s.Scan(&r.PipelineID, &r.Key, &r.Step, &r.Round, &r.Item, &r.ItemValue, &r.Hash, &r.Input, &r.JobID,
		&r.Tries, &r.State, &r.Replayed, &r.Commit, &r.Summary, &r.Reason, &r.CostUSD, &r.Tokens,
		TimeCol{&r.CreatedAt}, TimeCol{&r.UpdatedAt})
	return r, err
}

func pipelineRunWhat(pipelineID, key string) string {
	return fmt.Sprintf("run %s of pipeline %s", key, pipelineID)
}

func (t *tx) PutPipelineRun(r store.PipelineRun) error {
	_, err := t.exec("put "+pipelineRunWhat(r.PipelineID, r.Key), putPipelineRun,
		r.PipelineID, r.Key, r.Step, r.Round, r.Item, r.ItemValue, r.Hash, r.Input, r.JobID,
		r.Tries, string(r.State), r.Replayed, r.Commit, r.Summary, r.Reason, r.CostUSD, r.Tokens,
		Millis(r.CreatedAt), Millis(r.UpdatedAt))
	return err
}

func (t *tx) PipelineRuns(pipelineID string) ([]store.PipelineRun, error) {
	return all(t, "runs of pipeline "+pipelineID, scanPipelineRun,
		pipelineRuns.query("WHERE pipeline_id = ? ORDER BY created_at, key"), pipelineID)
}

// PipelineRunByJob skips replays: a replay names the job of the result it
// replays, which is some other run.
func (t *tx) PipelineRunByJob(jobID string) (store.PipelineRun, error) {
	return one(t, "pipeline run of job "+jobID, scanPipelineRun,
		pipelineRuns.query("WHERE job_id = ? AND job_id != '' AND NOT replayed"), jobID)
}

func scanStepResult(s Scanner) (r store.StepResult, err error) {
	err = s.Scan(&r.Project, &r.Hash, &r.JobID, &r.Commit, &r.Summary, &r.CostUSD, &r.Tokens, TimeCol{&r.CreatedAt})
	return r, err
}

func stepResultWhat(project, hash string) string {
	return fmt.Sprintf("result of step %s of project %s", hash, project)
}

// PutStepResult keeps the first result of a step: a second is a no-op
// (the insert's onConflict), not ErrConflict.
func (t *tx) PutStepResult(r store.StepResult) error {
	_, err := t.exec("put "+stepResultWhat(r.Project, r.Hash), stepResults.insert,
		r.Project, r.Hash, r.JobID, r.Commit, r.Summary, r.CostUSD, r.Tokens, Millis(r.CreatedAt))
	return err
}

func (t *tx) StepResult(project, hash string) (store.StepResult, error) {
	return one(t, stepResultWhat(project, hash), scanStepResult,
		stepResults.query("WHERE project = ? AND hash = ?"), project, hash)
}

func scanPipelineEvent(s Scanner) (e store.PipelineEvent, err error) {
	err = s.Scan(&e.Seq, &e.PipelineID, TimeCol{&e.At}, &e.Kind, &e.Step, &e.Actor, &e.Message)
	return e, err
}

func (t *tx) AddPipelineEvent(e store.PipelineEvent) (int64, error) {
	return t.insertSeq("add event to pipeline "+e.PipelineID, `INSERT INTO pipeline_events
		(pipeline_id, at, kind, step, actor, message) VALUES (?, ?, ?, ?, ?, ?) RETURNING seq`,
		e.PipelineID, Millis(e.At), e.Kind, e.Step, e.Actor, e.Message)
}

// PipelineEvents lists the pipeline's events after afterSeq in order;
// limit <= 0 means all of them.
func (t *tx) PipelineEvents(pipelineID string, afterSeq int64, limit int) ([]store.PipelineEvent, error) {
	return all(t, "events of pipeline "+pipelineID, scanPipelineEvent,
		"SELECT "+PipelineEventCols+` FROM pipeline_events
		WHERE pipeline_id = ? AND seq > ? ORDER BY seq LIMIT ?`, pipelineID, afterSeq, noLimit(limit))
}
