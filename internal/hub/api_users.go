package hub

import (
	"errors"
	"fmt"
	"net/http"

	"drover/internal/auth"
	"drover/internal/protocol"
	"drover/internal/store"
)

// apiUsers lists every user for an admin, the caller alone for anyone else.
func (h *Hub) apiUsers(w http.ResponseWriter, r *http.Request, p principal) error {
	out := protocol.UserList{Users: []protocol.UserView{}}
	err := h.store.Read(r.Context(), func(tx store.Tx) error {
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
			if !p.admin && u.ID != p.userID {
				continue
			}
			out.Users = append(out.Users, protocol.UserView{Name: u.Name, Admin: u.Admin, CreatedAt: u.CreatedAt.UTC(),
				RemovedAt: utcPtr(u.RemovedAt), Runners: owned[u.ID]})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list users: %w", err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// liveUser reads a user who was not removed.
func liveUser(tx store.Tx, name string) (store.User, error) {
	u, err := tx.UserByName(name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.RemovedAt != nil) {
		return store.User{}, notFound("no user named %q", name)
	}
	return u, err
}

// apiRemoveUser removes a user (admin only): their tokens stop working at
// once, their runners are revoked (and disconnected), whatever is shared
// with them is unshared, and their unfinished jobs are cancelled. The row
// stays, so history keeps their name.
func (h *Hub) apiRemoveUser(w http.ResponseWriter, r *http.Request, p principal) error {
	if !p.admin {
		return forbidden("only an admin can remove users")
	}
	name := r.PathValue("name")
	now := h.now()
	var u store.User
	var runners []store.Runner
	var jobs []store.Job
	err := h.store.Write(r.Context(), func(tx store.Tx) error {
		runners, jobs = nil, nil
		var err error
		if u, err = liveUser(tx, name); err != nil {
			return err
		}
		if u.ID == p.userID {
			return badRequest("you cannot remove yourself; another admin can")
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
		return fmt.Errorf("remove user %s: %w", name, err)
	}
	for _, rn := range runners {
		h.closeConn(rn.ID, protocol.CloseRevoked, "runner's owner was removed")
	}
	if err := h.refreshAllAccess(r.Context()); err != nil {
		return fmt.Errorf("reload runner access after removing %s: %w", name, err)
	}
	cancelled := 0
	for _, j := range jobs {
		if err := h.cancelJob(r.Context(), p, j.ID); err != nil {
			// Ended on its own since the read: nothing to cancel.
			var ae *apiError
			if errors.As(err, &ae) && ae.status == http.StatusConflict {
				continue
			}
			return fmt.Errorf("cancel job %s of removed user %s: %w", j.ID, name, err)
		}
		cancelled++
	}
	h.log.Info("user removed", "user", name, "runners_revoked", len(runners), "jobs_cancelled", cancelled, "by", p.name)
	writeJSON(w, http.StatusOK, protocol.UserView{Name: u.Name, Admin: u.Admin, CreatedAt: u.CreatedAt.UTC(), RemovedAt: utcPtr(u.RemovedAt)})
	return nil
}

// apiRotateToken gives a user a new token and revokes their others; a user
// rotates their own, an admin anyone's.
func (h *Hub) apiRotateToken(w http.ResponseWriter, r *http.Request, p principal) error {
	name := r.PathValue("name")
	token := auth.NewToken(auth.PrefixUser)
	now := h.now()
	err := h.store.Write(r.Context(), func(tx store.Tx) error {
		u, err := liveUser(tx, name)
		if err != nil {
			return err
		}
		if u.ID != p.userID && !p.admin {
			return forbidden("you can rotate only your own token; an admin can rotate %s's", name)
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
		return fmt.Errorf("rotate the token of %s: %w", name, err)
	}
	h.log.Info("user token rotated", "user", name, "by", p.name)
	writeJSON(w, http.StatusOK, protocol.NewUserResponse{Name: name, Token: token})
	return nil
}
