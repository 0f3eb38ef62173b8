// Package protocol holds the messages shared by the hub and its runners: the
// WebSocket frames of the runner gateway and the JSON bodies of the HTTP API.
// docs/protocol.md describes each message; keep the two in step.
//
// Version rule: Version changes only for an incompatible change. Adding an
// optional field is compatible; peers ignore fields they do not know. A hub
// refuses a runner whose protocol version differs with close code CloseVersion.
package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"strings"
	"time"

	"drover/internal/job"
	"drover/internal/rules"
)

// Version is the wire protocol version spoken on /api/v1/runner/connect.
const Version = 1

// Limits.
const (
	MaxFrame       = 2 << 20  // largest WebSocket frame either side accepts
	MaxLogChunk    = 1 << 20  // largest log chunk in one log request
	DefaultLogCap  = 64 << 20 // per-attempt log cap unless the hub says otherwise
	MaxHeldReports = 4096     // attempts in one hello or status
	MaxSlots       = 256      // slots one runner may offer
	MaxNotReady    = 256      // bytes of a runner's not-ready reason
	MaxVersion     = 64       // bytes of a runner's version
)

// WebSocket close codes the hub uses. The runner exits on CloseReplaced,
// CloseRevoked and CloseRefused instead of reconnecting.
const (
	CloseReplaced = 4000 // a newer connection of the same runner took over
	CloseRevoked  = 4001 // the runner's token was revoked
	CloseProtocol = 4002 // a malformed, oversize or unknown frame
	CloseVersion  = 4003 // protocol versions differ
	CloseDead     = 4004 // no heartbeat within the liveness window
	// CloseRefused refuses a well-formed hello for what it says (its
	// labels, slots, agents, accounts, version string, or labels outside
	// a launch's): the same hello would be refused again, so the runner
	// exits with the reason instead of reconnecting.
	CloseRefused = 4005
)

// Frame types.
const (
	// runner → hub
	TypeHello      = "hello"
	TypeStatus     = "status"
	TypeHeartbeat  = "heartbeat"
	TypeAccept     = "accept"     // request
	TypeDecline    = "decline"    // request
	TypeLog        = "log"        // request
	TypeFinish     = "finish"     // request
	TypeAsk        = "ask"        // request: the agent asks a person (see questions.go)
	TypeDeliver    = "deliver"    // request: the agent delivers its work
	TypeContext    = "context"    // request: read the job's live context
	TypeTurns      = "turns"      // request: record a model loop's turns (see turns.go)
	TypeTranscript = "transcript" // request: read the turns a resumed attempt continues
	// hub → runner
	TypeWelcome = "welcome"
	TypeOffer   = "offer"
	TypeCancel  = "cancel"
	TypeDrop    = "drop"
	TypeReply   = "reply"
	TypeQueue   = "queue" // whether a queued job the runner may run waits (Queue)
)

// IsRequest reports whether frames of type t carry an id and get a reply.
func IsRequest(t string) bool {
	switch t {
	case TypeAccept, TypeDecline, TypeLog, TypeFinish, TypeAsk, TypeDeliver, TypeContext, TypeTurns, TypeTranscript:
		return true
	}
	return false
}

// Frame is the envelope of every WebSocket message, one JSON object per
// text message.
type Frame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`       // request id, chosen by the runner, unique per runner
	ReplyTo string          `json:"reply_to,omitempty"` // on replies: the request id
	Body    json.RawMessage `json:"body,omitempty"`
}

// NewFrame encodes body into a frame.
func NewFrame(typ, id string, body any) (Frame, error) {
	f := Frame{Type: typ, ID: id}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return f, fmt.Errorf("encode %s frame: %w", typ, err)
		}
		f.Body = b
	}
	return f, nil
}

// Decode unmarshals the frame's body into v.
func (f Frame) Decode(v any) error {
	if len(f.Body) == 0 {
		return fmt.Errorf("%s frame has no body", f.Type)
	}
	if err := json.Unmarshal(f.Body, v); err != nil {
		return fmt.Errorf("decode %s frame: %w", f.Type, err)
	}
	return nil
}

// AttemptRef names one attempt and the fencing epoch it was offered under.
// Every runner→hub mutation carries one; the hub refuses a stale epoch.
type AttemptRef struct {
	Job     string `json:"job"`
	Attempt string `json:"attempt"`
	Epoch   int64  `json:"epoch"`
}

func (r AttemptRef) String() string { return fmt.Sprintf("%s/%s@%d", r.Job, r.Attempt, r.Epoch) }

// Validate checks that the reference is well formed.
func (r AttemptRef) Validate() error {
	if r.Job == "" || r.Attempt == "" || r.Epoch <= 0 || len(r.Job) > 64 || len(r.Attempt) > 64 {
		return fmt.Errorf("attempt reference %q is malformed", r.String())
	}
	return nil
}

// Phases a runner reports for an attempt it holds.
const (
	PhaseOffered   = "offered"   // offer received, accept not yet confirmed
	PhaseRunning   = "running"   // accept confirmed; claimed in the journal, agent running or about to
	PhaseFinishing = "finishing" // agent ended; receipt written, finish not yet acknowledged
)

// Held is one attempt a runner holds, as listed in hello and status.
type Held struct {
	AttemptRef
	Phase string `json:"phase"`
}

// Hello is the runner's first frame after the WebSocket opens.
type Hello struct {
	Protocol      int               `json:"protocol"`
	RunnerVersion string            `json:"runner_version"`
	Slots         int               `json:"slots"`
	Labels        map[string]string `json:"labels,omitempty"`
	Attempts      []Held            `json:"attempts"`
	// Agents are the agents the runner can run now: exec, and each vendor
	// CLI that is installed with an account that is not limited. A hello
	// without it (an older runner) means exec only. The hub offers a job
	// only to a runner that lists its agent.
	Agents []string `json:"agents,omitempty"`
	// Accounts describe the runner's agent accounts (never a secret).
	Accounts []AccountInfo `json:"accounts,omitempty"`
	// NotReady, when set, says why the runner takes no offers now though
	// it is connected (e.g. its disk is below its free-space floor). The
	// hub offers it nothing and shows the reason until a status clears it.
	NotReady string `json:"not_ready,omitempty"`
	// WantQueue asks the hub for queue frames (Queue): a draining runner
	// exits on them.
	WantQueue bool `json:"want_queue,omitempty"`
	// Images are the container images a job may name on this runner
	// (rules.CheckImagePatterns: exact, or a prefix ending in '*'). None
	// (an older runner, or one without containers): it takes only jobs
	// that name no image.
	Images []string `json:"images,omitempty"`
}

// AccountInfo is one agent account of a runner as the hub sees it.
type AccountInfo struct {
	ID           string    `json:"id"`
	Agent        string    `json:"agent"`
	Label        string    `json:"label,omitempty"`
	Kind         string    `json:"kind"`  // login, api-key or no-key
	State        string    `json:"state"` // ready, limited, needs login or needs attention; only ready runs jobs
	LimitedUntil time.Time `json:"limited_until,omitzero"`
}

// Account states.
const (
	AccountReady   = "ready"
	AccountLimited = "limited"
	// AccountNeedsLogin: a login account whose vendor login is missing or
	// expired (its owner runs the CLI's login on the runner).
	AccountNeedsLogin = "needs login"
	// AccountNeedsAttention: the provider refused the account (auth_failed);
	// it runs nothing until its owner fixes it and resets it.
	AccountNeedsAttention = "needs attention"
)

// Bounds of the agents and accounts a runner reports.
const (
	MaxAgents   = 32
	MaxAccounts = 256
	MaxModel    = 128 // bytes of a model name (a job's, an account's)
)

// Welcome is the hub's answer to hello. It dictates the runner's timing so
// operators tune without redeploying runners, and lists attempts the runner
// must drop before it resends anything.
type Welcome struct {
	Protocol          int         `json:"protocol"`
	RunnerID          string      `json:"runner_id"`
	RunnerName        string      `json:"runner_name"`
	HeartbeatInterval Duration    `json:"heartbeat_interval"`
	Lease             Duration    `json:"lease"`
	LogFlushInterval  Duration    `json:"log_flush_interval"`
	LogBatchBytes     int         `json:"log_batch_bytes"`
	LogChunkBytes     int         `json:"log_chunk_bytes"`
	LogCap            int64       `json:"log_cap"`
	TransferCap       int64       `json:"transfer_cap,omitempty"` // largest source or result transfer (bytes)
	Drop              []DropOrder `json:"drop,omitempty"`
	// IdleHeartbeatInterval, when set, lets a runner holding no attempts
	// heartbeat this seldom, with IdleHeartbeatFrame (docs/protocol.md,
	// Liveness). A hub that leaves it out expects HeartbeatInterval always.
	IdleHeartbeatInterval Duration `json:"idle_heartbeat_interval,omitempty"`
}

// Status is sent whenever what the runner holds changes (coalesced). Listing
// an offered attempt acknowledges the offer. Slots 0 means the runner is
// draining (stopping): the hub sends it no more offers.
type Status struct {
	Slots    int    `json:"slots"`
	Attempts []Held `json:"attempts"`
	// Agents and Accounts as in Hello; nil Agents leaves them as they were.
	Agents   []string      `json:"agents,omitempty"`
	Accounts []AccountInfo `json:"accounts,omitempty"`
	// NotReady as in Hello; every status carries it ("": ready).
	NotReady string `json:"not_ready,omitempty"`
}

// JobSpec is what a runner needs to run a job. It never carries secrets.
type JobSpec struct {
	Agent     string            `json:"agent"`
	Args      []string          `json:"args"`
	Labels    map[string]string `json:"labels,omitempty"`
	Requester string            `json:"requester"`
	LogCap    int64             `json:"log_cap"`
	Timeout   Duration          `json:"timeout,omitempty"`
	// Repo is the source the job works on; nil for a job without a
	// repository (it gets an empty working directory).
	Repo *RepoSpec `json:"repo,omitempty"`
	// Mode is ModeFix (publish the agent's changes) or ModeObserve (the
	// worktree must come back unchanged).
	Mode string `json:"mode,omitempty"`
	// Context lists the job's attached context files (fetched separately
	// with GET /api/v1/runner/context; only names and sizes travel here).
	Context []ContextFile `json:"context,omitempty"`
	// Tools: the agent gets drover's tool server (ask, checkpoint, deliver,
	// context), and only a deliver completes the job: a finish "completed"
	// without one is recorded as failed (not_delivered). Set when the job
	// was submitted with tools, as every vendor agent adapter will be.
	Tools bool `json:"tools,omitempty"`
	// Resume is set when an approved answer requeued the job after its
	// agent asked: continue that conversation (see ResumeSpec).
	Resume *ResumeSpec `json:"resume,omitempty"`
	// Account pins a vendor agent's job to the runner account with this id
	// or label: the runner uses no other, and releases the attempt as
	// limited when that one is not ready.
	Account string `json:"account,omitempty"`
	// Model is the model a native agent's job asks for; "" is its
	// account's. Only a model name: the endpoint is the operator's.
	Model string `json:"model,omitempty"`
	// Fallback is the account of this runner the hub found for the job's
	// fallback, one its requester may use ("" for none here).
	Fallback string `json:"fallback,omitempty"`
	// Network is the network of a job on a project, resolved by the hub
	// from the operator's policies, the project's choice and the job's
	// narrowing. Nil: no network beyond what a vendor agent needs for its
	// model (a job without a project, or an older hub).
	Network *NetworkSpec `json:"network,omitempty"`
	// Setup is the project's setup, run in the attempt's sandbox before
	// the agent under Network.Setup; nil for none.
	Setup *SetupSpec `json:"setup,omitempty"`
	// Caches name the project's dependency caches the runner keeps for it
	// between attempts and mounts read-write into its sandbox: go, npm,
	// pip, cargo, or a directory name of the project's own.
	Caches []string `json:"caches,omitempty"`
	// Image is the container image the job's sandbox runs ("": the
	// runner's own); the hub offers it only to a runner whose Hello.Images
	// allow it, and the runner refuses one they do not.
	Image string `json:"image,omitempty"`
}

// NetworkSpec is the network of each phase of an attempt.
type NetworkSpec struct {
	Setup PhaseNetwork `json:"setup"`
	Agent PhaseNetwork `json:"agent"`
	// Catalog is the operator's named policies (name → host patterns),
	// so that a refusal says which policy would let a host through.
	Catalog map[string][]string `json:"catalog,omitempty"`
}

// PhaseNetwork is what one phase may reach: no network when Policies is
// empty, every host when Open.
type PhaseNetwork struct {
	Policies []string `json:"policies"`
	Allow    []string `json:"allow,omitempty"` // host[:port] patterns of the policies
	Open     bool     `json:"open,omitempty"`
}

// SetupSpec is a project's setup phase.
type SetupSpec struct {
	Commands []string `json:"commands"` // each run with sh -c, in order, in the worktree
	Timeout  Duration `json:"timeout"`  // for all of them together
	// KeyFiles are the worktree files the setup's result depends on (its
	// lockfiles): a runner that ran the same commands successfully for
	// the project with the same contents of these files skips the setup
	// (its result is in the project's caches). None: setup always runs.
	KeyFiles []string `json:"key_files,omitempty"`
	// File is a script of the repository, relative to the worktree, that
	// the project's owner enabled: run with sh after Commands, in the
	// sandbox, from the job's commit. "" for none.
	File string `json:"file,omitempty"`
	// FileApproved are the SHA-256 digests (SetupFileHash) of the
	// versions of File the project's owner approved: only such a version
	// runs with the project's secrets (a member's commit can change it).
	FileApproved []string `json:"file_approved,omitempty"`
	// Credentials are the operator's registry credentials of the setup
	// policies in force. They are the one secret an offer carries (over
	// the runner's authenticated connection): the runner hands them to
	// the setup sandbox's egress proxy only, never to the sandbox, its
	// log, its journal or the hub's views.
	Credentials []SetupCredential `json:"credentials,omitempty"`
}

// SetupCredential is a registry key the egress proxy adds to requests to
// Upstream sent to the endpoint in $BaseURLEnv with the placeholder in
// $KeyEnv (the same mechanism as model keys).
type SetupCredential struct {
	Name       string `json:"name"`
	Policy     string `json:"policy"` // the setup policy that brings it
	Upstream   string `json:"upstream"`
	Header     string `json:"header"`
	Prefix     string `json:"prefix,omitempty"`
	Key        string `json:"key"`
	KeyEnv     string `json:"key_env"`
	BaseURLEnv string `json:"base_url_env"`
	// Secret marks a project secret (not an operator's credential): a
	// repository setup script gets it only in a version its owner approved.
	Secret bool `json:"secret,omitempty"`
}

// String never shows the key, so that a logged spec leaks nothing.
func (c SetupCredential) String() string { return "credential " + c.Name + " for " + c.Upstream }

// CacheVars names the variables that point a known cache's tool at its
// directory (false for a cache of the project's own naming).
func CacheVars(name string) ([]string, bool) {
	switch name {
	case "go":
		return []string{"GOMODCACHE", "GOCACHE"}, true
	case "npm":
		return []string{"npm_config_cache"}, true
	case "pip":
		return []string{"PIP_CACHE_DIR"}, true
	case "cargo":
		return []string{"CARGO_HOME"}, true
	}
	return nil, false
}

// CheckCacheName accepts a known cache or a directory name of the
// project's own: letters, digits, '.', '_' and '-', at most 64, not "." or
// "..".
func CheckCacheName(name string) error {
	if _, ok := CacheVars(name); ok {
		return nil
	}
	ok := name != "" && len(name) <= 64 && name != "." && name != ".."
	for _, r := range name {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}
	if !ok {
		return fmt.Errorf("cache %q: want go, npm, pip, cargo or a directory name (letters, digits, '.', '_', '-'; at most 64)", name)
	}
	return nil
}

// MaxSparsePaths bounds the folders of a sparse checkout.
const MaxSparsePaths = 64

// CheckSparsePaths accepts the folders of a cone-mode sparse checkout:
// clean relative paths inside the repository, of letters, digits and
// "._-+@/", at most 256 bytes each (no pattern characters, which cone
// mode would take literally or refuse).
func CheckSparsePaths(paths []string) error {
	if len(paths) > MaxSparsePaths {
		return fmt.Errorf("at most %d sparse paths", MaxSparsePaths)
	}
	for _, p := range paths {
		ok := p != "" && len(p) <= 256 && path.Clean(p) == p && !path.IsAbs(p) && p != "." && p != ".." && !strings.HasPrefix(p, "../")
		for _, r := range p {
			ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-+@/", r))
		}
		if !ok || p == ".git" || strings.HasPrefix(p, ".git/") {
			return fmt.Errorf("sparse path %q: want a folder inside the repository (a clean relative path of letters, digits and ._-+@/)", p)
		}
	}
	return nil
}

// CheckSecretName accepts a project secret's name: a lower-case letter,
// then lower-case letters, digits and '_', at most 32.
func CheckSecretName(name string) error {
	ok := name != "" && len(name) <= 32 && name[0] >= 'a' && name[0] <= 'z'
	for _, r := range name {
		ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
	}
	if !ok {
		return fmt.Errorf("secret name %q: want a lower-case letter, then lower-case letters, digits and '_' (at most 32)", name)
	}
	return nil
}

// SecretEnv is the variable that holds a project secret's placeholder in
// the setup sandbox; the variable with "_URL" after it holds the endpoint
// its requests go to.
func SecretEnv(name string) string { return "DROVER_SECRET_" + strings.ToUpper(name) }

// SetupFileHash is the digest by which a project's owner approves a
// version of its repository's setup script: the SHA-256 of its contents,
// in hex (what sha256sum prints).
func SetupFileHash(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// CheckSetupHash accepts a setup script's digest (64 hex digits) and
// returns it in lower case.
func CheckSetupHash(h string) (string, error) {
	l := strings.ToLower(strings.TrimSpace(h))
	if len(l) != sha256.Size*2 || strings.Trim(l, "0123456789abcdef") != "" {
		if len(h) > 80 {
			h = h[:80] + "..."
		}
		return "", fmt.Errorf("setup script digest %q: want the SHA-256 of the script, 64 hex digits (sha256sum FILE)", h)
	}
	return l, nil
}

// CheckKeyFile accepts a setup key file: a clean relative path in the
// worktree, without "..".
func CheckKeyFile(name string) error {
	if name == "" || len(name) > 256 || strings.HasPrefix(name, "/") || path.Clean(name) != name ||
		name == ".." || strings.HasPrefix(name, "../") || strings.ContainsAny(name, "\x00\n\\") {
		return fmt.Errorf("setup key file %q: want a clean path relative to the worktree, e.g. go.sum", name)
	}
	return nil
}

// Bounds of a project's setup and caches.
const (
	MaxSetupCommands    = 32
	MaxSetupCommand     = 4096
	MaxCaches           = 16
	MaxSecrets          = 16   // per project
	MaxSecretLen        = 4096 // bytes of a secret's value
	MinSecretLen        = 8    // shorter values could not be told from other text, so not stripped from answers
	MaxSetupApproved    = 32   // approved versions of a project's setup script
	DefaultSetupTimeout = 10 * time.Minute
	MaxSetupTimeout     = 2 * time.Hour
)

// Modes of a job with a repository.
const (
	ModeFix     = "fix"
	ModeObserve = "observe"
)

// RepoSpec names a job's exact source.
type RepoSpec struct {
	Project string `json:"project"` // the hub's project (one bare repository each)
	Base    string `json:"base"`    // full commit id the job starts from
	Head    string `json:"head"`    // the job's latest published commit (Base before any)
	// URL is where the runner fetches commits by id: the hub's smart HTTP
	// endpoint {hub}/git/{project} (runner token), or a remote the project
	// is mapped to, fetched with the runner's own credentials (Remote true).
	URL    string `json:"url"`
	Remote bool   `json:"remote,omitempty"`
	// Large says the hub serves the project as a partial clone: the runner
	// fetches commits and trees, and blobs only as a checkout needs them.
	Large bool `json:"large,omitempty"`
	// Sparse makes the job's worktree a cone-mode sparse checkout of
	// these folders (the project's default).
	Sparse []string `json:"sparse,omitempty"`
}

// ContextFile is one file attached to a job.
type ContextFile struct {
	Name string `json:"name"` // relative, clean, no ".."
	Size int64  `json:"size"`
}

// Publication limits.
const (
	DefaultTransferCap = 64 << 20 // source and result transfers
)

// PublishResult answers POST /api/v1/runner/publish: the job's head after
// the publication. On 409 with code ErrStaleHead, Head is the newer head
// the hub already holds (a reply was lost): fetch it, check it descends from
// the last head you knew, continue from it.
type PublishResult struct {
	Head       string `json:"head"`
	Checkpoint int    `json:"checkpoint,omitempty"` // number of the checkpoint ref, when one was made
}

// Offer hands an attempt to a runner. A repeated offer (same attempt) is the
// same attempt, never a second run.
type Offer struct {
	AttemptRef
	Spec JobSpec `json:"spec"`
	// Account is the account the hub chose by its owner's preference
	// order (a vendor agent's job); the runner uses it unless it is no
	// longer ready or the attempt resumes a session in another.
	Account string `json:"account,omitempty"`
}

// Queue tells a runner that asked for it (Hello.WantQueue) whether a queued job it may run is waiting after a
// dispatch pass, whatever its free slots or readiness. The hub sends it
// after the first pass that follows the welcome and then whenever it
// changes; a draining runner exits once it has held nothing and been told
// Waiting false for its grace period.
type Queue struct {
	Waiting bool `json:"waiting"`
}

// CancelOrder asks the runner to stop an attempt and finish it as cancelled.
type CancelOrder struct {
	AttemptRef
	Reason string `json:"reason"`
}

// DropOrder tells a runner an attempt is no longer its own (fenced): stop it
// and do not report a result.
type DropOrder struct {
	AttemptRef
	Reason string `json:"reason"`
}

// Accept asks the hub to confirm an offer. The agent starts only after the
// hub's ok reply.
type Accept struct {
	AttemptRef
}

// Decline refuses an offer; the job goes back to the queue.
type Decline struct {
	AttemptRef
	Reason string `json:"reason"`
}

// Log appends Data to the attempt's log at byte Offset. A chunk at the wrong
// offset is refused with ErrOffset and the hub's size, so the runner resyncs.
type Log struct {
	AttemptRef
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"` // base64 in JSON
}

// LogAck is the reply to a log request.
type LogAck struct {
	Size int64 `json:"size"`
}

// Finish is the last call of an attempt. It is idempotent.
type Finish struct {
	AttemptRef
	Outcome   job.Outcome `json:"outcome"`
	LogSize   int64       `json:"log_size"`
	LogSHA256 string      `json:"log_sha256"` // hex
	// Isolation is what the runner's execution boundary actually applied,
	// stored with the attempt so that a claim of isolation is auditable.
	Isolation *Isolation `json:"isolation,omitempty"`
	// Session is the agent's session id, kept with the attempt so that a
	// later attempt can resume the conversation (ResumeSpec.Session).
	Session string `json:"session,omitempty"`
	// Usage is what a vendor agent reported it consumed.
	Usage *Usage `json:"usage,omitempty"`
}

// Usage is what an attempt's agent consumed, as its CLI reported it (CLIs
// that report no cost leave CostUSD zero).
type Usage struct {
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64   `json:"cache_write_tokens,omitempty"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
}

// Add returns u plus v, for CLIs that report usage per step.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		CostUSD:          u.CostUSD + v.CostUSD,
	}
}

// Check bounds a reported usage.
func (u Usage) Check() error {
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 || u.CostUSD < 0 || u.CostUSD > 1e9 {
		return fmt.Errorf("usage out of bounds: %+v", u)
	}
	return nil
}

// Isolation describes the isolation a boundary applied. Values are short
// human-readable words, not promises.
type Isolation struct {
	Kind       string `json:"kind"` // bwrap, docker, podman, none
	Version    string `json:"version,omitempty"`
	Network    string `json:"network"`
	Filesystem string `json:"filesystem"`
	User       string `json:"user"`
	Limits     string `json:"limits"`
	// Policy is the network policy each phase ran under, "agent: go,npm;
	// setup: go" ("OPEN" for the open policy), set by the runner for a job
	// with a network spec.
	Policy string `json:"policy,omitempty"`
	// Denials are the hosts the egress proxy refused, per phase.
	Denials []Denial `json:"denials,omitempty"`
	// Caches name the project caches mounted, and SetupReused is set when
	// the setup result of an earlier attempt was reused.
	Caches      []string `json:"caches,omitempty"`
	SetupReused bool     `json:"setup_reused,omitempty"`
}

// Denial is one host:port the egress proxy refused during an attempt.
type Denial struct {
	Host  string `json:"host"`
	Phase string `json:"phase"` // setup or agent
	Count int    `json:"count"`
	// Allow is the command that lets the project reach Host (the hub sets
	// it in job views, from its current policies).
	Allow string `json:"allow,omitempty"`
}

// MaxDenials bounds the denials one attempt reports.
const MaxDenials = 64

// FinishAck is the reply to finish.
type FinishAck struct {
	AlreadyFinished bool `json:"already_finished,omitempty"`
}

// Reply answers one request.
type Reply struct {
	OK    bool            `json:"ok"`
	Error *rules.Error    `json:"error,omitempty"`
	Body  json.RawMessage `json:"body,omitempty"`
}

// Duration is a time.Duration that travels as integer milliseconds.
type Duration time.Duration

// D returns the standard library duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Milliseconds())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration must be integer milliseconds: %w", err)
	}
	// Found by FuzzDuration: the multiplication below wraps around for
	// |ms| over about 292 years, and a wrapped value can land anywhere,
	// e.g. expires_in_ms 18446744073710 would pass for 0.4 ms.
	if ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
		return fmt.Errorf("duration of %d ms is out of range", ms)
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}
