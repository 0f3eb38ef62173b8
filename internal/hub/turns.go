package hub

import (
	"context"
	"encoding/json"

	"drover/internal/protocol"
	"drover/internal/store"
)

// recordTurns appends a model loop's records to the job's history as turn
// events, in the attempt's lease (a resent request is answered from the
// ledger, so no record is stored twice). The first names the attempt's
// session, so that a retry after an unknown outcome can resume it.
func (h *Hub) recordTurns(ctx context.Context, c *runnerSession, reqID string, m protocol.Turns) error {
	if err := m.Check(); err != nil {
		return argError("turns", err)
	}
	_, err := toolRequest(ctx, h, c, reqID, "record its turns", m.AttemptRef, func(tx store.Tx, a store.Attempt, j store.Job) (struct{}, error) {
		if a.Session == "" {
			a.Session = m.Session
			if err := tx.UpdateAttempt(a); err != nil {
				return struct{}{}, err
			}
		}
		now := h.now()
		for _, r := range m.Records {
			data, err := json.Marshal(protocol.TurnEvent{Session: m.Session, Attempt: a.Epoch, TurnRecord: r})
			if err != nil {
				return struct{}{}, err
			}
			if _, err := tx.AddEvent(store.Event{JobID: j.ID, At: now, Kind: r.EventKind(), Actor: c.name,
				Message: r.Summary, Data: string(data)}); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	return err
}

// transcriptPageEvents is how many events one read of a transcript page
// scans at a time.
const transcriptPageEvents = 500

// transcript reads a page of the turns of a session of the job, for the
// attempt (in its lease) that resumes it.
func (h *Hub) transcript(ctx context.Context, c *runnerSession, m protocol.GetTranscript) (protocol.TranscriptPage, error) {
	page := protocol.TranscriptPage{Records: []protocol.TurnRecord{}, Next: m.After}
	if err := m.Check(); err != nil {
		return page, argError("transcript", err)
	}
	err := h.store.Read(ctx, func(tx store.Tx) error {
		a, j, err := loadFenced(tx, c.runnerID, m.AttemptRef)
		if err != nil {
			return err
		}
		if err := inTurn(a, j, "read its transcript"); err != nil {
			return err
		}
		size := 0
		for {
			evs, err := tx.Events(j.ID, page.Next, transcriptPageEvents)
			if err != nil {
				return err
			}
			for _, e := range evs {
				te, ok := turnEvent(e)
				if ok && te.Session == m.Session {
					if size+len(te.Data) > protocol.MaxTurnBatch || len(page.Records) == protocol.MaxTurnRecords {
						page.More = true
						return nil
					}
					size += len(te.Data)
					page.Records = append(page.Records, te.TurnRecord)
				}
				page.Next = e.Seq
			}
			if len(evs) < transcriptPageEvents {
				return nil
			}
		}
	})
	return page, err
}

// turnEvent reads a turn event's record; false for any other event.
func turnEvent(e store.Event) (protocol.TurnEvent, bool) {
	var te protocol.TurnEvent
	if (e.Kind != protocol.KindTurn && e.Kind != protocol.KindCompaction) || json.Unmarshal([]byte(e.Data), &te) != nil {
		return te, false
	}
	return te, true
}
