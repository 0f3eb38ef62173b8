package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"drover/internal/agent"
	"drover/internal/model"
	"drover/internal/tools"
)

// Limits bound one attempt of the loop; the loop enforces them, not the
// model. Zero fields take the defaults (DefaultLimits).
type Limits struct {
	MaxTurns  int           // model calls
	MaxTokens int64         // input, output and cache tokens, summed
	MaxCost   float64       // dollars, where the price is known
	MaxWall   time.Duration // the whole loop
	// MaxMalformed malformed tool calls or empty answers in a row end the
	// attempt.
	MaxMalformed int
	// MaxRepeats identical calls in a row end the attempt as stuck.
	MaxRepeats int
	// ContextWindow is the model's context in tokens: past compactAt
	// percent of it the transcript is compacted.
	ContextWindow int64
	// MaxWait is the job's wait budget: a limit whose stated reset is
	// further off ends the attempt instead of parking the job until then.
	MaxWait time.Duration
}

// DefaultLimits are the limits of a job that sets none.
func DefaultLimits() Limits {
	return Limits{MaxTurns: 60, MaxTokens: 5_000_000, MaxCost: 20, MaxWall: 2 * time.Hour, MaxMalformed: 3, MaxRepeats: 3,
		MaxWait: 6 * time.Hour, ContextWindow: 128_000}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxTurns <= 0 {
		l.MaxTurns = d.MaxTurns
	}
	if l.MaxTokens <= 0 {
		l.MaxTokens = d.MaxTokens
	}
	if l.MaxCost <= 0 {
		l.MaxCost = d.MaxCost
	}
	if l.MaxWall <= 0 {
		l.MaxWall = d.MaxWall
	}
	if l.MaxMalformed <= 0 {
		l.MaxMalformed = d.MaxMalformed
	}
	if l.MaxRepeats <= 0 {
		l.MaxRepeats = d.MaxRepeats
	}
	if l.MaxWait <= 0 {
		l.MaxWait = d.MaxWait
	}
	if l.ContextWindow <= 0 {
		l.ContextWindow = d.ContextWindow
	}
	return l
}

// Transcript is the conversation so far: what a resumed attempt continues.
type Transcript struct {
	Session  string          `json:"session"`
	System   string          `json:"system"`
	Messages []model.Message `json:"messages"`
	Turns    int             `json:"turns"` // model calls made, over every attempt
	Usage    agent.Usage     `json:"usage"`
	// Compactions are the transcript's compactions, oldest first; the
	// model is sent the latest one's view (see view).
	Compactions []Compaction `json:"compactions,omitempty"`
}

// interrupted is the result given to a tool call that never got one (the
// attempt ended between the call and its result): providers refuse a
// conversation with a dangling call.
const interrupted = "interrupted: the attempt ended before this call returned; check its effect before you repeat it"

// backfill adds a user message (messages are only ever appended: the
// transcript's file is append-only) holding an interrupted result for
// every call of the last assistant message, which never got one, and text
// (a resumed attempt's prompt).
func (t *Transcript) backfill(text string) {
	m := model.Message{Role: model.User, Text: text}
	if n := len(t.Messages); n > 0 && t.Messages[n-1].Role == model.Assistant {
		for _, c := range t.Messages[n-1].Calls {
			m.Results = append(m.Results, model.Result{CallID: c.ID, Name: c.Name, Output: interrupted, IsError: true})
		}
	}
	if m.Text != "" || len(m.Results) > 0 {
		t.Messages = append(t.Messages, m)
	}
}

// uniqueCalls gives each of calls an id no earlier call of the transcript
// has: two providers (an account and its fallback) may both number their
// calls from one, and a result must name its call alone.
func (t *Transcript) uniqueCalls(calls []model.Call) {
	used := map[string]bool{}
	for _, m := range t.Messages {
		for _, c := range m.Calls {
			used[c.ID] = true
		}
	}
	for i := range calls {
		id := calls[i].ID
		for n := 2; id == "" || used[id]; n++ {
			id = fmt.Sprintf("%s_%d", calls[i].ID, n)
		}
		used[id], calls[i].ID = true, id
	}
}

// emptyNudge answers an empty answer.
const emptyNudge = "Your answer was empty. If you meant to call a tool, call one of the tools you were given, by its exact name, " +
	"with arguments that are one JSON object; if you are done, end your turn as your instructions say."

// End is how a loop ended.
type End string

const (
	EndAnswered  End = "answered"  // the model ended its turn
	EndDelivered End = "delivered" // deliver succeeded
	EndAsked     End = "asked"     // ask succeeded: the job waits
	EndLimit     End = "limit"     // a limit of Limits was reached
	EndTimeout   End = "timeout"   // the wall-time limit was reached
	EndMalformed End = "malformed" // too many malformed calls in a row
	EndEmpty     End = "empty"     // too many malformed turns in a row, the last an empty answer
	EndStuck     End = "stuck"     // the same call over and over
	EndModel     End = "model"     // the model call failed (see Outcome.Err)
	EndTooLong   End = "too_long"  // the request would not fit the context window
	EndCancelled End = "cancelled" // ctx ended
)

// Outcome is what a loop run came to.
type Outcome struct {
	End    End
	Reason string       // for people: why it ended so
	Err    *model.Error // End == EndModel
}

// loop drives a model through a task with the toolbox's tools.
type loop struct {
	model  model.Provider
	tools  *toolbox
	limits Limits
	log    io.Writer // the job's log: one line per call and result
	events agent.Events
	// save records the transcript after every model call and every batch
	// of tool results, before the next call: a resumed attempt continues
	// from the last one saved.
	save func(context.Context, *Transcript) error
	// fallback makes the model of the job's fallback account, which the
	// loop continues on once its model is limited or unavailable; nil for
	// none (or once used).
	fallback func() (model.Provider, error)
	// fellBack is the error that moved the loop to the fallback.
	fellBack *model.Error
}

func (l *loop) logf(format string, args ...any) {
	if l.log != nil {
		fmt.Fprintf(l.log, "drover: "+format+"\n", args...)
	}
}

func (l *loop) emit(e agent.Event) {
	if l.events != nil {
		l.events(e)
	}
}

// run continues tr until the model ends its turn, a drover tool ends the
// attempt's turn, or a limit is reached.
func (l *loop) run(ctx context.Context, tr *Transcript) Outcome {
	lim := l.limits.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, lim.MaxWall)
	defer cancel()
	defs := l.tools.definitions()
	malformed, repeats := 0, 0
	last := ""
	est := &estimate{}
	est.added(tr.view()...)
	for turns := 0; ; turns++ {
		if turns >= lim.MaxTurns {
			return Outcome{End: EndLimit, Reason: fmt.Sprintf("reached the limit of %d model turns", lim.MaxTurns)}
		}
		if used := tr.Usage.InputTokens + tr.Usage.OutputTokens + tr.Usage.CacheReadTokens + tr.Usage.CacheWriteTokens; used >= lim.MaxTokens {
			return Outcome{End: EndLimit, Reason: fmt.Sprintf("used %d tokens, the limit is %d", used, lim.MaxTokens)}
		}
		if tr.Usage.CostUSD >= lim.MaxCost {
			return Outcome{End: EndLimit, Reason: fmt.Sprintf("spent $%.4f, the limit is $%.2f", tr.Usage.CostUSD, lim.MaxCost)}
		}
		if est.tokens*100 > lim.ContextWindow*compactAt {
			if _, err := l.compact(ctx, tr, defs, est); err != nil {
				return l.failed(ctx, err, lim)
			}
		}
		if est.tokens > lim.ContextWindow {
			// A server past its window cuts the prompt silently (Ollama
			// does): the model would work on a task it cannot see whole.
			return Outcome{End: EndTooLong, Reason: fmt.Sprintf("the next request is about %d tokens, more than the model's context window of %d, "+
				"and compaction cannot shorten it: refused rather than sent to be truncated", est.tokens, lim.ContextWindow)}
		}
		resp, err := l.model.Complete(ctx, model.Request{System: tr.System, Messages: tr.view(), Tools: defs, CacheKey: tr.Session})
		if err != nil {
			if l.fallBack(ctx, err) {
				turns-- // the call is made again, on the fallback
				continue
			}
			return l.failed(ctx, err, lim)
		}
		tr.Turns++
		l.emit(agent.Event{Kind: agent.EventTurn, Turn: strconv.Itoa(tr.Turns)})
		tr.uniqueCalls(resp.Calls)
		est.called(resp.Usage, resp.Message())
		tr.Usage = tr.Usage.Add(resp.Usage)
		u := resp.Usage
		l.emit(agent.Event{Kind: agent.EventUsage, Usage: &u})
		tr.Messages = append(tr.Messages, resp.Message())
		if resp.Text != "" {
			l.logf("turn %d: %s", tr.Turns, oneLine(resp.Text, 300))
			l.emit(agent.Event{Kind: agent.EventText, Text: resp.Text})
		}
		if err := l.save(ctx, tr); err != nil {
			return Outcome{End: EndModel, Reason: "record the turn: " + err.Error()}
		}
		if ctx.Err() != nil {
			// Stopped while the model answered (cancelled, or the turn is
			// past its runner's turn limit): none of its calls runs. A
			// resumed attempt gives them interrupted results (backfill).
			return l.failed(ctx, ctx.Err(), lim)
		}
		if len(resp.Calls) == 0 {
			if resp.Stop == model.StopLength {
				// Cut off mid-answer with nothing to run: ask for less.
				malformed++
				if malformed >= lim.MaxMalformed {
					return Outcome{End: EndMalformed, Reason: fmt.Sprintf("%d answers in a row were cut off at the token limit", malformed)}
				}
				tr.backfill("Your answer was cut off at the token limit. Answer shorter: one step at a time.")
				continue
			}
			if resp.Text == "" {
				// A malformed turn: behind Ollama a malformed or unknown
				// tool call arrives as an empty answer.
				malformed++
				if malformed >= lim.MaxMalformed {
					return Outcome{End: EndEmpty, Reason: fmt.Sprintf("%d malformed or empty answers in a row, the last empty "+
						"(a server such as Ollama answers a malformed or unknown tool call with an empty one)", malformed)}
				}
				l.logf("turn %d: an empty answer; the model is asked again", tr.Turns)
				tr.backfill(emptyNudge)
				continue
			}
			return Outcome{End: EndAnswered, Reason: "the model ended its turn"}
		}
		var results []model.Result
		for _, c := range resp.Calls {
			sig := c.Name + "\x00" + c.Args
			if sig == last {
				repeats++
			} else {
				repeats, last = 1, sig
			}
			l.logf("turn %d: %s %s", tr.Turns, c.Name, oneLine(c.Args, 200))
			l.emit(agent.Event{Kind: agent.EventToolUse, Tool: c.Name, ToolID: c.ID, Input: rawOrNil(c.Args)})
			var out string
			var err error
			if resp.Stop == model.StopLength {
				err = fmt.Errorf("%w: your answer was cut off at the token limit, so this call may be incomplete; send it again, shorter", errMalformed)
			} else {
				out, err = l.tools.call(ctx, c)
			}
			res := model.Result{CallID: c.ID, Name: c.Name, Output: out}
			if err != nil {
				res.Output, res.IsError = "error: "+err.Error(), true
			}
			if errors.Is(err, errMalformed) {
				malformed++
			} else {
				malformed = 0
			}
			l.logf("turn %d: %s → %s", tr.Turns, c.Name, oneLine(res.Output, 200))
			l.emit(agent.Event{Kind: agent.EventToolResult, ToolID: c.ID, Text: res.Output, IsError: res.IsError})
			results = append(results, res)
		}
		tr.Messages = append(tr.Messages, model.Message{Role: model.User, Results: results})
		est.added(tr.Messages[len(tr.Messages)-1])
		if err := l.save(ctx, tr); err != nil {
			return Outcome{End: EndModel, Reason: "record the tool results: " + err.Error()}
		}
		if ctx.Err() != nil {
			return l.failed(ctx, ctx.Err(), lim)
		}
		if d := l.tools.drover; d != nil {
			switch d.Status() {
			case tools.Delivered:
				return Outcome{End: EndDelivered, Reason: "delivered"}
			case tools.Waiting:
				return Outcome{End: EndAsked, Reason: "asked a question"}
			}
		}
		if malformed >= lim.MaxMalformed {
			return Outcome{End: EndMalformed, Reason: fmt.Sprintf("%d malformed tool calls in a row", malformed)}
		}
		if repeats >= lim.MaxRepeats {
			return Outcome{End: EndStuck, Reason: fmt.Sprintf("stuck: made the same %s call %d times in a row", resp.Calls[len(resp.Calls)-1].Name, repeats)}
		}
	}
}

// fallBack switches to the fallback account's model when err says the
// model is limited or unavailable (never for a bad answer), and says
// whether it did. The transcript goes on as it is: the providers are sent
// the same tool-call ids (model.WireID).
func (l *loop) fallBack(ctx context.Context, err error) bool {
	var me *model.Error
	if l.fallback == nil || ctx.Err() != nil || !errors.As(err, &me) || (me.Kind != model.KindLimited && me.Kind != model.KindUnavailable) {
		return false
	}
	next := l.fallback
	l.fallback = nil
	p, perr := next()
	if perr != nil {
		l.logf("the fallback account cannot be used: %v", perr)
		return false
	}
	l.model, l.fellBack = p, me
	l.logf("the account's model is %s (%s); the job continues its transcript on the fallback account", me.Kind, me.Message)
	return true
}

// failed is the outcome of a model call or tool run that ended with err.
func (l *loop) failed(ctx context.Context, err error, lim Limits) Outcome {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Outcome{End: EndTimeout, Reason: fmt.Sprintf("ran past its time limit of %s", lim.MaxWall)}
	}
	if ctx.Err() != nil {
		return Outcome{End: EndCancelled, Reason: "cancelled"}
	}
	var me *model.Error
	if !errors.As(err, &me) {
		me = &model.Error{Kind: model.KindTransport, Message: err.Error()}
	}
	return Outcome{End: EndModel, Reason: me.Message, Err: me}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

// rawOrNil is a call's arguments for an event: nil when they are not JSON.
func rawOrNil(s string) []byte {
	if !json.Valid([]byte(s)) {
		return nil
	}
	return []byte(s)
}
