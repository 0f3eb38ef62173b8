package httpapi

import (
	"context"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/protocol"
	"drover/internal/store"
)

// Core is what the API calls: the hub's operations, each
// (ctx, caller, typed request) -> (typed reply, error), grouped by area.
type Core interface {
	Auth
	Jobs
	Logs
	Users
	Runners
	Accounts
	Projects
	Secrets
	Fleet
	Hubs
	Transfers
	Forges
	Pipelines
	ForgeWork
	Webhooks
	SignIn
	OIDC
	Evals
	Groups
}

// Groups are several attempts side by side (internal/attemptgroup).
type Groups interface {
	StartGroup(ctx context.Context, p call.Caller, req apitypes.GroupRequest) (apitypes.GroupView, bool, error)
	CompareGroup(ctx context.Context, p call.Caller, id string) (apitypes.GroupView, error)
	PickGroup(ctx context.Context, p call.Caller, id string, req apitypes.GroupPickRequest) (apitypes.GroupView, error)
}

// SignIn is signing in to the dashboard with a forge (internal/signin).
type SignIn interface {
	SetOAuth(ctx context.Context, p call.Caller, forge string, req apitypes.ForgeOAuthRequest) (apitypes.ForgeOAuthView, error)
}

// ForgeWork is forge triggers and the links of forge logins to users
// (internal/forgework).
type ForgeWork interface {
	SetTriggers(ctx context.Context, p call.Caller, project string, req apitypes.ForgeTriggersRequest) (apitypes.ForgeTriggersView, error)
	ShowTriggers(ctx context.Context, p call.Caller, project string) (apitypes.ForgeTriggersView, error)
	RemoveTriggers(ctx context.Context, p call.Caller, project string) (apitypes.ForgeTriggersView, error)
	LinkUser(ctx context.Context, p call.Caller, name string, req apitypes.ForgeLinkRequest) (apitypes.ForgeLinkView, error)
	UnlinkUser(ctx context.Context, p call.Caller, name, forge, login string) (apitypes.ForgeLinkView, error)
	Links(ctx context.Context, p call.Caller, name string) (apitypes.ForgeLinkList, error)
}

// Webhooks are users' outbound webhooks of jobs' events (internal/webhook).
type Webhooks interface {
	AddWebhook(ctx context.Context, p call.Caller, req apitypes.WebhookRequest) (apitypes.WebhookView, error)
	ListWebhooks(ctx context.Context, p call.Caller) (apitypes.WebhookList, error)
	RemoveWebhook(ctx context.Context, p call.Caller, id string) (apitypes.WebhookView, error)
	WebhookDeliveries(ctx context.Context, p call.Caller, id string, limit int) (apitypes.WebhookDeliveryList, error)
}

// Pipelines are graphs of steps run as jobs (internal/pipeline).
// RunPipeline's bool says whether it started one (false: the same key's
// earlier one).
type Pipelines interface {
	RunPipeline(ctx context.Context, p call.Caller, req apitypes.PipelineRunRequest) (apitypes.PipelineView, bool, error)
	ListPipelines(ctx context.Context, p call.Caller, limit int) (apitypes.PipelineList, error)
	ShowPipeline(ctx context.Context, p call.Caller, id string) (apitypes.PipelineView, error)
	CancelPipeline(ctx context.Context, p call.Caller, id string) (apitypes.PipelineView, error)
	RetryPipeline(ctx context.Context, p call.Caller, id string, req apitypes.PipelineRetryRequest) (apitypes.PipelineView, error)
	PipelineEvents(ctx context.Context, p call.Caller, id string, after int64) (apitypes.PipelineEventList, error)
}

// Forges are the forge connections and the publication of jobs' results
// to them (internal/publish).
type Forges interface {
	ListForges(ctx context.Context, p call.Caller) (apitypes.ForgeList, error)
	PutForge(ctx context.Context, p call.Caller, name string, req apitypes.ForgeRequest) (apitypes.ForgeView, error)
	RemoveForge(ctx context.Context, p call.Caller, name string) (apitypes.ForgeView, error)
	PublishJob(ctx context.Context, p call.Caller, id string, req apitypes.PublishRequest) (apitypes.PublicationView, error)
}

// Auth resolves tokens to callers and errors to refusals.
type Auth interface {
	// AuthenticateToken resolves a token of any kind.
	AuthenticateToken(ctx context.Context, token string) (call.Caller, error)
	// AuthenticateAs resolves a token that must be of kind.
	AuthenticateAs(ctx context.Context, token string, kind store.TokenKind) (call.Caller, error)
	// AsRefusal is err as the caller may see it; it logs an internal
	// error and reports a full disk.
	AsRefusal(err error) *call.Refusal
}

// Jobs are the jobs' operations.
type Jobs interface {
	SubmitJob(ctx context.Context, p call.Caller, req apitypes.SubmitRequest) (call.Submitted, error)
	ListJobs(ctx context.Context, p call.Caller, req call.ListJobsRequest) (apitypes.JobList, error)
	ShowJob(ctx context.Context, p call.Caller, req call.ShowJobRequest) (apitypes.JobView, error)
	ActOnJob(ctx context.Context, p call.Caller, req call.JobActionRequest) (apitypes.JobView, error)
	JobEvents(ctx context.Context, p call.Caller, req call.JobEventsRequest) (apitypes.EventList, error)
	OpenQuestions(ctx context.Context, p call.Caller) (apitypes.QuestionList, error)
}

// Logs read a job's log, waiting for more when asked to.
type Logs interface {
	FollowLog(ctx context.Context, p call.Caller, req call.LogRequest) (call.LogSlice, error)
}

// Users are the users' operations.
type Users interface {
	AddUser(ctx context.Context, p call.Caller, req apitypes.NewUserRequest) (apitypes.NewUserResponse, error)
	ListUsers(ctx context.Context, p call.Caller) (apitypes.UserList, error)
	RemoveUser(ctx context.Context, p call.Caller, req call.UserRequest) (apitypes.UserView, error)
	RotateToken(ctx context.Context, p call.Caller, req call.UserRequest) (apitypes.NewUserResponse, error)
	Whoami(ctx context.Context, p call.Caller) (apitypes.Whoami, error)
}

// Runners are the runners' operations, their shares, and a runner's check
// of its own token.
type Runners interface {
	RunnerViews(ctx context.Context, p call.Caller) ([]apitypes.RunnerView, error)
	Approve(ctx context.Context, p call.Caller, req apitypes.ApproveRequest) (apitypes.ApproveResponse, error)
	RevokeRunner(ctx context.Context, p call.Caller, req call.RunnerRequest) (apitypes.RunnerView, error)
	RunnerLogin(ctx context.Context, p call.Caller) (apitypes.RunnerView, error)
	ShareRunner(ctx context.Context, p call.Caller, req call.ShareRunnerRequest) (apitypes.RunnerView, error)
	AnswerShare(ctx context.Context, p call.Caller, req call.AnswerShareRequest) (apitypes.RunnerView, error)
}

// Accounts are the runners' agent accounts as users see and move them.
type Accounts interface {
	Accounts(ctx context.Context, p call.Caller) (apitypes.AccountList, error)
	MoveAccount(ctx context.Context, p call.Caller, req apitypes.MoveAccountRequest) (apitypes.AccountList, error)
	ShareAccount(ctx context.Context, p call.Caller, req call.ShareAccountRequest) (apitypes.AccountList, error)
}

// Projects are the projects' operations: mapping, config, members.
type Projects interface {
	ProjectViews(ctx context.Context, p call.Caller) ([]apitypes.ProjectView, error)
	MapProject(ctx context.Context, p call.Caller, req call.MapProjectRequest) (apitypes.ProjectView, error)
	ProjectConfig(ctx context.Context, p call.Caller, req call.ProjectConfigRequest) (apitypes.ProjectConfig, error)
	SetProjectConfig(ctx context.Context, p call.Caller, req call.ProjectConfigRequest) (apitypes.ProjectConfig, error)
	Members(ctx context.Context, p call.Caller, req call.MembersRequest) (apitypes.MemberList, error)
	ChangeMember(ctx context.Context, p call.Caller, req call.ChangeMemberRequest) (apitypes.MemberList, error)
}

// Secrets are a project's secrets; values go in, never out.
type Secrets interface {
	ListSecrets(ctx context.Context, p call.Caller, req call.SecretRequest) (apitypes.SecretList, error)
	SetSecret(ctx context.Context, p call.Caller, req call.SecretRequest) (apitypes.SecretList, error)
	RemoveSecret(ctx context.Context, p call.Caller, req call.SecretRequest) (apitypes.SecretList, error)
}

// Fleet are the launches of runners, their registration and the demand.
type Fleet interface {
	Launch(ctx context.Context, p call.Caller, req apitypes.LaunchRequest) (apitypes.LaunchResponse, error)
	Launches(ctx context.Context, p call.Caller) (apitypes.LaunchList, error)
	LaunchView(ctx context.Context, p call.Caller, req call.LaunchRequest) (apitypes.LaunchView, error)
	RevokeLaunch(ctx context.Context, p call.Caller, req call.LaunchRequest) (apitypes.LaunchView, error)
	RecordLaunchFailure(ctx context.Context, p call.Caller, req call.LaunchFailureRequest) error
	WaitDemand(ctx context.Context, p call.Caller, req call.DemandRequest) (apitypes.Demand, error)
	// AuthenticateRegistration checks a registration token ("": none).
	AuthenticateRegistration(ctx context.Context, token string) error
	RegisterRunner(ctx context.Context, token string, req apitypes.RegisterRequest) (apitypes.RunnerView, error)
}

// Hubs lists the hubs sharing the database.
type Hubs interface {
	HubList(ctx context.Context, p call.Caller) (apitypes.HubList, error)
}

// Transfers are a runner's calls besides its WebSocket: a job's context
// files, and a publication whose bundle the request's Spool stores.
type Transfers interface {
	ContextFiles(ctx context.Context, p call.Caller, ref protocol.AttemptRef) ([]store.ContextFile, error)
	PublishBundle(ctx context.Context, p call.Caller, req call.PublishRequest) (protocol.PublishResult, error)
	// TooLargeTransfer says what to do about a transfer over the cap.
	TooLargeTransfer(what string) *call.Refusal
}

// Evals are evaluations over datasets of instances (internal/eval).
// StartEval's bool says whether it started one (false: the same key's).
type Evals interface {
	StartEval(ctx context.Context, p call.Caller, req apitypes.EvalRunRequest) (apitypes.EvalView, bool, error)
	ListEvals(ctx context.Context, p call.Caller, limit int) (apitypes.EvalList, error)
	ShowEval(ctx context.Context, p call.Caller, id string) (apitypes.EvalView, error)
	EvalReport(ctx context.Context, p call.Caller, id string) (apitypes.EvalReport, error)
	CancelEval(ctx context.Context, p call.Caller, id string) (apitypes.EvalView, error)
}
