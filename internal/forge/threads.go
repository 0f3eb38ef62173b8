package forge

// The declarations of the forge operations the forgeapi branch adds (as the
// session's brief gives them), so that this branch's users compile against
// them; that branch's file of this name, with the clients' implementations,
// replaces this one when both are merged.

import (
	"context"
	"time"
)

type Issue struct {
	Number                          int
	Title, Body, Author, State, URL string
	IsPR                            bool
	Labels                          []string
	HeadSHA, HeadBranch, BaseBranch string
}

type Comment struct {
	ID                   int64
	Author, Body, URL    string
	CreatedAt, UpdatedAt time.Time
}

type Review struct {
	ID                            int64
	Author, State, Body, CommitID string
	SubmittedAt                   time.Time
}

const (
	ReviewApproved         = "approved"
	ReviewChangesRequested = "changes_requested"
	ReviewCommented        = "commented"
)

type ReviewThread struct {
	Path     string
	Line     int
	Resolved bool
	Comments []Comment
}

type Check struct{ Name, Status, Conclusion, URL string }

type Permission string

const (
	PermAdmin Permission = "admin"
	PermWrite Permission = "write"
	PermRead  Permission = "read"
	PermNone  Permission = "none"
)

type NewHook struct {
	URL, Secret string
	Events      []string
}

const (
	HookIssues   = "issues"
	HookComments = "comments"
	HookReviews  = "reviews"
)

type Threads interface {
	Issue(ctx context.Context, repo Repo, number int) (Issue, error)
	Comments(ctx context.Context, repo Repo, number int) ([]Comment, error)
	Reviews(ctx context.Context, repo Repo, number int) ([]Review, error)
	ReviewThreads(ctx context.Context, repo Repo, number int) ([]ReviewThread, error)
	Checks(ctx context.Context, repo Repo, sha string) ([]Check, error)
	CommentOnce(ctx context.Context, repo Repo, number int, marker, body string) (Comment, error)
	EditComment(ctx context.Context, repo Repo, id int64, body string) error
	Permission(ctx context.Context, repo Repo, login string) (Permission, error)
}

type Hooks interface {
	CreateHook(ctx context.Context, repo Repo, h NewHook) (id int64, err error)
	DeleteHook(ctx context.Context, repo Repo, id int64) error
}
