// Package store declares drover's persistence. The hub decides; the store
// only keeps. Every state change happens inside one Write transaction, so a
// hub restart finds jobs, attempts, leases and logs exactly as they were
// committed. No SQL lives outside the store's implementations (sqlite/, and
// later postgres/), which must all pass storetest.
package store

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"drover/internal/job"
)

// Errors every implementation returns (wrapped) for these cases.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
	// ErrNoSpace: the store's disk is full; nothing of the transaction
	// was kept. It wraps syscall.ENOSPC, so fsutil.IsNoSpace knows it.
	ErrNoSpace = fmt.Errorf("the store's disk is full: %w", syscall.ENOSPC)
)

// Store opens transactions. Write transactions are serialized; fn may run
// again if the implementation retries on a serialization failure, so fn must
// not have side effects outside tx.
type Store interface {
	Read(ctx context.Context, fn func(Tx) error) error
	Write(ctx context.Context, fn func(Tx) error) error
	Close() error
}

// EachReader is a Store that also reads without one snapshot, where that
// saves round trips (Postgres: no BEGIN and COMMIT, one round trip a
// statement).
type EachReader interface {
	ReadEach(ctx context.Context, fn func(Tx) error) error
}

// ReadEach runs fn, which only reads, through s's ReadEach, or in a Read
// where s has none. fn must not need one snapshot: each of its statements
// may see what was committed when it began.
func ReadEach(ctx context.Context, s Store, fn func(Tx) error) error {
	if er, ok := s.(EachReader); ok {
		return er.ReadEach(ctx, fn)
	}
	return s.Read(ctx, fn)
}

// Tx is one transaction. Methods return ErrNotFound (wrapped) for a missing
// row and ErrConflict for a duplicate key.
type Tx interface {
	// Users and tokens. Tokens are stored as SHA-256 hashes only.
	InsertUser(u User) error
	UpdateUser(u User) error // by ID (name, admin, removed; CreatedAt kept)
	User(id string) (User, error)
	UserByName(name string) (User, error)
	Users() ([]User, error) // by name, removed ones included
	InsertToken(t Token) error
	Token(hash string) (Token, error)
	RevokeTokens(kind TokenKind, ownerID string, at time.Time) error
	// RevokeToken revokes one live token (a browser session at sign-out);
	// ErrNotFound when there is no such token.
	RevokeToken(hash string, at time.Time) error

	// Runners.
	InsertRunner(r Runner) error
	UpdateRunner(r Runner) error
	Runner(id string) (Runner, error)
	RunnerByName(name string) (Runner, error)
	Runners() ([]Runner, error)
	// RunnerTokens maps every runner not revoked to its token's hash: what
	// a hub checks the connections it holds against, without the rest of
	// each row.
	RunnerTokens() (map[string]string, error)
	// Token versions, so a hub checks only the connections whose token
	// changed. An UpdateRunner that replaces or revokes the runner's token
	// stamps it with a new version, greater than every earlier one (as
	// access versions are). TokenVersion is the greatest (0 before any);
	// TokensChangedSince maps each runner stamped after v to its token's
	// hash, "" when revoked. A reader that sees a version sees every one
	// below it.
	TokenVersion() (int64, error)
	TokensChangedSince(v int64) (map[string]string, error)

	// Shares of runners and of their accounts. PutShare of a share that
	// exists is ErrConflict; DeleteShare of one that does not is ErrNotFound.
	PutShare(s Share) error
	DeleteShare(s Share) error
	// AcceptShare records that the share's recipient accepted it (at; kept
	// when it was accepted already); ErrNotFound when there is no such share.
	AcceptShare(s Share, at time.Time) error
	Shares(runnerID string) ([]Share, error) // the runner's and its accounts', oldest first
	AllShares() ([]Share, error)             // every runner's, by runner then oldest first
	// RunnerShares is Runner (Held nil) and Shares in one read.
	RunnerShares(runnerID string) (Runner, []Share, error)
	// DeleteSharesOf removes every share naming the subject (a removed
	// user, or a project).
	DeleteSharesOf(kind ShareKind, subject string) error

	// Access versions, so a hub reloads only the runners whose access
	// changed. Every write that changes what a runner's access is made of
	// (its owner, name or access; its owner's user row; its or its
	// accounts' shares) stamps the runner with a new version, greater than
	// every earlier one. AccessVersion is the greatest (0 before any);
	// AccessChangedSince lists the runners stamped after v, by id. A reader
	// that sees a version sees every one below it.
	AccessVersion() (int64, error)
	AccessChangedSince(v int64) ([]string, error)

	// Agent accounts runners report, in their owner's preference order.
	//
	// SyncRunnerAccounts makes accts (RunnerID, OwnerID and Rank ignored)
	// the runner's accounts: new ones rank after every account of the
	// runner's owner, kept ones keep their rank, missing ones are deleted.
	SyncRunnerAccounts(runnerID string, accts []Account, now time.Time) error
	// AccountsOfOwner lists an owner's accounts across their runners, best
	// rank first.
	AccountsOfOwner(ownerID string) ([]Account, error)
	// Accounts lists every account, by owner then best rank first.
	Accounts() ([]Account, error)
	// AccountRanks maps AccountKey(runner, id) of every account to its rank.
	AccountRanks() (map[string]int64, error)
	// MoveAccount puts the owner's account (runner, id) at 1-based position
	// among the owner's accounts (clamped), renumbering the others;
	// ErrNotFound when the owner has no such account.
	MoveAccount(ownerID, runnerID, id string, position int) error

	// Jobs.
	InsertJob(j Job) error
	UpdateJob(j Job) error
	Job(id string) (Job, error)
	// ClaimQueued reads a queued job an offer means to claim and, where the
	// engine has row locks, locks its row, skipping it while another
	// transaction holds it (FOR UPDATE SKIP LOCKED): ErrNotFound when the
	// job is not queued or another dispatcher is claiming it.
	ClaimQueued(id string) (Job, error)
	// ClaimQueuedFor is ClaimQueued(jobID) and RunnerShares(runnerID), in
	// one statement where that saves a round trip: ErrNotFound when the job
	// is not there to claim or the runner is missing.
	ClaimQueuedFor(jobID, runnerID string) (Job, Runner, []Share, error)
	// UpdateJobAt is UpdateJob checked in the same statement: only while
	// the stored job's epoch is still epoch; ErrConflict when it is not.
	UpdateJobAt(j Job, epoch int64) error
	// OfferAttempt is InsertAttempt(a), UpdateJobAt(j, epoch) and
	// AddEvent(ev), in one statement where that saves round trips; its
	// errors are theirs (a job no longer at epoch: ErrConflict and
	// ErrNotFound).
	OfferAttempt(a Attempt, j Job, epoch int64, ev Event) error
	JobByKey(requesterID, key string) (Job, error)
	Jobs(f JobFilter) ([]Job, error) // newest first
	// ActiveJobsOf lists the jobs of one requester that have not ended
	// (queued, offered, running, waiting), oldest first.
	ActiveJobsOf(requesterID string) ([]Job, error)
	QueuedJobs(limit int) ([]Job, error) // oldest first (FIFO dispatch)
	// JobCounts counts the jobs in each state (states without jobs absent).
	JobCounts() (map[job.State]int64, error)
	// QueuedHeads lists the oldest perShape queued jobs of every shape
	// (requester, agent, labels, project, account: the jobs of one shape
	// fit the same runners), oldest first. The dispatcher reads the queue
	// this way, so however many jobs of one shape no runner can take, the
	// others are still seen.
	QueuedHeads(perShape int) ([]Job, error)
	// QueuedHeadsWithRequesters is QueuedHeads and each head's requester by
	// id, in one statement where that saves round trips.
	QueuedHeadsWithRequesters(perShape int) ([]Job, map[string]User, error)
	// ActiveByRequester counts each requester's offered and running jobs
	// (what they hold of the fleet now; the dispatcher shares by it).
	ActiveByRequester() (map[string]int, error)

	// Attempts.
	InsertAttempt(a Attempt) error
	UpdateAttempt(a Attempt) error
	Attempt(id string) (Attempt, error)
	AttemptWithJob(id string) (Attempt, Job, error)          // the attempt and its job, in one read
	UpdateAttemptAndJob(a Attempt, j Job, ev Event) error    // UpdateAttempt, UpdateJob and AddEvent(ev), in one statement where that saves round trips
	Attempts(jobID string) ([]Attempt, error)                // by number ascending
	ActiveAttempts() ([]Attempt, error)                      // offered or running, all runners
	RunnerActiveAttempts(runnerID string) ([]Attempt, error) // offered or running, one runner
	ExpiredAttempts(now time.Time) ([]Attempt, error)        // active with LeaseUntil before now
	ExtendLeases(runnerID string, until time.Time) error     // active attempts of one runner
	// ExtendOfflineLeases moves to until (never earlier) the leases of the
	// active attempts whose runner no hub seen since liveSince holds: those
	// of runners offline everywhere.
	ExtendOfflineLeases(until, liveSince time.Time) error

	// Hubs: the hub processes sharing the store. PutHub inserts or
	// replaces a hub's row (its heartbeat); Hubs lists them, oldest start
	// first; DeleteHub removes one's row and the runner connections it
	// held (nothing to remove is no error); PruneHubs does so for every
	// hub last seen before the given time.
	PutHub(h Hub) error
	Hubs() ([]Hub, error)
	DeleteHub(id string) error
	PruneHubs(before time.Time) error
	// Runner connections: which hub holds each runner's. HoldRunner makes
	// hubID the holder of runnerID's (replacing another's); ReleaseRunner
	// forgets it only while hubID still holds it (the runner may have
	// connected elsewhere since). HeldRunners maps every runner held by a
	// hub seen since liveSince to that hub; RunnerHolder is that hub of
	// one runner ("" when none holds it). SetRunnerStatus records the
	// status of a runner hubID holds (a holding starts with none; nothing
	// held is no error).
	HoldRunner(runnerID, hubID string, at time.Time) error
	SetRunnerStatus(runnerID, hubID string, st RunnerStatus) error
	ReleaseRunner(runnerID, hubID string) error
	// RunnersLeft records that the runners of ids left hubID at at: their
	// last contact, and ReleaseRunner of each, in a few statements however
	// many (a stopping hub's whole fleet). Unknown ids are no error.
	RunnersLeft(ids []string, hubID string, at time.Time) error
	HeldRunners(liveSince time.Time) (map[string]string, error)
	RunnerHolder(runnerID string, liveSince time.Time) (string, error)

	// Leader term. Leader is the current term (ErrNotFound before the
	// first). TakeLeader renews hubID's term to until, or starts a new
	// one for hubID (Term+1) when the current has expired at now or was
	// never taken; it returns the term as it then is, held by another hub
	// when that one's has not expired. ReleaseLeader ends hubID's term at
	// (any holder's with hubID ""), so the next TakeLeader starts a new one.
	Leader() (Leader, error)
	TakeLeader(hubID string, now, until time.Time) (Leader, error)
	ReleaseLeader(hubID string, at time.Time) error

	// Logs: append-only bytes per attempt. The caller checks the offset
	// against Attempt.LogSize and updates the attempt in the same transaction.
	AppendLog(attemptID string, offset int64, data []byte) error
	ReadLog(attemptID string, offset int64, max int) ([]byte, error)
	// DeleteLog removes every chunk of an attempt's log (the hub does this
	// when a finish's checksum disagrees, then takes the log again from 0).
	DeleteLog(attemptID string) error

	// Events: a job's history, sequence numbers increase across all jobs.
	AddEvent(e Event) (int64, error)
	Events(jobID string, afterSeq int64, limit int) ([]Event, error)

	// Request ledger: each runner request id is applied once; a resent id
	// gets the stored response.
	Request(runnerID, requestID string) (response []byte, found bool, err error)
	PutRequest(runnerID, requestID string, response []byte, at time.Time) error
	PruneRequests(before time.Time) error

	// Projects: hosted on the hub or mapped to a remote URL.
	// PutProject inserts a project or updates its remote; its owner is kept
	// once set (a project without one takes the given one) and is made a
	// member with it.
	PutProject(p Project) error
	Project(name string) (Project, error)
	Projects() ([]Project, error) // by name
	// SetProjectConfig replaces a project's config (ErrNotFound when
	// there is no such project); PutProject keeps it.
	SetProjectConfig(name string, c ProjectConfig, at time.Time) error

	// Project secrets. PutProjectSecret inserts one or replaces the one of
	// that name; ProjectSecrets lists a project's by name, with their
	// values only when values is true; RemoveProjectSecret of a missing
	// one is ErrNotFound.
	PutProjectSecret(s ProjectSecret) error
	ProjectSecrets(project string, values bool) ([]ProjectSecret, error)
	RemoveProjectSecret(project, name string) error

	// Forge connections the hub holds. PutForge inserts one or replaces
	// the one of that name (its CreatedAt and CreatedBy kept); Forges
	// lists them by name, with their secrets only when secrets is true;
	// RemoveForge of a missing one is ErrNotFound.
	PutForge(f Forge) error
	Forge(name string) (Forge, error)
	Forges(secrets bool) ([]Forge, error)
	RemoveForge(name string) error

	// Publications of jobs' results to their projects' forges, one per
	// job. PutPublication inserts it or replaces the job's (its
	// CreatedAt kept); Publications lists those in state, oldest update
	// first.
	PutPublication(p Publication) error
	Publication(jobID string) (Publication, error)
	Publications(state PublicationState) ([]Publication, error)

	// Pipelines (internal/pipeline): a graph of steps, each an ordinary
	// job. InsertPipeline of an id that exists is ErrConflict;
	// PipelineByKey finds a requester's by its idempotency key;
	// UpdatePipeline replaces State, Reason, Result and UpdatedAt
	// (ErrNotFound when there is none); Pipelines lists those f selects,
	// newest first.
	InsertPipeline(p Pipeline) error
	Pipeline(id string) (Pipeline, error)
	PipelineByKey(requesterID, key string) (Pipeline, error)
	UpdatePipeline(p Pipeline) error
	Pipelines(f PipelineFilter) ([]Pipeline, error)
	// A pipeline's runs of its steps, one per (pipeline, key).
	// PutPipelineRun inserts one or replaces it (its CreatedAt kept);
	// PipelineRuns lists a pipeline's by CreatedAt then key;
	// PipelineRunByJob finds the run a job is, never a replay that names
	// the job of its result (ErrNotFound for a job of no pipeline).
	PutPipelineRun(r PipelineRun) error
	PipelineRuns(pipelineID string) ([]PipelineRun, error)
	PipelineRunByJob(jobID string) (PipelineRun, error)
	// Step results a rerun replays, by project and step hash: the first
	// put for a (project, hash) stays (a second is a no-op).
	PutStepResult(r StepResult) error
	StepResult(project, hash string) (StepResult, error)
	// The pipeline's event log, numbered like jobs' events.
	AddPipelineEvent(e PipelineEvent) (int64, error)
	PipelineEvents(pipelineID string, after int64, limit int) ([]PipelineEvent, error)

	// Evaluations (internal/eval). InsertEval of an id, or of a
	// requester's key, that exists is ErrConflict; UpdateEval replaces
	// State, Reason and UpdatedAt (ErrNotFound when there is none); Evals
	// lists those in state (all for ""), newest first. PutEvalItem
	// inserts an item or replaces it (its CreatedAt kept); EvalItems lists
	// an evaluation's by line, then key; EvalOpenItems lists, in the same
	// order, its items at their agent or grading and the first queued ones
	// up to queued (0: none), which is all an evaluation's pass reads.
	InsertEval(e Eval) error
	Eval(id string) (Eval, error)
	EvalByKey(requesterID, key string) (Eval, error)
	UpdateEval(e Eval) error
	Evals(state EvalState, limit int) ([]Eval, error)
	PutEvalItem(i EvalItem) error
	EvalItems(evalID string) ([]EvalItem, error)
	EvalOpenItems(evalID string, queued int) ([]EvalItem, error)
	// EvalItem reads an evaluation's item by key (ErrNotFound);
	// EvalRunning counts its items at their agent or grading and lists
	// its first queued ones up to queued, by line then key: what a job's
	// hand-off reads in the write that ends the job, without the running
	// items' rows. MoveEvalItem writes an item's progress (State, its
	// jobs, Head, Graded, Patch, Reason, what it spent, UpdatedAt), not
	// its instance (ErrNotFound when there is none): the hand-off's write.
	EvalItem(evalID, key string) (EvalItem, error)
	EvalRunning(evalID string, queued int) (running int, next []EvalItem, err error)
	MoveEvalItem(i EvalItem) error

	// Project members (the owner is one too, added with the project).
	// AddMember of a member is ErrConflict; RemoveMember of a non-member is
	// ErrNotFound.
	AddMember(project, userID string, at time.Time) error
	RemoveMember(project, userID string) error
	Members(project string) ([]string, error)   // user ids, oldest membership first
	ProjectsOf(userID string) ([]string, error) // project names the user is a member of, by name

	// Context files of a job, written with the job. With data false the
	// files come back without their bytes (for offers).
	InsertContextFile(jobID string, f ContextFile) error
	ContextFiles(jobID string, data bool) ([]ContextFile, error) // by name

	// Questions agents asked, with their answers. An attempt asks at most
	// once (a second question of one attempt is ErrConflict).
	InsertQuestion(q Question) error
	UpdateQuestion(q Question) error
	Questions(jobID string) ([]Question, error) // oldest first
	// OpenQuestions lists the questions jobs wait on: each one the current
	// attempt of a waiting job asked, without an approved answer; oldest first.
	OpenQuestions(f QuestionFilter) ([]Question, error)

	// Meta: small settings such as whether the admin exists.
	Meta(key string) (string, error)
	SetMeta(key, value string) error

	// Fleet launches and their single-use registration tokens.
	InsertLaunch(l Launch) error
	UpdateLaunch(l Launch) error // by ID (RevokedAt; the rest is kept as inserted)
	Launch(id string) (Launch, error)
	Launches(ownerID string) ([]Launch, error) // "" for every owner's; oldest first
	InsertRegistration(r Registration) error
	Registration(hash string) (Registration, error)
	// RegistrationOfRunner is the registration a runner was made with
	// (ErrNotFound for a runner a user approved).
	RegistrationOfRunner(runnerID string) (Registration, error)
	Registrations(launchID string) ([]Registration, error) // by name
	// PutLaunchFailure records the owner's latest launch failure (one per
	// owner: it replaces the one before); ClearLaunchFailure forgets it
	// (nothing to forget is no error); LaunchFailures lists them by owner.
	PutLaunchFailure(f LaunchFailure) error
	ClearLaunchFailure(ownerID string) error
	LaunchFailures() ([]LaunchFailure, error)
	// UseRegistration marks an unused registration used by runnerID:
	// ErrConflict when it was used already, ErrNotFound when missing.
	UseRegistration(hash, runnerID string, at time.Time) error

	// Forge threads (internal/forgethread): the issue or pull request a
	// job works for, one per job. PutForgeThread inserts one or replaces
	// the job's (its CreatedAt kept); ForgeThreadsOf lists the jobs of a
	// thread, newest first; UnsettledForgeThreads lists those whose status
	// comment does not show a settled outcome yet, oldest update first.
	PutForgeThread(t ForgeThread) error
	ForgeThread(jobID string) (ForgeThread, error)
	ForgeThreadsOf(forge, repo string, number int) ([]ForgeThread, error)
	UnsettledForgeThreads() ([]ForgeThread, error)
	// Forge triggers, links, deliveries and targets (internal/forgework).
	ForgeTx
	// Outbound webhooks (internal/webhook). Every write of a job that
	// changes its state (InsertJob, UpdateJob, UpdateJobAt) records a
	// JobChange in the same transaction while any webhook exists: the
	// outbox nothing can lose. InsertWebhook of an id that exists is
	// ErrConflict; Webhooks lists an owner's ("" for all), oldest first,
	// without their secrets (Webhook reads one with its secret);
	// RemoveWebhook removes one and its deliveries (ErrNotFound when
	// missing).
	InsertWebhook(w Webhook) error
	Webhook(id string) (Webhook, error)
	Webhooks(ownerID string) ([]Webhook, error)
	RemoveWebhook(id string) error
	// JobChanges lists the recorded changes not yet expanded, oldest
	// first; DoneJobChange forgets one (nothing to forget is no error).
	JobChanges(limit int) ([]JobChange, error)
	DoneJobChange(seq int64) error
	// AddWebhookDelivery inserts a delivery; a second one of the same
	// hook and change is a no-op (so an expansion that runs twice adds
	// nothing), as is one of a hook removed meanwhile.
	AddWebhookDelivery(d WebhookDelivery) error
	UpdateWebhookDelivery(d WebhookDelivery) error // by ID: State, Attempts, Status, Error, NextAt, UpdatedAt
	// ClaimWebhookDelivery moves a delivery that is pending and due at
	// now to until, the claim of one try: ErrNotFound when it is not
	// (delivered, given up, or claimed by another try meanwhile).
	ClaimWebhookDelivery(id string, now, until time.Time) error
	// DueWebhookDeliveries lists pending deliveries due at now that no
	// earlier pending one of the same hook and job holds back (each
	// job's events go to a hook in order), soonest due first.
	DueWebhookDeliveries(now time.Time, limit int) ([]WebhookDelivery, error)
	// WebhookDeliveries lists a hook's deliveries, newest first.
	WebhookDeliveries(hookID string, limit int) ([]WebhookDelivery, error)
	// PruneWebhookDeliveries removes up to limit delivered or given-up
	// deliveries whose NextAt (for them, when they ended) is before
	// before, and says how many it removed.
	PruneWebhookDeliveries(before time.Time, limit int) (int64, error)

	// Sign-in with a forge (internal/signin): a forge connection's OAuth
	// application. PutForgeOAuth inserts or replaces the forge's (a forge
	// that is not held is an error); ForgeOAuths lists all, by forge;
	// RemoveForgeOAuth of a forge without one is ErrNotFound. Removing the
	// forge removes its application.
	PutForgeOAuth(o ForgeOAuth) error
	ForgeOAuth(forge string) (ForgeOAuth, error)
	ForgeOAuths() ([]ForgeOAuth, error)
	RemoveForgeOAuth(forge string) error

	// Sign-in with an OpenID Connect provider (internal/signin).
	// PutOIDCProvider inserts or replaces one; OIDCProviders lists all, by
	// name; RemoveOIDCProvider of one not held is ErrNotFound, and removes
	// its links. PutOIDCLink of a linked subject is ErrConflict;
	// OIDCLinksOf lists a user's by provider then subject; RemoveOIDCLink
	// of a missing one is ErrNotFound.
	PutOIDCProvider(p OIDCProvider) error
	OIDCProvider(name string) (OIDCProvider, error)
	OIDCProviders() ([]OIDCProvider, error)
	RemoveOIDCProvider(name string) error
	PutOIDCLink(l OIDCLink) error
	OIDCLink(provider, subject string) (OIDCLink, error)
	OIDCLinksOf(userID string) ([]OIDCLink, error)
	RemoveOIDCLink(provider, subject string) error

	// Evaluations' lists (internal/eval). EvalsOf lists a requester's
	// evaluations (everyone's for ""), newest first, at most limit (0: no
	// bound); EvalTallies counts an evaluation's items in each state,
	// with their cost and tokens, by state.
	EvalsOf(requesterID string, limit int) ([]Eval, error)
	EvalTallies(evalID string) ([]EvalTally, error)
}

// EvalTally is how many items of an evaluation are in State, and what
// they cost.
type EvalTally struct {
	State   EvalItemState
	Items   int
	CostUSD float64
	Tokens  int64
}

// OIDCProvider is an OpenID Connect provider users sign in to the
// dashboard with. Secret is this hub's client secret there: it never
// leaves the hub's store but to the provider itself.
type OIDCProvider struct {
	Name      string
	Issuer    string
	ClientID  string
	Secret    string
	UpdatedBy string // user id
	UpdatedAt time.Time
}

// OIDCLink maps an identity of a provider (its issuer's subject) to the
// drover user it signs in as.
type OIDCLink struct {
	Provider  string
	Subject   string
	UserID    string
	CreatedBy string
	CreatedAt time.Time
}

// ForgeOAuth is the OAuth application users of a forge connection sign in
// to the dashboard through. Secret is its client secret: it never leaves
// the hub's store but to the forge itself.
type ForgeOAuth struct {
	Forge     string
	ClientID  string
	Secret    string
	UpdatedBy string // user id
	UpdatedAt time.Time
}

// User is a person (or script) that submits jobs.
type User struct {
	ID        string
	Name      string
	Admin     bool
	CreatedAt time.Time
	RemovedAt *time.Time // removed users keep their row (and name) for history
}

// TokenKind says whom a token authenticates.
type TokenKind string

const (
	TokenUser   TokenKind = "user"
	TokenRunner TokenKind = "runner"
	// TokenSession is a browser session of a user (its OwnerID), made by
	// signing in to the hub's web pages with a user token; it is no API
	// credential and expires (the hub's SessionTTL after CreatedAt).
	TokenSession TokenKind = "session"
)

// Token is a credential, kept only as the hex SHA-256 of its plaintext.
type Token struct {
	Hash      string
	Kind      TokenKind
	OwnerID   string // user id or runner id
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Account is an agent account a runner reported (never a secret). Its id
// is the runner's; the same id on two runners is two accounts.
type Account struct {
	RunnerID     string
	ID           string
	OwnerID      string // the runner's owner, who orders the accounts
	Agent        string
	Label        string
	Kind         string
	State        string
	LimitedUntil *time.Time
	Rank         int64 // lower is preferred
	UpdatedAt    time.Time
}

// AccountKey keys an account in AccountRanks.
func AccountKey(runnerID, id string) string { return runnerID + "/" + id }

// Runner is a machine that runs jobs.
type Runner struct {
	ID        string
	Name      string
	OwnerID   string // user who approved its login
	TokenHash string // current token
	Slots     int
	Labels    map[string]string
	CreatedAt time.Time
	LastSeen  *time.Time
	RevokedAt *time.Time
	// Access is protocol.AccessPrivate (the default, also for "") or
	// protocol.AccessHub; shares widen a private runner.
	Access string
	// Version is the drover version it last reported on connecting.
	Version string
	// Held is its holding as Runner, RunnerByName and Runners read it
	// (nil while no hub holds it, live or not; never written back).
	Held *RunnerHeld
}

// RunnerStatus is what a connected runner last reported, recorded by the
// hub holding its connection so that every hub shows it.
type RunnerStatus struct {
	Agents   []string
	Accounts []Account // RunnerID, OwnerID, Rank and UpdatedAt unset
	NotReady string    // why it takes no offers ("" ready)
	Draining bool
}

// RunnerHeld is a runner's holding row: its hub, the status that hub
// recorded, and its offered or running attempts.
type RunnerHeld struct {
	Hub     string
	Status  RunnerStatus
	Running int
}

// Hub is one hub process sharing the store, as it last recorded itself.
type Hub struct {
	ID        string // new at every start
	URL       string // its public URL ("" when it takes the runners')
	Version   string // drover version
	StartedAt time.Time
	LastSeen  time.Time // its last heartbeat
	Conns     int       // runner connections it held then
}

// Leader is the leader term: Holder runs the hub-wide duties until Expires.
type Leader struct {
	Holder  string // hub id
	Term    int64  // grows with every new holding
	Since   time.Time
	Expires time.Time
}

// ShareKind says what a share names.
type ShareKind string

const (
	ShareUser    ShareKind = "user"    // Subject is a user id
	ShareProject ShareKind = "project" // Subject is a project name
)

// Share lets a user, or the members' jobs on a project, use a runner
// (AccountID "") or one of its accounts. A runner's share is pending
// (AcceptedAt nil) until its recipient accepts it, and runs nothing until
// then.
type Share struct {
	RunnerID   string
	AccountID  string
	Kind       ShareKind
	Subject    string
	CreatedAt  time.Time
	AcceptedAt *time.Time
}

// Pending: is the share waiting for its recipient's consent?
func (s Share) Pending() bool { return s.AcceptedAt == nil }

// Job is one unit of work.
type Job struct {
	ID          string
	State       job.State
	Agent       string
	Args        []string
	Labels      map[string]string
	RequesterID string
	Key         string // idempotency key, unique per requester when set
	Epoch       int64  // fencing epoch of the current attempt; grows with every offer
	AttemptID   string // current (latest) attempt, "" before the first offer
	Cancelling  bool   // a cancel was requested while an attempt was active
	Reason      job.Reason
	ExitCode    *int
	LogCap      int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
	FinishedAt  *time.Time
	// Source of a job with a repository ("" without one).
	Project     string
	Base        string // exact commit the job starts from
	Head        string // latest published commit; Base before any publication
	Mode        string // protocol.ModeFix or ModeObserve
	RepoURL     string // the remote runners fetch from, for a mapped project ("" when hub-hosted)
	Checkpoints int    // checkpoint refs made so far
	// Tools: the agent gets the tool server and completes only by deliver.
	Tools bool
	// ResumeAttempt is the attempt whose agent session the next attempt
	// resumes: the one that asked, once an approved answer requeued the job
	// ("" for a fresh start; retry and restart clear it).
	ResumeAttempt string
	// Account pins a vendor agent's job to one account (id or label); ""
	// lets the dispatcher choose by the owner's order.
	Account string
	// Network is the agent-phase policies the job asked for, narrowing
	// its project's; nil keeps the project's, [] is no network.
	Network []string
	// Model is the model a native agent's job asks for; "" is its
	// account's.
	Model string
	// Fallback is a native agent's job's fallback account (id or label).
	Fallback string
	// Sparse are the folders of the job's cone-mode sparse worktree; nil
	// keeps its project's default.
	Sparse []string
	// Image is the container image the job runs in ("": the runner's
	// own); part of its queue shape, since it decides which runners fit.
	Image string
}

// Project is a source repository jobs name. Remote "" means hosted on the
// hub (a bare repository in its data directory).
type Project struct {
	Name      string
	OwnerID   string // its first pusher, or the admin who mapped it
	Remote    string
	CreatedAt time.Time
	UpdatedAt time.Time
	Config    ProjectConfig // set by SetProjectConfig, kept by PutProject
}

// ProjectConfig is what a project's owner chose for its jobs: network
// policies (names of the hub operator's) per phase, setup commands and
// the dependency caches runners keep for it. Stored as JSON.
type ProjectConfig struct {
	SetupNetwork  []string      `json:"setup_network,omitempty"`
	AgentNetwork  []string      `json:"agent_network,omitempty"`
	SetupCommands []string      `json:"setup_commands,omitempty"`
	SetupTimeout  time.Duration `json:"setup_timeout,omitempty"`
	SetupKeys     []string      `json:"setup_keys,omitempty"` // lockfiles whose contents key a reusable setup
	// SetupFile is a script in the repository the owner enabled as part
	// of the setup (run after SetupCommands, in the sandbox): "" for none.
	SetupFile string `json:"setup_file,omitempty"`
	// SetupApproved are the digests (protocol.SetupFileHash) of the
	// versions of SetupFile the owner approved: only those run with the
	// project's secrets.
	SetupApproved []string `json:"setup_approved,omitempty"`
	Caches        []string `json:"caches,omitempty"`
	// Large makes runners fetch the project as a partial clone (no
	// blobs until a checkout needs them).
	Large bool `json:"large,omitempty"`
	// Sparse makes its jobs' worktrees cone-mode sparse checkouts of
	// these folders; empty: whole.
	Sparse []string `json:"sparse,omitempty"`
	// Forge and ForgeRepo map the project to a repository on one of the
	// hub's forge connections (OWNER/REPO), where its results publish.
	Forge     string `json:"forge,omitempty"`
	ForgeRepo string `json:"forge_repo,omitempty"`
	// Publish is what a completed job publishes by itself: "pr",
	// "branch", "none" (nothing: drover publish does it), or "" (as none,
	// but a job started from an issue opens a pull request).
	Publish string `json:"publish,omitempty"`
	// DirectPush lets a publication push to the repository's default
	// branch or a pull request's base; refused otherwise.
	DirectPush bool `json:"direct_push,omitempty"`
	// PublishAuthor is who authors a publication's commits: "" keeps
	// them as the agent made them; "requester" rewrites them with the
	// job's requester as author (email by PublishEmail) and the agent in
	// a Co-authored-by trailer.
	PublishAuthor string `json:"publish_author,omitempty"`
	// PublishEmail is the requester's email in rewritten commits, its
	// "{user}" replaced by the requester's name; "" for
	// {user}@users.noreply.FORGE-HOST.
	PublishEmail string `json:"publish_email,omitempty"`
	// PublishSign signs a publication's commits with the hub's key (its
	// operator's signing_key), rewriting them as PublishAuthor says.
	PublishSign bool `json:"publish_sign,omitempty"`
}

// HasSetup reports whether the project's jobs run a setup phase.
func (c ProjectConfig) HasSetup() bool { return len(c.SetupCommands) > 0 || c.SetupFile != "" }

// ProjectSecret is a credential a project's owner set for its setup: the
// egress proxy adds Prefix+Value in Header to requests to Upstream.
type ProjectSecret struct {
	Project   string
	Name      string
	Upstream  string // base URL
	Header    string
	Prefix    string
	Value     string // "" when listed without values
	CreatedBy string // user id
	CreatedAt time.Time
}

// Forge is a forge connection the hub holds (forge.Conn is what it
// dials). Secret is its token, or a GitHub App's private key (PEM): it
// never leaves the hub's store but to the forge itself.
type Forge struct {
	Name      string
	Kind      string // forge.KindGitHub, KindGitea, KindGitLab
	URL       string // the forge's root
	AppID     int64  // a GitHub App's id; 0 for a token
	Secret    string // "" when listed without secrets
	CreatedBy string // user id
	CreatedAt time.Time
	UpdatedAt time.Time
}

// PublicationState is where a job's publication to a forge is.
type PublicationState string

const (
	// PublicationPending: the intent is recorded and the forge calls may
	// have begun; the hub carries it on (on its next try or start).
	PublicationPending PublicationState = "pending"
	// PublicationPlanned: the job was started from a pull request and
	// publishes back onto it once it completes.
	PublicationPlanned PublicationState = "planned"
	PublicationDone    PublicationState = "done"
	PublicationFailed  PublicationState = "failed"
)

// Publication is a job's result published to its project's forge: the
// intent, recorded before any forge call, then what came of it.
type Publication struct {
	JobID  string
	Forge  string // the forge connection's name
	Repo   string // OWNER/REPO on it
	Mode   string // pr, branch, to_pr or agit (internal/publish)
	Branch string // the head branch pushed to (drover/JOB unless given)
	Base   string // the pull request's base ("" until known)
	ToPR   int    // the pull request pushed to (to_pr)
	Title  string
	Draft  bool
	Commit string // the job's head to publish
	// Expect is the remote branch's commit drover last saw, which the
	// push's lease names ("" for a branch that must not exist yet).
	Expect    string
	Pushed    string // the commit pushed, once pushed
	PRNumber  int
	PRURL     string
	State     PublicationState
	Code      string // the outcome's code ("" while pending, "ok" when done)
	Reason    string // what went wrong, for people
	Tries     int
	By        string // the user who asked; "" for the project's default
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ForgeThread ties a job to the issue or pull request it works for on a
// forge, and keeps what the bot wrote there: its status comment (StatusID,
// 0 until posted), what that comment shows (Shown; Settled once it shows
// an outcome nothing more changes) and the comment of each question
// posted (question id -> comment id).
type ForgeThread struct {
	JobID     string
	Project   string
	Forge     string // the forge connection's name
	Repo      string // OWNER/NAME on the forge
	Number    int
	IsPR      bool
	StatusID  int64
	Shown     string
	Settled   bool
	Questions map[string]int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// PipelineState is where a pipeline is.
type PipelineState string

const (
	PipelineRunning PipelineState = "running"
	PipelineDone    PipelineState = "done"
	// PipelineNeedsHuman: a loop that did not converge (max_rounds,
	// max_cost, max_wall, a repeated finding, a round with no change), a
	// step's job that ended unknown, or an integration conflict; a person
	// decides (pipeline retry STEP, or cancel).
	PipelineNeedsHuman PipelineState = "needs_human"
	PipelineFailed     PipelineState = "failed"
	PipelineCancelled  PipelineState = "cancelled"
)

// Terminal says whether nothing more happens to a pipeline in s on its own.
func (s PipelineState) Terminal() bool {
	return s == PipelineDone || s == PipelineFailed || s == PipelineCancelled
}

// Pipeline is one run of a pipeline file on a project at a base commit.
type Pipeline struct {
	ID          string
	Name        string // the file's name: field
	File        string // the file's name, for messages
	Project     string
	Base        string // the commit the first steps start at
	RequesterID string
	Key         string // idempotency key, unique per requester when set
	Spec        string // the parsed, valid spec.Pipeline as JSON (prompt files resolved)
	Params      string // the params' values as a JSON object
	Staged      bool   // run everything, publish nothing
	State       PipelineState
	Reason      string // why it needs a person, failed or was cancelled
	Result      string // the commit its last step left, once done
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// PipelineFilter selects pipelines; zero values select all.
type PipelineFilter struct {
	RequesterID string
	Project     string
	State       PipelineState
	Limit       int
}

// PipelineRunState is where one run of a step is.
type PipelineRunState string

const (
	RunRunning    PipelineRunState = "running"     // its job is queued or running
	RunDone       PipelineRunState = "done"        // completed (or replayed, or merged)
	RunFailed     PipelineRunState = "failed"      // its job failed or was cancelled, or it could not start
	RunUnknown    PipelineRunState = "unknown"     // its job's attempt ended unknown: a person retries it
	RunNeedsHuman PipelineRunState = "needs_human" // a loop stopped, or a merge conflicted
	RunWaiting    PipelineRunState = "waiting"     // a for_each item held back by max_parallel or touches
	RunSkipped    PipelineRunState = "skipped"     // staged: a publish that did not happen
)

// PipelineRun is one job of a step: the step's, a loop round's, or a
// for_each item's. Key is unique in its pipeline: "ID#ROUND" or
// "ID[ITEM]#ROUND".
type PipelineRun struct {
	PipelineID string
	Key        string
	Step       string // the step's id
	Round      int    // from 1
	Item       int    // -1 outside a for_each
	ItemValue  string
	Hash       string // spec.Step.Hash of its definition and inputs
	Input      string // the commit it started at
	JobID      string // "" before its job exists, and for a replay of a result recorded without one
	Tries      int    // jobs started for it so far (pipeline retry starts another)
	State      PipelineRunState
	Replayed   bool   // its result is a recorded one, at no cost
	Commit     string // the commit it left (its job's head, or Input when it changed nothing)
	Summary    string // what its job delivered (a verdict's JSON, feedback)
	Reason     string
	CostUSD    float64
	Tokens     int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// StepResult is a finished step's recorded result, which a later run of
// the same step (the same hash) on the project replays at no cost.
type StepResult struct {
	Project   string
	Hash      string
	JobID     string
	Commit    string
	Summary   string
	CostUSD   float64 // what it cost when it ran
	Tokens    int64
	CreatedAt time.Time
}

// PipelineEvent is one entry of a pipeline's log.
type PipelineEvent struct {
	Seq        int64
	PipelineID string
	At         time.Time
	Kind       string
	Step       string // the run's key; "" for the pipeline's own
	Actor      string
	Message    string
}

// ContextFile is a file attached to a job.
type ContextFile struct {
	Name string
	Size int64
	Data []byte // nil when listed without data
}

// Attempt is one offer of a job to one runner.
type Attempt struct {
	ID         string
	JobID      string
	Epoch      int64 // also the attempt's number within its job
	RunnerID   string
	State      job.AttemptState
	Reason     job.Reason
	ExitCode   *int
	Message    string
	OfferedAt  time.Time
	AcceptedAt *time.Time
	FinishedAt *time.Time
	LeaseUntil time.Time
	LogSize    int64
	LogSHA256  string // set at finish
	Isolation  string // JSON: what the runner's execution boundary applied (set at finish)
	Usage      string // JSON: tokens and cost the agent reported (set at finish; "" for none)
	Session    string // the agent's session id (set at finish)
	Summary    string // what the agent delivered ("" when it did not)
	Account    string // the runner's account the offer named ("" for an agent without accounts)
}

// Question is what an agent asked and, once given, a person's answer.
// Answered and approved are separate: another user's answer waits for the
// job's requester to approve it, and only approved answers reach the agent.
type Question struct {
	ID         string
	JobID      string
	AttemptID  string // the attempt that asked
	Text       string
	Choices    []string
	AskedAt    time.Time
	ExpiresAt  *time.Time
	Answer     string
	Choice     *int   // 1-based index into Choices; nil for free text
	AnsweredBy string // user id; "" while unanswered
	AnsweredAt *time.Time
	ApprovedBy string // user id; "" until approved
	ApprovedAt *time.Time
}

// QuestionFilter selects open questions.
type QuestionFilter struct {
	RequesterID   string    // "" for any
	VisibleTo     string    // "" for any; else only questions of jobs JobFilter.VisibleTo would list
	ExpiredBefore time.Time // zero for any; else only questions with ExpiresAt before it
}

// JobFilter selects jobs to list.
type JobFilter struct {
	State       job.State // "" for any
	RequesterID string    // "" for any
	// VisibleTo, a user id, keeps the jobs that user may see: those they
	// requested, those on a project they are a member of, and those without
	// a project with an attempt on a runner they own ("" for any).
	VisibleTo string
	Limit     int // 0 for the default (100)
}

// Event is one entry in a job's history.
type Event struct {
	Seq     int64
	JobID   string
	At      time.Time
	Kind    string
	Actor   string
	Message string
	// Data is what the event carries for programs: a turn event's
	// protocol.TurnEvent (JSON); "" for most kinds.
	Data string
}

// Launch is runners started on a fleet target for their owner. Each
// registers once with its own Registration, which binds the owner, the
// labels it may report and a runner name; revoking the launch revokes them.
type Launch struct {
	ID        string
	OwnerID   string
	Target    string
	Labels    map[string]string // the labels its runners may report (a subset)
	Slots     int
	Count     int
	CreatedAt time.Time
	RevokedAt *time.Time
}

// LaunchFailure is why an owner's latest launch failed on its target (an
// infrastructure failure): shown on the owner's waiting jobs that runners
// with Labels could run, until a launch succeeds.
type LaunchFailure struct {
	OwnerID  string
	LaunchID string
	Target   string
	Labels   map[string]string
	Reason   string
	FailedAt time.Time
}

// Registration is a single-use, expiring registration token of a launch,
// kept only as the hex SHA-256 of its plaintext.
type Registration struct {
	Hash      string
	LaunchID  string
	Name      string // the runner name it registers
	CreatedAt time.Time
	ExpiresAt time.Time
	UsedAt    *time.Time
	RunnerID  string // "" until used
}

// Forge triggers (internal/forgework): the forge events that start jobs.
type ForgeTx interface {
	// A project's triggers, one per project and one per hook id.
	// PutForgeTrigger inserts them or replaces the project's (CreatedAt
	// and CreatedBy kept); ForgeTrigger and ForgeTriggerByHook carry the
	// secret; RemoveForgeTrigger of a project without is ErrNotFound.
	PutForgeTrigger(t ForgeTrigger) error
	ForgeTrigger(project string) (ForgeTrigger, error)
	ForgeTriggerByHook(hookID string) (ForgeTrigger, error)
	RemoveForgeTrigger(project string) error
	// Links of forge logins to users, unique per (forge, login):
	// PutForgeLink of a linked login is ErrConflict; ForgeLinksOf lists a
	// user's by forge then login; RemoveForgeLink of a missing one is
	// ErrNotFound.
	PutForgeLink(l ForgeLink) error
	ForgeLink(forge, login string) (ForgeLink, error)
	ForgeLinksOf(userID string) ([]ForgeLink, error)
	RemoveForgeLink(forge, login string) error
	// Deliveries of a hook, one per (hook, delivery id): InsertForgeDelivery
	// of one received before is ErrConflict; UpdateForgeDelivery replaces
	// its State, JobID, Reason, Tries and UpdatedAt; ForgeDeliveries lists
	// those in state, oldest first, at most limit; PruneForgeDeliveries
	// removes the finished ones last updated before.
	InsertForgeDelivery(d ForgeDelivery) error
	ForgeDelivery(hookID, delivery string) (ForgeDelivery, error)
	UpdateForgeDelivery(d ForgeDelivery) error
	ForgeDeliveries(state ForgeDeliveryState, limit int) ([]ForgeDelivery, error)
	PruneForgeDeliveries(before time.Time) (int64, error)
}

// ForgeTrigger is what starts a project's jobs from its forge repository,
// and the hook registered there to hear of it.
type ForgeTrigger struct {
	Project string
	HookID  string // random: the hook's URL is /hooks/KIND/HOOKID
	Secret  string // the hook's HMAC secret or GitLab token: a secret
	Forge   string // the connection the hook was registered through
	Kind    string // its kind, which says how deliveries are signed
	Repo    string // OWNER/REPO
	// RemoteID is the forge's id of the hook (what deletes it).
	RemoteID  int64
	Label     string // a label that starts a job on an issue; "" for none
	Command   string // the comment command's prefix; "" for none
	Reviews   bool   // a review asking for changes starts a round on the PR
	Assign    string // the bot's login: an assignment to it starts a job; "" for none
	Agent     string // the agent of the jobs it starts (a command's --agent aside)
	CreatedBy string // user id
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ForgeLink maps a forge login to the drover user it acts as.
type ForgeLink struct {
	Forge     string
	Login     string
	UserID    string
	CreatedBy string
	CreatedAt time.Time
}

// ForgeDeliveryState is where a hook's delivery is.
type ForgeDeliveryState string

const (
	DeliveryPending ForgeDeliveryState = "pending" // recorded; the leader acts on it
	DeliveryDone    ForgeDeliveryState = "done"    // it started a job (JobID), or acted on one
	DeliveryRefused ForgeDeliveryState = "refused" // it starts nothing: Reason says why
)

// ForgeDelivery is one delivery of a hook, recorded before it is acted on.
type ForgeDelivery struct {
	HookID    string
	Delivery  string
	Event     string // the forgehook.Event as JSON
	State     ForgeDeliveryState
	JobID     string
	Reason    string
	Tries     int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Webhook is a user's outbound webhook: the events of jobs it hears of,
// POSTed to URL signed with Secret (which only the hub reads: never listed,
// logged or sent but as a signature's key).
type Webhook struct {
	ID        string
	OwnerID   string
	URL       string
	Events    []string // event names (webhook.Events)
	Project   string   // "" for the owner's own jobs
	Format    string   // "json", "slack" or "matrix"
	Secret    string
	CreatedAt time.Time
}

// JobChange is a job's move to State, recorded in the transaction that
// made it. Seq orders one job's changes as they were committed.
type JobChange struct {
	Seq   int64
	JobID string
	State job.State
	At    time.Time
}

// WebhookDeliveryState is where one delivery is.
type WebhookDeliveryState string

const (
	WebhookPending   WebhookDeliveryState = "pending"
	WebhookDelivered WebhookDeliveryState = "delivered"
	WebhookFailed    WebhookDeliveryState = "failed" // given up (or no longer the owner's to see)
)

// WebhookDelivery is one event of one job for one hook. ID is the
// delivery id receivers see on every try; Payload is the event as JSON,
// which the hook's format renders at each try.
type WebhookDelivery struct {
	ID        string
	HookID    string
	JobID     string
	ChangeSeq int64 // the JobChange it came from: unique per hook, the order of a job's events
	Event     string
	Payload   string
	State     WebhookDeliveryState
	Attempts  int
	Status    int    // the last try's HTTP status (0: none)
	Error     string // the last try's error
	NextAt    time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// EvalState is where an evaluation is.
type EvalState string

const (
	EvalRunning   EvalState = "running"
	EvalDone      EvalState = "done" // every item ended
	EvalCancelled EvalState = "cancelled"
)

// Eval is one evaluation: a dataset's instances run by one agent.
type Eval struct {
	ID          string
	RequesterID string
	Key         string
	Agent       string
	Name        string // model_name_or_path of its predictions
	Params      string // internal/eval's settings as JSON
	State       EvalState
	Reason      string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// EvalItemState is where one sample of an instance is.
type EvalItemState string

const (
	ItemQueued     EvalItemState = "queued"     // not started: max_parallel holds it back
	ItemAgent      EvalItemState = "agent"      // its agent job is queued, parked or running
	ItemGrading    EvalItemState = "grading"    // its grading job is queued or running
	ItemResolved   EvalItemState = "resolved"   // graded: every test passed
	ItemUnresolved EvalItemState = "unresolved" // graded: a test failed, or the agent failed
	ItemRefused    EvalItemState = "refused"    // bad input: never run, not counted
	ItemSkipped    EvalItemState = "skipped"    // never run: the evaluation was cancelled or its max cost spent
)

// Terminal says whether an item is over.
func (s EvalItemState) Terminal() bool {
	return s != ItemQueued && s != ItemAgent && s != ItemGrading
}

// EvalItem is one sample of an instance (Key "INSTANCE#REPEAT#ATTEMPT"),
// or a refused dataset line (Repeat 0).
type EvalItem struct {
	EvalID     string
	Key        string
	InstanceID string
	Repeat     int
	Attempt    int
	Line       int    // its line in the dataset
	Instance   string // the instance as checked, JSON
	State      EvalItemState
	AgentJob   string
	Head       string // the commit the agent left
	Graded     string // the commit graded: the base with the agent's changes to files other than tests
	GradeJob   string
	Patch      string // model_patch: the agent's diff against the base
	Reason     string
	CostUSD    float64
	Tokens     int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
}
