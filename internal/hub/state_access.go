package hub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// shareSubject resolves whom p's request to share runner rn names:
// exactly one user (who exists and was not removed) or one project that p
// may see (one p may not see is refused as one that does not exist) and
// whose member rn's owner is: a project lets in only its members' runners.
func shareSubject(tx store.Tx, p call.Caller, rn store.Runner, user, project string) (store.ShareKind, string, error) {
	switch {
	case (user == "") == (project == ""):
		return "", "", call.BadRequest("name exactly one user or one project to share with")
	case user != "":
		u, err := tx.UserByName(user)
		if errors.Is(err, store.ErrNotFound) || (err == nil && u.RemovedAt != nil) {
			return "", "", call.NotFound("no user named %q", user)
		}
		if err != nil {
			return "", "", err
		}
		return store.ShareUser, u.ID, nil
	default:
		if _, err := visibleProject(tx, p, project); err != nil {
			return "", "", err
		}
		if ok, err := isMember(tx, project, rn.OwnerID); err != nil {
			return "", "", err
		} else if !ok {
			return "", "", call.Forbidden("%s, who owns runner %s, is not a member of project %s: only its members' runners can be shared with it",
				newNamer(tx).user(rn.OwnerID), rn.Name, project)
		}
		return store.ShareProject, project, nil
	}
}

// mayAnswerShare: may p accept or decline sh, a share of another's runner?
// A user answers for themself, a project's owner or an admin for a
// project. A share p may not answer is refused as one that does not exist.
func mayAnswerShare(tx store.Tx, p call.Caller, sh store.Share, runner string) error {
	switch sh.Kind {
	case store.ShareUser:
		if sh.Subject == p.UserID {
			return nil
		}
	case store.ShareProject:
		prj, err := visibleProject(tx, p, sh.Subject)
		if err != nil {
			return err
		}
		if p.Admin || prj.OwnerID == p.UserID {
			return nil
		}
		return call.Forbidden("only project %s's owner, %s, or an admin can accept or decline runners shared with it",
			prj.Name, newNamer(tx).user(prj.OwnerID))
	}
	return call.NotFound("runner %s is not shared with you", runner)
}

// ownedRunner reads a runner that p owns (or any, for an admin).
func ownedRunner(tx store.Tx, p call.Caller, name string) (store.Runner, error) {
	rn, err := tx.RunnerByName(name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Runner{}, call.NotFound("no runner named %q", name)
	}
	if err != nil {
		return store.Runner{}, err
	}
	if rn.OwnerID != p.UserID && !p.Admin {
		return store.Runner{}, call.Forbidden("runner %s is not yours: only its owner or an admin can share it", name)
	}
	if rn.RevokedAt != nil {
		return store.Runner{}, call.Conflict("runner %s was revoked", name)
	}
	return rn, nil
}

// refreshAccess gives a connected runner its access as stored now, then
// rings the dispatcher (a share may have opened it to queued jobs).
func (h *Hub) refreshAccess(ctx context.Context, runnerID string) error {
	return h.refreshAccessOf(ctx, []string{runnerID})
}

// refreshAccessOf is refreshAccess of several runners in one read; those
// another hub holds are left to it (a hint).
func (h *Hub) refreshAccessOf(ctx context.Context, runnerIDs []string) error {
	h.accessMu.Lock()
	defer h.accessMu.Unlock()
	_, elsewhere, err := h.loadAccessLocked(ctx, func(store.Tx) ([]string, error) { return runnerIDs, nil })
	if err != nil {
		return err
	}
	for i, id := range elsewhere {
		elsewhere[i] = hintAccess + id // its hub reloads it
	}
	h.hint(elsewhere...)
	h.kick()
	return nil
}

// refreshAllAccess reloads every connected runner's access (after a
// change that may touch many: a user removed), here and on other hubs.
func (h *Hub) refreshAllAccess(ctx context.Context) error {
	h.hint(hintAccess)
	return h.refreshAccessOf(ctx, slices.Collect(maps.Keys(h.connectedRunners())))
}

// ShareRunner shares a runner with (or unshares it from) a user, a
// project or the hub (the API's and the runners page's): its owner or an
// admin only; it answers with the runner as they see it.
func (h *Hub) ShareRunner(ctx context.Context, p call.Caller, req call.ShareRunnerRequest) (apitypes.RunnerView, error) {
	name, share := req.Name, req.Share
	var rn store.Runner
	var what string
	err := h.store.Write(ctx, func(tx store.Tx) error {
		var err error
		if rn, err = ownedRunner(tx, p, name); err != nil {
			return err
		}
		if req.Hub {
			if req.User != "" || req.Project != "" {
				return call.BadRequest("share with the hub, a user or a project: one at a time")
			}
			if !p.Admin {
				return call.Forbidden("only an admin can make a runner hub-wide")
			}
			if share {
				// Another user's machine runs everyone's jobs only if
				// they say so: its owner shares it with users or projects.
				owner, err := tx.User(rn.OwnerID)
				if err != nil {
					return err
				}
				if !owner.Admin {
					return call.Forbidden("runner %s belongs to %s, who is not an admin: only an admin's own runners can be hub-wide", name, owner.Name)
				}
			}
			if !share && access(rn) != apitypes.AccessHub {
				return call.NotFound("runner %s is not hub-wide", name)
			}
			rn.Access, what = apitypes.AccessPrivate, "private"
			if share {
				rn.Access, what = apitypes.AccessHub, "hub-wide"
			}
			return tx.UpdateRunner(rn)
		}
		kind, subject, err := shareSubject(tx, p, rn, req.User, req.Project)
		if err != nil {
			return err
		}
		if kind == store.ShareUser && subject == rn.OwnerID {
			return call.BadRequest("runner %s belongs to %s already", name, req.User)
		}
		sh := store.Share{RunnerID: rn.ID, Kind: kind, Subject: subject, CreatedAt: h.now()}
		what = fmt.Sprintf("%s %s", kind, req.User+req.Project)
		if share {
			// It waits for its recipient, unless the sharer is one who
			// may accept it (a project's owner sharing with their project).
			if mayAnswerShare(tx, p, sh, name) == nil {
				sh.AcceptedAt = &sh.CreatedAt
			}
			err = tx.PutShare(sh)
			if errors.Is(err, store.ErrConflict) {
				return nil // shared already: nothing to change
			}
			return err
		}
		if err := tx.DeleteShare(sh); errors.Is(err, store.ErrNotFound) {
			return call.NotFound("runner %s is not shared with %s", name, what)
		} else if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return apitypes.RunnerView{}, err
	}
	if err := h.refreshAccess(ctx, rn.ID); err != nil {
		return apitypes.RunnerView{}, fmt.Errorf("reload access of runner %s: %w", name, err)
	}
	verb := "shared with"
	if !share {
		verb = "unshared from"
	}
	if req.Hub {
		verb = "made"
	}
	h.log.Info("runner access changed", "runner", name, "change", verb+" "+what, "by", p.Name)
	h.notify(anyChange)
	return h.sharedRunnerView(ctx, rn.ID)
}

// sharedRunnerView is one runner with whom it is shared, as its owner and
// admins see it.
func (h *Hub) sharedRunnerView(ctx context.Context, runnerID string) (apitypes.RunnerView, error) {
	var v apitypes.RunnerView
	err := h.store.Read(ctx, func(tx store.Tx) error {
		rn, err := tx.Runner(runnerID)
		if err != nil {
			return err
		}
		shares, err := tx.Shares(rn.ID)
		if err != nil {
			return err
		}
		holder, err := tx.RunnerHolder(rn.ID, h.liveSince(h.now()))
		if err != nil {
			return err
		}
		n := newNamer(tx)
		v = h.runnerView(rn, n.user(rn.OwnerID), holder)
		v.SharedWith = sharesView(n, shares, "")
		return nil
	})
	return v, err
}

// AnswerShare accepts or declines a share of another's runner (the API's):
// its recipient only, a project's owner or an admin for a project; it
// answers with the runner as the caller sees it now. Declining removes the
// share, pending or accepted. A runner that is not shared with the caller
// is "not shared with you" whether it exists or not.
func (h *Hub) AnswerShare(ctx context.Context, p call.Caller, req call.AnswerShareRequest) (apitypes.RunnerView, error) {
	var rn store.Runner
	err := h.store.Write(ctx, func(tx store.Tx) error {
		notShared := call.NotFound("runner %s is not shared with you", req.Name)
		if req.Project != "" {
			notShared = call.NotFound("runner %s is not shared with project %s", req.Name, req.Project)
		}
		var err error
		if rn, err = tx.RunnerByName(req.Name); errors.Is(err, store.ErrNotFound) {
			return notShared
		} else if err != nil {
			return err
		}
		sh := store.Share{RunnerID: rn.ID, Kind: store.ShareUser, Subject: p.UserID}
		if req.Project != "" {
			sh.Kind, sh.Subject = store.ShareProject, req.Project
		}
		if err := mayAnswerShare(tx, p, sh, req.Name); err != nil {
			return err
		}
		if !req.Accept {
			err = tx.DeleteShare(sh)
		} else if rn.RevokedAt != nil {
			return call.Conflict("runner %s was revoked", req.Name)
		} else {
			err = tx.AcceptShare(sh, h.now())
		}
		if errors.Is(err, store.ErrNotFound) {
			return notShared
		}
		return err
	})
	if err != nil {
		return apitypes.RunnerView{}, err
	}
	if err := h.refreshAccess(ctx, rn.ID); err != nil {
		return apitypes.RunnerView{}, fmt.Errorf("reload access of runner %s: %w", rn.Name, err)
	}
	h.log.Info("runner share answered", "runner", rn.Name, "accept", req.Accept, "project", req.Project, "by", p.Name)
	h.notify(anyChange)
	vs, err := h.runnerViewsOf(ctx, p, rn.ID)
	if err != nil || len(vs) == 0 {
		return apitypes.RunnerView{Name: rn.Name}, err // declined: p may see it no longer
	}
	return vs[0], nil
}

// ShareAccount shares one account of a runner with (or unshares it from) a
// user or a project (the API's and the runners page's): the runner's owner
// or an admin only; it answers with p's accounts.
func (h *Hub) ShareAccount(ctx context.Context, p call.Caller, req call.ShareAccountRequest) (apitypes.AccountList, error) {
	share := req.Share
	var out apitypes.AccountList
	if err := namesAccount(req.Runner, req.Account, ""); err != nil {
		return out, err
	}
	var rn store.Runner
	connected := h.connectedRunners()
	err := h.store.Write(ctx, func(tx store.Tx) error {
		var err error
		if rn, err = ownedRunner(tx, p, req.Runner); err != nil {
			return err
		}
		accts, err := tx.AccountsOfOwner(rn.OwnerID)
		if err != nil {
			return err
		}
		id, err := pickAccount(accts, rn, req.Account)
		if err != nil {
			return err
		}
		kind, subject, err := shareSubject(tx, p, rn, req.User, req.Project)
		if err != nil {
			return err
		}
		if kind == store.ShareUser && subject == rn.OwnerID {
			return call.BadRequest("account %s belongs to %s already", req.Account, req.User)
		}
		// An account's share needs no consent: it only lets a runner the
		// recipient accepted spend for them.
		now := h.now()
		sh := store.Share{RunnerID: rn.ID, AccountID: id, Kind: kind, Subject: subject, CreatedAt: now, AcceptedAt: &now}
		if share {
			if err := tx.PutShare(sh); err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
		} else if err := tx.DeleteShare(sh); errors.Is(err, store.ErrNotFound) {
			return call.NotFound("account %s of runner %s is not shared with %s %s", req.Account, req.Runner, kind, req.User+req.Project)
		} else if err != nil {
			return err
		}
		out, err = h.accountList(tx, p, connected)
		return err
	})
	if err != nil {
		return out, err
	}
	if err := h.refreshAccess(ctx, rn.ID); err != nil {
		return out, fmt.Errorf("reload access of runner %s: %w", rn.Name, err)
	}
	h.log.Info("account access changed", "runner", rn.Name, "account", req.Account, "share", share,
		"user", req.User, "project", req.Project, "by", p.Name)
	h.notify(anyChange)
	return out, nil
}

// memberProject reads a project for a members call: anyone who may see it
// lists, its owner and admins change.
func memberProject(tx store.Tx, p call.Caller, name string, change bool) (store.Project, error) {
	prj, err := readProject(tx, name)
	if err != nil {
		return store.Project{}, err
	}
	if err := mayUseProject(tx, p, prj); err != nil {
		return store.Project{}, err
	}
	if change && !p.Admin && prj.OwnerID != p.UserID {
		return store.Project{}, call.Forbidden("only project %s's owner, %s, or an admin can change its members", name, newNamer(tx).user(prj.OwnerID))
	}
	return prj, nil
}

func memberList(tx store.Tx, prj store.Project) (apitypes.MemberList, error) {
	ids, err := tx.Members(prj.Name)
	if err != nil {
		return apitypes.MemberList{}, err
	}
	n := newNamer(tx)
	out := apitypes.MemberList{Project: prj.Name, Owner: n.user(prj.OwnerID), Members: make([]string, 0, len(ids))}
	for _, id := range ids {
		out.Members = append(out.Members, n.user(id))
	}
	return out, nil
}

// unshareLeaver removes the shares with project of the runners (and their
// accounts) of userID, who left it: a project lets in only its members'
// runners. It returns the runners whose access changed.
func unshareLeaver(tx store.Tx, project, userID string) ([]string, error) {
	rs, err := tx.Runners()
	if err != nil {
		return nil, err
	}
	theirs := map[string]bool{}
	for _, rn := range rs {
		theirs[rn.ID] = rn.OwnerID == userID
	}
	shares, err := tx.AllShares()
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, sh := range shares {
		if sh.Kind != store.ShareProject || sh.Subject != project || !theirs[sh.RunnerID] {
			continue
		}
		if err := tx.DeleteShare(sh); err != nil {
			return nil, fmt.Errorf("unshare runner %s from project %s: %w", sh.RunnerID, project, err)
		}
		if !slices.Contains(changed, sh.RunnerID) {
			changed = append(changed, sh.RunnerID)
		}
	}
	return changed, nil
}

// Members lists a project's Members for p (a member, or an admin).
func (h *Hub) Members(ctx context.Context, p call.Caller, req call.MembersRequest) (apitypes.MemberList, error) {
	project := req.Project
	var out apitypes.MemberList
	err := h.store.Read(ctx, func(tx store.Tx) error {
		prj, err := memberProject(tx, p, project, false)
		if err != nil {
			return err
		}
		out, err = memberList(tx, prj)
		return err
	})
	return out, err
}

// ChangeMember adds a user to a project or removes one (the API's and the
// projects page's): the project's owner or an admin only.
func (h *Hub) ChangeMember(ctx context.Context, p call.Caller, req call.ChangeMemberRequest) (apitypes.MemberList, error) {
	name, user, add := req.Project, req.User, req.Add
	var out apitypes.MemberList
	var unshared []string // runners whose shares with the project went
	if user == "" {
		return out, call.BadRequest("name the user")
	}
	err := h.store.Write(ctx, func(tx store.Tx) error {
		prj, err := memberProject(tx, p, name, true)
		if err != nil {
			return err
		}
		u, err := tx.UserByName(user)
		if errors.Is(err, store.ErrNotFound) || (err == nil && u.RemovedAt != nil) {
			return call.NotFound("no user named %q", user)
		}
		if err != nil {
			return err
		}
		switch {
		case add:
			if err := tx.AddMember(prj.Name, u.ID, h.now()); err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
		case u.ID == prj.OwnerID:
			return call.BadRequest("%s owns project %s and stays a member", user, prj.Name)
		default:
			if err := tx.RemoveMember(prj.Name, u.ID); errors.Is(err, store.ErrNotFound) {
				return call.NotFound("%s is not a member of project %s", user, prj.Name)
			} else if err != nil {
				return err
			}
			if unshared, err = unshareLeaver(tx, prj.Name, u.ID); err != nil {
				return err
			}
		}
		out, err = memberList(tx, prj)
		return err
	})
	if err != nil {
		return out, err
	}
	if len(unshared) > 0 {
		if err := h.refreshAccessOf(ctx, unshared); err != nil {
			return out, fmt.Errorf("reload access of %s's runners: %w", user, err)
		}
	}
	// Membership decides project shares: queued jobs may now fit.
	h.kick()
	h.log.Info("project members changed", "project", name, "user", user, "add", add, "by", p.Name)
	return out, nil
}
