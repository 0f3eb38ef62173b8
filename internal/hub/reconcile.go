package hub

import (
	"context"
	"errors"
	"strings"

	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// attach reconciles what a (re)connecting runner says it holds with what
// the hub recorded, registers the connection (replacing an older one) and
// queues the welcome, then resent offers and pending cancels, in that order.
func (h *Hub) attach(ctx context.Context, c *runnerSession, hello protocol.Hello) error {
	held := make(map[string]protocol.Held, len(hello.Attempts))
	for _, a := range hello.Attempts {
		held[a.Attempt] = a
	}
	var (
		drops []protocol.DropOrder
		after []func(protocol.Runner)
		lost  []store.Attempt
		keep  []string
	)
	now := h.now()
	err := h.store.Write(ctx, func(tx store.Tx) error {
		drops, after, lost, keep = nil, nil, nil, nil
		rn, err := tx.Runner(c.runnerID)
		if err != nil {
			return err
		}
		if rn.RevokedAt != nil || rn.TokenHash != c.tokenHash {
			return errStaleToken
		}
		if err := checkLaunchScope(tx, c.runnerID, c.labels); err != nil {
			return err
		}
		rn.Slots, rn.Labels, rn.LastSeen, rn.Version = c.slots, c.labels, &now, c.version
		if err := tx.UpdateRunner(rn); err != nil {
			return err
		}
		if err := tx.SyncRunnerAccounts(c.runnerID, storeAccounts(hello.Accounts), now); err != nil {
			return err
		}
		if err := tx.ExtendLeases(c.runnerID, now.Add(h.cfg.Lease)); err != nil {
			return err
		}
		if err := h.holdRunner(tx, c, now); err != nil {
			return err
		}
		for _, hd := range hello.Attempts {
			reason, err := h.checkHeld(tx, c, hd)
			if err != nil {
				return err
			}
			if reason != "" {
				drops = append(drops, protocol.DropOrder{AttemptRef: hd.AttemptRef, Reason: reason})
			}
		}
		mine, err := tx.RunnerActiveAttempts(c.runnerID)
		if err != nil {
			return err
		}
		for _, a := range mine {
			j, err := tx.Job(a.JobID)
			if err != nil {
				return err
			}
			ref := protocol.AttemptRef{Job: a.JobID, Attempt: a.ID, Epoch: a.Epoch}
			if _, ok := held[a.ID]; ok {
				keep = append(keep, a.ID)
				if a.State == job.AttemptRunning && j.Cancelling {
					after = append(after, func(r protocol.Runner) {
						r.Cancel(protocol.CancelOrder{AttemptRef: ref, Reason: "cancelled by a user"})
					})
				}
				continue
			}
			switch a.State {
			case job.AttemptOffered:
				// The offer may have been lost with the old connection: send
				// it again as the dispatcher would offer it now, or withdraw
				// it when the runner's access or accounts no longer cover it.
				account, ok, err := h.resendAccount(tx, c, j)
				if err != nil {
					return err
				}
				if !ok {
					if err := h.expireOffer(tx, &a, &j, job.ReasonOfferExpired, job.EvOfferExpired); err != nil {
						return err
					}
					if err := h.event(tx, j.ID, "offer_expired", "", "attempt %d withdrawn: runner %s may no longer run it for its requester; back in the queue", a.Epoch, c.name); err != nil {
						return err
					}
					lost = append(lost, a) // no longer active here, like a lost one
					continue
				}
				keep = append(keep, a.ID)
				o, err := h.offerFor(tx, c, a, j, account)
				if err != nil {
					return err
				}
				after = append(after, func(r protocol.Runner) { r.Offer(o) })
			case job.AttemptRunning:
				// The runner no longer has it: whatever happened cannot be known.
				if err := h.loseAttempt(tx, a, j, job.ReasonDropped, c.name); err != nil {
					return err
				}
				lost = append(lost, a)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	w := protocol.Welcome{
		Protocol: protocol.Version, RunnerID: c.runnerID, RunnerName: c.name,
		HeartbeatInterval: protocol.Duration(h.cfg.Heartbeat), Lease: protocol.Duration(h.cfg.Lease),
		LogFlushInterval: protocol.Duration(h.cfg.LogFlush), LogBatchBytes: h.cfg.LogBatch,
		LogChunkBytes: h.cfg.LogChunk, LogCap: h.cfg.LogCap, TransferCap: h.cfg.TransferCap, Drop: drops,
	}
	if h.cfg.IdleHeartbeat > h.cfg.Heartbeat {
		w.IdleHeartbeatInterval = protocol.Duration(h.cfg.IdleHeartbeat)
	}
	c.lastExtend = now

	h.reg.mu.Lock()
	old := h.reg.putLocked(c)
	// The slots it holds are the database's, whichever hub it was on
	// before (this one's memory may be of another hub's time).
	delete(h.reg.active, c.runnerID)
	for _, id := range keep {
		h.reg.addActiveLocked(c.runnerID, id)
	}
	// Queue under the lock so no dispatcher offer can overtake the welcome.
	c.link.Welcome(w)
	for _, push := range after {
		push(c)
	}
	h.reg.mu.Unlock()
	h.notify(anyChange)
	if old != nil {
		old.close(protocol.CloseReplaced, "replaced by a newer connection of this runner")
		h.log.Info("runner connection replaced", "runner", c.name)
	}
	for _, a := range lost {
		h.notify(a.JobID)
	}
	return nil
}

// resendAccount is the account an offer of j sent again to c names, chosen
// as the dispatcher would choose it now (an offer naming none lets the
// runner pick any account of its owner's); ok is false when c's access,
// accounts or trust with the setup's credentials no longer allow the offer. c is not attached yet, so its fields
// are read without h.mu.
func (h *Hub) resendAccount(tx store.Tx, c *runnerSession, j store.Job) (string, bool, error) {
	member, err := isMember(tx, j.Project, j.RequesterID)
	if err != nil {
		return "", false, err
	}
	need, err := h.jobNeed(tx, j)
	if err != nil {
		return "", false, err
	}
	if !c.access.mayRun(j.RequesterID, j.Project, member) || !c.access.mayReceive(need) {
		return "", false, nil
	}
	var ranks map[string]int64
	if usesAccount(j.Agent) {
		if ranks, err = tx.AccountRanks(); err != nil {
			return "", false, err
		}
	}
	cd := &candidate{c: c, accounts: c.accounts, access: c.access}
	acct, _, ok := cd.accountFor(j, member, ranks)
	return acct, ok, nil
}

// checkHeld decides whether a runner may keep an attempt it says it holds;
// it returns the reason to drop it, or "".
func (h *Hub) checkHeld(tx store.Tx, c *runnerSession, hd protocol.Held) (string, error) {
	a, j, err := loadFenced(tx, c.runnerID, hd.AttemptRef)
	if err != nil {
		var ae *call.Refusal
		if errors.As(err, &ae) {
			return ae.Msg, nil
		}
		return "", err
	}
	switch a.State {
	case job.AttemptOffered, job.AttemptRunning:
		return "", nil
	case job.AttemptUnknown:
		if lateResultAllowed(a, j) && hd.Phase != protocol.PhaseOffered {
			return "", nil
		}
	case job.AttemptCompleted, job.AttemptFailed, job.AttemptCancelled, job.AttemptReleased, job.AttemptAsked:
		if hd.Phase == protocol.PhaseFinishing {
			return "", nil // its finish will be acknowledged as already finished
		}
	}
	return "attempt " + a.ID + " is " + string(a.State), nil
}

// loseAttempt marks a started attempt whose runner is gone as unknown. It is
// never run again automatically.
func (h *Hub) loseAttempt(tx store.Tx, a store.Attempt, j store.Job, reason job.Reason, actor string) error {
	now := h.now()
	a.State, a.Reason, a.FinishedAt = job.AttemptUnknown, reason, &now
	if err := tx.UpdateAttempt(a); err != nil {
		return err
	}
	if j.AttemptID == a.ID && j.State == job.Running {
		next, err := job.Next(j.State, job.EvLeaseExpired)
		if err != nil {
			return err
		}
		j.State, j.Reason, j.FinishedAt, j.UpdatedAt = next, reason, &now, now
		if err := tx.UpdateJob(j); err != nil {
			return err
		}
	}
	return h.event(tx, j.ID, "unknown", actor, "attempt %d outcome unknown (%s); run `drover retry %s` to run it again", a.Epoch, reason, j.ID)
}

// storeAccounts is what the store keeps of a runner's reported accounts.
func storeAccounts(in []protocol.AccountInfo) []store.Account {
	out := make([]store.Account, 0, len(in))
	for _, a := range in {
		sa := store.Account{ID: a.ID, Agent: a.Agent, Label: a.Label, Kind: a.Kind, State: a.State}
		if !a.LimitedUntil.IsZero() {
			t := a.LimitedUntil.UTC()
			sa.LimitedUntil = &t
		}
		out = append(out, sa)
	}
	return out
}

// offerFor builds the offer for an attempt to c's runner; account is the
// account the dispatcher chose ("" for none: the runner picks).
func (h *Hub) offerFor(tx store.Tx, c *runnerSession, a store.Attempt, j store.Job, account string) (protocol.Offer, error) {
	u, err := tx.User(j.RequesterID)
	if err != nil {
		return protocol.Offer{}, err
	}
	return h.offerNaming(tx, c, a, j, account, u.Name)
}

// offerNaming is offerFor with the requester's name known (a dispatch
// pass read it for every requester it offers for).
func (h *Hub) offerNaming(tx store.Tx, c *runnerSession, a store.Attempt, j store.Job, account, requester string) (protocol.Offer, error) {
	spec := protocol.JobSpec{Agent: j.Agent, Args: j.Args, Labels: j.Labels, Requester: requester, LogCap: j.LogCap, Tools: j.Tools,
		Account: j.Account, Model: j.Model, Image: j.Image}
	if err := h.sourceSpec(tx, c, j, &spec); err != nil {
		return protocol.Offer{}, err
	}
	h.reg.mu.Lock()
	ra := c.access
	h.reg.mu.Unlock()
	if err := h.projectSpec(tx, ra, j, &spec); err != nil {
		return protocol.Offer{}, err
	}
	if j.Fallback != "" {
		// Only an account of this runner the requester may use.
		member, err := isMember(tx, j.Project, j.RequesterID)
		if err != nil {
			return protocol.Offer{}, err
		}
		h.reg.mu.Lock()
		cd := candidate{c: c, accounts: c.accounts, access: c.access}
		h.reg.mu.Unlock()
		if id, _, ok := cd.bestAccount(j.Agent, j.Fallback, j.RequesterID, j.Project, member, nil); ok && id != account {
			spec.Fallback = id
		}
	}
	if j.ResumeAttempt != "" {
		var err error
		if spec.Resume, err = newNamer(tx).resumeSpec(j, c.runnerID); err != nil {
			return protocol.Offer{}, err
		}
		// A session lives in one account of its runner: resume it only if
		// the requester may still use that account there.
		if id, _, ok := strings.Cut(spec.Resume.Session, "/"); ok && spec.Resume.SameRunner {
			member, err := isMember(tx, j.Project, j.RequesterID)
			if err != nil {
				return protocol.Offer{}, err
			}
			if !ra.mayUseAccount(id, j.RequesterID, j.Project, member) {
				spec.Resume.Session = ""
			}
		}
	}
	return protocol.Offer{
		AttemptRef: protocol.AttemptRef{Job: j.ID, Attempt: a.ID, Epoch: a.Epoch},
		Spec:       spec,
		Account:    account,
	}, nil
}
