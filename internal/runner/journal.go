package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"drover/internal/fsutil"
	"drover/internal/job"
	"drover/internal/protocol"
)

// The journal (home/journal) is the runner's durable memory of what it may
// have run. Per attempt:
//
//	ATTEMPT.claim    written (O_EXCL, fsynced) after the hub's accept and before launch; kept forever
//	ATTEMPT.receipt  the outcome, written before finish is sent
//	ATTEMPT.done     the hub acknowledged the finish
//	ATTEMPT.dropped  the hub said the attempt is not ours any more; never finish it
//
// A claim without a receipt after a restart means the agent died with the
// old runner: its outcome is unknown and it is never launched again.
type journal struct {
	dir string
}

const (
	extClaim   = ".claim"
	extReceipt = ".receipt"
	extDone    = ".done"
	extDropped = ".dropped"
)

var errClaimed = errors.New("attempt already claimed")

// Claim records that this runner may have launched an attempt.
type Claim struct {
	Job       string    `json:"job"`
	Attempt   string    `json:"attempt"`
	Epoch     int64     `json:"epoch"`
	ClaimedAt time.Time `json:"claimed_at"`
	PID       int       `json:"runner_pid"`
}

// receipt is the outcome of an attempt, kept until the hub acknowledges it.
type receipt struct {
	Job       string      `json:"job"`
	Attempt   string      `json:"attempt"`
	Epoch     int64       `json:"epoch"`
	Outcome   job.Outcome `json:"outcome"`
	LogSize   int64       `json:"log_size"`
	LogSHA256 string      `json:"log_sha256"`
	// Isolation is what the boundary applied when the agent ran (nil when
	// nothing was launched, or the runner that launched it is gone).
	Isolation *protocol.Isolation `json:"isolation,omitempty"`
	// Usage is what a vendor agent reported it consumed.
	Usage *protocol.Usage `json:"usage,omitempty"`
	// Session is the agent's session id, reported for a later resume.
	Session string `json:"session,omitempty"`
}

func (rc receipt) ref() protocol.AttemptRef {
	return protocol.AttemptRef{Job: rc.Job, Attempt: rc.Attempt, Epoch: rc.Epoch}
}

// Claims lists the attempts the runner at home has claimed, oldest first:
// its own record of everything it may have run.
func Claims(home string) ([]Claim, error) {
	recs, err := journalOf(home)
	if err != nil {
		return nil, err
	}
	var cs []Claim
	for _, r := range recs {
		if r.claim != nil {
			cs = append(cs, *r.claim)
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if !cs[i].ClaimedAt.Equal(cs[j].ClaimedAt) {
			return cs[i].ClaimedAt.Before(cs[j].ClaimedAt)
		}
		return cs[i].Attempt < cs[j].Attempt
	})
	return cs, nil
}

// Held lists the attempts the runner at home still holds by its journal:
// claimed or receipted, with the hub's acknowledgement of their finish
// (done) or their drop not recorded. A runner that stopped with nothing
// in flight holds none.
func Held(home string) ([]string, error) {
	recs, err := journalOf(home)
	if err != nil {
		return nil, err
	}
	var held []string
	for _, r := range recs {
		if r.open() {
			held = append(held, r.attempt)
		}
	}
	return held, nil
}

// journalOf reads the journal of the runner at home, for a reader other
// than the runner itself.
func journalOf(home string) ([]*record, error) {
	recs, _, err := (&journal{dir: filepath.Join(home, "journal")}).scan()
	return recs, err
}

func (j *journal) path(attempt, ext string) string { return filepath.Join(j.dir, attempt+ext) }

// claim durably records c, or fails with errClaimed when the attempt was
// claimed before: then it must never be launched again.
func (j *journal) claim(c Claim) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	err = j.create(j.path(c.Attempt, extClaim), os.O_EXCL, b)
	if errors.Is(err, fs.ErrExist) {
		return errClaimed
	}
	if err != nil {
		return fmt.Errorf("claim %s: %w", c.Attempt, err)
	}
	return nil
}

// create writes a new journal file and makes it and its name durable. On
// failure the file is removed: a claim that is not durable launches nothing.
func (j *journal) create(path string, flag int, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flag, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsutil.SyncDir(j.dir)
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

func (j *journal) writeReceipt(rc receipt) error {
	b, err := json.Marshal(rc)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(j.path(rc.Attempt, extReceipt), b); err != nil {
		return fmt.Errorf("write receipt of %s: %w", rc.Attempt, err)
	}
	return nil
}

func (j *journal) readReceipt(attempt string) (*receipt, error) {
	var rc receipt
	if err := readJSON(j.path(attempt, extReceipt), &rc); err != nil {
		return nil, err
	}
	return &rc, nil
}

// has reports whether the attempt was ever claimed or receipted here.
func (j *journal) has(attempt string) bool {
	for _, ext := range []string{extClaim, extReceipt} {
		if _, err := os.Stat(j.path(attempt, ext)); err == nil {
			return true
		}
	}
	return false
}

// mark writes an empty marker (done or dropped) durably.
func (j *journal) mark(attempt, ext string) error {
	if err := j.create(j.path(attempt, ext), os.O_TRUNC, nil); err != nil {
		return fmt.Errorf("mark %s %s: %w", attempt, strings.TrimPrefix(ext, "."), err)
	}
	return nil
}

// record is what the journal knows about one attempt.
type record struct {
	attempt       string
	claim         *Claim
	receipt       *receipt
	done, dropped bool
}

// open reports whether the attempt still needs a finish sent.
func (r *record) open() bool {
	return (r.claim != nil || r.receipt != nil) && !r.done && !r.dropped
}

// scan reads the journal. A claim that cannot be read was cut short by a
// crash before claim returned, so nothing was launched under it: it is
// skipped and reported in bad.
func (j *journal) scan() (recs []*record, bad []error, err error) {
	ents, err := os.ReadDir(j.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read journal: %w", err)
	}
	byID := map[string]*record{}
	get := func(id string) *record {
		if byID[id] == nil {
			byID[id] = &record{attempt: id}
		}
		return byID[id]
	}
	for _, e := range ents {
		name := e.Name()
		ext := filepath.Ext(name)
		id := strings.TrimSuffix(name, ext)
		if strings.HasPrefix(name, ".") || !ValidName(id) {
			continue // temp files
		}
		switch ext {
		case extClaim:
			var c Claim
			if err := readJSON(filepath.Join(j.dir, name), &c); err != nil {
				bad = append(bad, err)
				continue
			}
			get(id).claim = &c
		case extReceipt:
			rc, err := j.readReceipt(id)
			if err != nil {
				return nil, nil, err
			}
			get(id).receipt = rc
		case extDone:
			get(id).done = true
		case extDropped:
			get(id).dropped = true
		}
	}
	for _, r := range byID {
		recs = append(recs, r)
	}
	sort.Slice(recs, func(a, b int) bool { return recs[a].attempt < recs[b].attempt })
	return recs, bad, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
