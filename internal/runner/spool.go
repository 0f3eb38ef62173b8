package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"drover/internal/protocol"
	"drover/internal/rules"
)

// spool is an attempt's output on disk (home/spool/ATTEMPT.log). The agent
// appends to it; the uploader reads it by offset, so what the hub holds is
// always a prefix of the spool, whatever was resent or lost on the way.
type spool struct {
	path string
	cap  int64
	now  func() time.Time

	// failed is called once, with the first write error, so that the
	// attempt stops its agent: its output can no longer be kept.
	failed func(error)

	mu     sync.Mutex
	w      *os.File // append handle; nil once the writer ended
	r      *os.File
	size   int64 // bytes in the file
	capped bool
	ended  bool
	werr   error // first write error; later output is dropped
	// tail follows the file's bytes: the marker of a failed write, kept in
	// memory because the disk took no more. The log is file then tail.
	tail    []byte
	mark    int64     // end of what the uploader has taken
	since   time.Time // when the first byte past mark was written (zero: send at once)
	changed chan struct{}
}

// createSpool starts an empty spool that keeps at most about cap bytes;
// failed is told of the first write that did not reach the disk.
func createSpool(path string, cap int64, now func() time.Time, failed func(error)) (*spool, error) {
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create spool: %w", err)
	}
	r, err := os.Open(path)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open spool: %w", err)
	}
	return &spool{path: path, cap: cap, now: now, failed: failed, w: w, r: r, changed: make(chan struct{}, 1)}, nil
}

// openSpool reopens what a previous runner wrote, read-only. A missing
// spool is an empty one: the runner died before the agent wrote anything.
func openSpool(path string) (*spool, error) {
	r, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			return nil, fmt.Errorf("create empty spool: %w", err)
		}
		r, err = os.Open(path)
	}
	if err != nil {
		return nil, fmt.Errorf("open spool: %w", err)
	}
	fi, err := r.Stat()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("open spool: %w", err)
	}
	return &spool{path: path, r: r, size: fi.Size(), ended: true, changed: make(chan struct{}, 1)}, nil
}

// Write appends agent output. It never fails, so that the agent is never
// blocked on it: past the cap one marker line is written and the rest
// discarded. A write the disk refuses ends the spool with a marker line
// (kept in memory and uploaded after the file's bytes) and tells failed,
// which stops the attempt: output that could not be kept never passes for
// a complete log.
func (s *spool) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.capped || s.werr != nil {
		return len(p), nil
	}
	keep := p
	if room := s.cap - s.size; int64(len(p)) > room {
		keep = p[:max(room, 0)]
		s.capped = true
	}
	s.appendLocked(keep)
	if s.capped {
		s.appendLocked(fmt.Appendf(nil, "\n[drover: output truncated at %d bytes]\n", s.cap))
	}
	return len(p), nil
}

func (s *spool) appendLocked(b []byte) {
	if len(b) == 0 || s.werr != nil {
		return
	}
	if s.size <= s.mark && s.since.IsZero() {
		s.since = s.now()
	}
	n, err := s.w.Write(b)
	s.size += int64(n)
	if err != nil {
		s.werr = fmt.Errorf("write the attempt's output to %s: %w", s.path, err)
		s.tail = fmt.Appendf(nil, "\n%s: the runner could not keep the output after byte %d (%v); the agent was stopped\n",
			diskFullMarker, s.size, errors.Unwrap(err))
		if s.failed != nil {
			go s.failed(s.werr) // not under mu: it cancels the agent
		}
	}
	s.notify()
}

// diskFullMarker starts the line a spool ends with when the disk refused
// its output.
const diskFullMarker = "[drover: runner_disk_full]"

func (s *spool) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// end is called once the agent is gone: no more output will come.
func (s *spool) end() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil
	}
	s.ended = true
	defer s.notify()
	err := s.w.Sync()
	if cerr := s.w.Close(); err == nil {
		err = cerr
	}
	s.w = nil
	if err != nil {
		return fmt.Errorf("close spool: %w", err)
	}
	return s.werr
}

// state is the log's size (file and tail), whether the writer ended, and
// since when output waits to be sent.
func (s *spool) state() (size int64, ended bool, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size + int64(len(s.tail)), s.ended, s.since
}

// take reads up to limit bytes of the log from offset from, for the
// uploader: the file's bytes, then the tail's.
func (s *spool) take(from int64, limit int) ([]byte, error) {
	s.mu.Lock()
	file, tail := s.size, s.tail
	total := file + int64(len(tail))
	n := min(total-from, int64(limit))
	end := from + n
	s.mark = end
	if end >= total {
		s.since = time.Time{}
	}
	s.mu.Unlock()
	if n <= 0 {
		return nil, nil
	}
	b := make([]byte, n)
	if inFile := min(file-from, n); inFile > 0 {
		if _, err := s.r.ReadAt(b[:inFile], from); err != nil {
			return nil, fmt.Errorf("read spool at %d: %w", from, err)
		}
	}
	if end > file {
		start := max(from, file)
		copy(b[start-from:], tail[start-file:end-file])
	}
	return b, nil
}

// digest returns the size and hex SHA-256 of the whole log.
func (s *spool) digest() (int64, string, error) {
	s.mu.Lock()
	file, tail := s.size, s.tail
	s.mu.Unlock()
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(s.r, 0, file)); err != nil {
		return 0, "", fmt.Errorf("hash spool: %w", err)
	}
	h.Write(tail)
	return file + int64(len(tail)), hex.EncodeToString(h.Sum(nil)), nil
}

func (s *spool) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		s.w.Close()
		s.w = nil
		s.ended = true
	}
	s.r.Close()
}

// upload sends the spool to the hub from offset acked, one log request in
// flight, until the writer has ended and the hub holds every byte. It
// returns the hub's size.
func (r *Runner) upload(a *attempt, sp *spool, acked int64) (int64, error) {
	failures := 0
	for {
		size, ended, since := sp.state()
		if acked > size {
			return acked, r.abandon(a, fmt.Errorf("the hub holds %d bytes of log but the spool only %d", acked, size))
		}
		unsent := size - acked
		if unsent == 0 && ended {
			return acked, nil
		}
		t := r.timings()
		if unsent == 0 || (!ended && unsent < int64(t.batch) && !since.IsZero() && r.now().Before(since.Add(t.flush))) {
			if err := r.waitOutput(a, sp, unsent, since.Add(t.flush)); err != nil {
				return acked, err
			}
			continue
		}
		data, err := sp.take(acked, t.chunk)
		if err != nil {
			return acked, r.abandon(a, err)
		}
		ack, err := r.hubFor(a).Log(r.life, newRequestID(), protocol.Log{AttemptRef: a.ref, Offset: acked, Data: data})
		e, err := refusal(err)
		if err != nil {
			return acked, err
		}
		if e == nil {
			if failures > 0 {
				r.log.Info("the hub takes the attempt's log again", "attempt", a.ref.String(), "offset", acked)
			}
			failures = 0
			acked = ack.Size
			continue
		}
		if e.Code == rules.ErrOffset && e.Size != nil {
			r.log.Info("log offset resync", "attempt", a.ref.String(), "sent", acked, "hub", *e.Size)
			acked = *e.Size
			continue
		}
		failures++
		again, err := r.retryLater(a, e, failures)
		if err != nil {
			return acked, err
		}
		if !again {
			return acked, r.refused(a, protocol.TypeLog, e)
		}
	}
}

// waitOutput waits for more output, or until due when some is unsent.
func (r *Runner) waitOutput(a *attempt, sp *spool, unsent int64, due time.Time) error {
	var timeout <-chan time.Time
	if unsent > 0 {
		t := time.NewTimer(due.Sub(r.now()))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-sp.changed:
	case <-timeout:
	case <-a.gone:
		return errGone
	case <-r.life.Done():
		return errStopped
	}
	return nil
}
