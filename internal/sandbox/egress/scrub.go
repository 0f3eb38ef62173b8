package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Scrubbing: a credential endpoint's upstream may echo what it was sent
// (a debugging endpoint, an error page quoting the request), and what it
// answers goes to the sandbox and from there to the job's log. The proxy
// masks every form of a key it added in the answer, so that neither ever
// holds it.

// minNeedle is the shortest text masked: shorter forms of a key (a short
// password inside a basic-auth value) would mask ordinary text.
const minNeedle = 6

// mask replaces each byte of a key's form.
const mask = '*'

// Needles are the forms in which an answer may echo credential c's key:
// as sent, JSON- and URL-escaped, base64 at each alignment (inside a
// longer encoded value too), and for a basic-auth key its decoded
// "user:password" and password.
func Needles(c Credential) []string {
	forms := []string{c.Key}
	if strings.EqualFold(strings.TrimSpace(c.Prefix), "basic") {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(c.Key); err == nil {
				forms = append(forms, string(b))
				if _, pw, ok := strings.Cut(string(b), ":"); ok {
					forms = append(forms, pw)
				}
				break
			}
		}
	}
	var out []string
	for _, f := range forms {
		out = append(out, f, url.QueryEscape(f), url.PathEscape(f))
		if j, err := json.Marshal(f); err == nil {
			out = append(out, string(j[1:len(j)-1]), strings.ReplaceAll(string(j[1:len(j)-1]), "/", `\/`))
		}
		out = append(out, base64Cores(f)...)
	}
	out = slices.DeleteFunc(out, func(s string) bool { return len(s) < minNeedle })
	slices.Sort(out)
	return slices.Compact(out)
}

// base64Cores are the parts of the base64 encodings of s that depend on s
// alone, at each of the three offsets s can have inside a longer value.
func base64Cores(s string) []string {
	var out []string
	for off := range 3 {
		b := append(make([]byte, off), s...)
		from, to := (8*off+5)/6, 8*len(b)/6
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			e := enc.EncodeToString(b)
			if to > from {
				out = append(out, e[from:to])
			}
		}
	}
	return out
}

// scrubber masks needles in a stream: what it holds back is only a tail
// that could still begin one, so a streamed answer (server-sent events)
// is not delayed by it.
type scrubber struct {
	needles [][]byte
	pend    []byte
}

func newScrubber(needles []string) *scrubber {
	s := &scrubber{}
	for _, n := range needles {
		if len(n) > 0 {
			s.needles = append(s.needles, []byte(n))
		}
	}
	return s
}

// maskAll masks every needle in b, in place.
func (s *scrubber) maskAll(b []byte) {
	for _, n := range s.needles {
		for i := 0; ; {
			k := bytes.Index(b[i:], n)
			if k < 0 {
				break
			}
			for j := range n {
				b[i+k+j] = mask
			}
			i += k + len(n)
		}
	}
}

// text masks every needle in v.
func (s *scrubber) text(v string) string {
	b := []byte(v)
	s.maskAll(b)
	return string(b)
}

// add takes in p and returns what may go out now.
func (s *scrubber) add(p []byte) []byte {
	s.pend = append(s.pend, p...)
	s.maskAll(s.pend)
	keep := s.tail(s.pend)
	out := slices.Clone(s.pend[:len(s.pend)-keep])
	s.pend = append(s.pend[:0], s.pend[len(s.pend)-keep:]...)
	return out
}

// flush returns what is held back: the stream ended.
func (s *scrubber) flush() []byte {
	out := s.pend
	s.pend = nil
	return out
}

// tail is the length of the longest suffix of b that begins a needle.
func (s *scrubber) tail(b []byte) int {
	longest := 0
	for _, n := range s.needles {
		from := max(0, len(b)-len(n)+1)
		for i := from; i < len(b); i++ {
			if len(b)-i > longest && bytes.HasPrefix(n, b[i:]) {
				longest = len(b) - i
				break
			}
		}
	}
	return longest
}

// header masks every needle in h's names and values, in place.
func (s *scrubber) header(h http.Header) {
	for k, vs := range h {
		clean := s.text(k)
		for i, v := range vs {
			vs[i] = s.text(v)
		}
		if clean != k {
			delete(h, k)
			h[clean] = vs
		}
	}
}

// scrubHeaders masks the needles in every header it sends: the final
// answer's and the interim (1xx) ones the reverse proxy passes on.
type scrubHeaders struct {
	http.ResponseWriter
	s *scrubber
}

func (w scrubHeaders) WriteHeader(code int) {
	w.s.header(w.Header())
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w scrubHeaders) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// scrubBody is a response body with the needles masked; at its end it
// masks the trailers too, which the transport has read by then.
type scrubBody struct {
	r    io.ReadCloser
	s    *scrubber
	resp *http.Response
	out  []byte
	buf  []byte
	err  error
}

func (b *scrubBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		if b.buf == nil {
			b.buf = make([]byte, 32<<10)
		}
		n, err := b.r.Read(b.buf)
		b.out = b.s.add(b.buf[:n])
		if err != nil {
			b.out = append(b.out, b.s.flush()...)
			b.s.header(b.resp.Trailer)
			b.err = err
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *scrubBody) Close() error { return b.r.Close() }

// ScrubWriter passes what is written on to w with every needle masked.
// Flush writes what it holds back (a tail that could begin one).
type ScrubWriter struct {
	w  io.Writer
	mu sync.Mutex
	s  *scrubber
}

// NewScrubWriter masks needles in what goes to w.
func NewScrubWriter(w io.Writer, needles []string) *ScrubWriter {
	return &ScrubWriter{w: w, s: newScrubber(needles)}
}

func (sw *ScrubWriter) Write(p []byte) (int, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if out := sw.s.add(p); len(out) > 0 {
		if _, err := sw.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what is held back.
func (sw *ScrubWriter) Flush() error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if out := sw.s.flush(); len(out) > 0 {
		_, err := sw.w.Write(out)
		return err
	}
	return nil
}
