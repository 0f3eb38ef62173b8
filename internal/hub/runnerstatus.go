package hub

import (
	"context"
	"slices"
	"time"

	"drover/internal/protocol"
	"drover/internal/store"
)

// shown is what a runner reported that every hub shows (runnerView): the
// holding hub records it in the holding row at attach and again only when
// a status changes it, never per status or heartbeat (statuses come with
// every attempt's start and finish).
type shown struct {
	agents   []string
	accounts []protocol.AccountInfo // ids, labels and states: no secrets
	notReady string
	draining bool
}

// shown is c's now (under h.mu, or before c is listed).
func (c *runnerSession) shown() shown {
	return shown{agents: c.agents, accounts: c.accounts, notReady: c.notReady, draining: c.draining()}
}

func (s shown) equal(o shown) bool {
	return s.notReady == o.notReady && s.draining == o.draining && slices.Equal(s.agents, o.agents) &&
		slices.EqualFunc(s.accounts, o.accounts, sameAccount)
}

func sameAccount(a, b protocol.AccountInfo) bool {
	ta, tb := a.LimitedUntil, b.LimitedUntil
	a.LimitedUntil, b.LimitedUntil = time.Time{}, time.Time{}
	return a == b && ta.Equal(tb)
}

func (s shown) status() store.RunnerStatus {
	return store.RunnerStatus{Agents: s.agents, Accounts: storeAccounts(s.accounts), NotReady: s.notReady, Draining: s.draining}
}

// shownOf is what the holding hub recorded of a runner it holds.
func shownOf(st store.RunnerStatus) shown {
	out := shown{agents: st.Agents, notReady: st.NotReady, draining: st.Draining,
		accounts: make([]protocol.AccountInfo, 0, len(st.Accounts))}
	for _, a := range st.Accounts {
		ai := protocol.AccountInfo{ID: a.ID, Agent: a.Agent, Label: a.Label, Kind: a.Kind, State: a.State}
		if a.LimitedUntil != nil {
			ai.LimitedUntil = a.LimitedUntil.UTC()
		}
		out.accounts = append(out.accounts, ai)
	}
	return out
}

// recordStatus writes, in one transaction, the runner's accounts (when
// they changed) and what other hubs show of it (when that changed), so a
// status that changes neither writes nothing.
func (h *Hub) recordStatus(ctx context.Context, c *runnerSession, cur shown, accounts, status bool) error {
	at := h.now()
	err := h.store.Write(ctx, func(tx store.Tx) error {
		if accounts {
			if err := tx.SyncRunnerAccounts(c.runnerID, storeAccounts(cur.accounts), at); err != nil {
				return err
			}
		}
		if status {
			return tx.SetRunnerStatus(c.runnerID, h.id, cur.status())
		}
		return nil
	})
	if err == nil {
		c.recorded = cur
	}
	return err
}
