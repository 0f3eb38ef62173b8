// Package githttp is the git smart HTTP transport of the hub: it serves
// the hub's bare repositories to git fetch and git push, reads the
// protocol's paths and push commands, refuses every ref update a user may
// not make, and hands the rest to git http-backend (run by workspace, with
// hooks and filters off). Who may read or write which repository, and what
// an accepted push records, is the hub's: the Hub interface below.
package githttp

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"drover/internal/auth"
	"drover/internal/gitcmd"
	"drover/internal/hubrepo"
	"drover/internal/rules"
)

// Prefix is where the hub serves its repositories over git's smart HTTP
// protocol: /git/PROJECT (or PROJECT.git) followed by the protocol's paths.
const Prefix = "/git/"

// maxPushCommands bounds the ref updates of one push.
const maxPushCommands = 16

// maxPushHeader bounds the bytes of a push's command list (before its
// pack), shallow lines included.
const maxPushHeader = 1 << 20

// Hub is what the transport needs of the hub it serves.
type Hub interface {
	// Authenticate resolves a token to its caller; an error is a refusal.
	Authenticate(ctx context.Context, token string) (Caller, error)
	// TooLarge is the refusal of a request body (what) over the transfer cap.
	TooLarge(what string) error
	// Refusal is err as the client may see it (errors not of this package).
	Refusal(err error) *Error
}

// Caller is an authenticated client, as the hub sees it.
type Caller interface {
	// Name names the caller in logs.
	Name() string
	// Authorize refuses unless the caller may fetch from (write false) or
	// push to project. The repository exists when it returns, except for
	// a write that would create the project (a first push).
	Authorize(ctx context.Context, project string, write bool) error
	// Push records a push whose every ref update is allowed, before git
	// receives it, and makes the project's repository if it has none.
	Push(ctx context.Context, project string) error
}

// Server serves git's smart HTTP protocol under Prefix.
type Server struct {
	Hub         Hub
	Repos       hubrepo.Repos // where the bare repositories are, and the git that serves them
	ScratchDir  string        // for spooled request bodies
	TransferCap int64         // bytes of one request body
	Log         *slog.Logger
}

// Error is a refusal: its HTTP status, error code and message, which git
// shows its user.
type Error struct {
	Status int
	Code   string
	Msg    string
}

func (e *Error) Error() string { return e.Code + ": " + e.Msg }

func errf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *Error {
	return errf(http.StatusBadRequest, rules.ErrBadRequest, format, args...)
}

func notFound(format string, args ...any) *Error {
	return errf(http.StatusNotFound, rules.ErrNotFound, format, args...)
}

func forbidden(format string, args ...any) *Error {
	return errf(http.StatusForbidden, rules.ErrForbidden, format, args...)
}

// gitService is one of the two smart HTTP services.
type gitService struct {
	name  string // git-upload-pack or git-receive-pack
	write bool
}

// parseGitPath splits /git/PROJECT[.git]/REST and names the service the
// request is for. Only the smart protocol's three paths are served.
func parseGitPath(r *http.Request) (project, rest string, svc gitService, err error) {
	p := strings.TrimPrefix(r.URL.Path, Prefix)
	project, rest, _ = strings.Cut(p, "/")
	project = strings.TrimSuffix(project, ".git")
	if !gitcmd.ValidProject(project) {
		return "", "", svc, notFound("no project %q", project)
	}
	switch {
	case r.Method == http.MethodGet && rest == "info/refs":
		svc.name = r.URL.Query().Get("service")
	case r.Method == http.MethodPost && (rest == "git-upload-pack" || rest == "git-receive-pack"):
		svc.name = rest
	default:
		return "", "", svc, notFound("only git's smart HTTP protocol is served here (git fetch, git push)")
	}
	switch svc.name {
	case "git-upload-pack":
	case "git-receive-pack":
		svc.write = true
	default:
		return "", "", svc, notFound("only git's smart HTTP protocol is served here (git fetch, git push)")
	}
	return project, rest, svc, nil
}

// gitToken takes the token from a Bearer header, or from HTTP Basic as the
// password (so a plain git credential works; the user name is ignored).
func gitToken(r *http.Request) (string, error) {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return auth.BearerToken(h)
	}
	if _, pw, ok := r.BasicAuth(); ok && pw != "" && len(pw) <= 256 {
		return pw, nil
	}
	return "", errors.New("a token is needed (Bearer, or HTTP Basic with the token as password)")
}

// ServeHTTP authenticates and authorizes a git request, checks what a
// push would change, and hands the request to git http-backend.
//
// Users read every hosted project and push only new refs under
// refs/drover/uploads/. Runners only read, and only projects of jobs they
// hold an active attempt of.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	project, rest, svc, err := parseGitPath(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	tok, err := gitToken(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="drover"`)
		s.fail(w, r, errf(http.StatusUnauthorized, rules.ErrUnauthorized, "%v", err))
		return
	}
	c, err := s.Hub.Authenticate(r.Context(), tok)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="drover"`)
		s.fail(w, r, err)
		return
	}
	if err := c.Authorize(r.Context(), project, svc.write); err != nil {
		s.fail(w, r, err)
		return
	}
	// A first push is told of no refs, and nothing is made on disk until a
	// push with ref updates, each allowed, arrives (c.Push): a discovery
	// or a refused push of any valid name leaves no repository behind.
	fresh := !s.Repos.Exists(project)
	switch {
	case fresh && !svc.write:
		s.fail(w, r, notFound("project %s has no repository on the hub", project))
		return
	case fresh && r.Method == http.MethodGet:
		advertiseNothing(w)
		return
	}
	body, size, cleanup, err := s.spoolGitBody(w, r, svc)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer cleanup()
	if svc.write && r.Method == http.MethodPost {
		n, ok, err := checkPush(w, body, r.Header.Get("Content-Encoding"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !ok {
			s.Log.Info("push refused", "project", project, "user", c.Name())
			return
		}
		if fresh && n == 0 {
			// git's probe before a large push: nothing to receive yet.
			w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
			w.WriteHeader(http.StatusOK)
			return
		}
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := c.Push(r.Context(), project); err != nil {
			s.fail(w, r, err)
			return
		}
		s.Log.Info("source push", "project", project, "user", c.Name(), "bytes", size)
	}
	backend, err := s.Repos.HTTPBackend(svc.write, slogWriter{s.Log, project})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = "/"+project+".git/"+rest, ""
	r2.Header.Del("Authorization") // git needs no credentials, so its environment gets none
	r2.Header.Del("Cookie")
	r2.TransferEncoding = nil // net/http/cgi refuses chunked bodies; the spool has a length
	r2.Body, r2.ContentLength = http.NoBody, 0
	if body != nil {
		r2.Body, r2.ContentLength = io.NopCloser(body), size
	}
	backend.ServeHTTP(w, r2)
}

// spoolGitBody copies a POST body to a temporary file within the transfer
// cap: net/http/cgi takes no chunked body, and a push is read twice.
func (s *Server) spoolGitBody(w http.ResponseWriter, r *http.Request, svc gitService) (*os.File, int64, func(), error) {
	nothing := func() {}
	if r.Method != http.MethodPost {
		return nil, 0, nothing, nil
	}
	what := "the fetch negotiation"
	if svc.write {
		what = "the push"
	}
	if r.ContentLength > s.TransferCap {
		return nil, 0, nothing, s.Hub.TooLarge(what)
	}
	dir := s.ScratchDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, nothing, fmt.Errorf("spool git request: %w", err)
	}
	f, err := os.CreateTemp(dir, "git-*.body")
	if err != nil {
		return nil, 0, nothing, fmt.Errorf("spool git request: %w", err)
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }
	n, err := io.Copy(f, http.MaxBytesReader(w, r.Body, s.TransferCap))
	if err != nil {
		cleanup()
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, 0, nothing, s.Hub.TooLarge(what)
		}
		return nil, 0, nothing, badRequest("read the request: %v", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, 0, nothing, fmt.Errorf("spool git request: %w", err)
	}
	return f, n, cleanup, nil
}

// pushCommand is one ref update of a push.
type pushCommand struct{ old, new, ref string }

// readPushCommands reads the ref updates and capabilities at the start of
// a receive-pack request body.
func readPushCommands(body io.Reader, encoding string) ([]pushCommand, []string, error) {
	if encoding == "gzip" || encoding == "x-gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, nil, badRequest("push body is not valid gzip: %v", err)
		}
		defer zr.Close()
		body = zr
	} else if encoding != "" {
		return nil, nil, badRequest("push body encoding %q is not supported", encoding)
	}
	// The command list is read through a bound: it is short (maxPushCommands
	// refs, a few shallow lines), but "shallow" lines were skipped without
	// a count, so a gzip body inflating to gigabytes of them held the
	// request for minutes (found while writing FuzzReadPushCommands).
	lr := &io.LimitedReader{R: body, N: maxPushHeader + 1}
	br := bufio.NewReader(lr)
	var cmds []pushCommand
	var caps []string
	for {
		line, flush, err := readPktLine(br)
		if err != nil && lr.N == 0 {
			return nil, nil, forbidden("push refused: its commands take over %d bytes", maxPushHeader)
		}
		if err != nil {
			return nil, nil, badRequest("push request is malformed: %v", err)
		}
		if flush {
			break
		}
		cmd, capList, hasCaps := strings.Cut(strings.TrimSuffix(line, "\n"), "\x00")
		if hasCaps {
			caps = strings.Fields(capList)
		}
		if strings.HasPrefix(cmd, "shallow ") {
			continue
		}
		if strings.HasPrefix(cmd, "push-cert") {
			return nil, nil, forbidden("signed pushes are not taken")
		}
		f := strings.Fields(cmd)
		if len(f) != 3 {
			return nil, nil, badRequest("push command %.80q is malformed", cmd)
		}
		if len(cmds) == maxPushCommands {
			return nil, nil, forbidden("push refused: over %d refs in one push", maxPushCommands)
		}
		cmds = append(cmds, pushCommand{old: f[0], new: f[1], ref: f[2]})
	}
	// No command at all is git's probe before a large push (a lone flush):
	// it changes nothing, so it goes through.
	return cmds, caps, nil
}

// pushRefusal says why a ref update is refused, "" when it is allowed:
// users may only create refs under refs/drover/uploads/.
func pushRefusal(c pushCommand) string {
	switch {
	case !gitcmd.ValidUploadRef(c.ref):
		return "users may only create refs under " + gitcmd.UploadRefPrefix + " (drover run --repo does this)"
	case c.new == gitcmd.ZeroID:
		return "refs cannot be deleted"
	case c.old != gitcmd.ZeroID:
		return "uploads are written once"
	}
	return ""
}

// checkPush refuses a push unless every ref update is allowed, and says
// how many it has. A client that asked for a status report gets one, so
// git shows each ref's reason ("! [remote rejected] ... (reason)");
// nothing reaches git http-backend.
func checkPush(w http.ResponseWriter, body io.Reader, encoding string) (int, bool, error) {
	cmds, caps, err := readPushCommands(body, encoding)
	if err != nil {
		return 0, false, err
	}
	reasons := make([]string, len(cmds))
	refused := ""
	for i, c := range cmds {
		if reasons[i] = pushRefusal(c); reasons[i] != "" && refused == "" {
			refused = fmt.Sprintf("push to %s refused: %s", c.ref, reasons[i])
		}
	}
	if refused == "" {
		return len(cmds), true, nil
	}
	if !slices.Contains(caps, "report-status") && !slices.Contains(caps, "report-status-v2") {
		return 0, false, forbidden("%s", refused)
	}
	var report bytes.Buffer
	writePktLine(&report, "unpack ok\n")
	for i, c := range cmds {
		reason := reasons[i]
		if reason == "" {
			reason = "another ref of this push was refused"
		}
		writePktLine(&report, "ng "+c.ref+" "+reason+"\n")
	}
	report.WriteString("0000")
	out := report.Bytes()
	if slices.Contains(caps, "side-band-64k") || slices.Contains(caps, "side-band") {
		var sb bytes.Buffer
		for len(out) > 0 {
			n := min(len(out), 900)
			writePktLine(&sb, "\x01"+string(out[:n]))
			out = out[n:]
		}
		sb.WriteString("0000")
		out = sb.Bytes()
	}
	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return 0, false, nil
}

// advertiseNothing answers a push's discovery as git receive-pack does for
// an empty repository: no refs, and the capabilities every hub repository
// (SHA-1, made by Push) takes.
func advertiseNothing(w http.ResponseWriter) {
	var b bytes.Buffer
	writePktLine(&b, "# service=git-receive-pack\n")
	b.WriteString("0000")
	writePktLine(&b, gitcmd.ZeroID+" capabilities^{}\x00report-status report-status-v2 side-band-64k quiet ofs-delta object-format=sha1\n")
	b.WriteString("0000")
	w.Header().Set("Content-Type", "application/x-git-receive-pack-advertisement")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}

// writePktLine appends one pkt-line.
func writePktLine(b *bytes.Buffer, payload string) {
	fmt.Fprintf(b, "%04x%s", len(payload)+4, payload)
}

// readPktLine reads one pkt-line: its payload, or flush for "0000".
func readPktLine(br *bufio.Reader) (string, bool, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return "", false, err
	}
	n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
	if err != nil {
		return "", false, fmt.Errorf("bad pkt-line length %q", hdr[:])
	}
	switch {
	case n == 0:
		return "", true, nil
	case n < 4:
		return "", false, fmt.Errorf("unexpected pkt-line %04x", n)
	}
	buf := make([]byte, n-4)
	if _, err := io.ReadFull(br, buf); err != nil {
		return "", false, err
	}
	return string(buf), false, nil
}

// fail answers a git request in plain text, which git shows its user as
// "remote: ...".
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e, ok := errors.AsType[*Error](err)
	if !ok {
		e = s.Hub.Refusal(err)
	}
	if e.Status < 500 {
		s.Log.Info("git request refused", "method", r.Method, "path", r.URL.Path, "code", e.Code, "msg", e.Msg)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(e.Status)
	fmt.Fprintf(w, "drover: %s\n", e.Msg)
}

// slogWriter logs what git http-backend writes on stderr.
type slogWriter struct {
	log     *slog.Logger
	project string
}

func (s slogWriter) Write(p []byte) (int, error) {
	if msg := strings.TrimSpace(string(p)); msg != "" {
		if len(msg) > 2000 {
			msg = strings.ToValidUTF8(msg[:2000], "")
		}
		s.log.Warn("git http-backend", "project", s.project, "msg", msg)
	}
	return len(p), nil
}
