package protocol

import (
	"encoding/json"
	"fmt"

	"drover/internal/rules"
)

// A model loop run by the runner (the native agent) records its
// transcript in the hub turn by turn, so that any runner allowed to run
// the job continues it: each model answer and each batch of tool results
// is a turn event of the job before the next model call.
const (
	MaxTurnRecord  = 256 << 10 // bytes of one record's data
	MaxTurnBatch   = 1 << 20   // bytes of the records of one turns request or transcript page
	MaxTurnRecords = 256       // records in one turns request
	MaxTurnSummary = 400       // bytes of a record's summary
)

// TurnRecord is one entry of a transcript: Data is the loop's own record
// (opaque to the hub), Summary a line for people (drover show, logs).
type TurnRecord struct {
	// Kind is the event it becomes: KindTurn ("" too) or KindCompaction.
	Kind    string          `json:"kind,omitempty"`
	Turn    int             `json:"turn"` // model calls made when it was recorded
	Summary string          `json:"summary"`
	Data    json.RawMessage `json:"data"`
}

// Turns appends records to the transcript of Session, the attempt's.
type Turns struct {
	AttemptRef
	Session string       `json:"session"`
	Records []TurnRecord `json:"records"`
}

// Check bounds a turns request.
func (t Turns) Check() error {
	if err := CheckSessionID(t.Session); err != nil {
		return err
	}
	if len(t.Records) == 0 || len(t.Records) > MaxTurnRecords {
		return fmt.Errorf("turns: 1-%d records, not %d", MaxTurnRecords, len(t.Records))
	}
	total := 0
	for i, r := range t.Records {
		switch {
		case r.Kind != "" && r.Kind != KindTurn && r.Kind != KindCompaction:
			return fmt.Errorf("turns: record %d is of kind %q, not %s or %s", i, r.Kind, KindTurn, KindCompaction)
		case r.Turn < 0:
			return fmt.Errorf("turns: record %d has a negative turn", i)
		case len(r.Data) == 0 || len(r.Data) > MaxTurnRecord || r.Data[0] != '{' || !json.Valid(r.Data):
			return fmt.Errorf("turns: record %d: data must be a JSON object of at most %d bytes", i, MaxTurnRecord)
		case len(r.Summary) > MaxTurnSummary:
			return fmt.Errorf("turns: record %d: a summary over %d bytes", i, MaxTurnSummary)
		}
		if err := rules.CheckPlainText("summary", r.Summary, false); err != nil {
			return fmt.Errorf("turns: record %d: %w", i, err)
		}
		total += len(r.Data)
	}
	if total > MaxTurnBatch {
		return fmt.Errorf("turns: %d bytes of records; the limit is %d", total, MaxTurnBatch)
	}
	return nil
}

// GetTranscript reads the records of Session after event After (0: from
// the start), for the attempt that resumes it.
type GetTranscript struct {
	AttemptRef
	Session string `json:"session"`
	After   int64  `json:"after,omitempty"`
}

// TranscriptPage is the answer to GetTranscript: at most MaxTurnBatch
// bytes of records; More says to ask again after Next.
type TranscriptPage struct {
	Records []TurnRecord `json:"records"`
	Next    int64        `json:"next"`
	More    bool         `json:"more,omitempty"`
}

// TurnEvent is what a turn event of the job's history holds: the record
// and the session it belongs to.
type TurnEvent struct {
	Session string `json:"session"`
	Attempt int64  `json:"attempt"`
	TurnRecord
}

// The kinds of a transcript's events: a model answer or tool results,
// and a compaction (what the model is no longer sent, and its summary).
const (
	KindTurn       = "turn"
	KindCompaction = "compaction"
)

// EventKind is the kind of event r becomes.
func (r TurnRecord) EventKind() string {
	if r.Kind == KindCompaction {
		return KindCompaction
	}
	return KindTurn
}

// CheckSessionID says whether s may name a transcript (it names files too).
func CheckSessionID(s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("turns: a session id of 1-64 characters")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("turns: session id %q has a character other than letters, digits and '-'", s)
		}
	}
	return nil
}

// Check bounds a transcript request.
func (g GetTranscript) Check() error { return CheckSessionID(g.Session) }
