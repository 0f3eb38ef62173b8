package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
)

// logHub serves one job's view and its attempts' logs.
type logHub struct {
	mu        sync.Mutex
	view      func(n int) apitypes.JobView // n counts job requests from 1
	jobGets   int
	logs      map[int64]string
	maxAnswer map[int64]int  // bytes per answer, for a log that grows
	cutOnce   map[int64]bool // drop the connection mid-answer once
	staleOff  bool           // answer from offset 0 whatever was asked
	neverDone bool           // the log is never complete; the job's state says it ended
	requests  []string
}

func (h *logHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case r.URL.Path == "/api/v1/jobs/j-1":
		h.jobGets++
		writeJSON(w, 200, h.view(h.jobGets))
	case r.URL.Path == "/api/v1/jobs/j-1/log":
		q := r.URL.Query()
		att, _ := strconv.ParseInt(q.Get("attempt"), 10, 64)
		off, _ := strconv.ParseInt(q.Get("offset"), 10, 64)
		h.requests = append(h.requests, fmt.Sprintf("%d@%d", att, off))
		if h.staleOff {
			off = 0
		}
		data := h.logs[att][off:]
		complete := !h.neverDone
		if m := h.maxAnswer[att]; m > 0 && len(data) > m {
			data, complete = data[:m], false
			h.maxAnswer[att] = 0
		}
		w.Header().Set(apitypes.HeaderLogAttempt, strconv.FormatInt(att, 10))
		w.Header().Set(apitypes.HeaderLogOffset, strconv.FormatInt(off, 10))
		w.Header().Set(apitypes.HeaderLogSize, strconv.Itoa(len(h.logs[att])))
		w.Header().Set(apitypes.HeaderLogComplete, strconv.FormatBool(complete))
		if h.view != nil {
			w.Header().Set(apitypes.HeaderJobState, string(h.view(h.jobGets).State))
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		if h.cutOnce[att] {
			h.cutOnce[att] = false
			_, _ = w.Write([]byte(data[:3]))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection drops mid-body
		}
		_, _ = w.Write([]byte(data))
	default:
		http.NotFound(w, r)
	}
}

// growing is a job that waits in the queue for two requests, runs its first
// attempt, then ends with a second one.
func growing(n int) apitypes.JobView {
	a1 := apitypes.AttemptView{Number: 1, State: job.AttemptRunning, Runner: "r1"}
	switch {
	case n <= 2:
		return apitypes.JobView{ID: "j-1", State: job.Queued}
	case n == 3:
		return apitypes.JobView{ID: "j-1", State: job.Running, Attempts: []apitypes.AttemptView{a1}}
	}
	a1.State = job.AttemptUnknown
	return apitypes.JobView{ID: "j-1", State: job.Completed, Attempts: []apitypes.AttemptView{
		{Number: 2, State: job.AttemptCompleted, Runner: "r2"}, a1,
	}}
}

func TestFollowLog(t *testing.T) {
	for _, tt := range []struct {
		name    string
		attempt int64
		gets    int // job requests the hub already answered
	}{
		{"waits for the first attempt", 0, 0},
		{"from a given attempt", 1, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &logHub{view: growing, jobGets: tt.gets,
				logs:      map[int64]string{1: "hello\nworld\n", 2: "second\n"},
				maxAnswer: map[int64]int{2: 3},
				cutOnce:   map[int64]bool{1: true},
			}
			c, _ := newTestClient(t, h, 0)
			var out bytes.Buffer
			var seen []string
			err := c.FollowLog(context.Background(), "j-1", tt.attempt, 0, &out, OnAttempt(func(a apitypes.AttemptView) {
				seen = append(seen, fmt.Sprintf("%d on %s", a.Number, a.Runner))
			}))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := out.String(), "hello\nworld\nsecond\n"; got != want {
				t.Errorf("log = %q, want %q", got, want)
			}
			if got := strings.Join(seen, ", "); got != "1 on r1, 2 on r2" {
				t.Errorf("attempts = %s", got)
			}
			// 1@3: resumed after the dropped connection; 2@3: the log grew.
			if got, want := strings.Join(h.requests, " "), "1@0 1@3 2@0 2@3"; got != want {
				t.Errorf("log requests = %s, want %s", got, want)
			}
		})
	}
}

func TestFollowLogLatestAttempt(t *testing.T) {
	h := &logHub{view: growing, jobGets: 3, logs: map[int64]string{1: "one\n", 2: "two\n"}}
	c, _ := newTestClient(t, h, 0)
	var out bytes.Buffer
	if err := c.FollowLog(context.Background(), "j-1", 0, 0, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "two\n" {
		t.Errorf("log = %q", out.String())
	}
}

func TestFollowLogOnlyAttempt(t *testing.T) {
	h := &logHub{view: growing, jobGets: 3, logs: map[int64]string{1: "one\n", 2: "two\n"}}
	c, _ := newTestClient(t, h, 0)
	var out bytes.Buffer
	if err := c.FollowLog(context.Background(), "j-1", 1, 0, &out, OnlyAttempt()); err != nil {
		t.Fatal(err)
	}
	if out.String() != "one\n" {
		t.Errorf("log = %q", out.String())
	}
}

func TestFollowLogUnknownJobEnds(t *testing.T) {
	h := &logHub{neverDone: true, logs: map[int64]string{1: "partial"}, maxAnswer: map[int64]int{1: 3},
		view: func(int) apitypes.JobView {
			return apitypes.JobView{ID: "j-1", State: job.Unknown, Attempts: []apitypes.AttemptView{{Number: 1, State: job.AttemptUnknown}}}
		}}
	c, _ := newTestClient(t, h, 0)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.FollowLog(ctx, "j-1", 0, 0, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "partial" {
		t.Errorf("log = %q", out.String())
	}
	if got := strings.Join(h.requests, " "); got != "1@0 1@3 1@7" {
		t.Errorf("log requests = %s", got)
	}
}

func TestFollowLogJobEndedWithoutAttempts(t *testing.T) {
	h := &logHub{view: func(int) apitypes.JobView { return apitypes.JobView{ID: "j-1", State: job.Cancelled} }}
	c, _ := newTestClient(t, h, 0)
	called := false
	err := c.FollowLog(context.Background(), "j-1", 0, 0, &bytes.Buffer{}, OnAttempt(func(apitypes.AttemptView) { called = true }))
	if err != nil || called || len(h.requests) != 0 {
		t.Errorf("err %v, callback %v, log requests %v", err, called, h.requests)
	}
}

func TestFollowLogStopsWithContext(t *testing.T) {
	h := &logHub{view: func(int) apitypes.JobView { return apitypes.JobView{ID: "j-1", State: job.Queued} }}
	c, _ := newTestClient(t, h, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.FollowLog(ctx, "j-1", 0, 0, &bytes.Buffer{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
}

func TestReadLogNeverRepeatsBytes(t *testing.T) {
	h := &logHub{logs: map[int64]string{1: "abcdef"}, staleOff: true}
	c, _ := newTestClient(t, h, 0)
	var out bytes.Buffer
	ch, err := c.ReadLog(context.Background(), "j-1", LogRequest{Attempt: 1, Offset: 2}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "cdef" || ch.Next != 6 || !ch.Complete || ch.Size != 6 {
		t.Errorf("got %q %+v", out.String(), ch)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestReadLogWriteErrorIsNotRetried(t *testing.T) {
	h := &logHub{logs: map[int64]string{1: "abc"}}
	c, _ := newTestClient(t, h, 0)
	if _, err := c.ReadLog(context.Background(), "j-1", LogRequest{Attempt: 1}, failingWriter{}); err == nil {
		t.Fatal("want an error")
	}
	if len(h.requests) != 1 {
		t.Errorf("log requests = %v", h.requests)
	}
}
