package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// The accounts' operations of the state layer (docs/architecture.md); the
// HTTP API serves them in httpapi/accounts.go, the runners page too.

// Accounts lists p's Accounts across their runners, in the order the
// dispatcher prefers them.
func (h *Hub) Accounts(ctx context.Context, p call.Caller) (apitypes.AccountList, error) {
	var out apitypes.AccountList
	connected := h.connectedRunners()
	err := h.store.Read(ctx, func(tx store.Tx) (err error) {
		out, err = h.accountList(tx, p, connected)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("list accounts of %s: %w", p.Name, err)
	}
	return out, nil
}

// namesAccount checks that a request names an account: its runner and
// its id or label (what: what the account is named for, as " to move").
func namesAccount(runner, account, what string) error {
	switch {
	case runner == "":
		return call.BadRequest("name the runner of the account%s", what)
	case account == "":
		return call.BadRequest("name the account%s by its id or label", what)
	}
	return nil
}

// MoveAccount moves one of p's accounts to a position in p's order (the
// API's and the runners page's up/down controls).
func (h *Hub) MoveAccount(ctx context.Context, p call.Caller, req apitypes.MoveAccountRequest) (apitypes.AccountList, error) {
	var out apitypes.AccountList
	if err := namesAccount(req.Runner, req.ID, " to move"); err != nil {
		return out, err
	}
	if req.Position < 1 {
		return out, call.BadRequest("position %d: positions start at 1", req.Position)
	}
	var moved string
	connected := h.connectedRunners()
	err := h.store.Write(ctx, func(tx store.Tx) error {
		rn, err := tx.RunnerByName(req.Runner)
		if errors.Is(err, store.ErrNotFound) || (err == nil && rn.OwnerID != p.UserID) {
			return call.NotFound("you have no runner named %q", req.Runner)
		}
		if err != nil {
			return err
		}
		accts, err := tx.AccountsOfOwner(p.UserID)
		if err != nil {
			return err
		}
		moved, err = pickAccount(accts, rn, req.ID)
		if err != nil {
			return err
		}
		if err := tx.MoveAccount(p.UserID, rn.ID, moved, req.Position); err != nil {
			return err
		}
		out, err = h.accountList(tx, p, connected)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("move account %s of runner %s: %w", req.ID, req.Runner, err)
	}
	// Queued jobs may now go to another account first.
	h.kick()
	h.log.Info("account moved", "runner", req.Runner, "account", moved, "position", req.Position, "by", p.Name)
	return out, nil
}

// pickAccount finds the id of the runner's account named by ref: its id, or
// else its label if exactly one of the runner's accounts has it.
func pickAccount(accts []store.Account, rn store.Runner, ref string) (string, error) {
	var byLabel []string
	for _, a := range accts {
		if a.RunnerID != rn.ID {
			continue
		}
		if a.ID == ref {
			return a.ID, nil
		}
		if a.Label == ref {
			byLabel = append(byLabel, a.ID)
		}
	}
	switch len(byLabel) {
	case 0:
		return "", call.NotFound("runner %q has no account with id or label %q", rn.Name, ref)
	case 1:
		return byLabel[0], nil
	}
	return "", call.BadRequest("runner %q has %d accounts labelled %q (%s): name one by its id",
		rn.Name, len(byLabel), ref, strings.Join(byLabel, ", "))
}

// connectedRunners is the set of ids of the runners connected now, taken
// before a transaction so that h.mu is never held inside one.
func (h *Hub) connectedRunners() map[string]bool {
	return h.reg.ids()
}

// accountList is p's own accounts, best first, then the accounts others
// shared with p or p's projects (in their owners' order), with their
// runners' names and whether those are connected (here: local, taken by
// connectedRunners; or to another live hub). Whom an account is shared
// with is shown to its owner and admins only.
func (h *Hub) accountList(tx store.Tx, p call.Caller, local map[string]bool) (apitypes.AccountList, error) {
	all, err := tx.Accounts()
	if err != nil {
		return apitypes.AccountList{}, err
	}
	held, err := tx.HeldRunners(h.liveSince(h.now()))
	if err != nil {
		return apitypes.AccountList{}, err
	}
	projects, err := userProjects(tx, p.UserID)
	if err != nil {
		return apitypes.AccountList{}, err
	}
	shares, err := tx.AllShares()
	if err != nil {
		return apitypes.AccountList{}, err
	}
	byRunner := map[string][]store.Share{}
	for _, sh := range shares {
		if sh.AccountID != "" {
			byRunner[sh.RunnerID] = append(byRunner[sh.RunnerID], sh)
		}
	}
	access := map[string]*runnerAccess{}
	n := newNamer(tx)
	out := apitypes.AccountList{Accounts: make([]apitypes.AccountView, 0, len(all))}
	var others []apitypes.AccountView
	pos := map[string]int{} // owner → position within the owner's order
	for _, a := range all {
		pos[a.OwnerID]++
		ra, ok := access[a.RunnerID]
		if !ok {
			ra = newRunnerAccess(store.Runner{OwnerID: a.OwnerID}, byRunner[a.RunnerID])
			access[a.RunnerID] = ra
		}
		mine := a.OwnerID == p.UserID
		if !mine && !mayUseAccountOf(p, ra, a.ID, projects) {
			continue
		}
		v := apitypes.AccountView{
			Position: pos[a.OwnerID], Runner: n.runner(a.RunnerID), ID: a.ID, Agent: a.Agent, Label: a.Label,
			Kind: a.Kind, State: a.State, LimitedUntil: utcPtr(a.LimitedUntil), Connected: connected(local[a.RunnerID], held[a.RunnerID]),
			Owner: n.user(a.OwnerID),
		}
		if mine || p.Admin {
			v.SharedWith = sharesView(n, byRunner[a.RunnerID], a.ID)
		}
		if mine {
			out.Accounts = append(out.Accounts, v)
		} else {
			others = append(others, v)
		}
	}
	out.Accounts = append(out.Accounts, others...)
	return out, nil
}
