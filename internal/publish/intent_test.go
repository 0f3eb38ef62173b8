package publish_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/publish"
	"drover/internal/store"
	"drover/internal/store/sqlite"
)

// TestIntentOfAJobFromAnIssue: a completed job started from an issue of
// its project's forge repository publishes as a pull request (which
// closes the issue) though the project publishes nothing by itself; its
// project's explicit default still rules, and a job from a pull request,
// from another repository's issue or from no thread publishes nothing by
// itself.
func TestIntentOfAJobFromAnIssue(t *testing.T) {
	const repo = "acme/tools"
	issue := &store.ForgeThread{Forge: "gt", Repo: repo, Number: 7}
	for _, tc := range []struct {
		name      string
		def       string // the project's default
		thread    *store.ForgeThread
		wantMode  string // "" for no publication
		wantIssue int
	}{
		{"an issue's job", "", issue, apitypes.PublishPR, 7},
		{"an issue's job, the repository spelled in another case", "", &store.ForgeThread{Forge: "gt", Repo: "Acme/Tools", Number: 7}, apitypes.PublishPR, 7},
		{"an issue's job, a project that publishes branches", apitypes.PublishBranch, issue, apitypes.PublishBranch, 7},
		{"an issue's job, a project set to publish nothing", apitypes.PublishNone, issue, "", 7},
		{"a pull request's job", "", &store.ForgeThread{Forge: "gt", Repo: repo, Number: 7, IsPR: true}, "", 0},
		{"another repository's issue", "", &store.ForgeThread{Forge: "gt", Repo: "acme/other", Number: 7}, "", 0},
		{"another forge's issue", "", &store.ForgeThread{Forge: "gh", Repo: repo, Number: 7}, "", 0},
		{"no thread", "", nil, "", 0},
		{"no thread, a project that publishes pull requests", apitypes.PublishPR, nil, apitypes.PublishPR, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			now := time.Now()
			cfg := store.ProjectConfig{Forge: "gt", ForgeRepo: repo, Publish: tc.def}
			j := store.Job{ID: "j1", State: job.Completed, Agent: "exec", RequesterID: alice.UserID, CreatedAt: now, UpdatedAt: now,
				Project: "tools", Base: "b", Head: "h", Mode: protocol.ModeFix}
			var gotIssue int
			var recorded bool
			err = st.Write(t.Context(), func(tx store.Tx) error {
				if err := tx.InsertUser(store.User{ID: alice.UserID, Name: alice.Name, CreatedAt: now}); err != nil {
					return err
				}
				if err := tx.PutProject(store.Project{Name: "tools", CreatedAt: now, UpdatedAt: now}); err != nil {
					return err
				}
				if err := tx.SetProjectConfig("tools", cfg, now); err != nil {
					return err
				}
				if err := tx.InsertJob(j); err != nil {
					return err
				}
				if tc.thread != nil {
					th := *tc.thread
					th.JobID, th.Project, th.CreatedAt, th.UpdatedAt = j.ID, "tools", now, now
					if err := tx.PutForgeThread(th); err != nil {
						return err
					}
				}
				if gotIssue, err = publish.Issue(tx, j.ID, cfg); err != nil {
					return err
				}
				recorded, err = publish.Intent(tx, j, now)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if gotIssue != tc.wantIssue {
				t.Errorf("Issue = %d, want %d", gotIssue, tc.wantIssue)
			}
			var p store.Publication
			err = st.Read(t.Context(), func(tx store.Tx) error { p, err = tx.Publication(j.ID); return err })
			switch {
			case tc.wantMode == "" && (recorded || !errors.Is(err, store.ErrNotFound)):
				t.Fatalf("recorded %v: %+v, %v; want none", recorded, p, err)
			case tc.wantMode != "" && (!recorded || err != nil || p.Mode != tc.wantMode || p.State != store.PublicationPending || p.Commit != "h"):
				t.Fatalf("recorded %v: %+v, %v; want a pending %s publication of h", recorded, p, err, tc.wantMode)
			}
		})
	}
}
