package hub

import (
	"context"
	"errors"
	"net/http"

	"drover/internal/hub/call"
	"drover/internal/store"
	"drover/internal/webhook"
)

// webhookCore adapts the core to webhook.Core: outbound webhooks are a
// package of their own (internal/webhook) fed by the outbox the store
// writes with every change of a job's state.
type webhookCore struct{ h *Hub }

var _ webhook.Core = webhookCore{}

func (a webhookCore) SeesJob(ctx context.Context, userID string, j store.Job) (bool, error) {
	var ok bool
	err := a.h.store.Read(ctx, func(tx store.Tx) error {
		c, err := userPrincipal(tx, userID)
		var r *call.Refusal
		if errors.Is(err, store.ErrNotFound) || (errors.As(err, &r) && r.Status == http.StatusUnauthorized) {
			return nil // a removed user sees nothing
		} else if err != nil {
			return err
		}
		ok, err = canSee(tx, c, j)
		return err
	})
	return ok, err
}

func (a webhookCore) SeesProject(ctx context.Context, c call.Caller, project string) error {
	return a.h.store.Read(ctx, func(tx store.Tx) error {
		_, err := visibleProject(tx, c, project)
		return err
	})
}

func (a webhookCore) JobURL(jobID string) string { return a.h.jobURL(jobID) }

func (a webhookCore) Leading() bool { return a.h.leading() }
