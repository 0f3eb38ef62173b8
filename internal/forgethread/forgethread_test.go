package forgethread_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/forgethread"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/retry"
	"drover/internal/store"
	"drover/internal/store/sqlite"
)

var target = forgethread.Target{Forge: "gt", Repo: forge.Repo{Owner: "acme", Name: "web"}, Number: 7}

// fakeCore is the hub's core as threads see it: jobs the test moves by
// hand, and the answers given through it.
type fakeCore struct {
	forge *fakeForge
	kind  string // the forge's kind; "" is one that numbers issues and pull requests alike

	mu      sync.Mutex
	jobs    map[string]apitypes.JobView
	answers []string // "user job text"
	noForge bool
}

func (c *fakeCore) Job(_ context.Context, id string) (apitypes.JobView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.jobs[id]
	if !ok {
		return v, fmt.Errorf("job %s: %w", id, store.ErrNotFound)
	}
	return v, nil
}
func (c *fakeCore) JobURL(id string) string { return "https://hub.example/jobs/" + id }
func (c *fakeCore) Forge(context.Context, string) (forgethread.Forge, string, error) {
	if c.noForge {
		return nil, "", forgethread.ErrNoThreads
	}
	return c.forge, c.kind, nil
}
func (c *fakeCore) Answer(_ context.Context, userID, jobID, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers = append(c.answers, userID+" "+jobID+" "+text)
	return nil
}
func (c *fakeCore) Leading() bool { return true }

func (c *fakeCore) set(v apitypes.JobView) {
	c.mu.Lock()
	c.jobs[v.ID] = v
	c.mu.Unlock()
}

// fakeForge is a forge's thread of comments, which can fail its next
// calls (down), or post and then lose the reply (lose).
type fakeForge struct {
	mu       sync.Mutex
	comments []forgethread.Comment
	markers  map[string]int64
	posts    int
	edits    int
	down     int   // calls that fail, unavailable
	lose     int   // posts whose reply is lost
	readErr  error // the reads' error
	issue    forgethread.Issue
	reviews  []forgethread.Review
	threads  []forgethread.ReviewThread
	checks   []forgethread.Check
	checkSHA string
	numbers  map[int]bool // the thread numbers the calls took
}

func newFakeForge() *fakeForge {
	return &fakeForge{markers: map[string]int64{}, numbers: map[int]bool{}}
}

func (f *fakeForge) took(n int) {
	f.mu.Lock()
	f.numbers[n] = true
	f.mu.Unlock()
}

var errDown = &forge.Error{Op: "comment", Status: 503, Code: forge.CodeUnavailable}

func (f *fakeForge) fail() error {
	if f.down > 0 {
		f.down--
		return errDown
	}
	return nil
}

func (f *fakeForge) CommentOnce(_ context.Context, _ forge.Repo, n int, marker, body string) (forgethread.Comment, error) {
	f.took(n)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail(); err != nil {
		return forgethread.Comment{}, err
	}
	if id, ok := f.markers[marker]; ok {
		return f.comments[id-1], nil
	}
	f.posts++
	c := forgethread.Comment{ID: int64(len(f.comments) + 1), Author: "drover-bot", Body: "<!-- " + marker + " -->\n" + body}
	f.comments = append(f.comments, c)
	f.markers[marker] = c.ID
	if f.lose > 0 {
		f.lose--
		return forgethread.Comment{}, &forge.Error{Op: "comment", Code: forge.CodeUnavailable}
	}
	return c, nil
}

func (f *fakeForge) EditComment(_ context.Context, _ forge.Repo, id int64, body string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail(); err != nil {
		return err
	}
	if id <= 0 || int(id) > len(f.comments) {
		return &forge.Error{Op: "edit comment", Status: 404, Code: forge.CodeNotFound}
	}
	f.edits++
	c := &f.comments[id-1]
	marker, _, _ := strings.Cut(c.Body, "\n")
	c.Body = marker + "\n" + body
	return nil
}

func (f *fakeForge) Issue(_ context.Context, _ forge.Repo, n int) (forgethread.Issue, error) {
	f.took(n)
	return f.issue, f.readErr
}
func (f *fakeForge) Comments(_ context.Context, _ forge.Repo, n int) ([]forgethread.Comment, error) {
	f.took(n)
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]forgethread.Comment(nil), f.comments...), f.readErr
}
func (f *fakeForge) Reviews(context.Context, forge.Repo, int) ([]forgethread.Review, error) {
	return f.reviews, f.readErr
}
func (f *fakeForge) ReviewThreads(context.Context, forge.Repo, int) ([]forgethread.ReviewThread, error) {
	return f.threads, f.readErr
}
func (f *fakeForge) Checks(_ context.Context, _ forge.Repo, sha string) ([]forgethread.Check, error) {
	f.checkSHA = sha
	return f.checks, f.readErr
}

func (f *fakeForge) state() (posts, edits int, bodies []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.comments {
		bodies = append(bodies, c.Body)
	}
	return f.posts, f.edits, bodies
}

type fixture struct {
	core *fakeCore
	ff   *fakeForge
	st   store.Store
	s    *forgethread.Service
}

// newFixture is a Service over a fake core and forge, on a store that
// holds jobs ids.
func newFixture(t *testing.T, ids ...string) *fixture {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	if err := st.Write(t.Context(), func(tx store.Tx) error {
		errs := []error{tx.InsertUser(store.User{ID: "u-1", Name: "alice", CreatedAt: now})}
		for _, id := range ids {
			errs = append(errs, tx.InsertJob(store.Job{ID: id, State: job.Queued, Agent: "exec", RequesterID: "u-1",
				CreatedAt: now, UpdatedAt: now, Project: "web"}))
		}
		return errors.Join(errs...)
	}); err != nil {
		t.Fatal(err)
	}
	ff := newFakeForge()
	core := &fakeCore{forge: ff, jobs: map[string]apitypes.JobView{}}
	for _, id := range ids {
		core.jobs[id] = apitypes.JobView{ID: id, State: job.Queued, Project: "web", Requester: "alice"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := forgethread.New(ctx, core, forgethread.Config{Store: st, Sweep: 20 * time.Millisecond,
		Retry: retry.Policy{First: time.Millisecond, Max: 5 * time.Millisecond, Tries: 4}})
	t.Cleanup(func() { cancel(); s.Wait() })
	return &fixture{core: core, ff: ff, st: st, s: s}
}

func (fx *fixture) thread(t *testing.T, jobID string) store.ForgeThread {
	t.Helper()
	var th store.ForgeThread
	if err := fx.st.Read(t.Context(), func(tx store.Tx) error {
		var err error
		th, err = tx.ForgeThread(jobID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return th
}

// eventually waits for cond, polling; it never asserts a time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// shows waits until job's thread records it shows key.
func (fx *fixture) shows(t *testing.T, jobID, key string) store.ForgeThread {
	t.Helper()
	var th store.ForgeThread
	eventually(t, jobID+" showing "+key, func() bool { th = fx.thread(t, jobID); return th.Shown == key })
	return th
}

func TestStatusCommentOncePerJobEditedOnlyOnChange(t *testing.T) {
	fx := newFixture(t, "j-1")
	fx.ff.lose = 1 // the first post's reply is lost: the retry finds it
	if err := fx.s.Attach(t.Context(), "j-1", target); err != nil {
		t.Fatal(err)
	}
	if err := fx.s.Attach(t.Context(), "j-1", target); err != nil {
		t.Fatalf("attach again to the same thread: %v", err)
	}
	other := target
	other.Number = 8
	if err := fx.s.Attach(t.Context(), "j-1", other); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("attach to another thread: %v, want a conflict", err)
	}
	th := fx.shows(t, "j-1", "queued")
	if th.StatusID != 1 || th.Settled {
		t.Fatalf("thread after queued: %+v", th)
	}
	for range 5 {
		fx.s.JobChanged("j-1")
	}
	fx.core.set(apitypes.JobView{ID: "j-1", State: job.Running})
	fx.s.JobChanged("j-1")
	fx.shows(t, "j-1", "running")
	for range 5 {
		fx.s.JobChanged("j-1") // a log chunk, say: nothing to show
	}
	fx.core.set(apitypes.JobView{ID: "j-1", State: job.Completed, Summary: "fixed @bob's bug",
		Publication: &apitypes.PublicationView{State: string(store.PublicationDone), PR: 12, URL: "https://gt.example/acme/web/pulls/12"}})
	fx.s.JobChanged("j-1")
	th = fx.shows(t, "j-1", "published https://gt.example/acme/web/pulls/12")
	if !th.Settled {
		t.Errorf("a published job's thread is not settled: %+v", th)
	}
	posts, edits, bodies := fx.ff.state()
	if posts != 1 || len(bodies) != 1 {
		t.Fatalf("%d posts, comments %q: want one status comment", posts, bodies)
	}
	// queued posted (its lost reply found again), then running and
	// published: one edit each, whatever else changed.
	if edits != 2 {
		t.Errorf("%d edits, want 2 (running, published)", edits)
	}
	for _, want := range []string{"<!-- job:j-1 -->", "[job j-1](https://hub.example/jobs/j-1)",
		"[pull request #12](https://gt.example/acme/web/pulls/12)", "```text\nfixed @bob's bug\n```"} {
		if !strings.Contains(bodies[0], want) {
			t.Errorf("status comment %q lacks %q", bodies[0], want)
		}
	}
}

func TestFinalStateReachedAfterAnOutage(t *testing.T) {
	fx := newFixture(t, "j-1")
	if err := fx.s.Attach(t.Context(), "j-1", target); err != nil {
		t.Fatal(err)
	}
	fx.shows(t, "j-1", "queued")
	fx.ff.mu.Lock()
	fx.ff.down = 10 // longer than one update's tries: the sweep carries on
	fx.ff.mu.Unlock()
	fx.core.set(apitypes.JobView{ID: "j-1", State: job.Failed, Reason: job.ReasonExited,
		Attempts: []apitypes.AttemptView{{Message: "exit status 2 <script>alert(1)</script>"}}})
	fx.s.JobChanged("j-1")
	th := fx.shows(t, "j-1", "failed exited: exit status 2 <script>alert(1)</script>")
	if !th.Settled {
		t.Errorf("failed thread not settled: %+v", th)
	}
	_, _, bodies := fx.ff.state()
	if !strings.Contains(bodies[0], "❌ failed.") || !strings.Contains(bodies[0], "```text\nexited: exit status 2 <script>") {
		t.Errorf("status comment after the outage: %q", bodies[0])
	}
}

func TestQuestionPostedOnceAndRepliesAnswerIt(t *testing.T) {
	fx := newFixture(t, "j-1", "j-2")
	if err := fx.s.Attach(t.Context(), "j-1", target); err != nil {
		t.Fatal(err)
	}
	fx.shows(t, "j-1", "queued")
	q := protocol.QuestionView{ID: "q-1", Job: "j-1", Question: "Which @team owns it? ``` ](javascript:alert(1))", Choices: []string{"web", "api"}}
	fx.core.set(apitypes.JobView{ID: "j-1", State: job.Waiting, Questions: []protocol.QuestionView{q}})
	for range 5 {
		fx.s.JobChanged("j-1")
	}
	th := fx.shows(t, "j-1", "asked q-1")
	posts, _, bodies := fx.ff.state()
	if posts != 2 || th.Questions["q-1"] != 2 {
		t.Fatalf("%d posts, questions %v: want the status and one question comment", posts, th.Questions)
	}
	if !strings.Contains(bodies[1], "<!-- question:q-1 -->") || !strings.Contains(bodies[1], "Reply in this thread") {
		t.Errorf("question comment: %q", bodies[1])
	}

	// A comment older than the question's (a late delivery) answers nothing.
	if ok, err := fx.s.Reply(t.Context(), target, "u-2", 1, "web"); err != nil || ok {
		t.Errorf("reply older than the question: handled %v, %v", ok, err)
	}
	// Quoted lines are not the answer; the actor answers as themself: the
	// core's rule decides on approval.
	if ok, err := fx.s.Reply(t.Context(), target, "u-2", 3, "> Which team?\r\nthe web team"); err != nil || !ok {
		t.Fatalf("reply: handled %v, %v", ok, err)
	}
	other := target
	other.Number = 99
	if ok, err := fx.s.Reply(t.Context(), other, "u-2", 4, "hello"); err != nil || ok {
		t.Errorf("reply in a thread without jobs: handled %v, %v", ok, err)
	}
	fx.core.set(apitypes.JobView{ID: "j-1", State: job.Queued, Questions: []protocol.QuestionView{q}})
	if ok, err := fx.s.Reply(t.Context(), target, "u-1", 5, "api"); err != nil || ok {
		t.Errorf("reply once no job waits: handled %v, %v", ok, err)
	}
	fx.core.mu.Lock()
	defer fx.core.mu.Unlock()
	if want := []string{"u-2 j-1 the web team"}; fmt.Sprint(fx.core.answers) != fmt.Sprint(want) {
		t.Errorf("answers %q, want %q", fx.core.answers, want)
	}
}

func TestNoThreadsForgeWaitsWithoutPosting(t *testing.T) {
	fx := newFixture(t, "j-1")
	fx.core.noForge = true
	if err := fx.s.Attach(t.Context(), "j-1", target); err != nil {
		t.Fatal(err)
	}
	fc, err := fx.s.Context(t.Context(), "j-1")
	if err != nil || fc == nil || len(fc.Notes) != 1 || !strings.Contains(fc.Notes[0], "cannot read threads") {
		t.Fatalf("context of a forge without threads: %+v, %v", fc, err)
	}
	if th := fx.thread(t, "j-1"); th.Shown != "" || th.StatusID != 0 {
		t.Errorf("thread on a forge without threads: %+v", th)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDeletedStatusCommentIsPostedAgain(t *testing.T) {
	fx := newFixture(t, "j-1")
	if err := fx.s.Attach(t.Context(), "j-1", target); err != nil {
		t.Fatal(err)
	}
	fx.shows(t, "j-1", "queued")
	fx.ff.mu.Lock()
	fx.ff.comments, fx.ff.markers = nil, map[string]int64{} // deleted on the forge
	fx.ff.mu.Unlock()
	fx.core.set(apitypes.JobView{ID: "j-1", State: job.Cancelled})
	fx.s.JobChanged("j-1")
	th := fx.shows(t, "j-1", "cancelled")
	if _, _, bodies := fx.ff.state(); th.StatusID != 1 || len(bodies) != 1 || !strings.Contains(bodies[0], "🚫 cancelled.") {
		t.Errorf("status comment after its deletion: %+v %q", th, bodies)
	}
}

// TestGitLabMergeRequestThread: on GitLab the thread of a merge request is
// written and read by forge.ThreadNumber's number, never the bare iid an
// issue may share.
func TestGitLabMergeRequestThread(t *testing.T) {
	fx := newFixture(t, "j-1")
	fx.core.kind = forge.KindGitLab
	mr := forgethread.Target{Forge: "gl", Repo: target.Repo, Number: 7, IsPR: true}
	if err := fx.s.Attach(t.Context(), "j-1", mr); err != nil {
		t.Fatal(err)
	}
	fx.shows(t, "j-1", "queued")
	if _, err := fx.s.Context(t.Context(), "j-1"); err != nil {
		t.Fatal(err)
	}
	fx.ff.mu.Lock()
	defer fx.ff.mu.Unlock()
	if want := forge.GitLabMergeRequest(7); len(fx.ff.numbers) != 1 || !fx.ff.numbers[want] {
		t.Fatalf("numbers %v, want only %d", fx.ff.numbers, want)
	}
}
