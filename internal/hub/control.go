package hub

import (
	"context"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// mayControl: the requester or an admin may cancel or retry a job.
func mayControl(p principal, j store.Job) error {
	if j.RequesterID != p.userID && !p.admin {
		return forbidden("only the job's requester or an admin can do that")
	}
	return nil
}

// cancelJob stops a job: a queued or offered job ends at once; a running
// one is marked and its runner told to stop it, and it ends when the runner
// reports (a disconnected runner is told when it comes back).
func (h *Hub) cancelJob(ctx context.Context, p principal, id string) error {
	var (
		order    *protocol.Frame
		runnerID string
		freed    string
	)
	err := h.store.Write(ctx, func(tx store.Tx) error {
		order, runnerID, freed = nil, "", ""
		j, err := tx.Job(id)
		if err != nil {
			return notFound("no job %q", id)
		}
		if err := mayControl(p, j); err != nil {
			return err
		}
		now := h.now()
		switch j.State {
		case job.Queued, job.Waiting, job.Offered:
			if j.State == job.Offered {
				a, err := tx.Attempt(j.AttemptID)
				if err != nil {
					return err
				}
				a.State, a.Reason, a.FinishedAt = job.AttemptCancelled, job.ReasonCancelled, &now
				if err := tx.UpdateAttempt(a); err != nil {
					return err
				}
				f, err := protocol.NewFrame(protocol.TypeDrop, "", protocol.DropOrder{
					AttemptRef: protocol.AttemptRef{Job: j.ID, Attempt: a.ID, Epoch: a.Epoch}, Reason: "job cancelled before it started"})
				if err != nil {
					return err
				}
				order, runnerID, freed = &f, a.RunnerID, a.ID
			}
			next, err := job.Next(j.State, job.EvCancel)
			if err != nil {
				return conflict("%v", err)
			}
			j.State, j.Reason, j.FinishedAt, j.UpdatedAt = next, job.ReasonCancelled, &now, now
			if err := tx.UpdateJob(j); err != nil {
				return err
			}
			return h.event(tx, j.ID, "cancelled", p.name, "cancelled by %s", p.name)
		case job.Running:
			a, err := tx.Attempt(j.AttemptID)
			if err != nil {
				return err
			}
			f, err := protocol.NewFrame(protocol.TypeCancel, "", protocol.CancelOrder{
				AttemptRef: protocol.AttemptRef{Job: j.ID, Attempt: a.ID, Epoch: a.Epoch}, Reason: "cancelled by " + p.name})
			if err != nil {
				return err
			}
			order, runnerID = &f, a.RunnerID
			if j.Cancelling {
				return nil // asked again: just tell the runner again
			}
			j.Cancelling, j.UpdatedAt = true, now
			if err := tx.UpdateJob(j); err != nil {
				return err
			}
			return h.event(tx, j.ID, "cancel_requested", p.name, "cancel requested by %s", p.name)
		default:
			return conflict("job %s is already %s", j.ID, j.State)
		}
	})
	if err != nil {
		return err
	}
	if freed != "" {
		h.removeActive(runnerID, freed)
		h.kick()
	}
	if order != nil {
		if c := h.connFor(runnerID); c != nil {
			c.send(*order)
		}
	}
	h.notify(id)
	return nil
}

// retryJob queues a failed, cancelled or unknown job again: the explicit
// owner action that an unknown outcome requires. The next offer gets a new
// epoch, which fences out whatever the old attempt still does.
func (h *Hub) retryJob(ctx context.Context, p principal, id string) error {
	err := h.store.Write(ctx, func(tx store.Tx) error {
		j, err := tx.Job(id)
		if err != nil {
			return notFound("no job %q", id)
		}
		if err := mayControl(p, j); err != nil {
			return err
		}
		next, err := job.Next(j.State, job.EvRetry)
		if err != nil {
			return conflict("only a failed, cancelled or unknown job can be retried; job %s is %s", j.ID, j.State)
		}
		prev := j.State
		now := h.now()
		j.State, j.Reason, j.ExitCode, j.FinishedAt, j.Cancelling, j.UpdatedAt = next, job.ReasonNone, nil, nil, false, now
		if err := tx.UpdateJob(j); err != nil {
			return err
		}
		return h.event(tx, j.ID, "retried", p.name, "retry requested by %s (was %s)", p.name, prev)
	})
	if err != nil {
		return err
	}
	h.notify(id)
	h.kick()
	return nil
}
