package native

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"drover/internal/agent"
	"drover/internal/fsutil"
	"drover/internal/model"
)

// maxRecord bounds one line of a transcript file read back.
const maxRecord = 16 << 20

// record is one line of a transcript file: the first holds the session and
// the system text, each next one message with the totals after it.
type record struct {
	Session string         `json:"session,omitempty"`
	System  string         `json:"system,omitempty"`
	Message *model.Message `json:"message,omitempty"`
	Turns   int            `json:"turns,omitempty"`
	Usage   *agent.Usage   `json:"usage,omitempty"`
	// Compaction is a compaction of the messages so far (see Compaction).
	Compaction *Compaction `json:"compaction,omitempty"`
}

// saved is how much of a transcript a log holds.
type saved struct{ messages, compactions int }

// since is the records of what t holds beyond s, and the mark after them.
func (t *Transcript) since(s saved) ([]record, saved) {
	var recs []record
	for i := s.messages; i < len(t.Messages); i++ {
		u := t.Usage
		recs = append(recs, record{Message: &t.Messages[i], Turns: t.Turns, Usage: &u})
	}
	for i := s.compactions; i < len(t.Compactions); i++ {
		recs = append(recs, record{Compaction: &t.Compactions[i], Turns: t.Turns})
	}
	return recs, saved{len(t.Messages), len(t.Compactions)}
}

// transcriptLog is where a transcript is recorded: the hub (hubLog) or,
// without one, a file of the account's (journal).
type transcriptLog interface {
	save(ctx context.Context, tr *Transcript) error
	Close() error
}

// journal is a transcript's file, append-only: each save appends the
// messages added since the last one and syncs, so a turn costs what it
// adds, and a crash loses at most the line being written (which load
// ignores).
type journal struct {
	f     *os.File
	saved saved // what is on disk
}

// openJournal opens the transcript file at path: it creates a new one for
// tr, or, with resume, reads the transcript it holds.
func openJournal(path string, tr *Transcript, resume bool) (*journal, *Transcript, error) {
	if !resume {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("create the transcript: %w", err)
		}
		j := &journal{f: f}
		if err := j.write(record{Session: tr.Session, System: tr.System}); err == nil {
			err = fsutil.SyncDir(filepath.Dir(path))
		} else {
			f.Close()
			return nil, nil, err
		}
		return j, tr, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open the transcript: %w", err)
	}
	tr, err = readJournal(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return &journal{f: f, saved: saved{len(tr.Messages), len(tr.Compactions)}}, tr, nil
}

func readJournal(r io.Reader) (*Transcript, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	tr := &Transcript{}
	for n := 0; ; n++ {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) {
			return tr, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the transcript: %w", err)
		}
		var rec record
		if err := json.Unmarshal(line, &rec); err != nil {
			if _, more := br.Peek(1); more != nil {
				return tr, nil // a torn last line: the crash it ends with
			}
			return nil, fmt.Errorf("read the transcript: line %d: %w", n+1, err)
		}
		tr.add(rec, n == 0)
	}
}

// add applies one record read back to t; first is the transcript's first.
func (t *Transcript) add(rec record, first bool) {
	switch {
	case first:
		t.Session, t.System = rec.Session, rec.System
	case rec.Message != nil:
		t.Messages = append(t.Messages, *rec.Message)
		t.Turns = rec.Turns
		if rec.Usage != nil {
			t.Usage = *rec.Usage
		}
	case rec.Compaction != nil && rec.Compaction.Upto > 0 && rec.Compaction.Upto <= len(t.Messages):
		t.Compactions = append(t.Compactions, *rec.Compaction)
	}
}

// readLine reads one line of at most maxRecord bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxRecord {
			return nil, fmt.Errorf("a line over %d bytes", maxRecord)
		}
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil // no newline: load decides if it is whole
		}
		return nil, err
	}
}

func (j *journal) write(rec record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode the transcript: %w", err)
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write the transcript: %w", err)
	}
	return nil
}

// save appends what tr holds beyond the last save and syncs it.
func (j *journal) save(_ context.Context, tr *Transcript) error {
	recs, next := tr.since(j.saved)
	for _, rec := range recs {
		if err := j.write(rec); err != nil {
			return err
		}
	}
	j.saved = next
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("sync the transcript: %w", err)
	}
	return nil
}

func (j *journal) Close() error { return j.f.Close() }
