package forgework_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/forgehook"
	"drover/internal/forgethread"
	"drover/internal/forgework"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/store"
	"drover/internal/store/sqlite"
)

const base = "1111111111111111111111111111111111111111"

// fakeForge is a forge in memory: hooks, the bot's comments by marker,
// and each login's permission.
type fakeForge struct {
	mu       sync.Mutex
	hooks    map[int64]forge.NewHook
	comments map[string]string // "NUMBER marker" -> body
	perms    map[string]forge.Permission
	nextID   int64
}

func (f *fakeForge) CreateHook(_ context.Context, _ forge.Repo, h forge.NewHook) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, old := range f.hooks {
		if old.URL == h.URL {
			return id, nil
		}
	}
	f.nextID++
	f.hooks[f.nextID] = h
	return f.nextID, nil
}

func (f *fakeForge) DeleteHook(_ context.Context, _ forge.Repo, id int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.hooks, id)
	return nil
}

func (f *fakeForge) CommentOnce(_ context.Context, _ forge.Repo, number int, marker, body string) (forge.Comment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fmt.Sprintf("%d %s", number, marker)
	if _, ok := f.comments[k]; !ok {
		f.comments[k] = body
	}
	return forge.Comment{ID: 1, Body: f.comments[k]}, nil
}

func (f *fakeForge) Permission(_ context.Context, _ forge.Repo, login string) (forge.Permission, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.perms[login]; ok {
		return p, nil
	}
	return forge.PermNone, nil
}

func (f *fakeForge) replies(number int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for k, v := range f.comments {
		if strings.HasPrefix(k, fmt.Sprint(number)+" ") {
			out = append(out, v)
		}
	}
	return out
}

// fakeCore is the hub's core as forge triggers see it: users u-owner
// (owner of project "web"), u-bob (a member) and u-eve (not a member).
type fakeCore struct {
	st        store.Store
	f         *fakeForge
	publicURL string
	// forgeName and repo are project web's mapping.
	forgeName, repo string

	mu        sync.Mutex
	submitted []apitypes.SubmitRequest
	byKey     map[string]string
	acted     []string // "retry j-..." / "cancel j-..."
	// asking is the job that waits on a question; replies are the
	// comments that answered it.
	asking  string
	replies []string
}

func (c *fakeCore) Caller(_ context.Context, userID string) (call.Caller, error) {
	return call.Caller{UserID: userID, Name: strings.TrimPrefix(userID, "u-")}, nil
}

func (c *fakeCore) Project(_ context.Context, p call.Caller, name string, manage bool) (store.Project, error) {
	if name != "web" {
		return store.Project{}, call.NotFound("no project %s", name)
	}
	prj := store.Project{Name: "web", OwnerID: "u-owner", Config: store.ProjectConfig{Forge: c.forgeName, ForgeRepo: c.repo}}
	switch {
	case p.Admin || p.UserID == "u-owner":
	case p.UserID == "u-bob" && !manage:
	case p.UserID == "u-bob":
		return store.Project{}, call.Forbidden("only the owner or an admin")
	default:
		return store.Project{}, call.NotFound("no project %s", name)
	}
	return prj, nil
}

func (c *fakeCore) Base(context.Context, string) (string, error) { return base, nil }

func (c *fakeCore) Submit(ctx context.Context, p call.Caller, req apitypes.SubmitRequest) (apitypes.JobView, error) {
	if _, err := c.Project(ctx, p, req.Repo.Project, false); err != nil {
		return apitypes.JobView{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.byKey[req.Key]; ok {
		return apitypes.JobView{ID: id}, nil
	}
	id := fmt.Sprintf("j-%d", len(c.byKey)+1)
	now := time.Now()
	err := c.st.Write(ctx, func(tx store.Tx) error {
		return tx.InsertJob(store.Job{ID: id, State: job.Queued, Agent: req.Agent, Args: req.Args, RequesterID: p.UserID, Key: req.Key,
			CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		return apitypes.JobView{}, err
	}
	c.byKey[req.Key] = id
	c.submitted = append(c.submitted, req)
	return apitypes.JobView{ID: id}, nil
}

func (c *fakeCore) Cancel(_ context.Context, _ call.Caller, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acted = append(c.acted, "cancel "+id)
	return nil
}

func (c *fakeCore) Retry(_ context.Context, _ call.Caller, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acted = append(c.acted, "retry "+id)
	return nil
}

func (c *fakeCore) Forge(context.Context, string) (forgework.Forge, error) { return c.f, nil }
func (c *fakeCore) PublicURL() string                                      { return c.publicURL }
func (c *fakeCore) Leading() bool                                          { return true }

// Attach records the thread as forgethread does: once per job.
func (c *fakeCore) Attach(ctx context.Context, jobID string, t forgethread.Target) error {
	return c.st.Write(ctx, func(tx store.Tx) error {
		if _, err := tx.ForgeThread(jobID); err == nil {
			return nil
		}
		now := time.Now()
		return tx.PutForgeThread(store.ForgeThread{JobID: jobID, Project: "web", Forge: t.Forge, Repo: t.Repo.String(),
			Number: t.Number, IsPR: t.IsPR, CreatedAt: now, UpdatedAt: now})
	})
}

func (c *fakeCore) Reply(_ context.Context, t forgethread.Target, userID string, commentID int64, body string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.asking == "" {
		return false, nil
	}
	c.replies = append(c.replies, fmt.Sprintf("%s %s #%d %s %d %s", c.asking, t.Repo, t.Number, userID, commentID, body))
	return true, nil
}

func (c *fakeCore) answered() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.replies...)
}

// thread is the thread job jobID was attached to.
func (e *env) thread(jobID string) store.ForgeThread {
	e.t.Helper()
	var th store.ForgeThread
	if err := e.st.Read(e.t.Context(), func(tx store.Tx) error {
		var err error
		th, err = tx.ForgeThread(jobID)
		return err
	}); err != nil {
		e.t.Fatalf("thread of %s: %v", jobID, err)
	}
	return th
}

func (c *fakeCore) submissions() []apitypes.SubmitRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]apitypes.SubmitRequest(nil), c.submitted...)
}

type env struct {
	t    testing.TB
	st   store.Store
	core *fakeCore
	f    *fakeForge
	svc  *forgework.Triggers
	srv  *httptest.Server
}

var owner = call.Caller{UserID: "u-owner", Name: "owner"}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, func(c *fakeCore) forgework.Core { return c })
}

// newEnvWith is newEnv whose service runs over wrap's core.
func newEnvWith(t testing.TB, wrap func(*fakeCore) forgework.Core) *env {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	err = st.Write(t.Context(), func(tx store.Tx) error {
		for _, u := range []string{"owner", "bob", "eve", "admin"} {
			if err := tx.InsertUser(store.User{ID: "u-" + u, Name: u, Admin: u == "admin", CreatedAt: now}); err != nil {
				return err
			}
		}
		if err := tx.PutProject(store.Project{Name: "web", OwnerID: "u-owner", CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		for name, kind := range map[string]string{"gt": forge.KindGitea, "gh": forge.KindGitHub, "gl": forge.KindGitLab} {
			if err := tx.PutForge(store.Forge{Name: name, Kind: kind, URL: "http://" + name + ".local", Secret: "t", CreatedAt: now, UpdatedAt: now}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeForge{hooks: map[int64]forge.NewHook{}, comments: map[string]string{},
		perms: map[string]forge.Permission{"alice": forge.PermAdmin, "bob": forge.PermWrite, "reader": forge.PermRead, "eve": forge.PermWrite}}
	core := &fakeCore{st: st, f: f, publicURL: "https://hub.example", forgeName: "gt", repo: "alice/tools", byKey: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	svc := forgework.New(ctx, wrap(core), forgework.Config{Store: st, Sweep: time.Hour})
	t.Cleanup(func() { cancel(); svc.Wait() })
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/{kind}/{hook}", svc.Hook)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, core: core, f: f, svc: svc, srv: srv}
}

func (e *env) link(user, login string) {
	e.t.Helper()
	if _, err := e.svc.LinkUser(e.t.Context(), call.Caller{Admin: true, UserID: "u-admin"}, user,
		apitypes.ForgeLinkRequest{Forge: e.core.forgeName, Login: login}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) trigger() store.ForgeTrigger {
	e.t.Helper()
	var tr store.ForgeTrigger
	if err := e.st.Read(e.t.Context(), func(tx store.Tx) error {
		var err error
		tr, err = tx.ForgeTrigger("web")
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return tr
}

// post delivers body as Gitea would, signed with secret.
func (e *env) post(hookPath, event, delivery string, body []byte, secret string) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+hookPath, bytes.NewReader(body))
	req.Header.Set("X-Gitea-Event-Type", event)
	req.Header.Set("X-Gitea-Delivery", delivery)
	req.Header.Set("X-Gitea-Signature", strings.TrimPrefix(forgehook.Sign([]byte(secret), body), "sha256="))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func (e *env) deliver(event, delivery string, body []byte) int {
	e.t.Helper()
	tr := e.trigger()
	code, _ := e.post("/hooks/gitea/"+tr.HookID, event, delivery, body, tr.Secret)
	return code
}

// settled waits until no delivery is pending.
func (e *env) settled() {
	e.t.Helper()
	for {
		var ds []store.ForgeDelivery
		if err := e.st.Read(e.t.Context(), func(tx store.Tx) error {
			var err error
			ds, err = tx.ForgeDeliveries(store.DeliveryPending, 10)
			return err
		}); err != nil {
			e.t.Fatal(err)
		}
		if len(ds) == 0 {
			return
		}
		select {
		case <-e.t.Context().Done():
			e.t.Fatal("deliveries still pending at the test's end")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (e *env) on(req apitypes.ForgeTriggersRequest) {
	e.t.Helper()
	if _, err := e.svc.SetTriggers(e.t.Context(), owner, "web", req); err != nil {
		e.t.Fatal(err)
	}
}

func sample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "forgehook", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// labeled is Gitea's issue_label delivery by sender on issue 3.
func labeled(t testing.TB, sender string) []byte {
	return bytes.ReplaceAll(sample(t, "gitea_issue_label.json"), []byte(`"login": "alice", "username": "alice"},
  "commit_id"`), []byte(`"login": "`+sender+`", "username": "`+sender+`"},
  "commit_id"`))
}

func comment(body, sender string, number int, isPull bool) []byte {
	return fmt.Appendf(nil, `{"action":"created","issue":{"number":%d,"title":"T","user":{"login":"x"},"labels":[]},
"comment":{"id":77,"body":%q,"user":{"login":%q}},"repository":{"full_name":"alice/tools"},"sender":{"login":%q},"is_pull":%t}`,
		number, body, sender, sender, isPull)
}

func TestTriggersRegisterTheHook(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	bob := call.Caller{UserID: "u-bob", Name: "bob"}
	if _, err := e.svc.SetTriggers(ctx, bob, "web", apitypes.ForgeTriggersRequest{Label: "drover:fix"}); err == nil {
		t.Fatal("a member who does not own the project set its triggers")
	}
	if _, err := e.svc.SetTriggers(ctx, owner, "web", apitypes.ForgeTriggersRequest{}); err == nil {
		t.Fatal("triggers without any trigger were set")
	}
	if _, err := e.svc.SetTriggers(ctx, owner, "web", apitypes.ForgeTriggersRequest{Command: "drover"}); err == nil {
		t.Fatal("a command prefix without '/' was taken")
	}
	if len(e.f.hooks) != 0 {
		t.Fatalf("refused requests registered hooks: %v", e.f.hooks)
	}
	e.core.publicURL = ""
	if _, err := e.svc.SetTriggers(ctx, owner, "web", apitypes.ForgeTriggersRequest{Label: "drover:fix"}); err == nil || !strings.Contains(err.Error(), "public URL") {
		t.Fatalf("a hub without a public URL: %v", err)
	}
	e.core.publicURL = "https://hub.example"
	v, err := e.svc.SetTriggers(ctx, owner, "web", apitypes.ForgeTriggersRequest{Label: "drover:fix", Command: "/drover"})
	if err != nil {
		t.Fatal(err)
	}
	tr := e.trigger()
	if len(e.f.hooks) != 1 || e.f.hooks[tr.RemoteID].URL != "https://hub.example/hooks/gitea/"+tr.HookID || v.HookURL != e.f.hooks[tr.RemoteID].URL {
		t.Fatalf("hooks %v, trigger %+v, view %+v", e.f.hooks, tr, v)
	}
	if len(tr.Secret) < 32 || e.f.hooks[tr.RemoteID].Secret != tr.Secret {
		t.Fatal("the hook's secret is not the one kept")
	}
	// Changed again: the same hook, no second one.
	e.on(apitypes.ForgeTriggersRequest{Label: "drover:go"})
	if len(e.f.hooks) != 1 || e.trigger().HookID != tr.HookID {
		t.Fatalf("changing triggers made another hook: %v", e.f.hooks)
	}
	if _, err := e.svc.RemoveTriggers(ctx, bob, "web"); err == nil {
		t.Fatal("a member removed the triggers")
	}
	if _, err := e.svc.RemoveTriggers(ctx, owner, "web"); err != nil {
		t.Fatal(err)
	}
	if len(e.f.hooks) != 0 {
		t.Fatalf("--off left the hook: %v", e.f.hooks)
	}
	if code, _ := e.post("/hooks/gitea/"+tr.HookID, "issue_label", "d-1", labeled(t, "alice"), tr.Secret); code != http.StatusNotFound {
		t.Fatalf("a delivery to a removed hook: %d", code)
	}
}

func TestLabelStartsOneJob(t *testing.T) {
	e := newEnv(t)
	e.on(apitypes.ForgeTriggersRequest{Label: "drover:fix"})
	e.link("bob", "alice")
	body := labeled(t, "alice")
	if code := e.deliver("issue_label", "d-1", body); code != http.StatusAccepted {
		t.Fatalf("status %d", code)
	}
	e.settled()
	subs := e.core.submissions()
	if len(subs) != 1 {
		t.Fatalf("%d submissions, want 1", len(subs))
	}
	tr := e.trigger()
	s := subs[0]
	if s.Key != "forge:"+tr.HookID+":d-1" || s.Repo.Base != base || s.Repo.Project != "web" || s.Agent != forgework.DefaultAgent || !s.Tools ||
		!strings.Contains(s.Args[0], "issue #3 of alice/tools") || !strings.Contains(s.Args[0], "Typo in the help text") ||
		!strings.Contains(s.Args[0], "context tool") || strings.Contains(s.Args[0], "recieve") {
		t.Fatalf("submission %+v", s)
	}
	if th := e.thread("j-1"); th.Forge != "gt" || th.Repo != "alice/tools" || th.Number != 3 || th.IsPR {
		t.Fatalf("thread %+v", th)
	}
	// The same delivery again starts nothing.
	if code := e.deliver("issue_label", "d-1", body); code != http.StatusOK {
		t.Fatalf("redelivery: status %d", code)
	}
	e.settled()
	if n := len(e.core.submissions()); n != 1 {
		t.Fatalf("a redelivery made %d submissions", n)
	}
	// Gitea's next label change (any label) while the trigger's is on: no
	// second job for the issue.
	if code := e.deliver("issue_label", "d-3", body); code != http.StatusAccepted {
		t.Fatalf("second label change: status %d", code)
	}
	e.settled()
	if n := len(e.core.submissions()); n != 1 {
		t.Fatalf("a second label change on Gitea made %d submissions", n)
	}
	// A forged signature: refused, nothing recorded.
	if code, _ := e.post("/hooks/gitea/"+tr.HookID, "issue_label", "d-2", body, "not-the-secret"); code != http.StatusUnauthorized {
		t.Fatalf("forged: status %d", code)
	}
	var d store.ForgeDelivery
	err := e.st.Read(t.Context(), func(tx store.Tx) (err error) { d, err = tx.ForgeDelivery(tr.HookID, "d-2"); return err })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a forged delivery was recorded: %+v %v", d, err)
	}
}

func TestUnlinkedAndReadOnlyStartNothing(t *testing.T) {
	e := newEnv(t)
	e.on(apitypes.ForgeTriggersRequest{Label: "drover:fix"})
	e.link("bob", "reader")
	for i, sender := range []string{"stranger", "stranger", "reader", "reader"} {
		if code := e.deliver("issue_label", fmt.Sprint("d-", i), labeled(t, sender)); code != http.StatusAccepted {
			t.Fatalf("status %d", code)
		}
	}
	e.settled()
	if n := len(e.core.submissions()); n != 0 {
		t.Fatalf("%d submissions from an unlinked and a read-only login", n)
	}
	replies := e.f.replies(3)
	if len(replies) != 2 {
		t.Fatalf("replies %q, want one per login", replies)
	}
	joined := strings.Join(replies, "\n")
	if !strings.Contains(joined, "@stranger") || !strings.Contains(joined, "not linked") || !strings.Contains(joined, "@reader") || !strings.Contains(joined, "write") {
		t.Fatalf("replies %q", replies)
	}
}

func TestCommands(t *testing.T) {
	e := newEnv(t)
	e.on(apitypes.ForgeTriggersRequest{Command: "/drover"})
	e.link("bob", "bob")
	must := func(code, want int) {
		t.Helper()
		if code != want {
			t.Fatalf("status %d, want %d", code, want)
		}
	}
	must(e.deliver("issue_comment", "c-1", comment("/drover run --agent codex fix the typo\nalso the other one", "bob", 5, false)), http.StatusAccepted)
	e.settled()
	subs := e.core.submissions()
	if len(subs) != 1 || subs[0].Agent != "codex" || !strings.Contains(subs[0].Args[0], "> fix the typo\n> also the other one") {
		t.Fatalf("submissions %+v", subs)
	}
	must(e.deliver("issue_comment", "c-2", comment("/drover retry", "bob", 5, false)), http.StatusAccepted)
	must(e.deliver("issue_comment", "c-3", comment("/drover cancel", "bob", 5, false)), http.StatusAccepted)
	e.settled()
	if got := strings.Join(e.core.acted, ","); got != "retry j-1,cancel j-1" {
		t.Fatalf("acted %q", got)
	}
	// Not commands, in a thread without a job: nothing recorded.
	for i, body := range []string{"> /drover run quoted", "```\n/drover run fenced\n```", "please /drover run this", "thanks"} {
		must(e.deliver("issue_comment", fmt.Sprint("n-", i), comment(body, "bob", 8, false)), http.StatusAccepted)
	}
	// Malformed commands: a reply, no job.
	must(e.deliver("issue_comment", "b-1", comment("/drover run fix; rm -rf /", "bob", 6, false)), http.StatusAccepted)
	must(e.deliver("issue_comment", "b-2", comment("/drover run --model big fix", "bob", 6, false)), http.StatusAccepted)
	must(e.deliver("issue_comment", "b-3", comment("/drover retry", "bob", 7, false)), http.StatusAccepted)
	e.settled()
	if n := len(e.core.submissions()); n != 1 {
		t.Fatalf("%d submissions", n)
	}
	r6, r7 := strings.Join(e.f.replies(6), "\n"), strings.Join(e.f.replies(7), "\n")
	if !strings.Contains(r6, "shell syntax") || !strings.Contains(r6, "unknown flag") || !strings.Contains(r7, "no job") {
		t.Fatalf("replies: #6 %q, #7 %q", r6, r7)
	}
	var ds []store.ForgeDelivery
	_ = e.st.Read(t.Context(), func(tx store.Tx) (err error) { ds, err = tx.ForgeDeliveries(store.DeliveryRefused, 100); return err })
	if len(ds) != 3 {
		t.Fatalf("%d refused deliveries, want 3 (and none for the comments that are no command)", len(ds))
	}
}

// TestRepliesAnswer: a comment that is no command, by a linked user with
// write access, in the thread of a job that asks, answers it (through the
// core's Reply); commands keep their path, and neither a review comment,
// an unlinked login nor a read-only one answers, nor does the bot reply to
// them.
func TestRepliesAnswer(t *testing.T) {
	e := newEnv(t)
	e.on(apitypes.ForgeTriggersRequest{Command: "/drover", Reviews: true})
	e.link("bob", "bob")
	e.link("eve", "reader")
	if code := e.deliver("pull_request_comment", "c-1", comment("/drover run fix the typo", "bob", 9, true)); code != http.StatusAccepted {
		t.Fatalf("status %d", code)
	}
	e.settled()
	if len(e.core.submissions()) != 1 {
		t.Fatalf("submissions %+v", e.core.submissions())
	}
	// No question waits: a remark answers nothing and is not replied to.
	if code := e.deliver("pull_request_comment", "a-0", comment("looks good", "bob", 9, true)); code != http.StatusAccepted {
		t.Fatalf("status %d", code)
	}
	e.settled()
	e.core.mu.Lock()
	e.core.asking = "j-1"
	e.core.mu.Unlock()
	for _, d := range []struct{ event, id, body, login string }{
		{"pull_request_comment", "a-1", "stranger's words", "stranger"},
		{"pull_request_comment", "a-2", "reader's words", "reader"},
		{"pull_request_review_comment", "a-3", "a review comment", "bob"},
		{"pull_request_comment", "a-4", "/drover retry", "bob"},
		{"pull_request_comment", "a-5", "> the question\nUse v2.", "bob"},
	} {
		body := comment(d.body, d.login, 9, true)
		if d.event == "pull_request_review_comment" {
			body = bytes.Replace(body, []byte(`"is_pull"`), fmt.Appendf(nil, `"review":{"type":"comment","content":%q},"is_pull"`, d.body), 1)
		}
		if code := e.deliver(d.event, d.id, body); code != http.StatusAccepted {
			t.Fatalf("%s: status %d", d.id, code)
		}
	}
	e.settled()
	if got := e.core.answered(); len(got) != 1 || got[0] != "j-1 alice/tools #9 u-bob 77 > the question\nUse v2." {
		t.Fatalf("answers %q", got)
	}
	if got := strings.Join(e.core.acted, ","); got != "retry j-1" {
		t.Fatalf("acted %q", got)
	}
	if r := e.f.replies(9); len(r) != 0 {
		t.Fatalf("the bot replied to comments that are no command: %q", r)
	}
	if n := len(e.core.submissions()); n != 1 {
		t.Fatalf("%d submissions", n)
	}
}

func TestReviewRound(t *testing.T) {
	e := newEnv(t)
	review := sample(t, "gitea_pull_request_review_rejected.json")
	e.on(apitypes.ForgeTriggersRequest{Label: "drover:fix"})
	e.link("owner", "alice")
	if code := e.deliver("pull_request_review_rejected", "r-1", review); code != http.StatusAccepted {
		t.Fatalf("status %d", code)
	}
	e.settled()
	if n := len(e.core.submissions()); n != 0 {
		t.Fatalf("a review started a job without --reviews")
	}
	e.on(apitypes.ForgeTriggersRequest{Reviews: true})
	if code := e.deliver("pull_request_review_rejected", "r-2", review); code != http.StatusAccepted {
		t.Fatalf("status %d", code)
	}
	e.settled()
	subs := e.core.submissions()
	if len(subs) != 1 || subs[0].Repo.FromPR != 9 || subs[0].Repo.Base != "" || !strings.Contains(subs[0].Args[0], "> Also fix 'adress'.") {
		t.Fatalf("submissions %+v", subs)
	}
	if th := e.thread("j-1"); !th.IsPR || th.Number != 9 {
		t.Fatalf("thread %+v", th)
	}
	// "/drover address" on the pull request: a round too.
	if code := e.deliver("pull_request_comment", "r-3", comment("/drover address", "alice", 9, true)); code != http.StatusAccepted {
		t.Fatalf("status %d", code)
	}
	e.settled()
	if subs := e.core.submissions(); len(subs) != 2 || subs[1].Repo.FromPR != 9 {
		t.Fatalf("submissions %+v", subs)
	}
}

func TestBadDeliveriesChangeNothing(t *testing.T) {
	e := newEnv(t)
	e.on(apitypes.ForgeTriggersRequest{Label: "drover:fix"})
	tr := e.trigger()
	body := labeled(t, "alice")
	other := bytes.ReplaceAll(body, []byte(`"full_name": "alice/tools"`), []byte(`"full_name": "alice/other"`))
	for _, tc := range []struct {
		name, path string
		body       []byte
		want       int
	}{
		{"unknown hook", "/hooks/gitea/hk-nope", body, http.StatusNotFound},
		{"wrong kind", "/hooks/github/" + tr.HookID, body, http.StatusNotFound},
		{"malformed", "/hooks/gitea/" + tr.HookID, []byte(`{"action":`), http.StatusBadRequest},
		{"oversized", "/hooks/gitea/" + tr.HookID, bytes.Repeat([]byte(" "), forgehook.MaxBody+1), http.StatusRequestEntityTooLarge},
		{"unmapped repository", "/hooks/gitea/" + tr.HookID, other, http.StatusUnprocessableEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, _ := e.post(tc.path, "issue_label", "d-"+tc.name, tc.body, tr.Secret); code != tc.want {
				t.Fatalf("status %d, want %d", code, tc.want)
			}
		})
	}
	var ds []store.ForgeDelivery
	_ = e.st.Read(t.Context(), func(tx store.Tx) (err error) { ds, err = tx.ForgeDeliveries(store.DeliveryPending, 100); return err })
	if len(ds) != 0 || len(e.core.submissions()) != 0 {
		t.Fatalf("bad deliveries recorded %d, submitted %d", len(ds), len(e.core.submissions()))
	}
}

// TestPendingDeliveriesResume: a delivery recorded by a hub that was
// killed before it acted is acted on by the next one, once.
func TestPendingDeliveriesResume(t *testing.T) {
	e := newEnv(t)
	e.on(apitypes.ForgeTriggersRequest{Label: "drover:fix"})
	e.link("bob", "alice")
	tr := e.trigger()
	ev, err := forgehook.Parse(forge.KindGitea, http.Header{"X-Gitea-Event-Type": {"issue_label"}, "X-Gitea-Delivery": {"k-1"}}, labeled(t, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	data := fmt.Appendf(nil, `{"Delivery":%q,"Type":%q,"Repo":%q,"Number":%d,"Title":%q,"Actor":%q,"Labels":["drover:fix"]}`,
		ev.Delivery, ev.Type, ev.Repo, ev.Number, ev.Title, ev.Actor)
	now := time.Now()
	if err := e.st.Write(t.Context(), func(tx store.Tx) error {
		return tx.InsertForgeDelivery(store.ForgeDelivery{HookID: tr.HookID, Delivery: "k-1", Event: string(data),
			State: store.DeliveryPending, CreatedAt: now, UpdatedAt: now})
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next := forgework.New(ctx, e.core, forgework.Config{Store: e.st, Sweep: time.Hour})
	e.settled()
	cancel()
	next.Wait()
	if subs := e.core.submissions(); len(subs) != 1 || subs[0].Key != forgework.Key(tr.HookID, "k-1") {
		t.Fatalf("submissions %+v", subs)
	}
}

// TestGitHubAndGitLab: their documented payloads, signed as they sign
// them, start jobs too; GitLab's token must match.
func TestGitHubAndGitLab(t *testing.T) {
	for _, tc := range []struct {
		forge, kind, repo, file, actor string
		header                         func(secret string, body []byte) http.Header
		number                         int
	}{
		{"gh", forge.KindGitHub, "octo-org/widgets", "github_issues_labeled.json", "maintainer", func(secret string, body []byte) http.Header {
			return http.Header{"X-Github-Event": {"issues"}, "X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"},
				"X-Hub-Signature-256": {forgehook.Sign([]byte(secret), body)}}
		}, 42},
		{"gl", forge.KindGitLab, "team/api", "gitlab_issue_labeled.json", "carol", func(secret string, _ []byte) http.Header {
			return http.Header{"X-Gitlab-Event": {"Issue Hook"}, "X-Gitlab-Event-Uuid": {"13792a34-cac6-4fda-95a8-c58e00a3954e"},
				"X-Gitlab-Token": {secret}}
		}, 23},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			e := newEnv(t)
			e.core.forgeName, e.core.repo = tc.forge, tc.repo
			e.f.perms[tc.actor] = forge.PermWrite
			e.on(apitypes.ForgeTriggersRequest{Label: "drover:fix"})
			e.link("bob", tc.actor)
			tr := e.trigger()
			body := sample(t, tc.file)
			send := func(h http.Header) int {
				req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/hooks/"+tc.kind+"/"+tr.HookID, bytes.NewReader(body))
				req.Header = h
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if code := send(tc.header("wrong", body)); code != http.StatusUnauthorized {
				t.Fatalf("a wrong secret: %d", code)
			}
			if code := send(tc.header(tr.Secret, body)); code != http.StatusAccepted {
				t.Fatalf("status %d", code)
			}
			if code := send(tc.header(tr.Secret, body)); code != http.StatusOK {
				t.Fatalf("redelivery: %d", code)
			}
			e.settled()
			subs := e.core.submissions()
			if len(subs) != 1 || !strings.Contains(subs[0].Args[0], fmt.Sprintf("issue #%d of %s", tc.number, tc.repo)) {
				t.Fatalf("submissions %+v", subs)
			}
		})
	}
}

// A second label delivery on an issue with a job starts none, and the
// reason names a way to run it again that exists: the comment command
// when the project has one, the CLI's retry when it has none.
func TestRelabelledIssueSaysHowToRetry(t *testing.T) {
	for _, command := range []string{"", "/drover"} {
		e := newEnv(t)
		e.on(apitypes.ForgeTriggersRequest{Label: "drover:fix", Command: command})
		e.link("bob", "alice")
		for _, d := range []string{"first", "second"} {
			if code := e.deliver("issue_label", d, labeled(t, "alice")); code != http.StatusAccepted {
				t.Fatalf("%s: status %d", d, code)
			}
			e.settled()
		}
		var ds []store.ForgeDelivery
		if err := e.st.Read(t.Context(), func(tx store.Tx) error {
			var err error
			ds, err = tx.ForgeDeliveries(store.DeliveryRefused, 10)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		want := "(drover retry j-"
		if command != "" {
			want = "(" + command + " retry starts it again)"
		}
		if len(ds) != 1 || !strings.Contains(ds[0].Reason, want) {
			t.Fatalf("command %q: refused deliveries %+v, want one saying %q", command, ds, want)
		}
	}
}
