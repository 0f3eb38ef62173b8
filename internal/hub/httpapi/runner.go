package httpapi

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// The runner's HTTP calls besides its WebSocket: their transport over the
// core's Transfers.

// staleHeadBody is the 409 answer to a publication that does not build on
// the job's head: an error body that also decodes as a PublishResult.
type staleHeadBody struct {
	apitypes.ErrorBody
	Head string `json:"head"`
}

// fencedRef reads (job, attempt, epoch) from a runner call's query.
func fencedRef(r *http.Request) (protocol.AttemptRef, error) {
	q := r.URL.Query()
	ref := protocol.AttemptRef{Job: q.Get("job"), Attempt: q.Get("attempt")}
	if q.Get("epoch") == "" {
		return ref, call.BadRequest("epoch is required")
	}
	epoch, err := queryInt(q, "epoch", 1, math.MaxInt64)
	if err != nil {
		return ref, err
	}
	ref.Epoch = epoch
	if err := ref.Validate(); err != nil {
		return ref, call.BadRequest("%v", err)
	}
	return ref, nil
}

// runnerContext serves a job's context files as a tar to the runner
// holding one of its active attempts.
func (a *API) runnerContext(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	ref, err := fencedRef(r)
	if err != nil {
		return err
	}
	files, err := a.core.ContextFiles(r.Context(), p, ref)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	tw := tar.NewWriter(w)
	for _, f := range files {
		hdr := &tar.Header{Name: f.Name, Mode: 0o644, Size: int64(len(f.Data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil // the client went away; the status is sent
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil
		}
	}
	_ = tw.Close()
	return nil
}

// publish serves POST /runner/publish: a runner's result (or checkpoint)
// as a git bundle in the body.
func (a *API) publish(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	ref, err := fencedRef(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	req := call.PublishRequest{Ref: ref, Commit: q.Get("commit"), Digest: q.Get("sha256"),
		Spool: func(digest string) (string, error) { return a.spoolBundle(w, r, digest) }}
	// Checked here too so that a bad id is refused before a bad checkpoint,
	// as it always was.
	if err := req.CheckIDs(); err != nil {
		return err
	}
	switch q.Get("checkpoint") {
	case "", "0":
	case "1":
		req.Checkpoint = true
	default:
		return call.BadRequest("checkpoint must be 0 or 1")
	}
	if sparse := q["sparse"]; len(sparse) > 0 {
		if err := protocol.CheckSparsePaths(sparse); err != nil {
			return call.BadRequest("sparse: %v", err)
		}
		req.Sparse = sparse
	}
	res, err := a.core.PublishBundle(r.Context(), p, req)
	var sh call.StaleHead
	if errors.As(err, &sh) {
		a.cfg.Logger.Info("publication on a stale head", "job", ref.Job, "attempt", ref.Attempt, "commit", req.Commit, "head", sh.Head)
		writeJSON(w, http.StatusConflict, staleHeadBody{
			ErrorBody: apitypes.ErrorBody{Error: rules.Error{Code: rules.ErrStaleHead,
				Message: fmt.Sprintf("the job's head is %s, which %s does not build on: fetch it, check it descends from the head you knew, continue from it", sh.Head, req.Commit)}},
			Head: sh.Head,
		})
		return nil
	}
	return reply(w, http.StatusOK, res, err)
}

// spoolBundle writes the request body to a temporary file, within the
// transfer cap, and checks its SHA-256. It returns the file's path.
func (a *API) spoolBundle(w http.ResponseWriter, r *http.Request, digest string) (string, error) {
	if r.ContentLength > a.cfg.TransferCap {
		return "", a.core.TooLargeTransfer("the publication")
	}
	dir := a.cfg.SpoolDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("spool publication: %w", err)
	}
	f, err := os.CreateTemp(dir, "publish-*.bundle")
	if err != nil {
		return "", fmt.Errorf("spool publication: %w", err)
	}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, sum), http.MaxBytesReader(w, r.Body, a.cfg.TransferCap))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return "", a.core.TooLargeTransfer("the publication")
		}
		return "", call.BadRequest("read the publication: %v", err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != digest {
		os.Remove(f.Name())
		return "", call.BadRequest("the publication's SHA-256 is %s, not the %s it was sent with (%d bytes arrived): the transfer was damaged; nothing was stored", got, digest, n)
	}
	return f.Name(), nil
}
