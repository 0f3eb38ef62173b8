package protocol

import (
	"context"
	"io"
)

// Transfers is the part of the runner protocol whose bodies are too large
// for a frame: a publication (a git bundle) and a job's context files.
// They travel over HTTP beside the WebSocket (docs/protocol.md,
// Publication and Context), each naming its attempt as every runner
// mutation does, and are fenced like the calls of Hub. client.Client
// carries them; protocoltest.Hub fakes them; protocoltest.Contract holds
// for both and for the real hub. A refusal is an *Error; any other error
// means no answer came.
type Transfers interface {
	// Publish offers p's bundle as the job's next head (or a checkpoint).
	// Flow: one request whose body streams from p.Bundle, answered by the
	// job's head once the hub verified and stored it; a transfer that
	// fails before an answer is sent again from offset 0 (the hub
	// deduplicates by commit: publishing the job's head again answers that
	// head). A bundle that does not build on the job's head is refused
	// with a *StaleHeadError naming the head to continue from.
	// Cancellation: ctx ends the upload and the wait; the hub may still
	// have applied it, which the next publication of the same commit (or
	// its stale head) tells.
	Publish(ctx context.Context, ref AttemptRef, p Publication) (PublishResult, error)

	// ContextFiles hands the job's context files to file one at a time,
	// each a regular file with a checked name (CheckContextName) within
	// MaxContextFiles, MaxContextFile and MaxContextTotal; an error of
	// file ends the download with that error.
	// Flow: one read-only request, sent again until the hub answers; the
	// answer's body streams into file and is not sent again once it began
	// (the caller starts over). Cancellation: ctx ends the request and the
	// stream; nothing at the hub changes either way.
	ContextFiles(ctx context.Context, ref AttemptRef, file func(name string, data io.Reader) error) error
}

// Publication is a git bundle to publish: its tip commit (the only ref it
// advertises), the SHA-256 of its bytes, whether it is a checkpoint (work
// in progress), and the cone of a sparse worktree (nil: whole).
type Publication struct {
	Commit     string
	SHA256     string // hex, of the Size bytes of Bundle
	Checkpoint bool
	Sparse     []string
	// Bundle is read from offset 0 by every try: a retry after a broken
	// transfer sends it again whole.
	Bundle io.ReaderAt
	Size   int64
}

// StaleHeadError refuses a publication that does not build on the job's
// head (a reply to an earlier one was lost): Head is the head the hub
// holds. The runner fetches it, checks it descends from the head it knew,
// and continues from it. Err is the refusal (code ErrStaleHead).
type StaleHeadError struct {
	Head string
	Err  error
}

func (e *StaleHeadError) Error() string { return e.Err.Error() }
func (e *StaleHeadError) Unwrap() error { return e.Err }
