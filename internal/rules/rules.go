package rules

// Limits.
const (
	MaxArgs      = 1024 // argv entries in a job
	MaxArgsBytes = 256 << 10
	MaxLabels    = 64
	MaxLabelLen  = 128
	// MaxJSONDepth bounds how deeply the objects and arrays of a request
	// body or frame nest (CheckJSON): far deeper than any message drover
	// writes, and shallow enough that checking stays linear in the size.
	MaxJSONDepth = 64
)

// Publication limits.
const (
	MaxContextFiles = 100
	MaxContextFile  = 8 << 20
	MaxContextTotal = 16 << 20
)

// Error codes shared by the gateway and the HTTP API.
const (
	ErrBadRequest    = "bad_request"     // malformed input; nothing changed
	ErrUnauthorized  = "unauthorized"    // missing, bad or revoked token
	ErrForbidden     = "forbidden"       // valid token without the right
	ErrNotFound      = "not_found"       // no such job, attempt, user or runner
	ErrFenced        = "fenced"          // stale epoch or not this runner's attempt
	ErrConflict      = "conflict"        // the request conflicts with the current state
	ErrOffset        = "offset_mismatch" // log chunk at the wrong offset; Size holds the hub's
	ErrLogIncomplete = "log_incomplete"  // finish before the whole log arrived; Size holds the hub's
	ErrTooLarge      = "too_large"       // over a size limit
	ErrStaleHead     = "stale_head"      // publish: the hub holds a newer head (in the body's "head")
	ErrNoSpace       = "no_space"        // the hub's disk is full: nothing was stored; retry later (HTTP 507)
	ErrInternal      = "internal"
)

// Error is the error body of a reply or an HTTP response.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Size    *int64 `json:"size,omitempty"` // for ErrOffset and ErrLogIncomplete
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }
