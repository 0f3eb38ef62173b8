package hub

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/forgethread"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// fakeThreadForge is a forge's issue thread, in test code until package
// forge's clients read threads.
type fakeThreadForge struct {
	mu       sync.Mutex
	comments []forgethread.Comment
	markers  map[string]int64
}

func (f *fakeThreadForge) Issue(_ context.Context, _ forge.Repo, n int) (forgethread.Issue, error) {
	return forgethread.Issue{Number: n, Title: "Login fails", Body: "Steps: ...", Author: "carol", State: "open"}, nil
}
func (f *fakeThreadForge) Comments(context.Context, forge.Repo, int) ([]forgethread.Comment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]forgethread.Comment(nil), f.comments...), nil
}
func (f *fakeThreadForge) Reviews(context.Context, forge.Repo, int) ([]forgethread.Review, error) {
	return nil, nil
}
func (f *fakeThreadForge) ReviewThreads(context.Context, forge.Repo, int) ([]forgethread.ReviewThread, error) {
	return nil, nil
}
func (f *fakeThreadForge) Checks(context.Context, forge.Repo, string) ([]forgethread.Check, error) {
	return nil, nil
}
func (f *fakeThreadForge) CommentOnce(_ context.Context, _ forge.Repo, _ int, marker, body string) (forgethread.Comment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.markers[marker]; ok {
		return f.comments[id-1], nil
	}
	c := forgethread.Comment{ID: int64(len(f.comments) + 1), Author: "bot", Body: body}
	f.comments = append(f.comments, c)
	f.markers[marker] = c.ID
	return c, nil
}
func (f *fakeThreadForge) EditComment(_ context.Context, _ forge.Repo, id int64, body string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.comments[id-1].Body = body
	return nil
}

// TestForgeThreadInContextAndRepliesAnswer: a job attached to an issue
// finds the issue in its agent's context, read from the forge, while a
// job of no thread finds none; replies in the thread answer as their
// author, with the approval rule of any answer.
func TestForgeThreadInContextAndRepliesAnswer(t *testing.T) {
	t.Parallel()
	ff := &fakeThreadForge{markers: map[string]int64{}}
	th := startHub(t, Config{threadForge: func(store.Forge) (forgethread.Forge, error) { return ff, nil }})
	bob := th.addUser("bob")
	var bobID, adminID string
	if err := th.h.store.Read(t.Context(), func(tx store.Tx) error {
		b, err := tx.UserByName("bob")
		bobID = b.ID
		a, aerr := tx.UserByName("admin")
		adminID = a.ID
		return errors.Join(err, aerr)
	}); err != nil {
		t.Fatal(err)
	}
	if err := th.h.store.Write(t.Context(), func(tx store.Tx) error {
		return tx.PutForge(store.Forge{Name: "gt", Kind: "gitea", URL: "https://gt.example", Secret: "token",
			CreatedBy: adminID, CreatedAt: time.Now(), UpdatedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	sr, _ := th.dial(th.registerRunnerOf(bob, "r1", "admin"), protocol.Hello{})
	issue := forgethread.Target{Forge: "gt", Repo: forge.Repo{Owner: "acme", Name: "web"}, Number: 7}
	other := issue
	other.Number = 8

	threaded := th.submitTools("fix", "it")
	th.submitTools("other")
	if err := th.h.threads.Attach(t.Context(), threaded.ID, issue); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		o := sr.offer()
		wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
		jc := contextOf(t, sr, o.AttemptRef)
		switch o.Job {
		case threaded.ID:
			if f := jc.Forge; f == nil || f.Title != "Login fails" || f.Repo != "acme/web" || f.Number != 7 || len(f.Notes) != 0 {
				t.Fatalf("forge section of the threaded job: %+v", f)
			}
			r := sr.request(protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "Which @team?"})
			wantOK(t, r)
			wantOK(t, finishAs(sr, o.AttemptRef, job.AttemptAsked, ""))
		default:
			if jc.Forge != nil {
				t.Fatalf("forge section of a job without a thread: %+v", jc.Forge)
			}
			wantOK(t, finishAs(sr, o.AttemptRef, job.AttemptFailed, ""))
		}
	}
	th.waitJob(threaded.ID, func(v apitypes.JobView) bool { return v.State == job.Waiting })
	// The question is posted: a later comment answers it.
	var asked int64
	waitFor(t, "the question comment", func() bool {
		var tt store.ForgeThread
		_ = th.h.store.Read(t.Context(), func(tx store.Tx) error { var err error; tt, err = tx.ForgeThread(threaded.ID); return err })
		for _, id := range tt.Questions {
			asked = id
		}
		return asked != 0
	})

	if ok, err := th.h.threads.Reply(t.Context(), other, bobID, asked+1, "sqlite"); err != nil || ok {
		t.Fatalf("reply in another thread: %v %v", ok, err)
	}
	if ok, err := th.h.threads.Reply(t.Context(), issue, bobID, asked+1, "the web team"); err != nil || !ok {
		t.Fatalf("bob's reply: %v %v", ok, err)
	}
	v := th.job(threaded.ID)
	if a := v.Questions[0].Answer; v.State != job.Waiting || a == nil || a.Approved || a.By != "bob" || a.Text != "the web team" {
		t.Fatalf("after bob's reply the answer awaits the requester's approval: %+v", v)
	}
	if ok, err := th.h.threads.Reply(t.Context(), issue, adminID, asked+2, "the api team"); err != nil || !ok {
		t.Fatalf("the requester's reply: %v %v", ok, err)
	}
	v = th.job(threaded.ID)
	// Queued again, and r1, idle and connected, may have been offered it
	// already.
	if a := v.Questions[0].Answer; (v.State != job.Queued && v.State != job.Offered) || a == nil || !a.Approved || a.By != "admin" {
		t.Fatalf("after the requester's reply the job is queued: %+v", v)
	}
	if code, _ := th.call(th.admin, "GET", "/jobs/"+threaded.ID, nil, nil); code != http.StatusOK {
		t.Fatal(code)
	}
}
