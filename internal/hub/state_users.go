package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/hub/call"
	"drover/internal/ids"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// The users' operations of the state layer (docs/architecture.md); the
// HTTP API serves them in httpapi/users.go.

// AddUser adds a user (admin only) with their first token.
func (h *Hub) AddUser(ctx context.Context, p call.Caller, req apitypes.NewUserRequest) (apitypes.NewUserResponse, error) {
	if !p.Admin {
		return apitypes.NewUserResponse{}, call.Forbidden("only an admin can add users")
	}
	if !rules.ValidName(req.Name) {
		return apitypes.NewUserResponse{}, call.BadRequest("user name %q must be 1-64 letters, digits or ._- and start with a letter or digit", req.Name)
	}
	token := auth.NewToken(auth.PrefixUser)
	now := h.now()
	u := store.User{ID: ids.New("u"), Name: req.Name, Admin: req.Admin, CreatedAt: now}
	err := h.store.Write(ctx, func(tx store.Tx) error {
		if err := tx.InsertUser(u); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return call.Conflict("a user named %q already exists", req.Name)
			}
			return err
		}
		return tx.InsertToken(store.Token{Hash: auth.Hash(token), Kind: store.TokenUser, OwnerID: u.ID, CreatedAt: now})
	})
	if err != nil {
		return apitypes.NewUserResponse{}, err
	}
	h.log.Info("user added", "user", u.Name, "admin", u.Admin, "by", p.Name)
	return apitypes.NewUserResponse{Name: u.Name, Token: token}, nil
}

// ListUsers lists every user for an admin, the caller alone for anyone else.
func (h *Hub) ListUsers(ctx context.Context, p call.Caller) (apitypes.UserList, error) {
	out := apitypes.UserList{Users: []apitypes.UserView{}}
	err := h.store.Read(ctx, func(tx store.Tx) error {
		us, err := tx.Users()
		if err != nil {
			return err
		}
		rs, err := tx.Runners()
		if err != nil {
			return err
		}
		owned := map[string]int{}
		for _, rn := range rs {
			if rn.RevokedAt == nil {
				owned[rn.OwnerID]++
			}
		}
		for _, u := range us {
			if !p.Admin && u.ID != p.UserID {
				continue
			}
			out.Users = append(out.Users, apitypes.UserView{Name: u.Name, Admin: u.Admin, CreatedAt: u.CreatedAt.UTC(),
				RemovedAt: utcPtr(u.RemovedAt), Runners: owned[u.ID]})
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// liveUser reads a user who was not removed.
func liveUser(tx store.Tx, name string) (store.User, error) {
	u, err := tx.UserByName(name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.RemovedAt != nil) {
		return store.User{}, call.NotFound("no user named %q", name)
	}
	return u, err
}

// RemoveUser removes a user (admin only): their tokens stop working at
// once, their runners are revoked (and disconnected), whatever is shared
// with them is unshared, and their unfinished jobs are cancelled. The row
// stays, so history keeps their name.
func (h *Hub) RemoveUser(ctx context.Context, p call.Caller, req call.UserRequest) (apitypes.UserView, error) {
	if !p.Admin {
		return apitypes.UserView{}, call.Forbidden("only an admin can remove users")
	}
	name := req.Name
	now := h.now()
	var u store.User
	var runners []store.Runner
	var jobs []store.Job
	err := h.store.Write(ctx, func(tx store.Tx) error {
		runners, jobs = nil, nil
		var err error
		if u, err = liveUser(tx, name); err != nil {
			return err
		}
		if u.ID == p.UserID {
			return call.BadRequest("you cannot remove yourself; another admin can")
		}
		u.RemovedAt = &now
		if err := tx.UpdateUser(u); err != nil {
			return err
		}
		if err := tx.RevokeTokens(store.TokenUser, u.ID, now); err != nil {
			return err
		}
		if err := tx.RevokeTokens(store.TokenSession, u.ID, now); err != nil { // its web sign-ins too
			return err
		}
		rs, err := tx.Runners()
		if err != nil {
			return err
		}
		for _, rn := range rs {
			if rn.OwnerID != u.ID || rn.RevokedAt != nil {
				continue
			}
			rn.RevokedAt = &now
			if err := tx.UpdateRunner(rn); err != nil {
				return err
			}
			if err := tx.RevokeTokens(store.TokenRunner, rn.ID, now); err != nil {
				return err
			}
			runners = append(runners, rn)
		}
		if err := tx.DeleteSharesOf(store.ShareUser, u.ID); err != nil {
			return err
		}
		ps, err := tx.ProjectsOf(u.ID)
		if err != nil {
			return err
		}
		for _, prj := range ps {
			if err := tx.RemoveMember(prj, u.ID); err != nil {
				return err
			}
		}
		jobs, err = tx.ActiveJobsOf(u.ID)
		return err
	})
	if err != nil {
		return apitypes.UserView{}, fmt.Errorf("remove user %s: %w", name, err)
	}
	for _, rn := range runners {
		h.closeConn(rn.ID, protocol.CloseRevoked, "runner's owner was removed")
	}
	if err := h.refreshAllAccess(ctx); err != nil {
		return apitypes.UserView{}, fmt.Errorf("reload runner access after removing %s: %w", name, err)
	}
	cancelled := 0
	for _, j := range jobs {
		if err := h.cancelJob(ctx, p, j.ID); err != nil {
			// Ended on its own since the read: nothing to cancel.
			var ae *call.Refusal
			if errors.As(err, &ae) && ae.Status == http.StatusConflict {
				continue
			}
			return apitypes.UserView{}, fmt.Errorf("cancel job %s of removed user %s: %w", j.ID, name, err)
		}
		cancelled++
	}
	h.log.Info("user removed", "user", name, "runners_revoked", len(runners), "jobs_cancelled", cancelled, "by", p.Name)
	return apitypes.UserView{Name: u.Name, Admin: u.Admin, CreatedAt: u.CreatedAt.UTC(), RemovedAt: utcPtr(u.RemovedAt)}, nil
}

// RotateToken gives a user a new token and revokes their others; a user
// rotates their own, an admin anyone's.
func (h *Hub) RotateToken(ctx context.Context, p call.Caller, req call.UserRequest) (apitypes.NewUserResponse, error) {
	name := req.Name
	token := auth.NewToken(auth.PrefixUser)
	now := h.now()
	err := h.store.Write(ctx, func(tx store.Tx) error {
		u, err := liveUser(tx, name)
		if err != nil {
			return err
		}
		if u.ID != p.UserID && !p.Admin {
			return call.Forbidden("you can rotate only your own token; an admin can rotate %s's", name)
		}
		if err := tx.RevokeTokens(store.TokenUser, u.ID, now); err != nil {
			return err
		}
		if err := tx.RevokeTokens(store.TokenSession, u.ID, now); err != nil { // its web sign-ins too
			return err
		}
		return tx.InsertToken(store.Token{Hash: auth.Hash(token), Kind: store.TokenUser, OwnerID: u.ID, CreatedAt: now})
	})
	if err != nil {
		return apitypes.NewUserResponse{}, fmt.Errorf("rotate the token of %s: %w", name, err)
	}
	h.log.Info("user token rotated", "user", name, "by", p.Name)
	return apitypes.NewUserResponse{Name: name, Token: token}, nil
}

// Whoami is the caller as the hub knows it, for a token of any kind.
func (h *Hub) Whoami(_ context.Context, p call.Caller) (apitypes.Whoami, error) {
	v := apitypes.Whoami{Kind: string(p.Kind), Name: p.Name, Admin: p.Admin}
	if p.Kind == store.TokenRunner {
		v.Runner = p.Name
	}
	return v, nil
}
