package runner

import (
	"context"
	"fmt"

	"drover/internal/protocol"
)

// turnLog keeps a native attempt's transcript in the hub (agent.TurnLog)
// through the attempt's requests, which are resent across reconnects and
// answered once (the hub's ledger). They wait as long as the attempt
// lives, so they take the runner's life, not the loop's context.
type turnLog struct {
	r *Runner
	a *attempt
}

// Append sends recs in batches the hub takes.
func (t turnLog) Append(_ context.Context, session string, recs []protocol.TurnRecord) error {
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && n < protocol.MaxTurnRecords && size+len(recs[n].Data) <= protocol.MaxTurnBatch {
			size += len(recs[n].Data)
			n++
		}
		if n == 0 {
			return fmt.Errorf("a transcript record of %d bytes; the limit is %d", len(recs[0].Data), protocol.MaxTurnBatch)
		}
		if err := t.r.hubFor(t.a).Turns(t.r.life, newRequestID(), protocol.Turns{AttemptRef: t.a.ref, Session: session, Records: recs[:n]}); err != nil {
			return toolErr(protocol.TypeTurns, err)
		}
		recs = recs[n:]
	}
	return nil
}

// Load reads the transcript page by page.
func (t turnLog) Load(_ context.Context, session string) ([]protocol.TurnRecord, error) {
	var out []protocol.TurnRecord
	req := protocol.GetTranscript{AttemptRef: t.a.ref, Session: session}
	for {
		page, err := t.r.hubFor(t.a).Transcript(t.r.life, newRequestID(), req)
		if err != nil {
			return nil, toolErr(protocol.TypeTranscript, err)
		}
		out = append(out, page.Records...)
		if !page.More {
			return out, nil
		}
		req.After = page.Next
	}
}
