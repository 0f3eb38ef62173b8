package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
)

// agentArgv is the job every latency sample runs: the agent process prints
// its own start time, so the sample ends when the process really runs.
func agentArgv() []string { return []string{"date", "+%s%N"} }

// targetLabels are carried by the target runner only; every bench job asks
// for them, so the idle runners are never offered one.
func targetLabels() map[string]string { return map[string]string{"bench": "target"} }

// frameWait bounds each wait for a frame from the hub.
const frameWait = 30 * time.Second

// target is the runner the bench jobs go to, driven at the protocol level
// the way internal/runner drives an attempt: on offer, accept (and list it
// in a status); on the hub's ok, claim it durably in a journal (file and
// directory fsync'd) and start the agent with os/exec; then upload the log
// and finish. It may be several connections (runners), all with the target
// labels: a job then goes to whichever one the hub picks, and the bench
// follows it there. Jobs run one at a time, so every frame between a submit
// and its finish belongs to that job.
type target struct {
	conns   []*targetConn
	welcome protocol.Welcome
	journal string

	cancel context.CancelFunc
	wg     sync.WaitGroup
	frames chan arrival  // from every connection
	failed chan struct{} // closed when the first reader stops
	once   sync.Once
	err    error // why, set before failed is closed
	seq    int
	hb     atomic.Int64
}

// targetConn is one target runner's connection.
type targetConn struct {
	ws   *websocket.Conn
	name string // the runner's name, for the report
}

// dialTarget connects one target runner per token (names[i] is the
// runner's name for tokens[i]).
func dialTarget(ctx context.Context, hubURL string, tokens, names []string, journal string) (*target, error) {
	if err := os.MkdirAll(journal, 0o700); err != nil {
		return nil, fmt.Errorf("create the target runner's journal: %w", err)
	}
	lctx, cancel := context.WithCancel(ctx)
	t := &target{journal: journal, cancel: cancel, frames: make(chan arrival, 64), failed: make(chan struct{})}
	for i, tok := range tokens {
		ws, w, err := dialRunner(ctx, hubURL, tok, "", targetLabels())
		if err != nil {
			t.close()
			return nil, fmt.Errorf("connect the target runner %s: %w", names[i], err)
		}
		tc := &targetConn{ws: ws, name: names[i]}
		t.conns, t.welcome = append(t.conns, tc), w
		t.wg.Add(2)
		go func() { defer t.wg.Done(); heartbeats(lctx, ws, beat{every: w.HeartbeatInterval.D()}, &t.hb) }()
		go func() { defer t.wg.Done(); t.read(lctx, tc) }()
	}
	return t, nil
}

// arrival is a frame, the connection it came on and when the reader got it.
type arrival struct {
	protocol.Frame
	at   time.Time
	from *targetConn
}

func (t *target) fail(err error) {
	t.once.Do(func() {
		t.err = err
		close(t.failed)
	})
}

func (t *target) read(ctx context.Context, tc *targetConn) {
	for {
		_, data, err := tc.ws.Read(ctx)
		at := time.Now()
		if err != nil {
			t.fail(fmt.Errorf("target runner %s connection: %w", tc.name, err))
			return
		}
		var f protocol.Frame
		if err := json.Unmarshal(data, &f); err != nil {
			t.fail(fmt.Errorf("target runner %s got a malformed frame: %w", tc.name, err))
			return
		}
		select {
		case t.frames <- arrival{f, at, tc}:
		case <-ctx.Done():
			t.fail(ctx.Err())
			return
		}
	}
}

func (t *target) close() {
	for _, tc := range t.conns {
		_ = tc.ws.Close(websocket.StatusNormalClosure, "bench done")
	}
	t.cancel()
	t.wg.Wait()
}

// next returns the next frame from the hub.
func (t *target) next(ctx context.Context) (arrival, error) {
	timer := time.NewTimer(frameWait)
	defer timer.Stop()
	select {
	case a := <-t.frames:
		return a, nil
	case <-t.failed:
		return arrival{}, t.err
	case <-ctx.Done():
		return arrival{}, ctx.Err()
	case <-timer.C:
		return arrival{}, fmt.Errorf("no frame from the hub within %s", frameWait)
	}
}

// request sends a request and waits for its reply, returning when the
// reply arrived; any other frame in between is a bench failure (jobs run
// one at a time).
func (t *target) request(ctx context.Context, tc *targetConn, typ string, body any) (time.Time, error) {
	t.seq++
	id := fmt.Sprintf("bench-%d", t.seq)
	if err := writeFrame(ctx, tc.ws, typ, id, body); err != nil {
		return time.Time{}, err
	}
	f, err := t.next(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("wait for the reply to %s: %w", typ, err)
	}
	if f.Type != protocol.TypeReply || f.ReplyTo != id || f.from != tc {
		return time.Time{}, fmt.Errorf("wait for the reply to %s: got a %s frame", typ, f.Type)
	}
	var r protocol.Reply
	if err := f.Decode(&r); err != nil {
		return time.Time{}, err
	}
	if !r.OK {
		return time.Time{}, fmt.Errorf("hub refused %s: %v", typ, r.Error)
	}
	return f.at, nil
}

func (t *target) status(ctx context.Context, tc *targetConn, held ...protocol.Held) error {
	return writeFrame(ctx, tc.ws, protocol.TypeStatus, "", protocol.Status{Slots: 1, Attempts: append([]protocol.Held{}, held...)})
}

// claim writes a claim file and fsyncs it and its directory, as the real
// runner's journal does before it launches an agent.
func (t *target) claim(ref protocol.AttemptRef) error {
	b, err := json.Marshal(struct {
		protocol.AttemptRef
		ClaimedAt time.Time `json:"claimed_at"`
		PID       int       `json:"pid"`
	}{ref, time.Now().UTC(), os.Getpid()})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(t.journal, ref.Attempt+".claim"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("claim %s: %w", ref.Attempt, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("claim %s: %w", ref.Attempt, err)
	}
	d, err := os.Open(t.journal)
	if err != nil {
		return fmt.Errorf("claim %s: %w", ref.Attempt, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("claim %s: sync journal directory: %w", ref.Attempt, err)
	}
	return nil
}

// completedFinish is the finish of an attempt whose agent exited 0 after
// writing log, all of which the hub has.
func completedFinish(ref protocol.AttemptRef, log []byte) protocol.Finish {
	sum := sha256.Sum256(log)
	exit := 0
	return protocol.Finish{AttemptRef: ref, Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: &exit},
		LogSize: int64(len(log)), LogSHA256: hex.EncodeToString(sum[:])}
}

// sample is one job's timings.
type sample struct {
	job       string
	runner    string        // the target runner that ran it
	completed bool          // seen completed through the API afterwards (tenancy samples)
	dispatch  time.Duration // submit returned → agent process running
	submit    time.Duration // the submit call's round trip
	// dispatch in stages: they add up to it
	offer  time.Duration // submit returned → offer arrived
	accept time.Duration // offer arrived → the hub's ok to accept arrived
	claim  time.Duration // ok arrived → claim durable in the journal
	start  time.Duration // claim durable → the agent's own timestamp
}

// runJob submits one job and takes it from offer to finish. The sample ends
// at the agent's own timestamp.
func (t *target) runJob(ctx context.Context, api *apiClient) (sample, error) {
	return t.runJobAs(ctx, api, benchJob())
}

// benchJob is the job every latency sample submits (a project may be added).
func benchJob() apitypes.SubmitRequest {
	return apitypes.SubmitRequest{Agent: "exec", Args: agentArgv(), Labels: targetLabels()}
}

// runJobAs submits req with api's token and takes the job from offer to
// finish on whichever target connection the hub offers it to.
func (t *target) runJobAs(ctx context.Context, api *apiClient, req apitypes.SubmitRequest) (sample, error) {
	var s sample
	start := time.Now()
	var v apitypes.JobView
	code, err := api.callStatus(ctx, http.MethodPost, "/jobs", req, &v)
	if err != nil {
		return s, fmt.Errorf("submit: %w", err)
	}
	submitted := time.Now()
	if code != http.StatusCreated {
		return s, fmt.Errorf("submit: status %d, want 201", code)
	}
	s.job, s.submit = v.ID, submitted.Sub(start)

	f, err := t.next(ctx)
	if err != nil {
		return s, fmt.Errorf("job %s: wait for the offer: %w", v.ID, err)
	}
	if f.Type != protocol.TypeOffer {
		return s, fmt.Errorf("job %s: want an offer, got a %s frame", v.ID, f.Type)
	}
	var o protocol.Offer
	if err := f.Decode(&o); err != nil {
		return s, err
	}
	offered, tc := f.at, f.from
	s.runner = tc.name
	if o.Job != v.ID || len(o.Spec.Args) == 0 {
		return s, fmt.Errorf("job %s: offer for job %s with argv %q", v.ID, o.Job, o.Spec.Args)
	}
	ref := o.AttemptRef
	if err := t.status(ctx, tc, protocol.Held{AttemptRef: ref, Phase: protocol.PhaseOffered}); err != nil {
		return s, err
	}
	accepted, err := t.request(ctx, tc, protocol.TypeAccept, protocol.Accept{AttemptRef: ref})
	if err != nil {
		return s, fmt.Errorf("job %s: %w", v.ID, err)
	}
	if err := t.claim(ref); err != nil {
		return s, err
	}
	claimed := time.Now()
	if err := t.status(ctx, tc, protocol.Held{AttemptRef: ref, Phase: protocol.PhaseRunning}); err != nil {
		return s, err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, o.Spec.Args[0], o.Spec.Args[1:]...)
	cmd.Stdout, cmd.Dir = &out, t.journal
	if err := cmd.Run(); err != nil {
		return s, fmt.Errorf("job %s: run the agent %q: %w", v.ID, o.Spec.Args, err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
	if err != nil {
		return s, fmt.Errorf("job %s: the agent printed %q, not a time in ns (does `date +%%s%%N` work here?)", v.ID, out.String())
	}
	running := time.Unix(0, ns)
	s.dispatch = running.Sub(submitted)
	s.offer, s.accept, s.claim, s.start = offered.Sub(submitted), accepted.Sub(offered), claimed.Sub(accepted), running.Sub(claimed)

	if _, err := t.request(ctx, tc, protocol.TypeLog, protocol.Log{AttemptRef: ref, Offset: 0, Data: out.Bytes()}); err != nil {
		return s, fmt.Errorf("job %s: %w", v.ID, err)
	}
	if _, err := t.request(ctx, tc, protocol.TypeFinish, completedFinish(ref, out.Bytes())); err != nil {
		return s, fmt.Errorf("job %s: %w", v.ID, err)
	}
	if err := t.status(ctx, tc); err != nil {
		return s, err
	}
	if err := os.Remove(filepath.Join(t.journal, ref.Attempt+".claim")); err != nil {
		return s, fmt.Errorf("clean up claim: %w", err)
	}
	return s, nil
}
