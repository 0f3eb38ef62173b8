package sqlstore

import (
	"errors"

	"drover/internal/store"
)

// errPipelinesTODO stands in until the pipelines' tables land.
var errPipelinesTODO = errors.New("pipelines: not stored yet")

func (t *tx) InsertPipeline(p store.Pipeline) error { return errPipelinesTODO }
func (t *tx) Pipeline(id string) (store.Pipeline, error) {
	return store.Pipeline{}, errPipelinesTODO
}
func (t *tx) PipelineByKey(requesterID, key string) (store.Pipeline, error) {
	return store.Pipeline{}, store.ErrNotFound
}
func (t *tx) UpdatePipeline(p store.Pipeline) error { return errPipelinesTODO }
func (t *tx) Pipelines(f store.PipelineFilter) ([]store.Pipeline, error) {
	return nil, nil
}
func (t *tx) PutPipelineRun(r store.PipelineRun) error { return errPipelinesTODO }
func (t *tx) PipelineRuns(pipelineID string) ([]store.PipelineRun, error) {
	return nil, nil
}
func (t *tx) PipelineRunByJob(jobID string) (store.PipelineRun, error) {
	return store.PipelineRun{}, store.ErrNotFound
}
func (t *tx) PutStepResult(r store.StepResult) error { return errPipelinesTODO }
func (t *tx) StepResult(project, hash string) (store.StepResult, error) {
	return store.StepResult{}, store.ErrNotFound
}
func (t *tx) AddPipelineEvent(e store.PipelineEvent) (int64, error) { return 0, errPipelinesTODO }
func (t *tx) PipelineEvents(pipelineID string, after int64, limit int) ([]store.PipelineEvent, error) {
	return nil, nil
}
