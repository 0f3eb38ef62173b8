package forgework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/forgehook"
	"drover/internal/hub/call"
	"drover/internal/rules"
	"drover/internal/store"
)

// DefaultAgent runs the jobs triggers start unless a command names one.
const DefaultAgent = "claude"

var loginRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$`)

// HookURL is where the forge delivers a project's hook.
func HookURL(publicURL, kind, hookID string) string {
	return strings.TrimRight(publicURL, "/") + "/hooks/" + kind + "/" + hookID
}

// SetTriggers turns project's forge triggers on, or changes them: the
// webhook is registered on the project's forge repository, with a secret
// drover makes and keeps. Only the project's owner or an admin may.
func (s *Triggers) SetTriggers(ctx context.Context, c call.Caller, project string, req apitypes.ForgeTriggersRequest) (apitypes.ForgeTriggersView, error) {
	if err := checkTriggers(&req); err != nil {
		return apitypes.ForgeTriggersView{}, err
	}
	prj, err := s.core.Project(ctx, c, project, true)
	if err != nil {
		return apitypes.ForgeTriggersView{}, err
	}
	cfg := prj.Config
	if cfg.Forge == "" || cfg.ForgeRepo == "" {
		return apitypes.ForgeTriggersView{}, call.Conflict("project %s is mapped to no forge repository: map it first (drover projects config %s --forge NAME --forge-repo OWNER/REPO)", project, project)
	}
	pub := s.core.PublicURL()
	if pub == "" {
		return apitypes.ForgeTriggersView{}, call.Conflict("the hub has no public URL for the forge to deliver to: its operator sets one (drover hub --url URL)")
	}
	repo, err := forge.ParseRepo(cfg.ForgeRepo)
	if err != nil {
		return apitypes.ForgeTriggersView{}, call.Conflict("the project's forge repository: %v", err)
	}
	var kind string
	var old store.ForgeTrigger
	had := false
	err = s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		f, err := tx.Forge(cfg.Forge)
		if err != nil {
			return err
		}
		kind = f.Kind
		old, err = tx.ForgeTrigger(project)
		if err == nil {
			had = true
		} else if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return apitypes.ForgeTriggersView{}, call.Conflict("the project's forge %s is gone; an admin adds it again", cfg.Forge)
	} else if err != nil {
		return apitypes.ForgeTriggersView{}, fmt.Errorf("read the triggers of %s: %w", project, err)
	}
	cl, err := s.core.Forge(ctx, cfg.Forge)
	if err != nil {
		return apitypes.ForgeTriggersView{}, err
	}
	now := s.cfg.Now()
	tr := store.ForgeTrigger{Project: project, Forge: cfg.Forge, Kind: kind, Repo: cfg.ForgeRepo,
		Label: req.Label, Command: req.Command, Reviews: req.Reviews, Assign: req.Assign, Agent: DefaultAgent,
		CreatedBy: c.UserID, CreatedAt: now, UpdatedAt: now}
	if had && old.Forge == tr.Forge && old.Repo == tr.Repo && old.Kind == tr.Kind {
		tr.HookID, tr.Secret, tr.RemoteID = old.HookID, old.Secret, old.RemoteID
	} else {
		if had {
			if err := s.unregister(ctx, old); err != nil {
				return apitypes.ForgeTriggersView{}, err
			}
		}
		tr.HookID, tr.Secret = "hk"+random(12), random(32)
	}
	// The row first: a hook the forge holds is one drover knows of, even
	// when the hub stops between the two.
	if err := s.cfg.Store.Write(ctx, func(tx store.Tx) error { return tx.PutForgeTrigger(tr) }); err != nil {
		return apitypes.ForgeTriggersView{}, fmt.Errorf("store the triggers of %s: %w", project, err)
	}
	id, err := cl.CreateHook(ctx, repo, forge.NewHook{URL: HookURL(pub, kind, tr.HookID), Secret: tr.Secret,
		Events: []string{forge.HookIssues, forge.HookComments, forge.HookReviews}})
	if err != nil {
		if !had {
			_ = s.cfg.Store.Write(ctx, func(tx store.Tx) error { return tx.RemoveForgeTrigger(project) })
		}
		return apitypes.ForgeTriggersView{}, asRefusal("register the webhook on "+repo.String(), err)
	}
	tr.RemoteID = id
	if err := s.cfg.Store.Write(ctx, func(tx store.Tx) error { return tx.PutForgeTrigger(tr) }); err != nil {
		return apitypes.ForgeTriggersView{}, fmt.Errorf("store the triggers of %s: %w", project, err)
	}
	s.log.Info("forge triggers on", "project", project, "forge", tr.Forge, "repo", tr.Repo, "by", c.Name)
	return triggersView(tr, pub), nil
}

// ShowTriggers shows project's forge triggers to one who may use it.
func (s *Triggers) ShowTriggers(ctx context.Context, c call.Caller, project string) (apitypes.ForgeTriggersView, error) {
	if _, err := s.core.Project(ctx, c, project, false); err != nil {
		return apitypes.ForgeTriggersView{}, err
	}
	tr, err := s.trigger(ctx, project)
	if err != nil {
		return apitypes.ForgeTriggersView{}, err
	}
	return triggersView(tr, s.core.PublicURL()), nil
}

// RemoveTriggers turns project's forge triggers off and removes the
// webhook from the forge. Only the project's owner or an admin may.
func (s *Triggers) RemoveTriggers(ctx context.Context, c call.Caller, project string) (apitypes.ForgeTriggersView, error) {
	if _, err := s.core.Project(ctx, c, project, true); err != nil {
		return apitypes.ForgeTriggersView{}, err
	}
	tr, err := s.trigger(ctx, project)
	if err != nil {
		return apitypes.ForgeTriggersView{}, err
	}
	if err := s.unregister(ctx, tr); err != nil {
		return apitypes.ForgeTriggersView{}, err
	}
	err = s.cfg.Store.Write(ctx, func(tx store.Tx) error { return tx.RemoveForgeTrigger(project) })
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return apitypes.ForgeTriggersView{}, fmt.Errorf("remove the triggers of %s: %w", project, err)
	}
	s.log.Info("forge triggers off", "project", project, "by", c.Name)
	return triggersView(tr, s.core.PublicURL()), nil
}

func (s *Triggers) trigger(ctx context.Context, project string) (store.ForgeTrigger, error) {
	var tr store.ForgeTrigger
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		tr, err = tx.ForgeTrigger(project)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return tr, call.NotFound("project %s has no forge triggers", project)
	}
	return tr, err
}

// unregister removes a trigger's hook from its forge (a hook already gone
// is no error).
func (s *Triggers) unregister(ctx context.Context, tr store.ForgeTrigger) error {
	if tr.RemoteID == 0 {
		return nil
	}
	repo, err := forge.ParseRepo(tr.Repo)
	if err != nil {
		return nil // never registered there
	}
	cl, err := s.core.Forge(ctx, tr.Forge)
	if err != nil {
		return err
	}
	if err := cl.DeleteHook(ctx, repo, tr.RemoteID); err != nil {
		return asRefusal("remove the webhook from "+repo.String(), err)
	}
	return nil
}

func checkTriggers(req *apitypes.ForgeTriggersRequest) error {
	if req.Label == "" && req.Command == "" && !req.Reviews && req.Assign == "" {
		return call.BadRequest("name at least one trigger: --label, --command, --reviews or --assign")
	}
	if req.Label != "" {
		if err := rules.CheckPlainText("label", req.Label, false); err != nil || len(req.Label) > rules.MaxLabelLen || strings.TrimSpace(req.Label) != req.Label {
			return call.BadRequest("label %q: 1-%d characters of plain text, no surrounding space", rules.Clip(rules.Escape(req.Label, false), 40), rules.MaxLabelLen)
		}
	}
	if req.Reviews && req.Command == "" {
		req.Command = forgehook.DefaultPrefix // a review's "address" is a command
	}
	if req.Command != "" {
		if err := forgehook.CheckPrefix(req.Command); err != nil {
			return call.BadRequest("%v", err)
		}
	}
	if req.Assign != "" && !loginRE.MatchString(req.Assign) {
		return call.BadRequest("assign %q: the bot's login on the forge", rules.Clip(rules.Escape(req.Assign, false), 40))
	}
	return nil
}

func triggersView(tr store.ForgeTrigger, pub string) apitypes.ForgeTriggersView {
	v := apitypes.ForgeTriggersView{Project: tr.Project, Forge: tr.Forge, Repo: tr.Repo, Label: tr.Label, Command: tr.Command,
		Reviews: tr.Reviews, Assign: tr.Assign, CreatedAt: tr.CreatedAt, UpdatedAt: tr.UpdatedAt}
	if pub != "" {
		v.HookURL = HookURL(pub, tr.Kind, tr.HookID)
	}
	return v
}

// asRefusal is a forge's failure as the caller sees it: a refusal as it
// is, else a 502 naming what was being done. Forge errors never carry a
// credential.
func asRefusal(what string, err error) error {
	if _, ok := errors.AsType[*call.Refusal](err); ok {
		return err
	}
	return call.Errf(502, "forge_error", "%s: %v", what, err)
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
