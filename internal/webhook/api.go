package webhook

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/ids"
	"drover/internal/rules"
	"drover/internal/store"
)

// SecretPrefix starts every hook's secret, so one found in the wild is
// known for what it is.
const SecretPrefix = "whsec_"

// AddWebhook checks a hook whole and adds it for c; the answer carries
// its secret, shown this once.
func (s *Hooks) AddWebhook(ctx context.Context, c call.Caller, req apitypes.WebhookRequest) (apitypes.WebhookView, error) {
	if err := checkURL(req.URL, s.cfg.AllowPrivate); err != nil {
		return apitypes.WebhookView{}, err
	}
	events, err := checkEvents(req.Events)
	if err != nil {
		return apitypes.WebhookView{}, err
	}
	format := req.Format
	if format == "" {
		format = "json"
	}
	if !known(Formats, format) {
		return apitypes.WebhookView{}, call.BadRequest("unknown format %q: one of %s", format, strings.Join(Formats, ", "))
	}
	if req.Project != "" {
		if err := rules.CheckPlainText("project", req.Project, false); err != nil {
			return apitypes.WebhookView{}, call.BadRequest("%v", err)
		}
		if err := s.core.SeesProject(ctx, c, req.Project); err != nil {
			return apitypes.WebhookView{}, err
		}
	}
	h := store.Webhook{ID: ids.New("wh"), OwnerID: c.UserID, URL: req.URL, Events: events, Project: req.Project,
		Format: format, Secret: SecretPrefix + rand.Text(), CreatedAt: s.cfg.Now()}
	err = s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		mine, err := tx.Webhooks(c.UserID)
		if err != nil {
			return err
		}
		if len(mine) >= MaxHooks {
			return call.BadRequest("%s has %d webhooks, the most a user may have: remove one first", c.Name, len(mine))
		}
		return tx.InsertWebhook(h)
	})
	if err != nil {
		return apitypes.WebhookView{}, fmt.Errorf("add webhook: %w", err)
	}
	s.log.Info("webhook added", "hook", h.ID, "owner", c.Name, "events", strings.Join(events, ","), "project", h.Project)
	v := view(h, c.Name)
	v.Secret = h.Secret
	return v, nil
}

// checkURL refuses what the hub must not POST to: another scheme, a URL
// with credentials in it, one without a host, or a very long one.
func checkURL(raw string, allowPrivate bool) error {
	if len(raw) > MaxURL {
		return call.BadRequest("the URL is %d bytes long; the limit is %d", len(raw), MaxURL)
	}
	if err := rules.CheckPlainText("the URL", raw, false); err != nil {
		return call.BadRequest("%v", err)
	}
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return call.BadRequest("the URL must be an http or https URL (like https://example.com/hook)")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return call.BadRequest("the URL's scheme is %q: webhooks go to http or https URLs only", u.Scheme)
	case u.User != nil:
		return call.BadRequest("the URL carries credentials: a hook authenticates the hub by its signature, not by a password in the URL")
	case u.Hostname() == "":
		return call.BadRequest("the URL has no host")
	case u.Fragment != "":
		return call.BadRequest("the URL has a fragment (#…), which is never sent")
	case !allowPrivate && (strings.EqualFold(u.Hostname(), "localhost") || checkDestination(net.JoinHostPort(u.Hostname(), "0")) == ErrPrivateDestination):
		return call.BadRequest("%v", ErrPrivateDestination) // a name is checked again at each send, once resolved
	}
	return nil
}

// checkEvents is the events asked for, each once, in a job's order; an
// unknown one is refused with the list of known ones.
func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, call.BadRequest("no events: name some of %s", strings.Join(Events, ", "))
	}
	for _, e := range events {
		if !known(Events, e) {
			return nil, call.BadRequest("unknown event %q: the events are %s", truncate(e, 64), strings.Join(Events, ", "))
		}
	}
	var out []string
	for _, e := range Events {
		if slices.Contains(events, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// ListWebhooks lists c's hooks (an admin's: everyone's), never a secret.
func (s *Hooks) ListWebhooks(ctx context.Context, c call.Caller) (apitypes.WebhookList, error) {
	out := apitypes.WebhookList{Webhooks: []apitypes.WebhookView{}}
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		owner := c.UserID
		if c.Admin {
			owner = ""
		}
		hs, err := tx.Webhooks(owner)
		if err != nil {
			return err
		}
		names := map[string]string{}
		for _, h := range hs {
			if _, ok := names[h.OwnerID]; !ok {
				if u, err := tx.User(h.OwnerID); err == nil {
					names[h.OwnerID] = u.Name
				}
			}
			out.Webhooks = append(out.Webhooks, view(h, names[h.OwnerID]))
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

// RemoveWebhook removes one of c's hooks (an admin: anyone's) with its
// delivery log; nothing more is sent to it.
func (s *Hooks) RemoveWebhook(ctx context.Context, c call.Caller, id string) (apitypes.WebhookView, error) {
	var v apitypes.WebhookView
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		h, err := own(tx, c, id)
		if err != nil {
			return err
		}
		v = view(h, "")
		return tx.RemoveWebhook(id)
	})
	if err != nil {
		return v, fmt.Errorf("remove webhook: %w", err)
	}
	s.log.Info("webhook removed", "hook", id, "by", c.Name)
	return v, nil
}

// WebhookDeliveries is the delivery log of one of c's hooks, newest
// first.
func (s *Hooks) WebhookDeliveries(ctx context.Context, c call.Caller, id string, limit int) (apitypes.WebhookDeliveryList, error) {
	if limit <= 0 || limit > maxDeliveries {
		limit = 100
	}
	out := apitypes.WebhookDeliveryList{Deliveries: []apitypes.WebhookDeliveryView{}}
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		if _, err := own(tx, c, id); err != nil {
			return err
		}
		ds, err := tx.WebhookDeliveries(id, limit)
		for _, d := range ds {
			out.Deliveries = append(out.Deliveries, apitypes.WebhookDeliveryView{
				ID: d.ID, Event: d.Event, JobID: d.JobID, State: string(d.State), Attempts: d.Attempts, Status: d.Status,
				Error: d.Error, NextAt: d.NextAt, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt})
		}
		return err
	})
	if err != nil {
		return out, fmt.Errorf("list the deliveries of webhook %s: %w", id, err)
	}
	return out, nil
}

// own reads hook id if c owns it or is an admin; anyone else's reads as
// not found.
func own(tx store.Tx, c call.Caller, id string) (store.Webhook, error) {
	h, err := tx.Webhook(id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !c.Admin && h.OwnerID != c.UserID) {
		return store.Webhook{}, call.NotFound("no webhook %q", id)
	}
	return h, err
}

func view(h store.Webhook, owner string) apitypes.WebhookView {
	return apitypes.WebhookView{ID: h.ID, Owner: owner, URL: h.URL, Events: h.Events, Project: h.Project,
		Format: h.Format, CreatedAt: h.CreatedAt}
}
