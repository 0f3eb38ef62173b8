package hub

import (
	"context"

	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// mayControl: the requester or an admin may cancel or retry a job.
func mayControl(p call.Caller, j store.Job) error {
	if j.RequesterID != p.UserID && !p.Admin {
		return call.Forbidden("only the job's requester or an admin can do that")
	}
	return nil
}

// cancelJob stops a job: a queued or offered job ends at once; a running
// one is marked and its runner told to stop it, and it ends when the runner
// reports (a disconnected runner is told when it comes back).
func (h *Hub) cancelJob(ctx context.Context, p call.Caller, id string) error {
	var (
		order    func(protocol.Runner) // the push to its runner, if any
		runnerID string
		freed    string
	)
	err := h.store.Write(ctx, func(tx store.Tx) error {
		order, runnerID, freed = nil, "", ""
		j, err := visibleJob(tx, p, id)
		if err != nil {
			return err
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
				d := protocol.DropOrder{AttemptRef: protocol.AttemptRef{Job: j.ID, Attempt: a.ID, Epoch: a.Epoch}, Reason: "job cancelled before it started"}
				order, runnerID, freed = func(r protocol.Runner) { r.Drop(d) }, a.RunnerID, a.ID
			}
			next, err := job.Next(j.State, job.EvCancel)
			if err != nil {
				return call.Conflict("%v", err)
			}
			j.State, j.Reason, j.FinishedAt, j.UpdatedAt = next, job.ReasonCancelled, &now, now
			if err := tx.UpdateJob(j); err != nil {
				return err
			}
			return h.event(tx, j.ID, "cancelled", p.Name, "cancelled by %s", p.Name)
		case job.Running:
			a, err := tx.Attempt(j.AttemptID)
			if err != nil {
				return err
			}
			o := protocol.CancelOrder{AttemptRef: protocol.AttemptRef{Job: j.ID, Attempt: a.ID, Epoch: a.Epoch}, Reason: "cancelled by " + p.Name}
			order, runnerID = func(r protocol.Runner) { r.Cancel(o) }, a.RunnerID
			if j.Cancelling {
				return nil // asked again: just tell the runner again
			}
			j.Cancelling, j.UpdatedAt = true, now
			if err := tx.UpdateJob(j); err != nil {
				return err
			}
			return h.event(tx, j.ID, "cancel_requested", p.Name, "cancel requested by %s", p.Name)
		default:
			return call.Conflict("job %s is already %s", j.ID, j.State)
		}
	})
	if err != nil {
		return err
	}
	if freed != "" {
		h.reg.removeActive(runnerID, freed)
	}
	h.kick() // a slot freed, or a queued job gone: draining runners learn it
	if order != nil {
		h.pushOrder(runnerID, order)
	}
	h.notify(id)
	return nil
}

// rerunJob queues a job again on its owner's word, under a new epoch that
// fences out whatever an old attempt still does, with a fresh agent session:
//   - retry: a failed, cancelled or unknown job (the explicit action an
//     unknown outcome requires), on its current head;
//   - restart: also a waiting job, from its base (head and ref go back to
//     it). It needs no approval: no other user's words reach the agent by it.
func (h *Hub) rerunJob(ctx context.Context, p call.Caller, id string, ev job.Event) error {
	var j store.Job
	var oldHead string
	err := h.store.Write(ctx, func(tx store.Tx) error {
		var err error
		j, err = visibleJob(tx, p, id)
		if err != nil {
			return err
		}
		if err := mayControl(p, j); err != nil {
			return err
		}
		next, err := job.Next(j.State, ev)
		switch {
		case err != nil && ev == job.EvRestart:
			return call.Conflict("only a waiting, failed, cancelled or unknown job can be restarted; job %s is %s", j.ID, j.State)
		case err != nil:
			return call.Conflict("only a failed, cancelled or unknown job can be retried; job %s is %s", j.ID, j.State)
		}
		prev := j.State
		oldHead = j.Head
		j.State, j.Reason, j.ExitCode, j.FinishedAt, j.Cancelling, j.UpdatedAt = next, job.ReasonNone, nil, nil, false, h.now()
		j.ResumeAttempt = ""
		kind, what := "retried", "retry requested"
		if ev == job.EvRetry && prev == job.Unknown && j.AttemptID != "" {
			// A model loop that recorded its turns in the hub (the
			// attempt's session is set by the first) continues them.
			if a, err := tx.Attempt(j.AttemptID); err != nil {
				return err
			} else if a.Session != "" {
				j.ResumeAttempt = a.ID
				what += ", resuming session " + a.Session
			}
		}
		if ev == job.EvRestart {
			j.Head = j.Base
			kind, what = "restarted", "restarted from the base"
		}
		if err := tx.UpdateJob(j); err != nil {
			return err
		}
		return h.event(tx, j.ID, kind, p.Name, "%s by %s (was %s)", what, p.Name, prev)
	})
	if err != nil {
		return err
	}
	if j.Project != "" && oldHead != j.Head {
		h.resetJobRef(ctx, j, oldHead)
	}
	h.notify(id)
	h.kick()
	return nil
}

func (h *Hub) retryJob(ctx context.Context, p call.Caller, id string) error {
	return h.rerunJob(ctx, p, id, job.EvRetry)
}

func (h *Hub) restartJob(ctx context.Context, p call.Caller, id string) error {
	return h.rerunJob(ctx, p, id, job.EvRestart)
}

// resetJobRef moves a restarted job's ref back to its recorded head.
// Failing is harmless: the next publication repairs the ref (ensureJobRef).
func (h *Hub) resetJobRef(ctx context.Context, j store.Job, from string) {
	err := func() error {
		unlock, err := h.locks.lock(ctx, "job:"+j.ID)
		if err != nil {
			return err
		}
		defer unlock()
		h.clearRefLocks(j, gitcmd.JobRef(j.ID))
		return h.repos.UpdateRef(ctx, j.Project, gitcmd.JobRef(j.ID), j.Head, from)
	}()
	if err != nil {
		h.log.Warn("could not move a restarted job's ref back to its base; the next publication repairs it", "job", j.ID, "err", err)
	}
}
