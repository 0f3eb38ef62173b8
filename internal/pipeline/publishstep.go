package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"drover/internal/hub/call"
	"drover/internal/pipeline/spec"
	"drover/internal/rules"
	"drover/internal/store"
)

// codeNotMapped is publishing's refusal for a project that maps to no
// forge: the publish step then publishes nothing and says so.
const codeNotMapped = "not_mapped"

// publish advances a publish step: the commit its inputs left goes to the
// project's forge through the job that made it (or, for a merge, the job
// that recorded it), exactly once (a publication is one per job). Staged,
// it publishes nothing and records what it would have published.
func (ps *pass) publish(ctx context.Context, s *spec.Step) error {
	key := runKey(s.ID, -1, 1)
	r := ps.runs[key]
	if r == nil {
		in, err := ps.input(ctx, s, nil)
		if err != nil || in == "" {
			return err
		}
		now := ps.e.cfg.Now()
		r = &store.PipelineRun{PipelineID: ps.p.ID, Key: key, Step: s.ID, Round: 1, Item: -1, Tries: 1, Input: in, Commit: in, CreatedAt: now, UpdatedAt: now}
		if r.JobID, err = ps.resultJob(ctx, in); err != nil {
			return err
		}
		if ps.p.Staged {
			r.State = store.RunSkipped
			b, _ := json.Marshal(staged{Job: r.JobID, Commit: in, Branch: "drover/" + r.JobID})
			r.Summary, r.Reason = string(b), "staged: nothing published"
			if err := ps.save(ctx, r, "staged", fmt.Sprintf("step %s would publish %s (job %s, branch drover/%s); staged, nothing published", key, short(in), r.JobID, r.JobID)); err != nil {
				return err
			}
			ps.out[s.ID] = &output{commit: in}
			return nil
		}
		r.State = store.RunRunning
		if err := ps.save(ctx, r, "publishing", fmt.Sprintf("step %s publishes %s through job %s", key, short(in), r.JobID)); err != nil {
			return err
		}
	}
	if r.State == store.RunRunning {
		pv, err := ps.e.core.Publish(ctx, ps.c, r.JobID)
		var ref *call.Refusal
		switch {
		case errors.As(err, &ref) && ref.Code == codeNotMapped:
			r.State, r.Reason = store.RunSkipped, "nothing published: "+ref.Msg
		case errors.As(err, &ref):
			r.State, r.Reason = store.RunFailed, "publishing refused: "+ref.Error()
		case err != nil:
			return fmt.Errorf("publish step %s: %w", key, err)
		case pv.State == string(store.PublicationDone):
			r.State = store.RunDone
			b, _ := json.Marshal(pv)
			r.Summary = string(b)
		case pv.State == string(store.PublicationFailed):
			r.State, r.Reason = store.RunFailed, fmt.Sprintf("publication failed (%s): %s", pv.Code, pv.Reason)
		default:
			return nil // pending: the publication goes on; a later pass looks again
		}
		r.UpdatedAt = ps.e.cfg.Now()
		if err := ps.save(ctx, r, "step_"+string(r.State), fmt.Sprintf("step %s: %s %s", key, r.State, rules.Clip(r.Reason, 300))); err != nil {
			return err
		}
	}
	if ps.settled(s, r) {
		ps.out[s.ID] = &output{commit: r.Commit}
	}
	return nil
}

// staged is what a staged publish step records it would have published.
type staged struct {
	Job    string `json:"job"`
	Commit string `json:"commit"`
	Branch string `json:"branch"`
}

// resultJob is a job of the requester whose head is commit: the run that
// made it (not a later one that left it as it found it, which has nothing
// to publish), or a job recorded for it.
func (ps *pass) resultJob(ctx context.Context, commit string) (string, error) {
	for _, r := range ps.runs {
		if r.State == store.RunDone && r.Commit == commit && r.JobID != "" {
			// The job must have made the commit (a check that changed
			// nothing ends at it too), and be the requester's (a replayed
			// result may be another's job).
			v, err := ps.e.core.Job(ctx, r.JobID)
			if err == nil && v.Head == commit && v.Base != commit && v.Requester == ps.c.Name {
				return v.ID, nil
			}
		}
	}
	// Keyed by the commit, so a rerun finds the job recorded before.
	v, err := ps.e.core.Record(ctx, ps.c, Recorded{
		Key: KeyPrefix + "result:" + commit, Project: ps.p.Project, Base: ps.p.Base, Head: commit,
		Agent: "pipeline", Summary: fmt.Sprintf("the result of pipeline %s (%s)", ps.p.Name, ps.p.ID),
	})
	if err != nil {
		return "", fmt.Errorf("record pipeline %s's result: %w", ps.p.ID, err)
	}
	return v.ID, nil
}
