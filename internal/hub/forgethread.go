package hub

import (
	"context"
	"errors"
	"fmt"

	"drover/internal/apitypes"
	"drover/internal/forgethread"
	"drover/internal/hub/call"
	"drover/internal/protocol"
	"drover/internal/publish"
	"drover/internal/store"
)

// threadCore adapts the core to forgethread.Core: the conversation on the
// forge of a job started there is a package of its own
// (internal/forgethread), over the hub's jobs, forges and answers.
type threadCore struct{ h *Hub }

var _ forgethread.Core = threadCore{}

func (a threadCore) Job(ctx context.Context, id string) (apitypes.JobView, error) {
	return a.h.jobView(ctx, call.Caller{Admin: true, Name: "hub"}, id)
}

func (a threadCore) JobURL(id string) string { return a.h.jobURL(id) }

// Forge opens a forge connection with the hub's credential, as publishing
// does; a client without the thread operations cannot serve threads.
func (a threadCore) Forge(ctx context.Context, name string) (forgethread.Forge, string, error) {
	var f store.Forge
	err := a.h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		f, err = tx.Forge(name)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("read forge %s: %w", name, err)
	}
	if a.h.cfg.threadForge != nil {
		th, err := a.h.cfg.threadForge(f)
		return th, f.Kind, err
	}
	cl, err := publish.Open(f, a.h.cfg.ForgeHTTP)
	if err != nil {
		return nil, "", fmt.Errorf("forge %s: %w", name, err)
	}
	th, ok := cl.(forgethread.Forge)
	if !ok {
		return nil, "", fmt.Errorf("forge %s: %w", name, forgethread.ErrNoThreads)
	}
	return th, f.Kind, nil
}

// Answer answers as user userID through answerJob, so its approval rule
// holds for answers from the forge as for any other.
func (a threadCore) Answer(ctx context.Context, userID, jobID, text string) error {
	var c call.Caller
	err := a.h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		c, err = userPrincipal(tx, userID)
		return err
	})
	if err != nil {
		return fmt.Errorf("answer as user %s: %w", userID, err)
	}
	return a.h.answerJob(ctx, c, jobID, apitypes.AnswerRequest{Text: text})
}

func (a threadCore) Leading() bool { return a.h.leading() }

// forgeContext adds the job's forge thread, read now, to an agent's
// context; the store failing leaves it out rather than fail the call.
func (h *Hub) forgeContext(ctx context.Context, jc *protocol.JobContext) {
	if h.threads == nil {
		return
	}
	fc, err := h.threads.Context(ctx, jc.Job)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			h.log.Warn("could not read a job's forge thread for its context", "job", jc.Job, "err", err)
		}
		return
	}
	jc.Forge = fc
}
