package chaos

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"
)

// frameFault is something the proxy does to the next WebSocket frame that
// fits it. The campaign arms them (from its seeded schedule); the proxy
// applies each to one frame and counts it.
type frameFault int

const (
	faultDelay     frameFault = iota // hold the frame back before forwarding it
	faultDuplicate                   // forward the frame twice
	faultDrop                        // lose the frame and the connection it was on
	faultDropReply                   // lose a hub reply (the hub applied the request) and the connection
)

// armed is one frame fault waiting for a frame.
type armed struct {
	kind  frameFault
	delay time.Duration
	// beats: a heartbeat may take it too. Heartbeats are most of what a
	// runner sends, so most faults wait for a frame that does something.
	beats bool
}

// proxy is a TCP proxy between runners and the hub that understands just
// enough of HTTP and WebSocket framing to hurt single frames: after a
// WebSocket upgrade it forwards frame by frame, so a frame can be delayed,
// duplicated or dropped whole. Other HTTP connections are piped as bytes
// (they are only cut). It refuses WebSocket compression (it strips the
// extension offer), so every frame stands alone.
type proxy struct {
	ln     net.Listener
	target string
	log    *slog.Logger

	mu      sync.Mutex
	conns   map[*link]bool
	pending []armed
	applied map[string]int // fault name → frames it was applied to
	wg      sync.WaitGroup
}

// link is one proxied TCP connection: the runner's side and the hub's.
type link struct {
	down, up net.Conn
	once     sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		l.down.Close()
		l.up.Close()
	})
}

func newProxy(target string, log *slog.Logger) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start the proxy: %w", err)
	}
	p := &proxy{ln: ln, target: target, log: log, conns: map[*link]bool{}, applied: map[string]int{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close() // the hub is down: the runner sees a refused connection
			continue
		}
		l := &link{down: c, up: up}
		p.mu.Lock()
		p.conns[l] = true
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(l)
			p.mu.Lock()
			delete(p.conns, l)
			p.mu.Unlock()
		}()
	}
}

// serve forwards one connection. The first request decides: a WebSocket
// upgrade goes frame by frame once the hub agrees, anything else is piped.
func (p *proxy) serve(l *link) {
	defer l.close()
	down, up := bufio.NewReader(l.down), bufio.NewReader(l.up)
	head, err := readHead(down)
	if err != nil {
		return
	}
	upgrade := isUpgrade(head)
	if upgrade {
		head = stripHeader(head, "sec-websocket-extensions")
	}
	if _, err := l.up.Write(head); err != nil {
		return
	}
	if !upgrade {
		pipe(l, down, up)
		return
	}
	resp, err := readHead(up)
	if err != nil {
		return
	}
	if _, err := l.down.Write(resp); err != nil {
		return
	}
	if !bytes.HasPrefix(resp, []byte("HTTP/1.1 101")) {
		pipe(l, down, up)
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.frames(l, down, l.up, false); done <- struct{}{} }()
	go func() { p.frames(l, up, l.down, true); done <- struct{}{} }()
	<-done
	l.close()
	<-done
}

// pipe copies both ways until either side ends.
func pipe(l *link, down, up *bufio.Reader) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(l.up, down); l.close(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(l.down, up); l.close(); done <- struct{}{} }()
	<-done
	<-done
}

// readHead reads an HTTP message head, through the blank line.
func readHead(r *bufio.Reader) ([]byte, error) {
	var b bytes.Buffer
	for {
		line, err := r.ReadSlice('\n')
		b.Write(line)
		if err != nil {
			return nil, fmt.Errorf("read HTTP head: %w", err)
		}
		if b.Len() > 64<<10 {
			return nil, errors.New("read HTTP head: over 64 KiB")
		}
		if len(line) <= 2 && strings.TrimSpace(string(line)) == "" {
			return b.Bytes(), nil
		}
	}
}

func isUpgrade(head []byte) bool {
	for _, line := range strings.Split(string(head), "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), "upgrade") && strings.EqualFold(strings.TrimSpace(v), "websocket") {
			return true
		}
	}
	return false
}

// stripHeader removes every line of header name from an HTTP head.
func stripHeader(head []byte, name string) []byte {
	lines := strings.Split(string(head), "\r\n")
	out := lines[:0]
	for _, line := range lines {
		if k, _, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), name) {
			continue
		}
		out = append(out, line)
	}
	return []byte(strings.Join(out, "\r\n"))
}

// frame is one WebSocket frame as it is on the wire.
type frame struct {
	raw     []byte
	fin     bool
	opcode  byte
	payload []byte // unmasked
}

const maxProxyFrame = 4 << 20 // above the protocol's 2 MiB frames

// readFrame reads one frame (RFC 6455 §5.2).
func readFrame(r *bufio.Reader) (frame, error) {
	var h [14]byte
	if _, err := io.ReadFull(r, h[:2]); err != nil {
		return frame{}, err
	}
	n := 2
	length := uint64(h[1] & 0x7f)
	switch length {
	case 126:
		if _, err := io.ReadFull(r, h[2:4]); err != nil {
			return frame{}, err
		}
		length, n = uint64(binary.BigEndian.Uint16(h[2:4])), 4
	case 127:
		if _, err := io.ReadFull(r, h[2:10]); err != nil {
			return frame{}, err
		}
		length, n = binary.BigEndian.Uint64(h[2:10]), 10
	}
	masked := h[1]&0x80 != 0
	var mask []byte
	if masked {
		if _, err := io.ReadFull(r, h[n:n+4]); err != nil {
			return frame{}, err
		}
		mask = h[n : n+4]
		n += 4
	}
	if length > maxProxyFrame {
		return frame{}, fmt.Errorf("frame of %d bytes is over the proxy's limit", length)
	}
	raw := make([]byte, n+int(length))
	copy(raw, h[:n])
	if _, err := io.ReadFull(r, raw[n:]); err != nil {
		return frame{}, err
	}
	payload := bytes.Clone(raw[n:])
	for i := range payload {
		if masked {
			payload[i] ^= mask[i%4]
		}
	}
	return frame{raw: raw, fin: h[0]&0x80 != 0, opcode: h[0] & 0x0f, payload: payload}, nil
}

// frames forwards frames from r to w, applying armed faults to whole text
// messages (fin, opcode 1). fromHub says which way they go.
func (p *proxy) frames(l *link, r *bufio.Reader, w net.Conn, fromHub bool) {
	for {
		f, err := readFrame(r)
		if err != nil {
			return
		}
		a, ok := p.take(f, fromHub)
		if !ok {
			if _, err := w.Write(f.raw); err != nil {
				return
			}
			continue
		}
		switch a.kind {
		case faultDelay:
			time.Sleep(a.delay)
			if _, err := w.Write(f.raw); err != nil {
				return
			}
		case faultDuplicate:
			if _, err := w.Write(append(bytes.Clone(f.raw), f.raw...)); err != nil {
				return
			}
		case faultDrop, faultDropReply:
			// A frame lost in flight: TCP would not lose one and go on, so
			// the connection goes with it, as a dropped link would.
			l.close()
			return
		}
	}
}

// take hands out the oldest armed fault that fits the frame, and counts it.
func (p *proxy) take(f frame, fromHub bool) (armed, bool) {
	if !f.fin || f.opcode != 1 {
		return armed{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, a := range p.pending {
		typ := frameType(f.payload)
		if a.kind == faultDropReply && (!fromHub || typ != "reply") || !a.beats && typ == "heartbeat" {
			continue
		}
		p.pending = append(p.pending[:i], p.pending[i+1:]...)
		name := a.kind.String()
		p.applied[name]++
		p.log.Debug("frame fault", "fault", name, "from_hub", fromHub, "frame", typ, "bytes", len(f.payload))
		return a, true
	}
	return armed{}, false
}

// String is the fault's name, as --faults takes it.
func (f frameFault) String() string {
	switch f {
	case faultDelay:
		return FaultDelay
	case faultDuplicate:
		return FaultDuplicate
	case faultDrop:
		return FaultDrop
	}
	return FaultDropReply
}

// frameType is a protocol frame's type ("" when it is not one).
func frameType(payload []byte) string {
	var env struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(payload, &env)
	return env.Type
}

// arm queues a frame fault for the next frame that fits it. Faults still
// waiting when the queue is long are dropped from its front: a proxy with
// no traffic should not store up a burst.
func (p *proxy) arm(a armed) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, a)
	if len(p.pending) > 8 {
		p.pending = p.pending[1:]
	}
}

// cut closes every connection through the proxy and says how many.
func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.close()
	}
	return len(p.conns)
}

// appliedCounts is how many frames each frame fault was applied to.
func (p *proxy) appliedCounts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.applied {
		out[k] = v
	}
	return out
}

func (p *proxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}
