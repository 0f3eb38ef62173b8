package hub

import (
	"context"
	"errors"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// HubList is the live hubs. Any signed-in user may see them: they name no
// runner, user or job, only counts (docs/operator.md).
func (h *Hub) HubList(ctx context.Context, _ call.Caller) (apitypes.HubList, error) {
	var (
		hs []store.Hub
		l  store.Leader
	)
	now := h.now()
	err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		if hs, err = tx.Hubs(); err != nil {
			return err
		}
		if l, err = tx.Leader(); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return apitypes.HubList{}, err
	}
	out := apitypes.HubList{Hubs: []apitypes.HubView{}}
	live := h.liveSince(now)
	for _, hb := range hs {
		if hb.LastSeen.Before(live) {
			continue
		}
		out.Hubs = append(out.Hubs, apitypes.HubView{
			ID: hb.ID, URL: hb.URL, Version: hb.Version, StartedAt: hb.StartedAt.UTC(), LastSeen: hb.LastSeen.UTC(),
			Conns: hb.Conns, Leader: hb.ID == l.Holder && now.Before(l.Expires), Self: hb.ID == h.id,
		})
	}
	return out, nil
}
