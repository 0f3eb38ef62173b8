package hub

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
	"drover/internal/protocol"
	"drover/internal/store"
	"drover/internal/workspace"
)

// gitPrefix is where the hub serves its repositories over git's smart HTTP
// protocol: /git/PROJECT (or PROJECT.git) followed by the protocol's paths.
const gitPrefix = "/git/"

// maxPushCommands bounds the ref updates of one push.
const maxPushCommands = 16

// maxPushHeader bounds the bytes of a push's command list (before its
// pack), shallow lines included.
const maxPushHeader = 1 << 20

// gitService is one of the two smart HTTP services.
type gitService struct {
	name  string // git-upload-pack or git-receive-pack
	write bool
}

// parseGitPath splits /git/PROJECT[.git]/REST and names the service the
// request is for. Only the smart protocol's three paths are served.
func parseGitPath(r *http.Request) (project, rest string, svc gitService, err error) {
	p := strings.TrimPrefix(r.URL.Path, gitPrefix)
	project, rest, _ = strings.Cut(p, "/")
	project = strings.TrimSuffix(project, ".git")
	if !workspace.ValidProject(project) {
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

// serveGit authenticates and authorizes a git request, checks what a push
// would change, and hands the request to git http-backend.
//
// Users read every hosted project and push only new refs under
// refs/drover/uploads/. Runners only read, and only projects of jobs they
// hold an active attempt of.
func (h *Hub) serveGit(w http.ResponseWriter, r *http.Request) {
	project, rest, svc, err := parseGitPath(r)
	if err != nil {
		h.gitError(w, r, err)
		return
	}
	tok, err := gitToken(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="drover"`)
		h.gitError(w, r, errf(http.StatusUnauthorized, protocol.ErrUnauthorized, "%v", err))
		return
	}
	p, err := h.authenticateToken(r.Context(), tok)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="drover"`)
		h.gitError(w, r, err)
		return
	}
	if err := h.authorizeGit(r.Context(), p, project, svc); err != nil {
		h.gitError(w, r, err)
		return
	}
	body, size, cleanup, err := h.spoolGitBody(w, r, svc)
	if err != nil {
		h.gitError(w, r, err)
		return
	}
	defer cleanup()
	if svc.write && r.Method == http.MethodPost {
		ok, err := checkPush(w, body, r.Header.Get("Content-Encoding"))
		if err != nil {
			h.gitError(w, r, err)
			return
		}
		if !ok {
			h.log.Info("push refused", "project", project, "user", p.name)
			return
		}
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			h.gitError(w, r, err)
			return
		}
		if err := h.createProject(r.Context(), p, project); err != nil {
			h.gitError(w, r, err)
			return
		}
		h.log.Info("source push", "project", project, "user", p.name, "bytes", size)
	}
	backend, err := h.repos.HTTPBackend(svc.write, slogWriter{h.log, project})
	if err != nil {
		h.gitError(w, r, err)
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

// authorizeGit applies the rules of serveGit: runners read the projects of
// jobs they hold; users read and push to the projects they are members of.
// A user's first accepted push (never the discovery before it) creates a
// hosted project, with the pusher as its owner (serveGit, createProject).
func (h *Hub) authorizeGit(ctx context.Context, p principal, project string, svc gitService) error {
	switch {
	case p.kind == store.TokenRunner && svc.write:
		return forbidden("runners cannot push; results travel as publications")
	case p.kind == store.TokenRunner:
		ok, err := h.runnerHoldsProject(ctx, p.runnerID, project)
		if err != nil {
			return err
		}
		if !ok {
			return forbidden("runner %s holds no attempt of a job on project %s", p.name, project)
		}
	default:
		var exists bool
		if err := h.store.Read(ctx, func(tx store.Tx) error {
			prj, err := tx.Project(project)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			exists = true
			return mayUseProject(tx, p, prj)
		}); err != nil {
			return err
		}
		switch {
		case exists:
		case !svc.write:
			return notFound("no project %s on the hub (drover run --repo pushes one)", project)
		default:
			// git needs a repository to advertise to a first push; the
			// project itself comes into being only with an accepted push
			// (serveGit), never with the discovery before it.
			if err := h.ensureRepo(ctx, project); err != nil {
				return err
			}
		}
	}
	if !h.repos.Exists(project) {
		return notFound("project %s has no repository on the hub (drover run --repo pushes one)", project)
	}
	return nil
}

// createProject records a hosted project pushed first by p, its owner. A
// project someone else created in the meantime needs p's membership.
func (h *Hub) createProject(ctx context.Context, p principal, project string) error {
	created := false
	err := h.store.Write(ctx, func(tx store.Tx) error {
		created = false
		prj, err := tx.Project(project)
		if err == nil {
			return mayUseProject(tx, p, prj)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		now := h.now()
		if err := tx.PutProject(store.Project{Name: project, OwnerID: p.userID, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		created = true
		// The store may add the owner with the project.
		if err := tx.AddMember(project, p.userID, now); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create project %s: %w", project, err)
	}
	if created {
		h.log.Info("project created by its first push", "project", project, "owner", p.name)
	}
	return nil
}

// runnerHoldsProject reports whether the runner holds an active attempt of
// a job on the project.
func (h *Hub) runnerHoldsProject(ctx context.Context, runnerID, project string) (bool, error) {
	var ok bool
	err := h.store.Read(ctx, func(tx store.Tx) error {
		as, err := tx.RunnerActiveAttempts(runnerID)
		if err != nil {
			return err
		}
		for _, a := range as {
			j, err := tx.Job(a.JobID)
			if err != nil {
				return err
			}
			if j.Project == project && j.AttemptID == a.ID {
				ok = true
				return nil
			}
		}
		return nil
	})
	return ok, err
}

// spoolGitBody copies a POST body to a temporary file within the transfer
// cap: net/http/cgi takes no chunked body, and a push is read twice.
func (h *Hub) spoolGitBody(w http.ResponseWriter, r *http.Request, svc gitService) (*os.File, int64, func(), error) {
	nothing := func() {}
	if r.Method != http.MethodPost {
		return nil, 0, nothing, nil
	}
	what := "the fetch negotiation"
	if svc.write {
		what = "the push"
	}
	if r.ContentLength > h.cfg.TransferCap {
		return nil, 0, nothing, h.tooLargeTransfer(what)
	}
	dir := h.scratch.dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, nothing, fmt.Errorf("spool git request: %w", err)
	}
	f, err := os.CreateTemp(dir, "git-*.body")
	if err != nil {
		return nil, 0, nothing, fmt.Errorf("spool git request: %w", err)
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }
	n, err := io.Copy(f, http.MaxBytesReader(w, r.Body, h.cfg.TransferCap))
	if err != nil {
		cleanup()
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, 0, nothing, h.tooLargeTransfer(what)
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
	case !workspace.ValidUploadRef(c.ref):
		return "users may only create refs under " + workspace.UploadRefPrefix + " (drover run --repo does this)"
	case c.new == workspace.ZeroID:
		return "refs cannot be deleted"
	case c.old != workspace.ZeroID:
		return "uploads are written once"
	}
	return ""
}

// checkPush refuses a push unless every ref update is allowed. A client
// that asked for a status report gets one, so git shows each ref's reason
// ("! [remote rejected] ... (reason)"); nothing reaches git http-backend.
func checkPush(w http.ResponseWriter, body io.Reader, encoding string) (bool, error) {
	cmds, caps, err := readPushCommands(body, encoding)
	if err != nil {
		return false, err
	}
	reasons := make([]string, len(cmds))
	refused := ""
	for i, c := range cmds {
		if reasons[i] = pushRefusal(c); reasons[i] != "" && refused == "" {
			refused = fmt.Sprintf("push to %s refused: %s", c.ref, reasons[i])
		}
	}
	if refused == "" {
		return true, nil
	}
	if !slices.Contains(caps, "report-status") && !slices.Contains(caps, "report-status-v2") {
		return false, forbidden("%s", refused)
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
	return false, nil
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

// gitError answers a git request in plain text, which git shows its user
// as "remote: ...".
func (h *Hub) gitError(w http.ResponseWriter, r *http.Request, err error) {
	ae := h.asAPIError(err)
	if ae.status < 500 {
		h.log.Info("git request refused", "method", r.Method, "path", r.URL.Path, "code", ae.code, "msg", ae.msg)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(ae.status)
	fmt.Fprintf(w, "drover: %s\n", ae.msg)
}

// slogWriter logs what git http-backend writes on stderr.
type slogWriter struct {
	log     *slog.Logger
	project string
}

func (s slogWriter) Write(p []byte) (int, error) {
	if msg := strings.TrimSpace(string(p)); msg != "" {
		s.log.Warn("git http-backend", "project", s.project, "msg", truncate(msg, 2000))
	}
	return len(p), nil
}
