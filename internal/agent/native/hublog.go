package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"drover/internal/agent"
	"drover/internal/model"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// inlineLimit is the longest text (a tool's output, a call's arguments,
// the model's text) a transcript record holds; a longer one is written
// whole to the job's log and the record keeps its head and tail.
const inlineLimit = 16 << 10

// hubLog keeps a transcript in the hub's event log (agent.TurnLog): each
// save sends the records added since the last one, and returns once the
// hub has them.
type hubLog struct {
	turns agent.TurnLog
	log   io.Writer // the job's log, where elided texts are kept whole
	saved saved     // what the hub has
	// header is a new transcript's first record until it is sent.
	header *protocol.TurnRecord
}

// openHubLog starts tr's transcript in the hub or, with resume, reads the
// one the hub holds for tr.Session. A new transcript's first record (the
// session and system text) goes with its first messages, so the hub never
// holds a session without the job's prompt.
func openHubLog(ctx context.Context, turns agent.TurnLog, log io.Writer, tr *Transcript, resume bool) (*hubLog, *Transcript, error) {
	h := &hubLog{turns: turns, log: log}
	if !resume {
		rec, err := h.encode(record{Session: tr.Session, System: tr.System}, "session "+tr.Session+" started", 0)
		if err != nil {
			return nil, nil, err
		}
		h.header = &rec
		return h, tr, nil
	}
	recs, err := turns.Load(ctx, tr.Session)
	if err != nil {
		return nil, nil, fmt.Errorf("read the transcript from the hub: %w", err)
	}
	if len(recs) == 0 {
		return nil, nil, errors.New("the hub holds no transcript of this session")
	}
	out := &Transcript{}
	for i, r := range recs {
		var rec record
		if err := json.Unmarshal(r.Data, &rec); err != nil {
			return nil, nil, fmt.Errorf("read the transcript: record %d: %w", i+1, err)
		}
		out.add(rec, i == 0)
	}
	h.saved = saved{len(out.Messages), len(out.Compactions)}
	return h, out, nil
}

func (h *hubLog) save(ctx context.Context, tr *Transcript) error {
	recs, next := tr.since(h.saved)
	if len(recs) == 0 {
		return nil
	}
	out := make([]protocol.TurnRecord, 0, len(recs)+1)
	if h.header != nil {
		out = append(out, *h.header)
	}
	for _, rec := range recs {
		r, err := h.record(rec, inlineLimit)
		if err != nil {
			// Many big calls in one message: keep less of each.
			if r, err = h.record(rec, 512); err != nil {
				return err
			}
		}
		out = append(out, r)
	}
	if err := h.turns.Append(ctx, tr.Session, out); err != nil {
		return fmt.Errorf("record the transcript in the hub: %w", err)
	}
	h.saved, h.header = next, nil
	return nil
}

// record is rec for the hub, its long texts cut to limit.
func (h *hubLog) record(rec record, limit int) (protocol.TurnRecord, error) {
	if c := rec.Compaction; c != nil {
		cut := *c
		cut.Summary = h.elide("compaction's summary", c.Summary, limit)
		rec.Compaction = &cut
		r, err := h.encode(rec, safeLine("compaction before turn "+fmt.Sprint(rec.Turns+1)+": dropped "+c.Dropped, protocol.MaxTurnSummary), rec.Turns)
		r.Kind = protocol.KindCompaction
		return r, err
	}
	m := h.fit(*rec.Message, limit)
	rec.Message = &m
	return h.encode(rec, summary(rec.Turns, m), rec.Turns)
}

func (h *hubLog) Close() error { return nil }

func (h *hubLog) encode(rec record, sum string, turn int) (protocol.TurnRecord, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return protocol.TurnRecord{}, fmt.Errorf("encode the transcript: %w", err)
	}
	if len(b) > protocol.MaxTurnRecord {
		return protocol.TurnRecord{}, fmt.Errorf("a transcript record of %d bytes; the limit is %d", len(b), protocol.MaxTurnRecord)
	}
	return protocol.TurnRecord{Turn: turn, Summary: sum, Data: b}, nil
}

// fit is m with every text over limit bytes written whole to the job's log
// and cut to its head and tail (arguments, which must stay JSON, to a
// note) in the record.
func (h *hubLog) fit(m model.Message, limit int) model.Message {
	m.Text = h.elide("the model's text", m.Text, limit)
	if len(m.Calls) > 0 {
		m.Calls = append([]model.Call(nil), m.Calls...)
		for i, c := range m.Calls {
			if len(c.Args) > limit {
				h.keep("arguments of call "+c.ID, c.Args)
				note, _ := json.Marshal(map[string]string{"elided": fmt.Sprintf("%d bytes of arguments, kept in the job's log", len(c.Args))})
				m.Calls[i].Args = string(note)
			}
		}
	}
	if len(m.Results) > 0 {
		m.Results = append([]model.Result(nil), m.Results...)
		for i, r := range m.Results {
			m.Results[i].Output = h.elide("output of call "+r.CallID, r.Output, limit)
		}
	}
	return m
}

func (h *hubLog) elide(what, s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	h.keep(what, s)
	half := limit / 2
	return strings.ToValidUTF8(s[:half], "") + fmt.Sprintf("\n[... %d bytes elided; the whole %s is in the job's log ...]\n", len(s)-2*half, what) +
		strings.ToValidUTF8(s[len(s)-half:], "")
}

// keep writes a text the transcript elides to the job's log, whole.
func (h *hubLog) keep(what, s string) {
	if h.log != nil {
		fmt.Fprintf(h.log, "drover: the whole %s (%d bytes):\n%s\ndrover: end of the %s\n", what, len(s), s, what)
	}
}

// summary is a transcript record's line for people: what the model said
// and called, or which results it got.
func summary(turn int, m model.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "turn %d %s:", turn, m.Role)
	if m.Text != "" {
		b.WriteString(" " + oneLine(m.Text, 120))
	}
	for _, c := range m.Calls {
		b.WriteString(" " + c.Name + " " + oneLine(c.Args, 80))
	}
	for _, r := range m.Results {
		mark := "→"
		if r.IsError {
			mark = "→ error:"
		}
		b.WriteString(" " + r.Name + " " + mark + " " + oneLine(strings.TrimPrefix(r.Output, "error: "), 80))
	}
	return safeLine(b.String(), protocol.MaxTurnSummary)
}

// safeLine is s without control characters, at most n bytes.
func safeLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if rules.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n-len("…")], "") + "…"
	}
	return s
}
