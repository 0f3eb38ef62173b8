package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"drover/internal/ids"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// cooldown is how long a runner that declined an offer is left alone.
const cooldown = 500 * time.Millisecond

// dispatchLoop offers queued jobs to runners with free slots. It is
// event-driven: it sleeps until kicked (a job submitted or requeued, a slot
// freed, a runner connected).
func (h *Hub) dispatchLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		if err := h.dispatch(ctx); err != nil && ctx.Err() == nil {
			h.logFailed("dispatch", err)
			// Try again later rather than spin on a broken store.
			time.AfterFunc(time.Second, h.kick)
		}
		// After each pass the queue is what autoscalers should see.
		h.fleet.changed()
	}
}

// candidate is a connected runner, as seen at the start of a pass; free
// may be 0 (a busy runner still tells a waiting job why it waits).
type candidate struct {
	c        *runnerSession
	free     int
	agents   []string               // c.agents when chosen
	accounts []protocol.AccountInfo // c.accounts when chosen
	access   *runnerAccess          // c.access when chosen
	notReady string                 // c.notReady when chosen
}

// noRank is the rank of an account the store has not ranked (yet).
const noRank = math.MaxInt64

// sharedRank is added to the rank of an account shared with the requester.
const sharedRank = math.MaxInt64 / 2

// bestAccount is cd's ready account of agent, usable for a job of requester
// on project, that its owner prefers (the one named pinned, by id or label,
// when the job is pinned to one), and its rank; exec needs none. ok is
// false when cd has no such account.
func (cd *candidate) bestAccount(agent, pinned, requester, project string, member bool, ranks map[string]int64) (acct string, rank int64, ok bool) {
	if !usesAccount(agent) {
		return "", 0, true
	}
	best, rank := "", int64(noRank)
	for _, a := range cd.accounts {
		if a.Agent != agent || a.State != protocol.AccountReady || (pinned != "" && a.ID != pinned && a.Label != pinned) {
			continue
		}
		if !cd.access.mayUseAccount(a.ID, requester, project, member) {
			continue
		}
		r, ok := ranks[store.AccountKey(cd.c.runnerID, a.ID)]
		if !ok {
			r = noRank - 1
		}
		if cd.access.owner != requester {
			// Ranks order one owner's accounts; the requester's own come
			// before any shared with them.
			r = min(r, sharedRank-1) + sharedRank
		}
		if best == "" || r < rank {
			best, rank = a.ID, r
		}
	}
	return best, rank, best != ""
}

// accountFor is the account an offer of j to cd names ("" for exec, or
// for the owner's job on a runner that reports no accounts: it picks) and
// its rank; ok is false when cd has no account j may use (pinned
// elsewhere, every account limited, or none this requester may use).
func (cd *candidate) accountFor(j store.Job, member bool, ranks map[string]int64) (acct string, rank int64, ok bool) {
	acct, rank, ok = cd.bestAccount(j.Agent, j.Account, j.RequesterID, j.Project, member, ranks)
	if !ok && j.Account == "" && len(cd.accounts) == 0 && cd.access.owner == j.RequesterID {
		return "", rank, true
	}
	return acct, rank, ok
}

// candidates are the connected runners out of their cooldown that may
// take one of queued (its shape fits one: fleetindex.go) or want queue
// frames (all that want them when nothing is queued), when to look again
// at those in their cooldown, and the most free slots any has.
func (h *Hub) candidates(queued []store.Job) ([]*candidate, time.Time, int) {
	wantQueue := func(c *runnerSession) bool { return c.wantQueue }
	return h.gather(func(each func(*runnerSession)) {
		if len(queued) == 0 {
			for _, c := range h.reg.conns {
				if c.wantQueue {
					each(c)
				}
			}
			return
		}
		h.reg.eachFor(queued, wantQueue, each)
	})
}

func labelsMatch(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// Why a queued job was not offered, from the furthest a connected runner
// got; the dispatcher keeps the reason of each job of its last pass.
const (
	whyNoRunner = iota
	whyTrust
	whyLabels
	whyImage
	whyAgent
	whyAccount
	whyNotReady
	whyBusy
)

// whyText says why j waits; notReady is the reason of a runner that could
// take it but is not ready (whyNotReady).
func whyText(stage int, j store.Job, notReady string, need credNeed) string {
	switch stage {
	case whyTrust:
		return need.waitText()
	case whyNotReady:
		return "every runner that can take it is not ready (" + notReady + ")"
	case whyLabels:
		return fmt.Sprintf("no connected runner you may use has the labels %s", rules.FormatLabels(j.Labels))
	case whyImage:
		return fmt.Sprintf("no connected runner you may use offers the image %s (drover runner --images)", j.Image)
	case whyAgent:
		return fmt.Sprintf("no connected runner you may use can run %s now (not installed, or every account limited)", j.Agent)
	case whyAccount:
		if j.Account != "" {
			return fmt.Sprintf("no connected runner you may use has account %s of %s ready for you", j.Account, j.Agent)
		}
		return fmt.Sprintf("no connected runner you may use has a ready %s account you may use", j.Agent)
	case whyBusy:
		return "every runner that can take it is busy"
	}
	return "no connected runner runs your jobs (its owner must share it with you or your project, and you, or the project's owner, accept the share: drover runners)"
}

// shapeKey names a job's shape: the jobs of one requester, agent, labels,
// project, account and image fit the same runners (store.Tx.QueuedHeads).
func shapeKey(j store.Job) string {
	return strings.Join([]string{j.RequesterID, j.Agent, rules.FormatLabels(j.Labels), j.Project, j.Account, j.Image}, "\x00")
}

// perShape is how many queued jobs of one shape a pass reads: one shape's
// jobs are interchangeable, so its oldest stand for the rest.
const perShape = 16

// dispatch offers queued jobs to runners. It reads the oldest jobs of every
// shape, so no number of jobs that no runner can take hides one that a
// runner can; a shape whose oldest job finds no runner is skipped for the
// rest of the pass. Requesters take turns, fewest jobs on the fleet first,
// so one user's thousand jobs do not starve another's one.
func (h *Hub) dispatch(ctx context.Context) error {
	for {
		var queued []store.Job
		// A job resuming an agent session prefers the runner that ran the
		// asking attempt: it may still have that session and worktree.
		prefer := map[string]string{}  // job id → runner id
		var ranks map[string]int64     // account preference, read only for vendor agents' jobs
		member := map[[2]string]bool{} // (project, user) of queued jobs' requesters
		removed := map[string]bool{}   // requester → removed (their jobs are being cancelled)
		names := map[string]string{}   // requester → name (their offers' spec)
		var active map[string]int      // requester → jobs offered or running now
		needs := map[string]credNeed{} // project → what its setup's credentials need of a runner
		if err := h.passRead(ctx, func(tx store.Tx) error {
			var requesters map[string]store.User
			var err error
			if queued, requesters, err = tx.QueuedHeadsWithRequesters(perShape); err != nil {
				return err
			}
			for id, u := range requesters {
				removed[id], names[id] = u.RemovedAt != nil, u.Name
			}
			// The counts only order requesters: with one (or none) queued
			// there is nothing to order, and no statement to pay for.
			active = map[string]int{}
			if slices.ContainsFunc(queued, func(j store.Job) bool { return j.RequesterID != queued[0].RequesterID }) {
				if active, err = tx.ActiveByRequester(); err != nil {
					return err
				}
			}
			if slices.ContainsFunc(queued, func(j store.Job) bool { return usesAccount(j.Agent) }) {
				if ranks, err = tx.AccountRanks(); err != nil {
					return err
				}
			}
			members := map[string][]string{}
			for _, j := range queued {
				if _, ok := needs[j.Project]; j.Project != "" && !ok {
					if needs[j.Project], err = h.jobNeed(tx, j); err != nil {
						return err
					}
				}
				if j.Project != "" {
					ms, ok := members[j.Project]
					if !ok {
						if ms, err = tx.Members(j.Project); err != nil {
							return err
						}
						members[j.Project] = ms
					}
					member[[2]string{j.Project, j.RequesterID}] = slices.Contains(ms, j.RequesterID)
				}
				if j.ResumeAttempt == "" {
					continue
				}
				a, err := tx.Attempt(j.ResumeAttempt)
				if err != nil {
					return err
				}
				prefer[j.ID] = a.RunnerID
			}
			return nil
		}); err != nil {
			return err
		}
		// With nothing queued only runners that want queue frames matter
		// (to hear that nothing waits): a runner's connect, or a finish,
		// costs no pass over the whole fleet.
		cands, retry, top := h.candidates(queued)
		var others []*candidate // the rest of the fleet, read only to say why a job waits
		if !retry.IsZero() {
			time.AfterFunc(time.Until(retry), h.kick)
		}
		// Each requester's jobs, oldest first, and the requesters in the
		// order of their oldest job.
		byReq := map[string][]store.Job{}
		var order []string
		heads := map[string]int{} // shape → jobs read
		for _, j := range queued {
			if _, ok := byReq[j.RequesterID]; !ok {
				order = append(order, j.RequesterID)
			}
			byReq[j.RequesterID] = append(byReq[j.RequesterID], j)
			heads[shapeKey(j)]++
		}
		batch := h.newOfferBatch()
		taken := map[string]bool{}          // job ids offered in this pass
		why := make(map[string]string)      // job id → why it was not offered
		whyShape := make(map[string]string) // shape → why its jobs are not offered
		for {
			// Fewest jobs on the fleet first; ties by the oldest job.
			slices.SortStableFunc(order, func(a, b string) int { return active[a] - active[b] })
			progressed := false
			for _, rq := range order {
				list := byReq[rq]
				for len(list) > 0 {
					j := list[0]
					list = list[1:]
					key := shapeKey(j)
					if w, ok := whyShape[key]; ok {
						why[j.ID] = w
						continue
					}
					if removed[j.RequesterID] {
						whyShape[key] = "its requester was removed"
						why[j.ID] = whyShape[key]
						continue
					}
					best, account, w := pickRunner(j, cands, top, member[[2]string{j.Project, j.RequesterID}], ranks, prefer[j.ID], needs[j.Project])
					if best < 0 {
						w = h.whyOverAll(j, cands, top, &others, queued, member[[2]string{j.Project, j.RequesterID}], ranks, needs[j.Project], w)
						whyShape[key], why[j.ID] = w, w
						continue
					}
					if !h.hasRoom(cands[best].c) {
						cands[best].free = 0 // and the job goes to another runner, or waits
						list = append([]store.Job{j}, list...)
						continue
					}
					batch.add(j.ID, cands[best].c, account, names[rq])
					taken[j.ID] = true
					cands[best].free--
					active[rq]++
					progressed = true
					break // one job per requester per turn
				}
				byReq[rq] = list
			}
			if !progressed {
				break
			}
		}
		offered, err := batch.send(ctx)
		if err != nil {
			return err
		}
		h.mu.Lock()
		h.why, h.whyShape = why, whyShape
		h.mu.Unlock()
		// A shape read in full may have more jobs behind: read again while
		// offers are being made.
		full := false
		for k, n := range heads {
			if _, failed := whyShape[k]; n >= perShape && !failed {
				full = true
			}
		}
		if offered == 0 || !full {
			h.tellWaiting(cands, queued, taken, removed, member, ranks, needs)
			return nil
		}
	}
}

// passRead runs a dispatch pass's read. It needs no one snapshot: by the
// offer's write one would be as old, and that write checks again what
// must hold (the job still queued at its epoch, the runner's access now,
// the credentials' trust); the rest only orders the queue (ranks, active
// counts, a resume's runner).
func (h *Hub) passRead(ctx context.Context, fn func(store.Tx) error) error {
	return store.ReadEach(ctx, h.store, fn)
}

// pickRunner is the candidate to offer j to, with the account to name, or
// -1 and why none fits: the requester's own runners before any shared with
// them, then the runner with the owner's most preferred ready account of
// the job's agent (exec: the most free slots), or the runner that asked,
// for a resumed session. A runner that may not receive the credentials of
// the job's setup (need) is never chosen.
// top bounds the free slots of any candidate (slots are only taken during
// a pass).
func pickRunner(j store.Job, cands []*candidate, top int, member bool, ranks map[string]int64, prefer string, need credNeed) (int, string, string) {
	// Only runners with a free slot can be chosen: look at them first, and
	// at the whole fleet only to say why none fits. A burst keeps most
	// runners busy, and the busy ones then cost a pass nothing.
	if best, account, _ := pickAmong(j, cands, top, member, ranks, prefer, need, true); best >= 0 {
		return best, account, ""
	}
	return pickAmong(j, cands, top, member, ranks, prefer, need, false)
}

// pickAmong is pickRunner over every candidate, or with freeOnly over
// those ready with a free slot (then the why it gives may say too little).
func pickAmong(j store.Job, cands []*candidate, top int, member bool, ranks map[string]int64, prefer string, need credNeed, freeOnly bool) (int, string, string) {
	best, account, bestRank, bestOwn, stage := -1, "", int64(0), false, whyNoRunner
	// A job without an account (exec) ranks every runner 0: the first of
	// the requester's own runners with top free slots is one no later
	// runner beats (ties keep the first), so the scan may stop there
	// rather than read the whole fleet for every job.
	unranked := prefer == "" && !usesAccount(j.Agent)
	notReady := "" // the first not-ready runner's reason
	for i, cd := range cands {
		if freeOnly && (cd.free <= 0 || cd.notReady != "") {
			continue
		}
		got, acct, rank, ok := cd.fit(j, member, ranks, need)
		stage = max(stage, got)
		if !ok {
			continue
		}
		if cd.notReady != "" {
			stage = max(stage, whyNotReady)
			if notReady == "" {
				notReady = cd.c.name + ": " + cd.notReady
			}
			continue
		}
		stage = whyBusy
		if cd.free <= 0 {
			continue
		}
		if cd.c.runnerID == prefer {
			return i, acct, ""
		}
		own := cd.access.owner == j.RequesterID
		if best < 0 || (own && !bestOwn) ||
			(own == bestOwn && (rank < bestRank || (rank == bestRank && cd.free > cands[best].free))) {
			best, account, bestRank, bestOwn = i, acct, rank, own
		}
		if unranked && own && cd.free >= top {
			break
		}
	}
	if best < 0 {
		return -1, "", whyText(stage, j, notReady, need)
	}
	return best, account, ""
}

// fit says whether cd may and can run j, whatever its readiness and free
// slots: ok with the account an offer names and its rank, or the furthest
// check cd got to (a why stage; whyNoRunner when j's requester may not use
// it).
func (cd *candidate) fit(j store.Job, member bool, ranks map[string]int64, need credNeed) (stage int, acct string, rank int64, ok bool) {
	if !cd.access.mayRun(j.RequesterID, j.Project, member) {
		return whyNoRunner, "", 0, false
	}
	if !cd.access.mayReceive(need) {
		return whyTrust, "", 0, false
	}
	if stage, ok := fitsShape(j, cd.c.labels, cd.c.images); !ok {
		return stage, "", 0, false
	}
	// A runner without the job's agent (not installed, or every account
	// limited) is not offered it.
	if !slices.Contains(cd.agents, j.Agent) {
		return whyAgent, "", 0, false
	}
	acct, rank, ok = cd.accountFor(j, member, ranks)
	return whyAccount, acct, rank, ok
}

// fitsShape is fit's check of what a runner's hello fixed for its
// connection, its labels and images (the dispatcher's index groups runners
// by them: runnerShape): ok, or the stage it failed at.
func fitsShape(j store.Job, labels map[string]string, images []string) (stage int, ok bool) {
	if !labelsMatch(j.Labels, labels) {
		return whyLabels, false
	}
	if !rules.ImageAllowed(j.Image, images) {
		return whyImage, false
	}
	return 0, true
}

// queuedWhy is why the last dispatch pass did not offer a queued job: its
// own reason, or its shape's when the pass did not read it ("" when the
// pass saw neither).
func (h *Hub) queuedWhy(jobID, shape string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.why[jobID]; ok {
		return w
	}
	return h.whyShape[shape]
}

// offer creates a new attempt of a queued job for a runner under a new
// epoch and sends it. It reports false when the job was no longer queued.
// errNoRoom is an offer not made: the runner has no free slot now.
var errNoRoom = errors.New("the runner has no free slot")

func (h *Hub) offer(ctx context.Context, jobID string, c *runnerSession, account, requester string) (bool, error) {
	if !h.hasRoom(c) {
		return false, errNoRoom
	}
	var offer protocol.Offer
	var att store.Attempt
	var waited time.Duration
	err := h.store.Write(ctx, func(tx store.Tx) error {
		// Claimed, and written back checked against the epoch read, so
		// that dispatchers of two hubs never offer one job twice, and
		// skip each other's rows rather than wait on them.
		// The runner's row comes with the claim: a runner gone since the
		// pass is not offered the job either.
		j, rn, shares, err := tx.ClaimQueuedFor(jobID, c.runnerID)
		if errors.Is(err, store.ErrNotFound) {
			return errNotQueued
		} else if err != nil {
			return err
		}
		next, err := job.Next(j.State, job.EvOffer)
		if err != nil {
			return errNotQueued
		}
		if ok, err := mayRunNow(tx, rn, shares, j); err != nil || !ok {
			return cmp.Or(err, errNotQueued)
		}
		now := h.now()
		waited = now.Sub(j.UpdatedAt) // since it was queued (or requeued)
		att = store.Attempt{
			ID: ids.New("a"), JobID: j.ID, Epoch: j.Epoch + 1, RunnerID: c.runnerID,
			State: job.AttemptOffered, OfferedAt: now, LeaseUntil: now.Add(h.cfg.Lease), Account: account,
		}
		was := j.Epoch
		j.State, j.Epoch, j.AttemptID, j.UpdatedAt = next, att.Epoch, att.ID, now
		ev := h.newEvent(j.ID, "offered", "", "attempt %d offered to %s", att.Epoch, c.name)
		if err := tx.OfferAttempt(att, j, was, ev); errors.Is(err, store.ErrConflict) && errors.Is(err, store.ErrNotFound) {
			return errNotQueued // the job moved on
		} else if err != nil {
			return err
		}
		offer, err = h.offerNaming(tx, c, att, j, account, requester)
		return err
	})
	if errors.Is(err, errNotQueued) || errors.Is(err, errUntrusted) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h.metrics.dispatchLatency.Observe(max(0, waited.Seconds()))
	h.reg.mu.Lock()
	// The cross sweep may have found the committed offer first and sent it
	// (crossHub: an offered attempt memory lacks): a second frame would be
	// a second offer of the same attempt.
	sent := h.reg.active[c.runnerID][att.ID]
	h.reg.addActiveLocked(c.runnerID, att.ID)
	h.reg.mu.Unlock()
	if !sent {
		c.Offer(offer)
	}
	h.notify(jobID)
	h.watchOffer(c.runnerID, att.ID)
	return true, nil
}

var errNotQueued = errors.New("job is no longer queued")

// hasRoom says whether c has a free slot now: the pass read the runner's
// free slots when it began, and a status taken since (slots 0: draining)
// must not be answered with an offer.
func (h *Hub) hasRoom(c *runnerSession) bool {
	h.reg.mu.Lock()
	defer h.reg.mu.Unlock()
	return c.slots > len(h.reg.active[c.runnerID])
}

// mayRunNow checks the runner's access as stored now (rn and its shares,
// read with the offer's claim), not as the pass saw it: a share withdrawn
// a moment ago (on another hub, whose hint has yet to arrive) holds for
// the offer. mayRun needs the runner and its shares, not its owner's row
// (loadRunnerAccess).
func mayRunNow(tx store.Tx, rn store.Runner, shares []store.Share, j store.Job) (bool, error) {
	ra := newRunnerAccess(rn, shares)
	member, err := isMember(tx, j.Project, j.RequesterID)
	if err != nil {
		return false, err
	}
	return ra.mayRun(j.RequesterID, j.Project, member), nil
}
