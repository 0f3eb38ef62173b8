package sqlstore

import (
	"strconv"

	"drover/internal/store"
)

// ForgeThreads is the table of the forge threads jobs work for
// (internal/forgethread).
var ForgeThreads = Table{"forge_threads", []string{
	"job_id", "project", "forge", "repo", "number", "is_pr", "status_id", "shown", "settled", "questions",
	"created_at", "updated_at"}}

var (
	forgeThreads   = newTable(ForgeThreads)
	putForgeThread = forgeThreads.upsert("created_at")
)

func scanForgeThread(s Scanner) (f store.ForgeThread, err error) {
	err = s.Scan(&f.JobID, &f.Project, &f.Forge, &f.Repo, &f.Number, &f.IsPR, &f.StatusID, &f.Shown, &f.Settled,
		JSONCol{&f.Questions}, TimeCol{&f.CreatedAt}, TimeCol{&f.UpdatedAt})
	if len(f.Questions) == 0 {
		f.Questions = nil // none reads back as none, whether stored as {} or null
	}
	return f, err
}

func (t *tx) PutForgeThread(f store.ForgeThread) error {
	qs := f.Questions
	if qs == nil {
		qs = map[string]int64{}
	}
	_, err := t.exec("put the forge thread of job "+f.JobID, putForgeThread,
		f.JobID, f.Project, f.Forge, f.Repo, f.Number, f.IsPR, f.StatusID, f.Shown, f.Settled, JSONArg{qs},
		Millis(f.CreatedAt), Millis(f.UpdatedAt))
	return err
}

func (t *tx) ForgeThread(jobID string) (store.ForgeThread, error) {
	return one(t, "forge thread of job "+jobID, scanForgeThread, forgeThreads.query("WHERE job_id = ?"), jobID)
}

// ForgeThreadsOf lists a thread's jobs, newest first (the job id breaking
// ties).
func (t *tx) ForgeThreadsOf(forge, repo string, number int) ([]store.ForgeThread, error) {
	return all(t, "jobs of "+forge+" "+repo+"#"+strconv.Itoa(number), scanForgeThread,
		forgeThreads.query("WHERE forge = ? AND repo = ? AND number = ? ORDER BY created_at DESC, job_id DESC"),
		forge, repo, number)
}

func (t *tx) UnsettledForgeThreads() ([]store.ForgeThread, error) {
	return all(t, "unsettled forge threads", scanForgeThread,
		forgeThreads.query("WHERE NOT settled ORDER BY updated_at, job_id"))
}
