package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/hub/call"
	"drover/internal/ids"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// RunnerViews lists the runners p owns or may use (an admin: all), and
// those with a share p may accept, with what p may see of each: whom a
// runner is shared with only its owner and admins.
func (h *Hub) RunnerViews(ctx context.Context, p call.Caller) ([]apitypes.RunnerView, error) {
	return h.runnerViewsOf(ctx, p, "")
}

// runnerViewsOf is runnerViews of one runner (by id; "" for all).
func (h *Hub) runnerViewsOf(ctx context.Context, p call.Caller, runnerID string) ([]apitypes.RunnerView, error) {
	out := []apitypes.RunnerView{}
	err := h.store.Read(ctx, func(tx store.Tx) error {
		rs, err := tx.Runners()
		if err != nil {
			return err
		}
		shares, err := tx.AllShares()
		if err != nil {
			return err
		}
		byRunner := map[string][]store.Share{}
		for _, sh := range shares {
			byRunner[sh.RunnerID] = append(byRunner[sh.RunnerID], sh)
		}
		projects, err := userProjects(tx, p.UserID)
		if err != nil {
			return err
		}
		owned, err := ownedProjects(tx, p.UserID)
		if err != nil {
			return err
		}
		held, err := tx.HeldRunners(h.liveSince(h.now()))
		if err != nil {
			return err
		}
		n := newNamer(tx)
		for _, rn := range rs {
			if runnerID != "" && rn.ID != runnerID {
				continue
			}
			own := p.Admin || rn.OwnerID == p.UserID
			var offered []apitypes.Share
			if !own {
				for _, sh := range byRunner[rn.ID] {
					if sh.AccountID == "" && sh.Pending() &&
						((sh.Kind == store.ShareUser && sh.Subject == p.UserID) || (sh.Kind == store.ShareProject && owned[sh.Subject])) {
						offered = append(offered, shareView(n, sh))
					}
				}
			}
			ra := newRunnerAccess(rn, byRunner[rn.ID])
			if !mayUseRunner(p, ra, projects) && len(offered) == 0 {
				continue
			}
			v := h.runnerView(rn, n.user(rn.OwnerID), held[rn.ID])
			if own {
				v.SharedWith = sharesView(n, byRunner[rn.ID], "")
			} else {
				// Others see only the accounts they may use.
				v.Accounts = slices.DeleteFunc(slices.Clone(v.Accounts), func(a protocol.AccountInfo) bool {
					return !mayUseAccountOf(p, ra, a.ID, projects)
				})
				v.Offered = offered
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// ownedProjects is the set of projects the user owns.
func ownedProjects(tx store.Tx, userID string) (map[string]bool, error) {
	ps, err := tx.Projects()
	if err != nil {
		return nil, fmt.Errorf("read projects: %w", err)
	}
	out := map[string]bool{}
	for _, prj := range ps {
		if prj.OwnerID == userID {
			out[prj.Name] = true
		}
	}
	return out, nil
}

// Approve is the one approval path of the API and the approval page.
func (h *Hub) Approve(ctx context.Context, p call.Caller, req apitypes.ApproveRequest) (apitypes.ApproveResponse, error) {
	rn, replaced, err := h.approveRunner(ctx, p.UserID, req.Name, req.Key, req.Replace)
	if err != nil {
		return apitypes.ApproveResponse{}, err
	}
	h.log.Info("runner login approved", "runner", rn.Name, "owner", p.Name, "replaced", replaced)
	return apitypes.ApproveResponse{RunnerView: h.runnerView(rn, p.Name, ""), Replaced: replaced}, nil
}

// approveRunner binds a token hash to a runner owned by ownerID. The same
// hash approved again is the same runner. A new hash for a live runner of
// the same owner re-keys it only with replace (the old token stops working
// and its connection is closed); replaced says that happened. The name is
// the one the runner uses from then on: it reads it back from the hub.
func (h *Hub) approveRunner(ctx context.Context, ownerID, name, key string, replace bool) (out store.Runner, replaced bool, err error) {
	now := h.now()
	err = h.store.Write(ctx, func(tx store.Tx) error {
		out, replaced, err = bindRunner(tx, now, ownerID, name, key, replace)
		return err
	})
	if err != nil {
		return store.Runner{}, false, fmt.Errorf("approve runner %s: %w", name, err)
	}
	// A replaced runner's old connection must not live on.
	h.closeConnIfStale(out.ID, out.TokenHash)
	return out, replaced, nil
}

// bindRunner is the one rule binding a runner token's hash to a runner
// owned by ownerID, for an approved login and a fleet registration alike.
// The same hash bound again is the same runner. A new hash for a live
// runner of the same owner re-keys it only with replace (the old token stops
// working); replaced says that happened.
func bindRunner(tx store.Tx, now time.Time, ownerID, name, key string, replace bool) (_ store.Runner, replaced bool, _ error) {
	if !rules.ValidName(name) {
		return store.Runner{}, false, call.BadRequest("runner name %q must be 1-64 letters, digits or ._- and start with a letter or digit", name)
	}
	if !auth.ValidHash(key) {
		return store.Runner{}, false, call.BadRequest("approval key must be the 64 hex digit SHA-256 printed by `drover runner login`")
	}
	if t, err := tx.Token(key); err == nil {
		if t.Kind != store.TokenRunner {
			return store.Runner{}, false, call.Conflict("that key is not a runner login")
		}
		rn, err := tx.Runner(t.OwnerID)
		if err != nil {
			return store.Runner{}, false, err
		}
		if rn.OwnerID != ownerID {
			return store.Runner{}, false, call.Forbidden("that login was approved by another user")
		}
		if rn.Name != name {
			return store.Runner{}, false, call.Conflict("that login was already approved as runner %q, not %q", rn.Name, name)
		}
		if t.RevokedAt != nil {
			return store.Runner{}, false, call.Conflict("that login was revoked; run `drover runner login` again for a new one")
		}
		return rn, false, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.Runner{}, false, err
	}
	rn, err := tx.RunnerByName(name)
	switch {
	case err == nil:
		if rn.OwnerID != ownerID {
			return store.Runner{}, false, call.Conflict("runner name %q is taken by another user's runner; choose another name", name)
		}
		// A revoked runner has no token left to take over.
		if rn.RevokedAt == nil {
			if !replace {
				return store.Runner{}, false, call.Conflict("runner name %q is taken by your runner of that name; approving this login with "+
					"replace (`drover runner approve --replace`) revokes the old runner's token and disconnects it", name)
			}
			replaced = true
		}
		if err := tx.RevokeTokens(store.TokenRunner, rn.ID, now); err != nil {
			return store.Runner{}, false, err
		}
		rn.TokenHash, rn.RevokedAt = key, nil
		if err := tx.UpdateRunner(rn); err != nil {
			return store.Runner{}, false, err
		}
	case errors.Is(err, store.ErrNotFound):
		rn = store.Runner{ID: ids.New("r"), Name: name, OwnerID: ownerID, TokenHash: key, CreatedAt: now}
		if err := tx.InsertRunner(rn); err != nil {
			return store.Runner{}, false, err
		}
	default:
		return store.Runner{}, false, err
	}
	return rn, replaced, tx.InsertToken(store.Token{Hash: key, Kind: store.TokenRunner, OwnerID: rn.ID, CreatedAt: now})
}

// RevokeRunner revokes a runner's tokens and closes its connection (the
// API's and the runners page's revoke): its owner or an admin only.
func (h *Hub) RevokeRunner(ctx context.Context, p call.Caller, req call.RunnerRequest) (apitypes.RunnerView, error) {
	name := req.Name
	now := h.now()
	var rn store.Runner
	var owner string
	err := h.store.Write(ctx, func(tx store.Tx) error {
		var err error
		rn, err = tx.RunnerByName(name)
		if err != nil {
			return call.NotFound("no runner named %q", name)
		}
		if rn.OwnerID != p.UserID && !p.Admin {
			return call.Forbidden("only the runner's owner or an admin can revoke it")
		}
		owner = newNamer(tx).user(rn.OwnerID)
		return revokeRunner(tx, &rn, now)
	})
	if err != nil {
		return apitypes.RunnerView{}, err
	}
	h.closeConn(rn.ID, protocol.CloseRevoked, "runner token revoked")
	h.log.Info("runner revoked", "runner", rn.Name, "by", p.Name)
	h.notify(anyChange)
	return h.runnerView(rn, owner, ""), nil
}

// RunnerLogin is the runner p authenticated as, as its login sees it.
func (h *Hub) RunnerLogin(ctx context.Context, p call.Caller) (apitypes.RunnerView, error) {
	var rn store.Runner
	var owner, holder string
	err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		if rn, err = tx.Runner(p.RunnerID); err != nil {
			return err
		}
		owner = newNamer(tx).user(rn.OwnerID)
		holder, err = tx.RunnerHolder(rn.ID, h.liveSince(h.now()))
		return err
	})
	if err != nil {
		return apitypes.RunnerView{}, err
	}
	return h.runnerView(rn, owner, holder), nil
}

// revokeRunner revokes a live runner and its tokens; closing its
// connection is the caller's, after the commit.
func revokeRunner(tx store.Tx, rn *store.Runner, now time.Time) error {
	if rn.RevokedAt != nil {
		return nil
	}
	rn.RevokedAt = &now
	if err := tx.UpdateRunner(*rn); err != nil {
		return err
	}
	return tx.RevokeTokens(store.TokenRunner, rn.ID, now)
}
