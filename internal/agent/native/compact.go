package native

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"drover/internal/agent"
	"drover/internal/model"
)

// Compaction replaces, in what the model is sent, the messages before
// Upto (all but the first, the job's prompt: the stable prefix prompt
// caching reuses) with Summary. The transcript keeps every message: a
// compaction is a record of its own, never a rewrite.
type Compaction struct {
	Upto    int    `json:"upto"`
	Summary string `json:"summary"`
	// Dropped says for people what the summary stands for.
	Dropped string `json:"dropped"`
}

const (
	// compactAt is the share of the context window (percent) past which
	// the transcript is compacted before the next model call.
	compactAt = 80
	// keepTail is how many of the latest messages a compaction keeps.
	keepTail = 4
	// charsPerToken estimates the tokens of text not yet sent.
	charsPerToken = 4
)

const compactInstruction = "The conversation is near the context window. Summarize the work so far for yourself: " +
	"the task, what you found, what you changed (files), what you ran and its results, and what is left. " +
	"Answer with the summary as text only; call no tool."

const compactedNote = "(Earlier turns were compacted into the summary above; the latest turns follow. Continue the job.)"

// view is what the model is sent: the messages, with the latest
// compaction's in place of those it summarizes.
func (t *Transcript) view() []model.Message {
	if len(t.Compactions) == 0 {
		return t.Messages
	}
	c := t.Compactions[len(t.Compactions)-1]
	out := make([]model.Message, 0, 3+len(t.Messages)-c.Upto)
	out = append(out, t.Messages[0],
		model.Message{Role: model.Assistant, Text: "Summary of the earlier work:\n" + c.Summary},
		model.Message{Role: model.User, Text: compactedNote})
	return append(out, t.Messages[c.Upto:]...)
}

// compactFrom is the first message the transcript's view still sends
// whole (after the prompt).
func (t *Transcript) compactFrom() int {
	if n := len(t.Compactions); n > 0 {
		return t.Compactions[n-1].Upto
	}
	return 1
}

// cut is where a compaction would end: the first of the latest keepTail
// messages that is a model answer (so no tool result loses its call);
// false when that drops nothing.
func (t *Transcript) cut() (int, bool) {
	from := t.compactFrom()
	for k := max(from+1, len(t.Messages)-keepTail); k < len(t.Messages); k++ {
		if t.Messages[k].Role == model.Assistant {
			return k, true
		}
	}
	return 0, false
}

// estimate is the tokens the next call would send: the last call's
// prompt and answer, as the provider counted them, plus the text added
// since.
type estimate struct{ tokens int64 }

// called takes a model call's usage; a provider that reports none has
// its answer counted by its text.
func (e *estimate) called(u model.Usage, answer model.Message) {
	if n := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens + u.OutputTokens; n > 0 {
		e.tokens = n
		return
	}
	e.added(answer)
}

func (e *estimate) added(ms ...model.Message) {
	for _, m := range ms {
		n := len(m.Text)
		for _, c := range m.Calls {
			n += len(c.Name) + len(c.Args)
		}
		for _, r := range m.Results {
			n += len(r.Output)
		}
		e.tokens += int64(n / charsPerToken)
	}
}

// compact asks the model for a summary of the messages a cut drops and
// records it; the next calls send the prefix, the summary and the latest
// turns. It returns false when there is nothing to drop.
func (l *loop) compact(ctx context.Context, tr *Transcript, defs []model.Tool, est *estimate) (bool, error) {
	k, ok := tr.cut()
	if !ok {
		return false, nil
	}
	from := tr.compactFrom()
	v := tr.view()
	msgs := append([]model.Message(nil), v[:len(v)-(len(tr.Messages)-k)]...)
	last := msgs[len(msgs)-1] // a user message: the one before the model answer at k
	last.Text = strings.TrimSpace(last.Text + "\n\n" + compactInstruction)
	msgs[len(msgs)-1] = last
	resp, err := l.model.Complete(ctx, model.Request{System: tr.System, Messages: msgs, Tools: defs, CacheKey: tr.Session})
	if err != nil {
		return false, err
	}
	tr.Usage = tr.Usage.Add(resp.Usage)
	u := resp.Usage
	l.emit(agent.Event{Kind: agent.EventUsage, Usage: &u})
	sum := strings.TrimSpace(resp.Text)
	calls := 0
	names := map[string]int{}
	for _, m := range tr.Messages[from:k] {
		for _, c := range m.Calls {
			calls++
			names[c.Name]++
		}
	}
	if sum == "" {
		sum = fmt.Sprintf("(the model gave no summary; %d tool calls were made)", calls)
	}
	var tools []string
	for _, n := range slices.Sorted(maps.Keys(names)) {
		tools = append(tools, fmt.Sprintf("%s×%d", n, names[n]))
	}
	c := Compaction{Upto: k, Summary: sum,
		Dropped: fmt.Sprintf("messages %d-%d of %d (%d tool calls: %s), summarized in %d bytes", from, k-1, len(tr.Messages), calls, strings.Join(tools, " "), len(sum))}
	tr.Compactions = append(tr.Compactions, c)
	l.logf("compacted the transcript before turn %d: %s", tr.Turns+1, c.Dropped)
	est.tokens = 0
	est.added(tr.view()...)
	return true, nil
}
