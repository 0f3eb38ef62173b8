package sqlstore

import (
	"drover/internal/job"
	"drover/internal/store"
)

var questions = newTable(Questions)

func (t *tx) InsertQuestion(q store.Question) error {
	return t.insert(questions, "question "+q.ID, QuestionArgs(q))
}

func (t *tx) UpdateQuestion(q store.Question) error {
	return t.update(questions, "question "+q.ID, QuestionArgs(q))
}

func (t *tx) Questions(jobID string) ([]store.Question, error) {
	return all(t, "questions of job "+jobID, ScanQuestion,
		questions.query("WHERE job_id = ? ORDER BY asked_at, id"), jobID)
}

// OpenQuestions: a waiting job's current attempt is the one that asked, so
// its question is the one the job waits on.
func (t *tx) OpenQuestions(f store.QuestionFilter) ([]store.Question, error) {
	q, args := OpenQuestionsQuery(f)
	return all(t, "open questions", ScanQuestion, q, args...)
}

// OpenQuestionsQuery builds the statement of OpenQuestions (apart, so a
// test can check its query plan).
func OpenQuestionsQuery(f store.QuestionFilter) (string, []any) {
	jobCond := `jobs.id = questions.job_id AND jobs.attempt_id = questions.attempt_id AND jobs.state = ?
		AND (? = '' OR jobs.requester_id = ?)`
	args := []any{job.Waiting, f.RequesterID, f.RequesterID}
	if f.VisibleTo != "" {
		// Checked per row: open questions are few (questions_open).
		jobCond += " AND " + visibleJob
		args = append(args, visibleArgs(f.VisibleTo)...)
	}
	where := "WHERE approved_at IS NULL AND EXISTS (SELECT 1 FROM jobs WHERE " + jobCond + ")"
	if !f.ExpiredBefore.IsZero() {
		where += " AND expires_at < ?"
		args = append(args, Millis(f.ExpiredBefore))
	}
	return questions.query(where + " ORDER BY asked_at, id"), args
}
