package native

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"drover/internal/sandbox"
)

// Command limits: one command's time and the output the model sees.
const (
	defaultCommandTimeout = 10 * time.Minute
	maxCommandTimeout     = 30 * time.Minute
	outputHead            = 8 << 10
	outputTail            = 8 << 10
)

// commands runs each command as a fresh process through the runner's
// execution boundary (the attempt's sandbox): no shell state survives from
// one to the next, and nothing of the runner (the account's key) is in it.
type commands struct {
	box   sandbox.Boundary
	dir   string
	env   []string
	grace time.Duration
}

func (c commands) run(ctx context.Context, command string, timeout time.Duration) (string, error) {
	if strings.TrimSpace(command) == "" {
		return "", fmt.Errorf("command is empty")
	}
	if timeout <= 0 {
		timeout = defaultCommandTimeout
	}
	timeout = min(timeout, maxCommandTimeout)
	out := &headTail{}
	p, err := c.box.Start(ctx, sandbox.Spec{Dir: c.dir, Argv: []string{"/bin/sh", "-c", command}, Env: c.env,
		Output: out, Timeout: timeout, Grace: c.grace})
	if err != nil {
		return "", fmt.Errorf("start the command: %w", err)
	}
	ex, err := p.Wait()
	if err != nil {
		return "", fmt.Errorf("run the command: %w", err)
	}
	status := fmt.Sprintf("exit code %d", ex.Code)
	switch {
	case ex.TimedOut:
		status = fmt.Sprintf("stopped after its time limit of %s", timeout)
	case ex.Signal != "":
		status += " (" + ex.Signal + ")"
	}
	return out.String() + "[" + status + "]", nil
}

// headTail keeps the first and last bytes of a command's output and counts
// what it elides between them.
type headTail struct {
	mu     sync.Mutex
	head   []byte
	tail   []byte // a ring's worth, kept linear for simplicity
	total  int64
	elided int64
}

func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	h.total += int64(n)
	if room := outputHead - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	h.tail = append(h.tail, p...)
	if over := len(h.tail) - outputTail; over > 0 {
		h.elided += int64(over)
		h.tail = append(h.tail[:0], h.tail[over:]...)
	}
	return n, nil
}

func (h *headTail) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	b.Write(h.head)
	if h.elided > 0 {
		fmt.Fprintf(&b, "\n[... %d bytes of output elided ...]\n", h.elided)
	}
	b.Write(h.tail)
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}
