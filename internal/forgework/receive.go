package forgework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"drover/internal/forge"
	"drover/internal/forgehook"
	"drover/internal/forgethread"
	"drover/internal/store"
)

// Hook serves POST /hooks/{kind}/{hook}: a forge's delivery, checked,
// recorded once and answered at once (202); acting on it is the leader's,
// in the background. Nothing but the hook's own signature authenticates
// it. A refusal changes nothing and is logged and counted.
func (s *Triggers) Hook(w http.ResponseWriter, r *http.Request) {
	status, outcome, msg := s.receive(r)
	s.cfg.Metrics.count(outcome)
	if status >= 400 {
		s.log.Warn("refused a forge webhook delivery", "outcome", outcome, "status", status, "reason", msg)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

func (s *Triggers) receive(r *http.Request) (status int, outcome, msg string) {
	kind, hookID := r.PathValue("kind"), r.PathValue("hook")
	// The hook first: a request naming none costs the hub no body read.
	var tr store.ForgeTrigger
	err := s.cfg.Store.Read(r.Context(), func(tx store.Tx) error {
		var err error
		tr, err = tx.ForgeTriggerByHook(hookID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) || (err == nil && tr.Kind != kind) {
		return http.StatusNotFound, "unknown_hook", "no such hook"
	} else if err != nil {
		return http.StatusServiceUnavailable, "error", "the hub could not read the hook; the forge sends it again"
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, forgehook.MaxBody))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("a delivery is at most %d bytes", forgehook.MaxBody)
	} else if err != nil {
		return http.StatusBadRequest, "malformed", "could not read the delivery"
	}
	if err := forgehook.Verify(kind, []byte(tr.Secret), r.Header, body); err != nil {
		return http.StatusUnauthorized, "bad_signature", err.Error()
	}
	ev, err := forgehook.Parse(kind, r.Header, body)
	if err != nil {
		return http.StatusBadRequest, "malformed", err.Error()
	}
	switch {
	case ev.Type == forgehook.Ping:
		return http.StatusOK, "ping", "pong"
	case ev.Type == forgehook.Ignored:
		return http.StatusAccepted, "ignored", "ignored: not an event drover acts on"
	case !strings.EqualFold(ev.Repo, tr.Repo):
		return http.StatusUnprocessableEntity, "unmapped", fmt.Sprintf("repository %s is not the one project %s maps", ev.Repo, tr.Project)
	}
	switch act := decide(tr, ev); {
	case act.verb == "":
		return http.StatusAccepted, "ignored", "ignored: no trigger of the project matches"
	case act.verb == verbAnswer && !s.hasJobs(r.Context(), tr, ev):
		return http.StatusAccepted, "ignored", "ignored: a comment in a thread with no job of drover"
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return http.StatusInternalServerError, "error", "could not record the delivery"
	}
	now := s.cfg.Now()
	d := store.ForgeDelivery{HookID: hookID, Delivery: ev.Delivery, Event: string(data), State: store.DeliveryPending,
		CreatedAt: now, UpdatedAt: now}
	err = s.cfg.Store.Write(r.Context(), func(tx store.Tx) error { return tx.InsertForgeDelivery(d) })
	if errors.Is(err, store.ErrConflict) {
		return http.StatusOK, "duplicate", "already received"
	} else if err != nil {
		return http.StatusServiceUnavailable, "error", "the hub could not record the delivery; the forge sends it again"
	}
	s.poke()
	return http.StatusAccepted, "accepted", "accepted"
}

// action is what a delivery asks of drover: a verb of forgehook's
// commands, or none.
type action struct {
	verb string
	cmd  forgehook.Command
	// err is a command that was one but malformed: the reply says why.
	err error
}

// verbAnswer is a comment that is no command: an answer to the question
// a job of its thread waits on, if one does.
const verbAnswer = "answer"

// decide is the rule of which events start or act on jobs, under a
// project's triggers.
func decide(tr store.ForgeTrigger, ev forgehook.Event) action {
	switch ev.Type {
	case forgehook.Labeled:
		// Gitea says only which labels the issue has after the change.
		if tr.Label != "" && !ev.IsPR && (ev.Label == tr.Label || ev.Label == "" && slices.Contains(ev.Labels, tr.Label)) {
			return action{verb: forgehook.VerbRun}
		}
	case forgehook.Assigned:
		if tr.Assign != "" && !ev.IsPR && strings.EqualFold(ev.Assignee, tr.Assign) {
			return action{verb: forgehook.VerbRun}
		}
	case forgehook.Reviewed:
		if tr.Reviews && ev.IsPR && ev.ReviewState == forgehook.ReviewChangesRequested {
			return action{verb: forgehook.VerbAddress, cmd: forgehook.Command{Verb: forgehook.VerbAddress, Prompt: ev.Body}}
		}
		fallthrough // a review's body may be a command too
	case forgehook.Commented, forgehook.ReviewComment:
		// A conversation comment that is no command may answer a job's
		// question; a review comment never does (its ids are not the
		// conversation's, which the answer's order rests on).
		reply := action{}
		if ev.Type == forgehook.Commented {
			reply = action{verb: verbAnswer}
		}
		if tr.Command == "" {
			return reply
		}
		cmd, ok, err := forgehook.ParseCommand(tr.Command, ev.Body)
		switch {
		case !ok:
			return reply
		case err != nil:
			return action{verb: "reply", err: err}
		case cmd.Verb == forgehook.VerbAddress && !(tr.Reviews && ev.IsPR):
			return action{verb: "reply", err: fmt.Errorf("%s address is for a pull request of a project whose triggers take reviews (--reviews)", tr.Command)}
		}
		return action{verb: cmd.Verb, cmd: cmd}
	}
	return action{}
}

// hasJobs says whether ev's thread may have a job of drover: every comment
// in the repository is delivered, and only those in a job's thread are
// worth recording. A failed read says yes; acting on it reads again.
func (s *Triggers) hasJobs(ctx context.Context, tr store.ForgeTrigger, ev forgehook.Event) bool {
	repo, err := forge.ParseRepo(tr.Repo)
	if err != nil {
		return true
	}
	jobs, err := s.jobsOf(ctx, forgethread.Target{Forge: tr.Forge, Repo: repo, Number: ev.Number, IsPR: ev.IsPR})
	return err != nil || len(jobs) > 0
}
