package apitypes

import (
	"time"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// HTTP API under /api/v1. Every call carries "Authorization: Bearer TOKEN".
// Errors are {"error": Error} with a matching HTTP status.
//
//	POST /api/v1/jobs                  SubmitRequest → 201 JobView (200 when Key matched an existing job)
//	GET  /api/v1/jobs?state=S&limit=N  → JobList
//	GET  /api/v1/jobs/{id}?events=1    → JobView (with its events when events=1)
//	POST /api/v1/jobs/{id}/cancel      → JobView
//	POST /api/v1/jobs/{id}/retry       → JobView
//	POST /api/v1/jobs/{id}/answer      AnswerRequest → JobView (requester: approved at once; others: awaits approval)
//	POST /api/v1/jobs/{id}/approve     → JobView (requester only: approves the answer awaiting approval)
//	POST /api/v1/jobs/{id}/restart     → JobView (requester or admin: start over from the base)
//	GET  /api/v1/questions             → QuestionList (what waits on the caller)
//	GET  /api/v1/jobs/{id}/log?attempt=N&offset=X&wait=MS  → raw bytes, see LogHeader*
//	GET  /api/v1/jobs/{id}/events?after=SEQ → EventList
//	GET  /api/v1/whoami                → Whoami
//	POST /api/v1/users                 NewUserRequest → 201 NewUserResponse (admin only)
//	GET  /api/v1/users                 → UserList (admin: all; others: themselves)
//	DELETE /api/v1/users/{name}        → UserView (admin only: tokens revoked, runners revoked, jobs cancelled)
//	POST /api/v1/users/{name}/token    → NewUserResponse (rotate: the user themselves or an admin)
//	GET  /api/v1/runners               → RunnerList (runners the caller owns or may use; admin: all)
//	POST /api/v1/runners/approve       ApproveRequest → ApproveResponse (409 when the name is taken and not Replace)
//	POST /api/v1/runners/{name}/revoke → RunnerView
//	POST /api/v1/runners/{name}/share  ShareRequest → RunnerView (owner or admin; hub: admin, for an admin's runner)
//	POST /api/v1/runners/{name}/unshare ShareRequest → RunnerView
//	POST /api/v1/accounts/share        AccountShareRequest → AccountList (the runner's owner or admin)
//	POST /api/v1/accounts/unshare      AccountShareRequest → AccountList
//	GET  /api/v1/runner/login          (runner token) → 200 RunnerView once approved (its Name is the
//	                                   runner's name from then on), 401 unauthorized before
//	GET  /api/v1/runner/connect        (runner token) → WebSocket, see Frame
//	POST /api/v1/runner/publish?job=&attempt=&epoch=&commit=&sha256=&checkpoint=0|1  (runner token)
//	                                   body: a git bundle → PublishResult (409 stale_head with the head)
//	GET  /api/v1/runner/context?job=&attempt=&epoch=  (runner token) → tar of the job's context files
//	GET  /api/v1/projects              → ProjectList
//	PUT  /api/v1/projects/{name}       MapProjectRequest → ProjectView (admin only)
//	GET  /api/v1/projects/{name}/members → MemberList (members and admin)
//	POST /api/v1/projects/{name}/members MemberRequest → MemberList (owner or admin)
//	DELETE /api/v1/projects/{name}/members/{user} → MemberList (owner or admin)
//	GET  /api/v1/forges                → ForgeList (any user; never a credential)
//	PUT  /api/v1/forges/{name}         ForgeRequest → ForgeView (admin only)
//	DELETE /api/v1/forges/{name}       → ForgeView (admin only; refused while a project maps to it)
//	PUT  /api/v1/forges/{name}/oauth   ForgeOAuthRequest → ForgeOAuthView (admin only; the secret never comes back)
//	GET  /api/v1/oidc                  → OIDCProviderList (any user; never a secret)
//	PUT  /api/v1/oidc/{name}           OIDCProviderRequest → OIDCProviderView (admin only; the secret never comes back)
//	DELETE /api/v1/oidc/{name}         → OIDCProviderView (admin only; removes its links)
//	GET  /api/v1/users/{name}/oidc-links → OIDCLinkList (admin or the user)
//	POST /api/v1/users/{name}/oidc-links OIDCLinkRequest → OIDCLinkView (admin only)
//	DELETE /api/v1/users/{name}/oidc-links/{provider}?subject= → OIDCLinkView (admin only)
//	POST /api/v1/jobs/{id}/publish     PublishRequest → PublicationView (the requester, the project's owner
//	                                   or an admin; 202 while the forge is retried)
//	GET  /api/v1/projects/{name}/config → ProjectConfig (members and admin)
//	PUT  /api/v1/projects/{name}/config ProjectConfigRequest → ProjectConfig (owner or admin)
//	GET|POST /approve?name=&key=       the runner login link's HTML page and its form (signed in, or a user token in the form)
//	GET  /metrics                      Prometheus text format (with the operator's metrics token)
//	/, /signin, /jobs, /runners, ...   the web pages (internal/web; a session cookie, not a token)
//	GET|POST /git/{project}/...        git smart HTTP (users: read, push to refs/drover/uploads/*;
//	                                   runners: read projects of jobs they hold)
const APIPrefix = "/api/v1"

// Log response headers.
const (
	HeaderLogAttempt  = "X-Drover-Attempt"        // attempt number the bytes belong to
	HeaderLogOffset   = "X-Drover-Log-Offset"     // offset of the first byte returned
	HeaderLogSize     = "X-Drover-Log-Size"       // bytes the hub holds for the attempt so far
	HeaderLogComplete = "X-Drover-Log-Complete"   // "true" when the attempt ended and every byte was returned
	HeaderJobState    = "X-Drover-Job-State"      // the job's state when the response was made
	HeaderLatest      = "X-Drover-Latest-Attempt" // the job's newest attempt number (0 before the first offer)
)

// SubmitRequest creates a job.
type SubmitRequest struct {
	Agent  string            `json:"agent"`
	Args   []string          `json:"args"`
	Labels map[string]string `json:"labels,omitempty"` // runner labels the job needs
	Key    string            `json:"key,omitempty"`    // idempotency key: the same key returns the same job
	// Repo: the project and exact base commit (already pushed to the hub,
	// or reachable at the project's mapped remote). Nil for no repository.
	Repo *SubmitRepo `json:"repo,omitempty"`
	Mode string      `json:"mode,omitempty"` // fix (default with a repo) or observe
	// Context files travel with the submission and are stored with the job
	// (limits: MaxContextFiles, MaxContextFile, MaxContextTotal; see
	// CheckContextFile).
	Context []rules.ContextUpload `json:"context,omitempty"`
	// Tools gives the agent drover's tool server; the job then completes
	// only through deliver (see JobSpec.Tools).
	Tools bool `json:"tools,omitempty"`
	// Account pins a vendor agent's job to one runner account (its id or
	// label): the job runs only there, and waits while it is limited.
	Account string `json:"account,omitempty"`
	// Network narrows the agent phase's network policies on a project:
	// ["none"], or some of the policies the project allows; nil keeps the
	// project's. A policy the project does not allow is refused.
	Network []string `json:"network,omitempty"`
	// Model asks a native agent's job for this model instead of its
	// account's (the account's provider and base URL stay).
	Model string `json:"model,omitempty"`
	// Fallback names a native agent's job's fallback account (its id or
	// label): when the account it runs under is limited or unavailable,
	// it continues the same transcript there, on the same runner.
	Fallback string `json:"fallback,omitempty"`
	// Sparse makes the job's worktree a cone-mode sparse checkout of these
	// folders of its repository (instead of its project's default).
	Sparse []string `json:"sparse,omitempty"`
	// Image is the container image the job runs in (rules.CheckImage); it
	// is offered only to a runner whose allow-list offers that image.
	Image string `json:"image,omitempty"`
}

// ProjectView is a project as the API shows it: hosted on the hub (Remote
// empty) or mapped to a remote URL runners fetch from themselves.
type ProjectView struct {
	Name   string `json:"name"`
	Remote string `json:"remote,omitempty"`
	Hosted bool   `json:"hosted"` // the hub has a bare repository for it
	Owner  string `json:"owner,omitempty"`
}

// ProjectList is the answer to GET /projects.
type ProjectList struct {
	Projects []ProjectView `json:"projects"`
}

// MapProjectRequest maps a project to a remote URL (PUT /projects/{name},
// admin only); an empty Remote makes it hub-hosted again. The hub requires
// the key, so that a body of null or {} is refused rather than unmapping.
type MapProjectRequest struct {
	Remote string `json:"remote"`
}

// SubmitRepo names a job's source at submit time.
type SubmitRepo struct {
	Project string `json:"project"`
	Base    string `json:"base"`
	// FromPR starts the job at the head of pull request FromPR on the
	// project's forge (Base empty) and publishes its result back onto it.
	FromPR int `json:"from_pr,omitempty"`
}

// JobView is a job as the API shows it. Field names are stable.
type JobView struct {
	ID         string            `json:"id"`
	State      job.State         `json:"state"`
	Agent      string            `json:"agent"`
	Args       []string          `json:"args"`
	Labels     map[string]string `json:"labels,omitempty"`
	Account    string            `json:"account,omitempty"`  // the account the job is pinned to
	Fallback   string            `json:"fallback,omitempty"` // a native job's fallback account
	Requester  string            `json:"requester"`
	Runner     string            `json:"runner,omitempty"`
	Attempts   []AttemptView     `json:"attempts"`
	CreatedAt  time.Time         `json:"created_at"`
	FinishedAt *time.Time        `json:"finished_at,omitempty"`
	ExitCode   *int              `json:"exit_code,omitempty"`
	Reason     job.Reason        `json:"reason,omitempty"`
	Waiting    string            `json:"waiting,omitempty"` // why a queued job has not been offered yet
	Key        string            `json:"key,omitempty"`
	Cancelling bool              `json:"cancelling,omitempty"`
	Project    string            `json:"project,omitempty"`
	Base       string            `json:"base,omitempty"`
	Head       string            `json:"head,omitempty"` // latest published commit (refs/drover/jobs/ID)
	Mode       string            `json:"mode,omitempty"`
	Tools      bool              `json:"tools,omitempty"`
	Network    []string          `json:"network"`          // the agent phase's policies the job asked for (nil: its project's)
	Sparse     []string          `json:"sparse,omitempty"` // the job's own sparse folders (none: its project's default)
	Image      string            `json:"image,omitempty"`  // the container image it asked for (none: the runner's own)
	// Questions the agent asked, oldest first, with their answers
	// (approved or awaiting approval).
	Questions []protocol.QuestionView `json:"questions,omitempty"`
	Summary   string                  `json:"summary,omitempty"` // the delivery of the latest attempt that delivered
	// Publication is where the job's result went on its project's forge.
	Publication *PublicationView `json:"publication,omitempty"`
	// Events is the job's history (its first 1000 events), only with
	// GET /jobs/{id}?events=1; GET /jobs/{id}/events?after=SEQ pages
	// through it from any point.
	Events []EventView `json:"events,omitempty"`
}

// AttemptView is one attempt of a job.
type AttemptView struct {
	ID         string              `json:"id"`
	Number     int64               `json:"number"` // equals the epoch it was offered under
	State      job.AttemptState    `json:"state"`
	Runner     string              `json:"runner"`
	Account    string              `json:"account,omitempty"` // the runner's account the offer named
	OfferedAt  time.Time           `json:"offered_at"`
	StartedAt  *time.Time          `json:"started_at,omitempty"`
	FinishedAt *time.Time          `json:"finished_at,omitempty"`
	ExitCode   *int                `json:"exit_code,omitempty"`
	Reason     job.Reason          `json:"reason,omitempty"`
	Message    string              `json:"message,omitempty"`
	LogSize    int64               `json:"log_size"`
	LogSHA256  string              `json:"log_sha256,omitempty"`
	Isolation  *protocol.Isolation `json:"isolation,omitempty"`
	Usage      *protocol.Usage     `json:"usage,omitempty"`   // what the agent reported it consumed
	Session    string              `json:"session,omitempty"` // the agent's session id, as the runner reported it
	Summary    string              `json:"summary,omitempty"` // what the agent delivered
}

// JobList is the answer to GET /jobs.
type JobList struct {
	Jobs []JobView `json:"jobs"`
}

// EventView is one entry of a job's history.
type EventView struct {
	Seq     int64     `json:"seq"`
	Job     string    `json:"job"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Actor   string    `json:"actor,omitempty"`
	Message string    `json:"message,omitempty"`
}

// EventList is the answer to GET /jobs/{id}/events.
type EventList struct {
	Events []EventView `json:"events"`
}

// Whoami describes the caller.
type Whoami struct {
	Kind   string `json:"kind"` // user or runner
	Name   string `json:"name"`
	Admin  bool   `json:"admin,omitempty"`
	Runner string `json:"runner,omitempty"`
}

// NewUserRequest adds a user.
type NewUserRequest struct {
	Name  string `json:"name"`
	Admin bool   `json:"admin,omitempty"`
}

// NewUserResponse carries the user's token, shown once.
type NewUserResponse struct {
	Name  string `json:"name"`
	Token string `json:"token"`
}

// ApproveRequest approves a runner login: Key is the SHA-256 (hex) of the
// runner's token, never the token.
type ApproveRequest struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	// Replace gives the name to this login when another login of the
	// caller's holds it: that runner's token is revoked and it is
	// disconnected. Without it such an approval is a conflict.
	Replace bool `json:"replace,omitempty"`
}

// ApproveResponse is the approved runner; Replaced says an older login of
// that name was revoked for it.
type ApproveResponse struct {
	RunnerView
	Replaced bool `json:"replaced,omitempty"`
}

// RunnerView is a runner as the API shows it.
type RunnerView struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Owner     string            `json:"owner"`
	Connected bool              `json:"connected"`
	Revoked   bool              `json:"revoked,omitempty"`
	Slots     int               `json:"slots"`
	Labels    map[string]string `json:"labels,omitempty"`
	Running   int               `json:"running"`
	// Agents and Accounts as the connected runner last reported them.
	Agents   []string               `json:"agents,omitempty"`
	Accounts []protocol.AccountInfo `json:"accounts,omitempty"`
	// NotReady says why a connected runner takes no jobs now (e.g. its
	// disk is below its free-space floor); "" when it is ready.
	NotReady string `json:"not_ready,omitempty"`
	// Version is the drover version the runner reported when it last
	// connected.
	Version string `json:"version,omitempty"`
	// Hub is the id of the hub holding its connection (drover hubs), when
	// connected: with several hubs on one database, maybe another one.
	Hub string `json:"hub,omitempty"`
	// Draining: the connected runner is stopping and takes no offers.
	Draining  bool       `json:"draining,omitempty"`
	LastSeen  *time.Time `json:"last_seen,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	// Access is AccessPrivate or AccessHub; SharedWith lists whom a private
	// runner is shared with besides its owner (shown to the owner and admins).
	Access     string  `json:"access"`
	SharedWith []Share `json:"shared_with,omitempty"`
	// Offered lists the pending shares of another's runner that the caller
	// may accept or decline: with them, or with a project they own.
	Offered []Share `json:"offered,omitempty"`
}

// RunnerList is the answer to GET /runners.
type RunnerList struct {
	Runners []RunnerView `json:"runners"`
}

// ErrorBody wraps an Error in HTTP responses.
type ErrorBody struct {
	Error rules.Error `json:"error"`
}

// AccountView is an agent account a runner reported, as its owner sees it:
// Position is its place (1 is the best) in the owner's preference order
// across all their runners, which the dispatcher follows.
type AccountView struct {
	Position     int        `json:"position"`
	Runner       string     `json:"runner"` // the runner's name
	ID           string     `json:"id"`
	Agent        string     `json:"agent"`
	Label        string     `json:"label,omitempty"`
	Kind         string     `json:"kind"`  // login, api-key or no-key
	State        string     `json:"state"` // ready or limited
	LimitedUntil *time.Time `json:"limited_until,omitempty"`
	Connected    bool       `json:"connected"` // whether its runner is connected now
	// Owner is the runner's owner; SharedWith whom the owner shared the
	// account with (shown to the owner and admins only).
	Owner      string  `json:"owner"`
	SharedWith []Share `json:"shared_with,omitempty"`
}

// AccountList is the answer to GET /accounts and POST /accounts/move: the
// caller's accounts, best first, then the accounts others shared with the
// caller (Position is then the place in their owner's order).
type AccountList struct {
	Accounts []AccountView `json:"accounts"`
}

// MoveAccountRequest puts one of the caller's accounts at Position (1 is
// the best; past the end means last). ID is the account's id or its label
// when that is unique among the runner's accounts.
type MoveAccountRequest struct {
	Runner   string `json:"runner"`
	ID       string `json:"id"`
	Position int    `json:"position"`
}

// Access of a runner (RunnerView.Access): private runs only its owner's
// jobs and those of the users and projects it is shared with; hub runs
// everyone's (set by an admin only).
const (
	AccessPrivate = "private"
	AccessHub     = "hub"
)

// Share names whom a runner or an account is shared with: one user, or one
// project (the jobs on that project whose requester is a member of it).
// Pending: the recipient (the user; the project's owner or an admin) has
// not accepted the runner's share yet, so it runs none of their jobs.
type Share struct {
	User    string `json:"user,omitempty"`
	Project string `json:"project,omitempty"`
	Pending bool   `json:"pending,omitempty"`
}

// AnswerShareRequest accepts (POST /runners/{name}/accept) or declines
// (POST /runners/{name}/decline) a share of another's runner: with the
// caller when Project is "", else with Project (its owner or an admin).
// Declining removes the share, accepted or not.
type AnswerShareRequest struct {
	Project string `json:"project,omitempty"`
}

// ShareRequest shares a runner (POST /runners/{name}/share) or takes a
// share back (POST /runners/{name}/unshare). Exactly one of User, Project
// and Hub is set; Hub (admin only) makes the runner hub-wide, or private
// again on unshare.
type ShareRequest struct {
	User    string `json:"user,omitempty"`
	Project string `json:"project,omitempty"`
	Hub     bool   `json:"hub,omitempty"`
}

// AccountShareRequest shares one runner account (POST /accounts/share) or
// takes the share back (POST /accounts/unshare). Account is the account's
// id, or its label when that is unique among the runner's accounts.
// Exactly one of User and Project is set.
type AccountShareRequest struct {
	Runner  string `json:"runner"`
	Account string `json:"account"`
	User    string `json:"user,omitempty"`
	Project string `json:"project,omitempty"`
}

// MemberRequest adds a user to a project (POST /projects/{name}/members).
type MemberRequest struct {
	User string `json:"user"`
}

// MemberList is a project's owner and members (GET /projects/{name}/members
// and the answer to adding or removing one). Members includes the owner.
type MemberList struct {
	Project string   `json:"project"`
	Owner   string   `json:"owner"`
	Members []string `json:"members"`
}

// ProjectConfig is what a project's owner sets for its jobs (GET and PUT
// /projects/{name}/config): the network policies of its setup and agent
// phases (names of the hub operator's policies; empty: no network), its
// setup commands with their timeout, and its dependency caches.
type ProjectConfig struct {
	Project       string            `json:"project"`
	SetupNetwork  []string          `json:"setup_network"`
	AgentNetwork  []string          `json:"agent_network"`
	SetupCommands []string          `json:"setup_commands"`
	SetupTimeout  protocol.Duration `json:"setup_timeout"`
	SetupKeys     []string          `json:"setup_keys"`           // lockfiles whose contents key a reusable setup result
	SetupFile     string            `json:"setup_file,omitempty"` // the repository's setup script the owner enabled
	// SetupApproved are the digests (SetupFileHash) of the versions of
	// SetupFile that run with the project's secrets.
	SetupApproved []string `json:"setup_approved,omitempty"`
	Caches        []string `json:"caches"`
	Large         bool     `json:"large,omitempty"`      // runners fetch it as a partial clone (--filter=blob:none)
	Sparse        []string `json:"sparse,omitempty"`     // its jobs' worktrees hold only these folders (cone mode)
	Forge         string   `json:"forge,omitempty"`      // the forge connection its results publish to
	ForgeRepo     string   `json:"forge_repo,omitempty"` // OWNER/REPO on it
	Publish       string   `json:"publish,omitempty"`    // what a completed job publishes by itself: pr or branch
	DirectPush    bool     `json:"direct_push,omitempty"`
	PublishAuthor string   `json:"publish_author,omitempty"` // "" (as the agent made them) or requester
	PublishEmail  string   `json:"publish_email,omitempty"`  // the requester's email, {user} their name
	PublishSign   bool     `json:"publish_sign,omitempty"`   // commits signed with the hub's key
	// Policies lists the policies the hub's operator defines (name → host
	// patterns), to choose from; AllowOpen says whether "open" is one.
	Policies  map[string][]string `json:"policies,omitempty"`
	AllowOpen bool                `json:"allow_open,omitempty"`
}

// ProjectConfigRequest changes a project's config: a nil field stays as
// it is. Only the project's owner or an admin may send it.
type ProjectConfigRequest struct {
	SetupNetwork  *[]string          `json:"setup_network,omitempty"`
	AgentNetwork  *[]string          `json:"agent_network,omitempty"`
	SetupCommands *[]string          `json:"setup_commands,omitempty"`
	SetupTimeout  *protocol.Duration `json:"setup_timeout,omitempty"`
	SetupKeys     *[]string          `json:"setup_keys,omitempty"`
	SetupFile     *string            `json:"setup_file,omitempty"` // "" disables it
	// ApproveSetup adds, UnapproveSetup removes digests of approved
	// versions of the setup script (SetupFileHash).
	ApproveSetup   []string  `json:"approve_setup,omitempty"`
	UnapproveSetup []string  `json:"unapprove_setup,omitempty"`
	Caches         *[]string `json:"caches,omitempty"`
	Large          *bool     `json:"large,omitempty"`
	Sparse         *[]string `json:"sparse,omitempty"` // [] makes worktrees whole again
	// Forge and ForgeRepo map the project to OWNER/REPO on a forge
	// connection ("" and "" unmap it); Publish is what a completed job
	// publishes by itself: pr, branch or none; DirectPush lets it push to
	// the default branch or a pull request's base.
	Forge      *string `json:"forge,omitempty"`
	ForgeRepo  *string `json:"forge_repo,omitempty"`
	Publish    *string `json:"publish,omitempty"`
	DirectPush *bool   `json:"direct_push,omitempty"`
	// PublishAuthor ("" or requester), PublishEmail and PublishSign say
	// how a publication's commits are authored and signed.
	PublishAuthor *string `json:"publish_author,omitempty"`
	PublishEmail  *string `json:"publish_email,omitempty"`
	PublishSign   *bool   `json:"publish_sign,omitempty"`
}

// ForgeRequest adds a forge connection or replaces the one of that name
// (PUT /forges/{name}, admins): a token, or a GitHub App's id and private
// key (PEM). Neither ever comes back.
type ForgeRequest struct {
	Kind       string `json:"kind"` // github, gitea or gitlab
	URL        string `json:"url"`  // the forge's root, e.g. https://github.com
	Token      string `json:"token,omitempty"`
	AppID      int64  `json:"app_id,omitempty"`
	PrivateKey string `json:"private_key,omitempty"`
}

// ForgeView is a forge connection as the API shows it: never its
// credential.
type ForgeView struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	URL       string    `json:"url"`
	AppID     int64     `json:"app_id,omitempty"` // a GitHub App's; 0 for a token
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	Projects  []string  `json:"projects,omitempty"` // the projects mapped to it that the caller may see
}

// ForgeList is GET /forges.
type ForgeList struct {
	Forges []ForgeView `json:"forges"`
}

// Publication modes.
const (
	PublishPR     = "pr"     // push the branch, open (or find) its pull request
	PublishBranch = "branch" // push the branch only
	PublishNone   = "none"   // nothing by itself, not even an issue's job (unset, "", lets those open one)
	PublishToPR   = "to_pr"  // push onto an existing pull request's head, fast-forward only
	PublishAGit   = "agit"   // Gitea/Forgejo: push to refs/for/BASE with a topic; no branch
)

// PublishRequest publishes a completed job's result to its project's
// forge (POST /jobs/{id}/publish). Mode "" is pr. Branch "" is drover/JOB;
// Base "" is the repository's default branch (or the pull request's).
type PublishRequest struct {
	Mode   string `json:"mode,omitempty"`
	Branch string `json:"branch,omitempty"`
	ToPR   int    `json:"to_pr,omitempty"`
	Base   string `json:"base,omitempty"`
	Draft  bool   `json:"draft,omitempty"`
	Title  string `json:"title,omitempty"`
}

// PublicationView is a job's publication and its outcome. State is
// pending (the hub carries it on), done or failed; Code says why a
// failed one failed (remote_moved, forge_unauthorized, ...).
type PublicationView struct {
	Job       string    `json:"job"`
	Forge     string    `json:"forge"`
	Repo      string    `json:"repo"`
	Mode      string    `json:"mode"`
	Branch    string    `json:"branch,omitempty"`
	Base      string    `json:"base,omitempty"`
	Commit    string    `json:"commit"`
	Pushed    string    `json:"pushed,omitempty"`
	PR        int       `json:"pr,omitempty"`
	URL       string    `json:"url,omitempty"`
	State     string    `json:"state"`
	Code      string    `json:"code,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Tries     int       `json:"tries"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretRequest sets a project secret (PUT /projects/{name}/secrets/{secret};
// its owner or an admin): the egress proxy of the project's setup adds
// Prefix+Value in Header to requests for Host. Value never comes back.
type SecretRequest struct {
	Host   string `json:"host"`             // host[:port] (https) or a base URL
	Header string `json:"header,omitempty"` // default Authorization
	Prefix string `json:"prefix,omitempty"` // default "Bearer " for Authorization
	Value  string `json:"value"`
}

// SecretView is a project secret as the API shows it: never its value.
type SecretView struct {
	Name       string    `json:"name"`
	Upstream   string    `json:"upstream"`
	Header     string    `json:"header"`
	KeyEnv     string    `json:"key_env"`      // holds the placeholder in the setup sandbox
	BaseURLEnv string    `json:"base_url_env"` // holds the proxy endpoint to send requests to
	CreatedBy  string    `json:"created_by"`
	CreatedAt  time.Time `json:"created_at"`
}

// SecretList is the answer to GET /projects/{name}/secrets.
type SecretList struct {
	Project string       `json:"project"`
	Secrets []SecretView `json:"secrets"`
}

// UserView is a user as GET /users shows it.
type UserView struct {
	Name      string     `json:"name"`
	Admin     bool       `json:"admin,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RemovedAt *time.Time `json:"removed_at,omitempty"`
	Runners   int        `json:"runners"` // runners the user owns that are not revoked
}

// UserList is the answer to GET /users: every user for an admin, the
// caller alone for anyone else.
type UserList struct {
	Users []UserView `json:"users"`
}

// HubView is one live hub of those sharing the database, as GET /hubs
// lists it: no runner names, only how many connections it holds.
type HubView struct {
	ID        string    `json:"id"`
	URL       string    `json:"url,omitempty"` // its public URL ("" when it takes the runners')
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	LastSeen  time.Time `json:"last_seen"`
	Conns     int       `json:"connections"`
	Leader    bool      `json:"leader,omitempty"` // it holds the leader term (runs the hub-wide duties)
	Self      bool      `json:"self,omitempty"`   // the hub that answered
}

// HubList is the answer to GET /hubs: the live hubs, oldest start first.
type HubList struct {
	Hubs []HubView `json:"hubs"`
}

// Spent is what a job's attempts consumed, all of them: its cost and its
// tokens of every kind.
func (v JobView) Spent() (costUSD float64, tokens int64) {
	var u protocol.Usage
	for _, a := range v.Attempts {
		if a.Usage != nil {
			u = u.Add(*a.Usage)
		}
	}
	return u.CostUSD, u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}
