package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/childproc"
)

// hubProc is a `drover hub` running as a child process, so that its memory
// and CPU time can be read from /proc/PID apart from the bench's own.
type hubProc struct {
	binary      string
	addr, maddr string // --listen and --metrics-listen ("" without metrics)
	cmd         *exec.Cmd
	pid         int
	url         string // http://127.0.0.1:PORT
	dir         string
	logf        string // the hub's stdout and stderr
	admin       string
	ticks       int64
	// metrics is the hub's Prometheus endpoint on a loopback port of its
	// own ("" when the hub binary has no --metrics-listen).
	metrics string

	exited  chan struct{}
	waitErr error // set before exited is closed

	db string // the hub's --db ("": SQLite in dir)
}

// startHub runs `BINARY hub --listen 127.0.0.1:PORT --data DIR` and waits
// until it answers the API with its admin token. With metrics it adds
// `--metrics-listen 127.0.0.1:PORT2`, so that goStats can read the hub's
// Go runtime figures.
// With db (a postgres:// URL of an empty database) the hub keeps its
// state there (`--db`).
func startHub(ctx context.Context, binary, dir string, ticks int64, metrics bool, db string) (*hubProc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create hub data directory: %w", err)
	}
	addr, err := childproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	var maddr string
	if metrics {
		if maddr, err = childproc.FreeAddr(); err != nil {
			return nil, err
		}
	}
	hp := &hubProc{binary: binary, addr: addr, maddr: maddr, url: "http://" + addr, dir: dir, logf: filepath.Join(dir, "hub.log"), ticks: ticks, db: db}
	if metrics {
		hp.metrics = "http://" + maddr + "/metrics"
	}
	if err := hp.spawn(ctx); err != nil {
		return nil, err
	}
	return hp, nil
}

// spawn starts the hub process on hp's addresses and data directory and
// waits until it is ready; its output is appended to the hub's log.
func (hp *hubProc) spawn(ctx context.Context) error {
	lf, err := os.OpenFile(hp.logf, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create hub log: %w", err)
	}
	defer lf.Close() // the child holds its own descriptor
	args := []string{"hub", "--listen", hp.addr, "--data", hp.dir}
	if hp.maddr != "" {
		args = append(args, "--metrics-listen", hp.maddr)
	}
	if hp.db != "" {
		args = append(args, "--db", hp.db)
	}
	cmd := exec.Command(hp.binary, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s hub: %w", hp.binary, err)
	}
	hp.cmd, hp.pid, hp.exited = cmd, cmd.Process.Pid, make(chan struct{})
	exited := hp.exited
	go func() {
		hp.waitErr = cmd.Wait()
		close(exited)
	}()
	if err := hp.waitReady(ctx); err != nil {
		hp.stop()
		return err
	}
	return nil
}

// restart stops the hub (SIGTERM) and starts it again on the same
// addresses and data, as an operator's upgrade does.
func (hp *hubProc) restart(ctx context.Context) error {
	if err := hp.stop(); err != nil {
		return err
	}
	return hp.spawn(ctx)
}

// waitReady waits for the admin token file and a successful whoami with it.
func (hp *hubProc) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	tokenPath := filepath.Join(hp.dir, "admin.token")
	for {
		if b, err := os.ReadFile(tokenPath); err == nil && len(bytes.TrimSpace(b)) > 0 {
			tok := string(bytes.TrimSpace(b))
			a := &apiClient{base: hp.url, token: tok, hc: hc}
			var who apitypes.Whoami
			if err := a.call(ctx, http.MethodGet, "/whoami", nil, &who); err == nil && who.Admin {
				hp.admin = tok
				return nil
			}
		}
		select {
		case <-hp.exited:
			return fmt.Errorf("hub exited before it was ready (%v): %s", hp.waitErr, hp.logTail())
		case <-ctx.Done():
			return fmt.Errorf("hub not ready: %w: %s", ctx.Err(), hp.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logTail returns the end of the hub's log, for error messages.
func (hp *hubProc) logTail() string {
	b, err := os.ReadFile(hp.logf)
	if err != nil {
		return "(no hub log)"
	}
	const keep = 2000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return strings.TrimSpace(string(b))
}

func (hp *hubProc) rss() (int64, error) { return readRSS(hp.pid) }

func (hp *hubProc) cpu() (time.Duration, error) { return readCPU(hp.pid, hp.ticks) }

// hubHasMetrics reports whether binary's hub command takes
// --metrics-listen (hubs built before it existed do not; the bench then
// measures their RSS only).
func hubHasMetrics(ctx context.Context, binary string) bool {
	out, err := exec.CommandContext(ctx, binary, "hub", "--help").Output()
	return err == nil && helpHasFlag(string(out), "metrics-listen")
}

// helpHasFlag reports whether a cobra usage text lists --name.
func helpHasFlag(help, name string) bool {
	for _, f := range strings.Fields(help) {
		if f == "--"+name {
			return true
		}
	}
	return false
}

// GoStats are the hub's Go runtime figures, as its Prometheus metrics give
// them at one moment (nothing forced: no GC before reading).
type GoStats struct {
	HeapInuse  int64 // go_memstats_heap_inuse_bytes: heap spans in use, live and not yet collected objects
	StackInuse int64 // go_memstats_stack_inuse_bytes: goroutine stacks
	Goroutines int64 // go_goroutines
}

// goStats scrapes the hub's metrics; nil, nil when it serves none.
func (hp *hubProc) goStats(ctx context.Context) (*GoStats, error) {
	text, err := hp.scrape(ctx)
	if err != nil || text == "" {
		return nil, err
	}
	return parseGoStats(text)
}

// statements is the hub's count of SQL statements run, -1 when its
// metrics do not have it (no --metrics-listen, or a hub from before the
// count).
func (hp *hubProc) statements(ctx context.Context) (int64, error) {
	text, err := hp.scrape(ctx)
	if err != nil {
		return -1, err
	}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "drover_store_statements_total" {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return -1, fmt.Errorf("hub metric %s: %w", f[0], err)
			}
			return int64(v), nil
		}
	}
	return -1, nil
}

// scrape reads the hub's metrics in Prometheus' text format ("" when it
// serves none).
func (hp *hubProc) scrape(ctx context.Context) (string, error) {
	if hp.metrics == "" {
		return "", nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, hp.metrics, nil)
	if err != nil {
		return "", fmt.Errorf("read the hub's metrics: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("read the hub's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("read the hub's metrics: %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", fmt.Errorf("read the hub's metrics: %w", err)
	}
	return string(b), nil
}

// parseGoStats picks the Go runtime figures out of Prometheus' text format.
func parseGoStats(text string) (*GoStats, error) {
	var s GoStats
	want := map[string]*int64{
		"go_memstats_heap_inuse_bytes":  &s.HeapInuse,
		"go_memstats_stack_inuse_bytes": &s.StackInuse,
		"go_goroutines":                 &s.Goroutines,
	}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		dst, ok := want[f[0]]
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("hub metric %s: %w", f[0], err)
		}
		*dst = int64(v)
		delete(want, f[0])
	}
	for name := range want {
		return nil, fmt.Errorf("the hub's metrics lack %s", name)
	}
	return &s, nil
}

// alive fails if the hub has exited.
func (hp *hubProc) alive() error {
	select {
	case <-hp.exited:
		return fmt.Errorf("hub exited (%v): %s", hp.waitErr, hp.logTail())
	default:
		return nil
	}
}

// stop asks the hub to shut down (SIGTERM) and kills it if it takes longer
// than 20 s.
func (hp *hubProc) stop() error {
	select {
	case <-hp.exited:
		return nil
	default:
	}
	if err := hp.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop hub: %w", err)
	}
	select {
	case <-hp.exited:
		return nil
	case <-time.After(20 * time.Second):
		_ = hp.cmd.Process.Kill()
		<-hp.exited
		return fmt.Errorf("hub did not stop within 20 s of SIGTERM; killed it; its log ends: %s", hp.logTail())
	}
}

// apiClient calls the hub's HTTP API with one token.
type apiClient struct {
	base  string
	token string
	hc    *http.Client
}

func newAPIClient(base, token string) *apiClient {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	return &apiClient{base: base, token: token, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// call does one request under /api/v1 and decodes a 2xx answer into out.
func (a *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	_, err := a.callStatus(ctx, method, path, body, out)
	return err
}

func (a *apiClient) callStatus(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("%s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+apitypes.APIPrefix+path, rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb apitypes.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, eb.Error.Error())
		}
		return resp.StatusCode, fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// approveRunners approves one fresh runner token per name, as `drover runner
// login` plus an admin's approval would, and returns the tokens in order.
func approveRunners(ctx context.Context, a *apiClient, names []string) ([]string, error) {
	tokens := make([]string, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, 8) // writes are serialized in the hub; this only overlaps round trips
	var wg sync.WaitGroup
	for i, name := range names {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			tok := auth.NewToken(auth.PrefixRunner)
			if err := a.call(ctx, http.MethodPost, "/runners/approve", apitypes.ApproveRequest{Name: name, Key: auth.Hash(tok)}, nil); err != nil {
				errs[i] = fmt.Errorf("approve runner %s: %w", name, err)
				return
			}
			tokens[i] = tok
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the first is enough: they tend to repeat
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("approve runners: %w", err)
	}
	return tokens, nil
}
