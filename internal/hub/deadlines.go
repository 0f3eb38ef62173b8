package hub

import (
	"io"
	"net/http"
	"time"
)

// pacedReads turns the server's ReadTimeout, a deadline for the whole
// request, into a bound on each pause of its body: as a whole-request
// deadline it would cut a large push or publication on a slow link. Once a
// body is read (or at once without one) net/http lifts the deadline
// itself, so handlers that run long (log follows, git fetches) are not
// bounded by it, and a hijacked WebSocket has its deadlines cleared; idle
// connections stay bounded by IdleTimeout, headers by ReadHeaderTimeout.
func (h *Hub) pacedReads(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &pacedBody{ReadCloser: r.Body, rc: http.NewResponseController(w), pause: h.cfg.ReadTimeout}
		}
		next.ServeHTTP(w, r)
	})
}

// pacedBody renews the connection's read deadline before each read of the
// body, until the body's end.
type pacedBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	pause time.Duration
	done  bool
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if b.done {
		// net/http's background read now owns the connection: a deadline
		// set here would end it and cancel the request.
		return b.ReadCloser.Read(p)
	}
	_ = b.rc.SetReadDeadline(time.Now().Add(b.pause))
	n, err := b.ReadCloser.Read(p)
	b.done = err == io.EOF
	return n, err
}
