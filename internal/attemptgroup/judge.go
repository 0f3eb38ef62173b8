package attemptgroup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/rules"
	"drover/internal/store"
)

// Events a group's judge leaves, each once: its verdict, as the group
// read it, and what came of picking by it.
const (
	kindJudged    = "judged"
	kindJudgePick = "judge_pick"
)

// judgeOf is the judge of a group from its step, nil for a group with
// none; notes are the group's judge events by kind.
func judgeOf(pv apitypes.PipelineView, s apitypes.PipelineStepView, n int, notes map[string]string) *apitypes.GroupJudge {
	j := &apitypes.GroupJudge{State: s.State, Reason: s.Reason, CostUSD: s.CostUSD, Tokens: s.Tokens,
		PickByJudge: pv.Params[paramPick] == pickByJudge, Pick: notes[kindJudgePick]}
	j.Agent, j.Account, _ = strings.Cut(pv.Params[paramJudge], ":")
	if k := len(s.Runs); k > 0 {
		last := s.Runs[k-1]
		j.Job = last.Job
		if s.State == "done" {
			ranking, err := ParseVerdict([]byte(last.Summary), n)
			if err != nil {
				// The reason may quote the judge's words: escaped and
				// bounded, as text from elsewhere.
				j.Verdict, j.Invalid = "invalid", rules.Clip(rules.Escape(err.Error(), false), 500)
			} else {
				j.Verdict, j.Ranking = "valid", ranking
			}
		}
	}
	return j
}

// notes are the latest message of each judge event of group id.
func (g *Groups) notes(ctx context.Context, id string) (map[string]string, error) {
	var evs []store.PipelineEvent
	if err := g.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		evs, err = tx.PipelineEvents(id, 0, 1000)
		return err
	}); err != nil {
		return nil, fmt.Errorf("read group %s's events: %w", id, err)
	}
	out := map[string]string{}
	for _, ev := range evs {
		if ev.Kind == kindJudged || ev.Kind == kindJudgePick {
			out[ev.Kind] = ev.Message
		}
	}
	return out, nil
}

// Settle acts on a group's judge once all the group's steps are done: the
// pipeline engine calls it on the leader, as the requester c, before the
// group ends, until it returns nil. It records the verdict, valid or not,
// and with pick-by-judge picks the attempt ranked first, through drover
// pick's rule, when the verdict is valid and that attempt's verify passed,
// or records why it picked nothing. Each is recorded once, after it is
// done; the pick itself is idempotent, so a crash between redoes nothing
// twice. Any other pipeline settles as it is.
func (g *Groups) Settle(ctx context.Context, c call.Caller, id, pipelineFile string) error {
	if pipelineFile != file {
		return nil
	}
	pv, err := g.core.ShowPipeline(ctx, c, id)
	if err != nil {
		return err
	}
	if pv.Name != name || pv.Params[paramJudge] == "" {
		return nil
	}
	v, err := g.view(ctx, pv)
	if err != nil {
		return err
	}
	j := v.Judge
	if j == nil {
		return nil
	}
	notes, err := g.notes(ctx, id)
	if err != nil {
		return err
	}
	if _, ok := notes[kindJudged]; !ok {
		if err := g.note(ctx, id, c, kindJudged, verdictNote(j)); err != nil {
			return err
		}
	}
	if _, ok := notes[kindJudgePick]; ok || !j.PickByJudge {
		return nil
	}
	msg, err := g.pickByJudge(ctx, c, pv, v)
	if err != nil {
		return err
	}
	return g.note(ctx, id, c, kindJudgePick, msg)
}

// pickByJudge picks the attempt the judge ranked first, when it may, and
// says what it did.
func (g *Groups) pickByJudge(ctx context.Context, c call.Caller, pv apitypes.PipelineView, v apitypes.GroupView) (string, error) {
	j := v.Judge
	if j.Verdict != "valid" {
		return "nothing picked: " + verdictNote(j), nil
	}
	k := j.Ranking[0].Attempt
	if a := v.Attempts[k-1]; a.Verify != "passed" {
		return fmt.Sprintf("nothing picked: attempt %d, ranked first, did not pass its verify (%s)", k, a.Verify), nil
	}
	_, err := g.pick(ctx, c, pv, k, "its judge's ranking")
	var r *call.Refusal
	if errors.As(err, &r) {
		return fmt.Sprintf("nothing picked: attempt %d, ranked first: %s", k, r.Msg), nil
	} else if err != nil {
		return "", err
	}
	return fmt.Sprintf("attempt %d, ranked first by the judge, picked as the group's result", k), nil
}

// note records a judge event of group id.
func (g *Groups) note(ctx context.Context, id string, c call.Caller, kind, msg string) error {
	now := g.cfg.Now()
	if err := g.cfg.Store.Write(ctx, func(tx store.Tx) error {
		_, err := tx.AddPipelineEvent(store.PipelineEvent{PipelineID: id, At: now, Kind: kind, Step: judgeStep, Actor: "hub", Message: msg})
		return err
	}); err != nil {
		return fmt.Errorf("record group %s's %s: %w", id, kind, err)
	}
	g.cfg.Logger.Info("attempt group "+kind, "group", id, "requester", c.Name, "note", msg)
	return nil
}

// verdictNote says what a judge's verdict is, for the group's events.
func verdictNote(j *apitypes.GroupJudge) string {
	switch j.Verdict {
	case "valid":
		var order []string
		for _, r := range j.Ranking {
			order = append(order, strconv.Itoa(r.Attempt))
		}
		return "the judge ranked the attempts " + strings.Join(order, ", ") + " (best first)"
	case "invalid":
		return "the judge's verdict is invalid, not trusted: " + j.Invalid
	}
	msg := "the judge ended " + j.State + " with no verdict"
	if j.Reason != "" {
		msg += ": " + j.Reason
	}
	return msg
}
