package sqlstore

import (
	"fmt"
	"slices"

	"drover/internal/store"
)

// LogWindow assembles ReadLog's answer from the chunks of one attempt's
// log, given in offset order from the chunk containing the first byte
// wanted.
type LogWindow struct {
	what     string
	pos, end int64 // the next byte wanted; one past the last
	out      []byte
}

// NewLogWindow starts a read of up to maxBytes bytes at offset.
func NewLogWindow(what string, offset int64, maxBytes int) *LogWindow {
	return &LogWindow{what: what, pos: offset, end: offset + int64(max(maxBytes, 0)), out: []byte{}}
}

// Add takes the chunk that starts at at; a chunk after the next byte
// wanted is a gap in the log.
func (w *LogWindow) Add(at int64, data []byte) error {
	if at > w.pos {
		return fmt.Errorf("%s: log has a gap at %d", w.what, w.pos)
	}
	if skip := w.pos - at; skip < int64(len(data)) {
		data = data[skip:min(int64(len(data)), w.end-at)]
		w.out = append(w.out, data...)
		w.pos += int64(len(data))
	}
	return nil
}

// Bytes is what was read (never nil).
func (w *LogWindow) Bytes() []byte { return w.out }

// SyncDeletes checks accts for SyncRunnerAccounts and returns which of the
// ids the runner had are no longer reported.
func SyncDeletes(what string, had []string, accts []store.Account) ([]string, error) {
	keep := make(map[string]bool, len(accts))
	for _, a := range accts {
		if a.ID == "" {
			return nil, fmt.Errorf("%s: an account has no id", what)
		}
		keep[a.ID] = true
	}
	var gone []string
	for _, id := range had {
		if !keep[id] {
			gone = append(gone, id)
		}
	}
	return gone, nil
}

// Ranked is an account by its key and rank.
type Ranked struct {
	RunnerID, ID string
	Rank         int64
}

func ScanRanked(s Scanner) (r Ranked, err error) {
	err = s.Scan(&r.RunnerID, &r.ID, &r.Rank)
	return r, err
}

// Move puts account (runnerID, id) of refs (one owner's, best rank first)
// at the 1-based position, clamped to [1, n], renumbers them 1..n and
// returns the ones whose rank changed, with their new rank; ErrNotFound
// when refs lack the account.
func Move(what string, refs []Ranked, runnerID, id string, position int) ([]Ranked, error) {
	i := slices.IndexFunc(refs, func(r Ranked) bool { return r.RunnerID == runnerID && r.ID == id })
	if i < 0 {
		return nil, fmt.Errorf("%s: no such account: %w", what, store.ErrNotFound)
	}
	moved := refs[i]
	refs = slices.Delete(slices.Clone(refs), i, i+1)
	position = min(max(position, 1), len(refs)+1)
	refs = slices.Insert(refs, position-1, moved)
	var changed []Ranked
	for n, r := range refs {
		if r.Rank != int64(n+1) {
			r.Rank = int64(n + 1)
			changed = append(changed, r)
		}
	}
	return changed, nil
}
