package hub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/hub/call"
	"drover/internal/ids"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// A fleet launch gives a target one single-use, expiring registration token
// per runner it starts. The runner exchanges it, once, for a runner token it
// made itself (bindRunner, the rule an approved login follows too): the
// runner is its launch owner's, named by the launch, and may report only
// the launch's labels. Revoking the launch revokes its runners.

// Launch creates a Launch of p's and its registration tokens.
func (h *Hub) Launch(ctx context.Context, p call.Caller, req apitypes.LaunchRequest) (apitypes.LaunchResponse, error) {
	if !rules.ValidName(req.Target) {
		return apitypes.LaunchResponse{}, call.BadRequest("target %q must be a name such as local or ssh", req.Target)
	}
	if req.Count < 1 || req.Count > apitypes.MaxLaunchCount {
		return apitypes.LaunchResponse{}, call.BadRequest("count must be 1 to %d", apitypes.MaxLaunchCount)
	}
	if req.Slots < 1 || req.Slots > protocol.MaxSlots {
		return apitypes.LaunchResponse{}, call.BadRequest("slots must be 1 to %d", protocol.MaxSlots)
	}
	if err := rules.CheckLabels(req.Labels); err != nil {
		return apitypes.LaunchResponse{}, call.BadRequest("labels: %v", err)
	}
	ttl := apitypes.DefaultRegistrationTTL
	if req.TTLSeconds != 0 {
		ttl = time.Duration(req.TTLSeconds) * time.Second
		if ttl <= 0 || ttl > apitypes.MaxRegistrationTTL {
			return apitypes.LaunchResponse{}, call.BadRequest("ttl_seconds must be 1 to %d", int(apitypes.MaxRegistrationTTL/time.Second))
		}
	}
	now := h.now()
	l := store.Launch{ID: ids.New("l"), OwnerID: p.UserID, Target: req.Target, Labels: req.Labels,
		Slots: req.Slots, Count: req.Count, CreatedAt: now}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	var regs []apitypes.Registration
	err := h.store.Write(ctx, func(tx store.Tx) error {
		regs = nil
		if err := tx.InsertLaunch(l); err != nil {
			return err
		}
		for i := range l.Count {
			tok := auth.NewToken(auth.PrefixRegistration)
			g := store.Registration{Hash: auth.Hash(tok), LaunchID: l.ID, Name: fmt.Sprintf("%s-%d", l.ID, i+1),
				CreatedAt: now, ExpiresAt: now.Add(ttl)}
			if err := tx.InsertRegistration(g); err != nil {
				return err
			}
			regs = append(regs, apitypes.Registration{Name: g.Name, Token: tok, ExpiresAt: g.ExpiresAt})
		}
		return nil
	})
	if err != nil {
		return apitypes.LaunchResponse{}, fmt.Errorf("launch on %s: %w", req.Target, err)
	}
	v, err := h.LaunchView(ctx, p, call.LaunchRequest{ID: l.ID})
	if err != nil {
		return apitypes.LaunchResponse{}, err
	}
	h.log.Info("fleet launch", "launch", l.ID, "target", l.Target, "count", l.Count, "owner", p.Name)
	return apitypes.LaunchResponse{LaunchView: v, Registrations: regs}, nil
}

// Launches lists p's Launches (an admin: all).
func (h *Hub) Launches(ctx context.Context, p call.Caller) (apitypes.LaunchList, error) {
	owner := p.UserID
	if p.Admin {
		owner = ""
	}
	out := apitypes.LaunchList{Launches: []apitypes.LaunchView{}}
	err := h.store.Read(ctx, func(tx store.Tx) error {
		ls, err := tx.Launches(owner)
		if err != nil {
			return err
		}
		n := newNamer(tx)
		for _, l := range ls {
			v, err := h.launchViewTx(tx, n, l)
			if err != nil {
				return err
			}
			out.Launches = append(out.Launches, v)
		}
		return nil
	})
	return out, err
}

// launchOf is the launch p may manage: its owner's, or any for an admin.
func launchOf(tx store.Tx, id string, p call.Caller) (store.Launch, error) {
	l, err := tx.Launch(id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && l.OwnerID != p.UserID && !p.Admin) {
		return store.Launch{}, call.NotFound("no launch %q of yours: `drover fleet list` shows them", id)
	}
	return l, err
}

// LaunchView is a launch p may manage.
func (h *Hub) LaunchView(ctx context.Context, p call.Caller, req call.LaunchRequest) (v apitypes.LaunchView, err error) {
	err = h.store.Read(ctx, func(tx store.Tx) error {
		l, err := launchOf(tx, req.ID, p)
		if err != nil {
			return err
		}
		v, err = h.launchViewTx(tx, newNamer(tx), l)
		return err
	})
	return v, err
}

func (h *Hub) launchViewTx(tx store.Tx, n *namer, l store.Launch) (apitypes.LaunchView, error) {
	v := apitypes.LaunchView{ID: l.ID, Owner: n.user(l.OwnerID), Target: l.Target, Count: l.Count, Slots: l.Slots,
		Labels: l.Labels, CreatedAt: l.CreatedAt, Revoked: l.RevokedAt != nil, Runners: []apitypes.LaunchRunner{}}
	gs, err := tx.Registrations(l.ID)
	if err != nil {
		return v, err
	}
	for _, g := range gs {
		lr := apitypes.LaunchRunner{Name: g.Name, ExpiresAt: g.ExpiresAt, Registered: g.UsedAt != nil}
		if g.RunnerID != "" {
			rn, err := tx.Runner(g.RunnerID)
			if err != nil {
				return v, err
			}
			lr.Connected, lr.Revoked = h.connected(rn.ID), rn.RevokedAt != nil
		}
		v.Runners = append(v.Runners, lr)
	}
	return v, nil
}

// RevokeLaunch revokes the launch: its unused tokens stop working and its
// runners are revoked and disconnected.
func (h *Hub) RevokeLaunch(ctx context.Context, p call.Caller, req call.LaunchRequest) (apitypes.LaunchView, error) {
	id := req.ID
	now := h.now()
	var revoked []string
	err := h.store.Write(ctx, func(tx store.Tx) error {
		revoked = nil
		l, err := launchOf(tx, id, p)
		if err != nil {
			return err
		}
		if l.RevokedAt == nil {
			l.RevokedAt = &now
			if err := tx.UpdateLaunch(l); err != nil {
				return err
			}
		}
		gs, err := tx.Registrations(l.ID)
		if err != nil {
			return err
		}
		for _, g := range gs {
			if g.RunnerID == "" {
				continue
			}
			rn, err := tx.Runner(g.RunnerID)
			if err != nil {
				return err
			}
			if err := revokeRunner(tx, &rn, now); err != nil {
				return err
			}
			revoked = append(revoked, rn.ID)
		}
		return nil
	})
	if err != nil {
		return apitypes.LaunchView{}, err
	}
	for _, id := range revoked {
		h.closeConn(id, protocol.CloseRevoked, "the runner's fleet launch was revoked")
	}
	h.log.Info("fleet launch revoked", "launch", id, "runners", len(revoked), "by", p.Name)
	return h.LaunchView(ctx, p, req)
}

// registrationRefused is a registration token that cannot register a
// runner: the launcher must launch again.
func registrationRefused(format string, args ...any) *call.Refusal {
	return call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, format+"; launch again (`drover fleet launch`) for a new token", args...)
}

// registrationToken refuses a bearer token ("" for none) that is not a
// fleet registration token.
func registrationToken(tok string) error {
	if !strings.HasPrefix(tok, auth.PrefixRegistration) {
		return call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "registering a runner needs a fleet registration token")
	}
	return nil
}

// AuthenticateRegistration refuses a bearer token that is not a
// registration token the hub issued: the caller of register is checked
// before its request body is read, so that a stranger gets nothing
// decoded. Whether the token may still register is register's to say.
func (h *Hub) AuthenticateRegistration(ctx context.Context, tok string) error {
	if err := registrationToken(tok); err != nil {
		return err
	}
	err := h.store.Read(ctx, func(tx store.Tx) error {
		_, err := tx.Registration(auth.Hash(tok))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return registrationRefused("registration token not recognised")
	}
	if err != nil {
		return fmt.Errorf("look up the registration token: %w", err)
	}
	return nil
}

// RegisterRunner exchanges a registration token (the caller's bearer) for the
// runner token whose hash req carries, all in one transaction: a refusal
// leaves nothing registered and the token as it was.
func (h *Hub) RegisterRunner(ctx context.Context, tok string, req apitypes.RegisterRequest) (apitypes.RunnerView, error) {
	if err := registrationToken(tok); err != nil {
		return apitypes.RunnerView{}, err
	}
	if err := rules.CheckLabels(req.Labels); err != nil {
		return apitypes.RunnerView{}, call.BadRequest("labels: %v", err)
	}
	hash, now := auth.Hash(tok), h.now()
	var rn store.Runner
	var owner string
	err := h.store.Write(ctx, func(tx store.Tx) error {
		g, err := tx.Registration(hash)
		if errors.Is(err, store.ErrNotFound) {
			return registrationRefused("registration token not recognised")
		} else if err != nil {
			return err
		}
		l, err := tx.Launch(g.LaunchID)
		if err != nil {
			return err
		}
		switch {
		case l.RevokedAt != nil:
			return registrationRefused("launch %s was revoked", l.ID)
		case g.UsedAt != nil:
			// The same runner key again is a retry of a registration whose
			// answer was lost: the same runner.
			if prev, err := tx.Runner(g.RunnerID); err == nil && prev.TokenHash == req.Key && prev.RevokedAt == nil {
				rn = prev
				owner = newNamer(tx).user(rn.OwnerID)
				return nil
			}
			return registrationRefused("registration token was used already (each registers one runner)")
		case !now.Before(g.ExpiresAt):
			return registrationRefused("registration token expired at %s", g.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if err := labelsInScope(req.Labels, l.Labels); err != nil {
			return call.Forbidden("%v", err)
		}
		up, err := userPrincipal(tx, l.OwnerID)
		if err != nil {
			return err
		}
		if rn, _, err = bindRunner(tx, now, l.OwnerID, g.Name, req.Key, false); err != nil {
			return err
		}
		owner = up.Name
		return tx.UseRegistration(hash, rn.ID, now)
	})
	if err != nil {
		return apitypes.RunnerView{}, fmt.Errorf("register runner: %w", err)
	}
	h.log.Info("fleet runner registered", "runner", rn.Name, "owner", owner)
	return h.runnerView(rn, owner, ""), nil
}

// labelsInScope: every label a launched runner reports must be one of its
// launch's, key and value.
func labelsInScope(have, scope map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(have)) {
		if v, ok := scope[k]; !ok || v != have[k] {
			return fmt.Errorf("label %s=%s is outside the launch's labels (%s): launch with it, or start the runner without it",
				k, have[k], labelList(scope))
		}
	}
	return nil
}

func labelList(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	return rules.FormatLabels(m)
}

// checkLaunchScope holds a launched runner to its launch's labels at every
// connect, not only at registration.
func checkLaunchScope(tx store.Tx, runnerID string, labels map[string]string) error {
	g, err := tx.RegistrationOfRunner(runnerID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // approved by a user: no launch scope
	} else if err != nil {
		return err
	}
	l, err := tx.Launch(g.LaunchID)
	if err != nil {
		return err
	}
	if err := labelsInScope(labels, l.Labels); err != nil {
		return helloRefusal{err}
	}
	return nil
}
