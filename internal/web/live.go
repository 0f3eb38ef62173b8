package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"drover/internal/apitypes"
)

// Log windows: the page holds at most maxLines lines of a log; it opens on
// the log's last tailBytes and fetches windowBytes more per scroll.
const (
	tailBytes   = 256 << 10
	windowBytes = 64 << 10
	maxLines    = 1500
)

// logWindow is a rendered part of a log, [Start, End) in bytes, whole
// lines only (but a line longer than a window is cut).
type logWindow struct {
	HTML       template.HTML
	Start, End int64
	Size       int64
	Complete   bool
	Lines      int
}

// wholeLines cuts data (at offset start, ending where the log ends when
// atEnd) to whole lines: from the first line start (unless start is 0),
// up to the last newline (unless atEnd). A window without a newline is
// kept whole rather than emptied.
func wholeLines(data []byte, start int64, atEnd bool) ([]byte, int64) {
	if start > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 && i+1 < len(data) {
			data, start = data[i+1:], start+int64(i+1)
		}
	}
	if !atEnd {
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1]
		}
	}
	return data, start
}

// readRange reads [start, end) of an attempt's log (end -1: as much as one
// read gives).
func (s *Server) readRange(ctx context.Context, u User, id string, attempt, start, end int64) (LogSlice, error) {
	sl, err := s.b.Log(ctx, u, id, attempt, start)
	if err != nil {
		return sl, err
	}
	if end >= 0 && start+int64(len(sl.Data)) > end {
		sl.Data, sl.Complete = sl.Data[:end-start], false
	}
	return sl, nil
}

// tail is the last window of an attempt's log, for the job page.
func (s *Server) tail(r *http.Request, ss *session, id string, attempt int64) (logWindow, error) {
	sl, err := s.b.Log(r.Context(), ss.User, id, attempt, 0)
	if err != nil || sl.Size <= int64(len(sl.Data)) && sl.Size <= tailBytes {
		return window(sl, 0), err
	}
	start := max(0, sl.Size-tailBytes)
	if sl, err = s.b.Log(r.Context(), ss.User, id, attempt, start); err != nil {
		return logWindow{}, err
	}
	return window(sl, start), nil
}

// window renders a slice read from start: whole lines, at most maxLines
// (the last ones).
func window(sl LogSlice, start int64) logWindow {
	data, st := wholeLines(sl.Data, start, sl.Complete)
	for n := bytes.Count(data, []byte{'\n'}); n > maxLines; n-- {
		i := bytes.IndexByte(data, '\n')
		data, st = data[i+1:], st+int64(i+1)
	}
	h, lines := renderLog(data, st)
	return logWindow{HTML: h, Start: st, End: st + int64(len(data)), Size: sl.Size, Complete: sl.Complete && st+int64(len(data)) == sl.Size, Lines: lines}
}

// search finds the first occurrence of q in an attempt's log at or after
// byte from, and returns the offset of the line it is on (-1: none) and of
// the match's end (where the next search starts).
func (s *Server) search(r *http.Request, ss *session, id string, attempt, from int64, q string) (line, end int64, err error) {
	needle := []byte(q)
	off := from
	for {
		sl, err := s.b.Log(r.Context(), ss.User, id, attempt, off)
		if err != nil || len(sl.Data) == 0 {
			return -1, 0, err
		}
		if i := bytes.Index(sl.Data, needle); i >= 0 {
			return off + int64(bytes.LastIndexByte(sl.Data[:i], '\n')+1), off + int64(i+len(needle)), nil
		}
		if off+int64(len(sl.Data)) >= sl.Size {
			return -1, 0, nil
		}
		// The next read overlaps this one by len(q)-1 bytes: a match across
		// the two is found.
		off += int64(max(1, len(sl.Data)-len(needle)+1))
	}
}

// at is the window of an attempt's log that starts with the line at start
// (a search hit): not followed live.
func (s *Server) at(r *http.Request, ss *session, id string, attempt, start int64) (logWindow, error) {
	sl, err := s.readRange(r.Context(), ss.User, id, attempt, start, start+windowBytes)
	if err != nil {
		return logWindow{}, err
	}
	data, _ := wholeLines(sl.Data, 0, sl.Complete)
	h, lines := renderLog(data, start)
	return logWindow{HTML: h, Start: start, End: start + int64(len(data)), Size: sl.Size, Complete: true, Lines: lines}, nil
}

func attemptOf(r *http.Request) (int64, error) {
	return intParam(r.URL.Query().Get("attempt"), "attempt")
}

func intParam(v, name string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &Error{Status: http.StatusBadRequest, Msg: name + " must be a whole number"}
	}
	return n, nil
}

// logWindow is GET /jobs/{id}/log/window?attempt=N&end=E: the whole lines
// of up to windowBytes before byte E, as HTML, its start in X-Log-Start.
func (s *Server) logWindow(w http.ResponseWriter, r *http.Request, ss *session) error {
	id := r.PathValue("id")
	attempt, err := attemptOf(r)
	if err != nil {
		return err
	}
	end, err := intParam(r.URL.Query().Get("end"), "end")
	if err != nil {
		return err
	}
	start := max(0, end-windowBytes)
	sl, err := s.readRange(r.Context(), ss.User, id, attempt, start, end)
	if err != nil {
		return err
	}
	lw := window(LogSlice{Data: sl.Data, Size: sl.Size, Complete: true}, start) // ends at a line end: E was one
	headers(w, "text/html; charset=utf-8")
	w.Header().Set("X-Log-Start", strconv.FormatInt(lw.Start, 10))
	_, err = io.WriteString(w, string(lw.HTML))
	return err
}

// rawLog is GET /jobs/{id}/log?attempt=N: the attempt's log as it is, to
// download.
func (s *Server) rawLog(w http.ResponseWriter, r *http.Request, ss *session) error {
	id := r.PathValue("id")
	attempt, err := attemptOf(r)
	if err != nil {
		return err
	}
	sl, err := s.b.Log(r.Context(), ss.User, id, attempt, 0)
	if err != nil {
		return err
	}
	headers(w, "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%d.log"`, id, sl.Attempt))
	var off int64
	for {
		if _, err := w.Write(sl.Data); err != nil {
			return nil // the client went away
		}
		off += int64(len(sl.Data))
		if len(sl.Data) == 0 || off >= sl.Size {
			return nil
		}
		if sl, err = s.b.Log(r.Context(), ss.User, id, sl.Attempt, off); err != nil {
			s.log.Warn("raw log cut short", "job", id, "err", err)
			return nil
		}
	}
}

// sse writes server-sent events.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	e := &sse{w: w, rc: http.NewResponseController(w)}
	_ = e.rc.Flush() // the stream is open: the client sees it before the first event
	return e
}

// event writes one event; id "" leaves the stream's last id as it was.
// data may hold newlines (each line its own data: field).
func (e *sse) event(id, kind, data string) error {
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + kind + "\n")
	for _, l := range strings.Split(strings.TrimSuffix(data, "\n"), "\n") {
		b.WriteString("data: " + l + "\n")
	}
	b.WriteString("\n")
	return e.write(b.String())
}

func (e *sse) write(s string) error {
	if _, err := io.WriteString(e.w, s); err != nil {
		return err
	}
	return e.rc.Flush()
}

// resumeFrom is where a stream resumes: the browser's Last-Event-ID after
// a reconnect, else the page's starting point.
func resumeFrom(r *http.Request, param string) (int64, error) {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		return intParam(v, "Last-Event-ID")
	}
	return intParam(r.URL.Query().Get(param), param)
}

// follow calls step at once and after each change of the job, with a
// keep-alive comment in quiet spells, until step says done or the client
// goes away. At each keep-alive it checks the session again: a stream ends
// soon after its session does (sign-out, expiry, a rotated token). With
// poll it calls step after each keep-alive too: what it reads may change
// without a job's change (a pipeline's own state, the user's access).
func (s *Server) follow(r *http.Request, ss *session, id string, e *sse, poll bool, step func() (done bool, err error)) error {
	ka := time.NewTicker(s.cfg.KeepAlive)
	defer ka.Stop()
	for {
		ch, release := s.b.Changed(id) // before reading, so no change is missed
		done, err := step()
		if err != nil || done {
			release()
			return err
		}
		for waiting := true; waiting; {
			select {
			case <-ch:
				waiting = false
			case <-ka.C:
				if _, err := s.b.Session(r.Context(), ss.token); err != nil {
					release()
					return err
				}
				if err := e.write(": keep-alive\n\n"); err != nil {
					release()
					return nil
				}
				waiting = !poll
			case <-r.Context().Done():
				release()
				return nil
			}
		}
		release()
	}
}

// liveLog is GET /jobs/{id}/log/live?attempt=N&from=OFFSET: the log's
// whole lines from OFFSET as they arrive, as "log" events of HTML lines
// whose id is the byte offset after them; "end" once the log is complete.
// A reconnecting browser's Last-Event-ID resumes exactly there. Followers
// of one log share one reader of it (tails).
func (s *Server) liveLog(w http.ResponseWriter, r *http.Request, ss *session) error {
	id := r.PathValue("id")
	attempt, err := attemptOf(r)
	if err != nil {
		return err
	}
	off, err := resumeFrom(r, "from")
	if err != nil {
		return err
	}
	if _, err := s.b.Log(r.Context(), ss.User, id, attempt, off); err != nil {
		return err // refused before the stream starts
	}
	e := startSSE(w)
	t := s.tails.join(ss.User, id, attempt, off)
	defer s.tails.leave(t)
	ka := time.NewTicker(s.cfg.KeepAlive)
	defer ka.Stop()
	err = func() error {
		for {
			data, complete, ok, wake := t.from(off)
			shared := t // followers in step render each chunk once
			if !ok {
				shared = nil // behind the shared tail, or its reader failed: read the store as this user
				sl, err := s.b.Log(r.Context(), ss.User, id, attempt, off)
				if err != nil {
					return err
				}
				data, complete = sl.Data, sl.Complete
			}
			n, err := sendLines(e, data, complete, off, shared)
			if err != nil {
				return nil // the client went away
			}
			off += n
			switch {
			case n > 0:
				continue
			case complete:
				return e.event("", "end", strconv.FormatInt(off, 10))
			case !ok && t.stopped():
				return s.follow(r, ss, id, e, false, func() (bool, error) { return s.logStep(r, ss, e, id, attempt, &off) })
			}
			select {
			case <-wake:
			case <-ka.C:
				if err := s.stillAllowed(r, ss, id); err != nil {
					return err
				}
				if err := e.write(": keep-alive\n\n"); err != nil {
					return nil
				}
			case <-r.Context().Done():
				return nil
			}
		}
	}()
	if err != nil && r.Context().Err() == nil {
		_ = e.event("", "failure", s.why(err))
	}
	return nil
}

// stillAllowed checks again, at a stream's keep-alive, that its session
// lives and its user may still see the job.
func (s *Server) stillAllowed(r *http.Request, ss *session, id string) error {
	if _, err := s.b.Session(r.Context(), ss.token); err != nil {
		return err
	}
	_, err := s.b.Job(r.Context(), ss.User, id)
	return err
}

// sendLines sends data, read at off, as one "log" event of its whole lines
// (all of it when complete; one very long line goes in pieces) and says
// how many bytes it sent.
func sendLines(e *sse, data []byte, complete bool, off int64, t *tail) (int64, error) {
	if i := bytes.LastIndexByte(data, '\n'); !complete && (i >= 0 || len(data) < windowBytes) {
		data = data[:i+1]
	}
	if len(data) == 0 {
		return 0, nil
	}
	var h string
	if t != nil {
		h = t.render(data, off)
	} else {
		lines, _ := renderLog(data, off)
		h = string(lines)
	}
	end := off + int64(len(data))
	return int64(len(data)), e.event(strconv.FormatInt(end, 10), "log", h)
}

// logStep sends what the store has of the log after *off, as this user:
// a follower's own reads when the shared reader failed.
func (s *Server) logStep(r *http.Request, ss *session, e *sse, id string, attempt int64, off *int64) (bool, error) {
	for {
		sl, err := s.b.Log(r.Context(), ss.User, id, attempt, *off)
		if err != nil {
			return true, err
		}
		n, err := sendLines(e, sl.Data, sl.Complete, *off, nil)
		if err != nil {
			return true, nil
		}
		*off += n
		if n > 0 {
			continue
		}
		if sl.Complete {
			return true, e.event("", "end", strconv.FormatInt(*off, 10))
		}
		return false, nil
	}
}

// liveEvents is GET /jobs/{id}/events/live?after=SEQ&version=V: the job's
// timeline from SEQ as "ev" events (HTML rows, id the sequence number), its
// state as "state" events when it changes, and the page's live part (facts,
// actions, attempts) as a "job" event of HTML when it is not version V
// (sent again after a reconnect: it is the job as it is now).
func (s *Server) liveEvents(w http.ResponseWriter, r *http.Request, ss *session) error {
	id := r.PathValue("id")
	after, err := resumeFrom(r, "after")
	if err != nil {
		return err
	}
	v, err := s.b.Job(r.Context(), ss.User, id)
	if err != nil {
		return err
	}
	state, have := r.URL.Query().Get("state"), r.URL.Query().Get("version")
	e := startSSE(w)
	t := s.tmpl["job"]
	err = s.follow(r, ss, id, e, false, func() (bool, error) {
		for {
			evs, err := s.b.Events(r.Context(), ss.User, id, after)
			if err != nil {
				return true, err
			}
			for _, ev := range evs {
				var b strings.Builder
				if err := t.ExecuteTemplate(&b, "event", ev); err != nil {
					return true, err
				}
				after = ev.Seq
				if err := e.event(strconv.FormatInt(ev.Seq, 10), "ev", b.String()); err != nil {
					return true, nil
				}
			}
			if len(evs) < 1000 {
				break
			}
		}
		if v, err = s.b.Job(r.Context(), ss.User, id); err != nil {
			return true, err
		}
		html, version, err := s.fragment("job", "job-live", ss, jobLive(v))
		if err != nil {
			return true, err
		}
		if version != have {
			have = version
			if err := e.event("", "job", html); err != nil {
				return true, nil
			}
		}
		if now := stateText(v); now != state {
			state = now
			if err := e.event("", "state", state); err != nil {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil && r.Context().Err() == nil {
		_ = e.event("", "failure", s.why(err))
	}
	return nil
}

// stateText is a job's state as its page shows it.
func stateText(v apitypes.JobView) string {
	s := string(v.State)
	if v.Cancelling {
		s += " (cancelling)"
	}
	return s
}

// liveEvery is the least time between two updates of a live part
// (the runners table, a pipeline): changes come in bursts.
const liveEvery = time.Second

// liveRunners is GET /runners/live: the runners table as the user may see
// it, as a "runners" event of HTML whenever it changed (a runner came or
// went, reported, took or ended an attempt).
func (s *Server) liveRunners(w http.ResponseWriter, r *http.Request, ss *session) error {
	return s.liveFragment(w, r, ss, "runners", "runners-table", "runners", func() (any, error) { return s.runnersData(r, ss) })
}

// liveFragment streams the live part name of page, rendered from data, as
// kind events of HTML whose id is its version: after any change on the
// hub and at each keep-alive, when the part changed, at most one every
// liveEvery. A (re)connecting page gets the part at once unless it has
// this version: it is never left stale. A refusal of data (the user lost
// access) ends the stream.
func (s *Server) liveFragment(w http.ResponseWriter, r *http.Request, ss *session, page, name, kind string, data func() (any, error)) error {
	if _, err := data(); err != nil {
		return err // refused before the stream starts
	}
	// The version the page has: the one it was rendered with, or after a
	// reconnect the last one this stream sent it.
	have := r.URL.Query().Get("version")
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		have = v
	}
	e := startSSE(w)
	err := s.follow(r, ss, "", e, true, func() (bool, error) {
		d, err := data()
		if err != nil {
			return true, err
		}
		html, version, err := s.fragment(page, name, ss, d)
		if err != nil {
			return true, err
		}
		if version == have {
			return false, nil
		}
		have = version
		if err := e.event(version, kind, html); err != nil {
			return true, nil
		}
		select { // changes come in bursts: one update for each
		case <-time.After(liveEvery):
		case <-r.Context().Done():
			return true, nil
		}
		return false, nil
	})
	if err != nil && r.Context().Err() == nil {
		_ = e.event("", "failure", s.why(err))
	}
	return nil
}

// fragment renders the live part name of page and names its version (a
// hash of the HTML: the same part, the same version).
func (s *Server) fragment(page, name string, ss *session, data any) (html, version string, err error) {
	var b strings.Builder
	if err := s.tmpl[page].ExecuteTemplate(&b, name, view{Page: page, Session: ss, Data: data}); err != nil {
		return "", "", fmt.Errorf("render %s of the %s page: %w", name, page, err)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return b.String(), hex.EncodeToString(sum[:12]), nil
}
