package forgethread

import (
	"context"
	"fmt"
	"strings"

	"drover/internal/store"
)

// Reply answers, with a comment the forge user linked to drover user
// actorUserID wrote in thread t, the question a job of that thread waits
// on: as that user, through the core's answer path, so an answer by anyone
// but the job's requester waits for the requester's approval. handled is
// false when no job of the thread waits on a question the comment could
// answer (the caller then treats it as any comment). Only a comment newer
// than the question's own answers it: a late or replayed delivery of an
// older comment does not answer a later question. commentID is one of the
// thread's conversation, whose ids the forge hands out in order as the
// bot's own; 0 skips that check.
func (s *Service) Reply(ctx context.Context, t Target, actorUserID string, commentID int64, body string) (bool, error) {
	text := answerText(body)
	if text == "" {
		return false, nil
	}
	var ts []store.ForgeThread
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		ts, err = tx.ForgeThreadsOf(t.Forge, t.Repo.String(), t.Number)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("find the jobs of %s: %w", t, err)
	}
	for _, th := range ts {
		if th.IsPR != t.IsPR {
			continue // on GitLab an issue and a merge request may share a number
		}
		v, err := s.core.Job(ctx, th.JobID)
		if err != nil {
			return false, fmt.Errorf("read job %s of %s: %w", th.JobID, t, err)
		}
		q := pendingQuestion(v)
		if q == nil {
			continue
		}
		if posted := th.Questions[q.ID]; posted != 0 && commentID != 0 && commentID <= posted {
			continue
		}
		if err := s.core.Answer(ctx, actorUserID, th.JobID, text); err != nil {
			return false, fmt.Errorf("answer question %s of job %s from %s: %w", q.ID, th.JobID, t, err)
		}
		return true, nil
	}
	return false, nil
}

// answerText is a reply's answer: its own lines, without those it quotes.
func answerText(body string) string {
	var keep []string
	for _, l := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), ">") {
			keep = append(keep, l)
		}
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}
