package forgework

import (
	"context"
	"errors"
	"fmt"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/rules"
	"drover/internal/store"
)

// Links of forge logins to users. Only an admin links or unlinks: drover
// cannot tell who holds a forge login (sign-in with the forge will), and a
// link makes what that login writes on the forge act as the user. A user
// may see their own links.

// LinkUser links login on forge connection forgeName to user name.
func (s *Triggers) LinkUser(ctx context.Context, c call.Caller, name string, req apitypes.ForgeLinkRequest) (apitypes.ForgeLinkView, error) {
	if !c.Admin {
		return apitypes.ForgeLinkView{}, call.Forbidden("only an admin links forge logins to users")
	}
	if !loginRE.MatchString(req.Login) {
		return apitypes.ForgeLinkView{}, call.BadRequest("login %q: a forge login", rules.Clip(rules.Escape(req.Login, false), 40))
	}
	l := store.ForgeLink{Forge: req.Forge, Login: req.Login, CreatedBy: c.UserID, CreatedAt: s.cfg.Now()}
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		u, err := user(tx, name)
		if err != nil {
			return err
		}
		if _, err := tx.Forge(req.Forge); errors.Is(err, store.ErrNotFound) {
			return call.NotFound("no forge named %q", rules.Clip(rules.Escape(req.Forge, false), 40))
		} else if err != nil {
			return err
		}
		l.UserID = u.ID
		if old, err := tx.ForgeLink(req.Forge, req.Login); err == nil {
			if old.UserID == u.ID {
				return nil
			}
			return call.Conflict("%s on %s is linked to another user; unlink it first", req.Login, req.Forge)
		}
		return tx.PutForgeLink(l)
	})
	if err != nil {
		return apitypes.ForgeLinkView{}, fmt.Errorf("link %s on %s to %s: %w", req.Login, req.Forge, name, err)
	}
	s.log.Info("forge login linked", "forge", req.Forge, "login", req.Login, "user", name, "by", c.Name)
	return apitypes.ForgeLinkView{User: name, Forge: l.Forge, Login: l.Login, CreatedAt: l.CreatedAt}, nil
}

// UnlinkUser removes the link of login on forgeName to user name.
func (s *Triggers) UnlinkUser(ctx context.Context, c call.Caller, name, forgeName, login string) (apitypes.ForgeLinkView, error) {
	if !c.Admin {
		return apitypes.ForgeLinkView{}, call.Forbidden("only an admin unlinks forge logins")
	}
	var l store.ForgeLink
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		u, err := user(tx, name)
		if err != nil {
			return err
		}
		l, err = tx.ForgeLink(forgeName, login)
		if errors.Is(err, store.ErrNotFound) || (err == nil && l.UserID != u.ID) {
			return call.NotFound("%s on %s is not linked to %s", rules.Clip(rules.Escape(login, false), 40), rules.Clip(rules.Escape(forgeName, false), 40), name)
		} else if err != nil {
			return err
		}
		return tx.RemoveForgeLink(forgeName, login)
	})
	if err != nil {
		return apitypes.ForgeLinkView{}, fmt.Errorf("unlink %s: %w", name, err)
	}
	s.log.Info("forge login unlinked", "forge", forgeName, "login", login, "user", name, "by", c.Name)
	return apitypes.ForgeLinkView{User: name, Forge: l.Forge, Login: l.Login, CreatedAt: l.CreatedAt}, nil
}

// Links lists user name's links: to an admin or the user themself.
func (s *Triggers) Links(ctx context.Context, c call.Caller, name string) (apitypes.ForgeLinkList, error) {
	out := apitypes.ForgeLinkList{Links: []apitypes.ForgeLinkView{}}
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		u, err := user(tx, name)
		if err != nil {
			return err
		}
		if !c.Admin && c.UserID != u.ID {
			return call.NotFound("no user named %q", name)
		}
		ls, err := tx.ForgeLinksOf(u.ID)
		for _, l := range ls {
			out.Links = append(out.Links, apitypes.ForgeLinkView{User: name, Forge: l.Forge, Login: l.Login, CreatedAt: l.CreatedAt})
		}
		return err
	})
	return out, err
}

func user(tx store.Tx, name string) (store.User, error) {
	u, err := tx.UserByName(name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.RemovedAt != nil) {
		return store.User{}, call.NotFound("no user named %q", rules.Clip(rules.Escape(name, false), 40))
	}
	return u, err
}
