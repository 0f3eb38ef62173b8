package hub

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
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
	"drover/internal/forgework"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
	"drover/internal/testkit"
)

// hookCapture keeps the forge deliveries a hub received, to send one
// again as the forge would.
type hookCapture struct {
	next http.Handler
	mu   sync.Mutex
	got  []capturedHook
}

type capturedHook struct {
	path   string
	header http.Header
	body   []byte
	status int
}

func (c *hookCapture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/hooks/") {
		c.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	c.next.ServeHTTP(rec, r)
	c.mu.Lock()
	c.got = append(c.got, capturedHook{path: r.URL.Path, header: r.Header.Clone(), body: body, status: rec.Code})
	c.mu.Unlock()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (c *hookCapture) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

func (c *hookCapture) find(event string) (capturedHook, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.got {
		if h.header.Get("X-Gitea-Event-Type") == event && h.status == http.StatusAccepted {
			return h, true
		}
	}
	return capturedHook{}, false
}

// startHubWithURL is startHub whose public URL is its own server's, as a
// forge delivering hooks to it needs, with the deliveries captured.
func startHubWithURL(t *testing.T) (*testHub, *hookCapture) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{DataDir: t.TempDir(), PublicURL: "http://" + ln.Addr().String(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	capt := &hookCapture{next: h.Handler()}
	srv := httptest.NewUnstartedServer(capt)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	tok, err := os.ReadFile(h.AdminTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	th := &testHub{t: t, h: h, srv: srv, cfg: cfg, admin: strings.TrimSpace(string(tok))}
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); th.h.Close() })
	return th, capt
}

// TestForgeTriggersOnGitea: a real Gitea delivers real webhooks to a hub
// on loopback. Triggers register the hook on Gitea; a linked user with
// write access labels an issue: one job, the issue in its prompt, the
// bot's one status comment in the issue; the same delivery again starts
// none, nor does a forged signature; an unlinked and a read-only user
// start none and get one reply each. The job's agent (a scripted runner)
// reads the issue in its context and asks; the question is a comment, the
// requester's reply comment answers it, the job delivers a commit, which
// becomes a pull request closing the issue (the project publishes nothing
// by itself), and the status comment is edited to link it. A review
// comment /drover address on that pull request starts a second job from
// its head, whose commit moves the same pull request's head: one pull
// request; the review's delivery again starts nothing.
func TestForgeTriggersOnGitea(t *testing.T) {
	t.Parallel()
	g := testkit.StartGitea(t)
	th, capt := startHubWithURL(t)
	if _, ok := any(mustOpenGitea(t, g)).(forgework.Forge); !ok {
		t.Fatal("the Gitea client cannot register hooks or reply in threads")
	}
	owner := g.AdminUser
	g.CreateRepo(t, owner, "tools")
	repo := "/repos/" + owner + "/tools"
	tokens := map[string]string{}
	for _, u := range []string{"bob", "reader", "stranger"} {
		tokens[u] = g.CreateUser(t, u)
	}
	g.API(t, g.AdminToken, http.MethodPut, repo+"/collaborators/bob", map[string]any{"permission": "write"}, nil)
	g.API(t, g.AdminToken, http.MethodPut, repo+"/collaborators/reader", map[string]any{"permission": "read"}, nil)
	var label struct {
		ID int64 `json:"id"`
	}
	g.API(t, g.AdminToken, http.MethodPost, repo+"/labels", map[string]any{"name": "drover:fix", "color": "#00aabb"}, &label)

	// The hub: a hosted project mapped to the repository; bob and reader
	// are drover users, members, linked to their Gitea logins.
	dir, base := sourceRepo(t)
	th.push(dir, "web", base)
	var fv apitypes.ForgeView
	if code, e := th.call(th.admin, "PUT", "/forges/gt", apitypes.ForgeRequest{Kind: forge.KindGitea, URL: g.URL, Token: g.AdminToken}, &fv); code != http.StatusOK {
		t.Fatalf("add forge: %d %+v", code, e)
	}
	fname, frepo := "gt", owner+"/tools"
	var cfg apitypes.ProjectConfig
	if code, e := th.call(th.admin, "PUT", "/projects/web/config", apitypes.ProjectConfigRequest{Forge: &fname, ForgeRepo: &frepo}, &cfg); code != http.StatusOK {
		t.Fatalf("map: %d %+v", code, e)
	}
	droverTokens := map[string]string{}
	for _, u := range []string{"bob", "reader"} {
		droverTokens[u] = th.addUser(u)
		if code, e := th.call(th.admin, "POST", "/projects/web/members", apitypes.MemberRequest{User: u}, nil); code != http.StatusOK {
			t.Fatalf("member %s: %d %+v", u, code, e)
		}
		if code, e := th.call(th.admin, "POST", "/users/"+u+"/links", apitypes.ForgeLinkRequest{Forge: "gt", Login: u}, nil); code != http.StatusOK {
			t.Fatalf("link %s: %d %+v", u, code, e)
		}
	}
	var tv apitypes.ForgeTriggersView
	if code, e := th.call(th.admin, "PUT", "/projects/web/triggers", apitypes.ForgeTriggersRequest{Label: "drover:fix", Command: "/drover", Reviews: true}, &tv); code != http.StatusOK {
		t.Fatalf("triggers: %d %+v", code, e)
	}
	var hooks []struct {
		Config map[string]string `json:"config"`
	}
	g.API(t, g.AdminToken, http.MethodGet, repo+"/hooks", nil, &hooks)
	if len(hooks) != 1 || hooks[0].Config["url"] != tv.HookURL {
		t.Fatalf("hooks on Gitea %+v, want one to %s", hooks, tv.HookURL)
	}

	// bob labels an issue: one job, the issue in its prompt.
	var issue struct {
		Number int `json:"number"`
	}
	g.API(t, g.AdminToken, http.MethodPost, repo+"/issues", map[string]any{"title": "Typo in the help", "body": "It says recieve."}, &issue)
	g.API(t, tokens["bob"], http.MethodPost, fmt.Sprintf("%s/issues/%d/labels", repo, issue.Number), map[string]any{"labels": []int64{label.ID}}, nil)
	jobs := th.waitForgeJobs(1)
	j := jobs[0]
	if !strings.Contains(j.Args[0], fmt.Sprintf("issue #%d of %s", issue.Number, frepo)) || !strings.Contains(j.Args[0], "Typo in the help") || j.Requester != "bob" {
		t.Fatalf("job %+v", j)
	}
	// The job is attached to the issue's thread: the bot's one status
	// comment there names it.
	status := waitGiteaComments(t, g, repo, issue.Number, func(cs []giteaComment) bool {
		return len(botComments(cs, owner, j.ID)) > 0
	})
	if n := len(botComments(status, owner, j.ID)); n != 1 {
		t.Fatalf("%d status comments of job %s: %+v", n, j.ID, status)
	}

	// The same delivery again, as Gitea would resend it: no second job.
	d, ok := capt.find("issue_label")
	if !ok {
		t.Fatal("no label delivery captured")
	}
	if code := th.redeliver(d, nil); code != http.StatusOK {
		t.Fatalf("redelivery: %d", code)
	}
	forged := d.header.Clone()
	forged.Set("X-Gitea-Delivery", "forged-1")
	forged.Set("X-Gitea-Signature", strings.Repeat("ab", 32))
	forged.Del("X-Hub-Signature-256")
	if code := th.redeliver(d, forged); code != http.StatusUnauthorized {
		t.Fatalf("forged: %d", code)
	}

	// An unlinked and a read-only user, twice each: no job, one reply each.
	for _, u := range []string{"stranger", "reader", "stranger", "reader"} {
		g.API(t, tokens[u], http.MethodPost, fmt.Sprintf("%s/issues/%d/comments", repo, issue.Number), map[string]any{"body": "/drover run fix it"}, nil)
	}
	var comments []struct {
		Body string `json:"body"`
		User struct {
			Login string `json:"login"`
		} `json:"user"`
	}
	for {
		g.API(t, g.AdminToken, http.MethodGet, fmt.Sprintf("%s/issues/%d/comments", repo, issue.Number), nil, &comments)
		replies := 0
		for _, c := range comments {
			if c.User.Login == owner {
				replies++
			}
		}
		if replies >= 2 && th.pendingDeliveries() == 0 && capt.count() >= 6 {
			break
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("replies %+v", comments)
		case <-time.After(50 * time.Millisecond):
		}
	}
	var stranger, reader int
	for _, c := range comments {
		if c.User.Login == owner {
			stranger += strings.Count(c.Body, "@stranger")
			reader += strings.Count(c.Body, "@reader")
		}
	}
	if stranger != 1 || reader != 1 {
		t.Fatalf("replies to stranger %d, reader %d, want one each: %+v", stranger, reader, comments)
	}
	if jobs := th.waitForgeJobs(1); len(jobs) != 1 {
		t.Fatalf("jobs %+v", jobs)
	}

	// The job's agent (a scripted runner) finds the issue's text in its
	// context and asks; the question is a comment in the issue; bob's reply
	// there answers it (he is the requester: approved), the job runs again
	// and completes, and the status comment shows it.
	rtok := th.registerRunnerOf(droverTokens["bob"], "r1")
	sr, _ := th.dial(rtok, protocol.Hello{Agents: []string{"exec", forgework.DefaultAgent}})
	o := sr.offerFor(j.ID)
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	if f := contextOf(t, sr, o.AttemptRef).Forge; f == nil || f.Number != issue.Number || !strings.Contains(f.Body, "It says recieve.") {
		t.Fatalf("the forge section of the job's context: %+v", f)
	}
	wantOK(t, sr.request(protocol.TypeAsk, protocol.Ask{AttemptRef: o.AttemptRef, Question: "Which file holds the help text?"}))
	wantOK(t, finishAs(sr, o.AttemptRef, job.AttemptAsked, ""))
	th.waitJob(j.ID, func(v apitypes.JobView) bool { return v.State == job.Waiting })
	waitGiteaComments(t, g, repo, issue.Number, func(cs []giteaComment) bool {
		return len(botComments(cs, owner, "Which file holds the help text?")) >= 2 // the question, and the status showing it
	})
	g.API(t, tokens["bob"], http.MethodPost, fmt.Sprintf("%s/issues/%d/comments", repo, issue.Number), map[string]any{"body": "> Which file?\nhelp.txt"}, nil)
	v := th.waitJob(j.ID, func(v apitypes.JobView) bool { return v.State != job.Waiting })
	// Queued, or offered already to the runner waiting for it.
	if a := v.Questions[0].Answer; (v.State != job.Queued && v.State != job.Offered) || a == nil || !a.Approved || a.By != "bob" || a.Text != "help.txt" {
		t.Fatalf("after bob's reply: %s, answer %+v", v.State, a)
	}
	o = sr.offerFor(j.ID)
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	if qs := contextOf(t, sr, o.AttemptRef).Questions; len(qs) != 1 || qs[0].Answer == nil || qs[0].Answer.Text != "help.txt" {
		t.Fatalf("the answer in the job's context: %+v", qs)
	}
	// The agent's commit, on the head of the repository's main that the
	// job started at.
	parent := t.TempDir()
	gitT(t, parent, "clone", "--quiet", g.URL+"/"+frepo+".git", "tools")
	clone := filepath.Join(parent, "tools")
	if head := gitT(t, clone, "rev-parse", "HEAD"); head != j.Base {
		t.Fatalf("the job starts at %s, not main's head %s", j.Base, head)
	}
	fix := commitOn(t, clone, j.Base, "help.txt", "receive\n")
	if a := th.publish(rtok, o.AttemptRef, fix, bundle(t, clone, fix, j.Base), "", false); a.code != http.StatusOK {
		t.Fatalf("publish: %+v", a)
	}
	wantOK(t, sr.request(protocol.TypeDeliver, protocol.Deliver{AttemptRef: o.AttemptRef, Summary: "Fixed the typo in help.txt."}))
	wantOK(t, finishAs(sr, o.AttemptRef, job.AttemptCompleted, ""))

	// A job started from an issue ends as a pull request that closes it;
	// the status comment is edited to link it.
	pub := waitPublished(th, j.ID)
	pr := onePR(t, g, repo)
	if pub.Mode != apitypes.PublishPR || pub.PR != pr.Number || pr.Head.Ref != pub.Branch || pr.Head.SHA != fix ||
		!strings.Contains(pr.Body, fmt.Sprintf("Closes #%d", issue.Number)) {
		t.Fatalf("publication %+v, pull request %+v", pub, pr)
	}
	final := waitGiteaComments(t, g, repo, issue.Number, func(cs []giteaComment) bool {
		return len(botComments(cs, owner, "pull request #"+fmt.Sprint(pr.Number)+"]("+pr.URL+")")) == 1
	})
	if n := len(botComments(final, owner, "drover:job:"+j.ID)); n != 1 || len(botComments(final, owner, "Fixed the typo in help.txt.")) != 1 {
		t.Fatalf("%d status comments, want the one edited: %+v", n, final)
	}

	// A review on the pull request asks for more: a second job, from the
	// pull request's head, whose result goes onto the same pull request.
	g.API(t, tokens["bob"], http.MethodPost, fmt.Sprintf("%s/pulls/%d/reviews", repo, pr.Number),
		map[string]any{"event": "COMMENT", "body": "/drover address\nSpell it in the README too."}, nil)
	jobs = th.waitForgeJobs(2)
	j2 := jobs[0]
	if j2.ID == j.ID {
		j2 = jobs[1]
	}
	if j2.Base != fix || j2.Requester != "bob" || !strings.Contains(j2.Args[0], fmt.Sprintf("pull request #%d of %s", pr.Number, frepo)) ||
		!strings.Contains(j2.Args[0], "Spell it in the README too.") {
		t.Fatalf("the review's job %+v", j2)
	}
	o = sr.offerFor(j2.ID)
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	if f := contextOf(t, sr, o.AttemptRef).Forge; f == nil || f.Number != pr.Number {
		t.Fatalf("the forge section of the review's job's context: %+v", f)
	}
	more := commitOn(t, clone, fix, "README.md", "receive\n")
	if a := th.publish(rtok, o.AttemptRef, more, bundle(t, clone, more, fix), "", false); a.code != http.StatusOK {
		t.Fatalf("publish: %+v", a)
	}
	wantOK(t, sr.request(protocol.TypeDeliver, protocol.Deliver{AttemptRef: o.AttemptRef, Summary: "The README too."}))
	wantOK(t, finishAs(sr, o.AttemptRef, job.AttemptCompleted, ""))
	pub2 := waitPublished(th, j2.ID)
	pr2 := onePR(t, g, repo)
	if pub2.PR != pr.Number || pr2.Number != pr.Number || pr2.Head.Ref != pr.Head.Ref || pr2.Head.SHA != more {
		t.Fatalf("the review's publication %+v, pull request %+v, want #%d's head moved to %s", pub2, pr2, pr.Number, more)
	}

	// The review's delivery again starts nothing.
	d, ok = capt.find("pull_request_review_comment")
	if !ok {
		t.Fatal("no review delivery captured")
	}
	if code := th.redeliver(d, nil); code != http.StatusOK {
		t.Fatalf("the review's redelivery: %d", code)
	}
	th.waitDeliveries()
	if jobs := th.waitForgeJobs(2); len(jobs) != 2 {
		t.Fatalf("jobs after the review's redelivery %+v", jobs)
	}
}

// giteaPR is a pull request as Gitea's API reads it.
type giteaPR struct {
	Number int    `json:"number"`
	URL    string `json:"html_url"`
	Body   string `json:"body"`
	Head   struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
}

// onePR is the one pull request of repo ("/repos/OWNER/NAME"), open or not.
func onePR(t *testing.T, g *testkit.Gitea, repo string) giteaPR {
	t.Helper()
	var prs []giteaPR
	g.API(t, g.AdminToken, http.MethodGet, repo+"/pulls?state=all", nil, &prs)
	if len(prs) != 1 {
		t.Fatalf("pull requests %+v, want one", prs)
	}
	return prs[0]
}

// waitPublished waits (minutes, on a busy machine) until job id is
// completed and its publication ended, and returns it: done, or the test
// fails.
func waitPublished(th *testHub, id string) apitypes.PublicationView {
	th.t.Helper()
	deadline := time.After(3 * time.Minute)
	for {
		v := th.job(id)
		if p := v.Publication; v.State == job.Completed && p != nil && p.State != string(store.PublicationPending) && p.State != string(store.PublicationPlanned) {
			if p.State != string(store.PublicationDone) {
				th.t.Fatalf("job %s's publication: %+v", id, p)
			}
			return *p
		}
		select {
		case <-deadline:
			th.t.Fatalf("job %s is %s, its publication %+v", id, v.State, v.Publication)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// giteaComment is a comment as Gitea's API reads it.
type giteaComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User struct {
		Login string `json:"login"`
	} `json:"user"`
}

// waitGiteaComments waits until the comments of issue number of repo
// ("/repos/OWNER/NAME") satisfy ok, and returns them.
func waitGiteaComments(t *testing.T, g *testkit.Gitea, repo string, number int, ok func([]giteaComment) bool) []giteaComment {
	t.Helper()
	for {
		var cs []giteaComment
		g.API(t, g.AdminToken, http.MethodGet, fmt.Sprintf("%s/issues/%d/comments", repo, number), nil, &cs)
		if ok(cs) {
			return cs
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("comments of #%d: %+v", number, cs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// botComments are the comments of login bot that hold text.
func botComments(cs []giteaComment, bot, text string) []giteaComment {
	var out []giteaComment
	for _, c := range cs {
		if c.User.Login == bot && strings.Contains(c.Body, text) {
			out = append(out, c)
		}
	}
	return out
}

func mustOpenGitea(t *testing.T, g *testkit.Gitea) forge.Client {
	t.Helper()
	cl, err := forge.Open(forge.Conn{Kind: forge.KindGitea, URL: g.URL, Token: g.AdminToken}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// waitForgeJobs waits until the hub holds n jobs started from the forge,
// and returns them.
func (th *testHub) waitForgeJobs(n int) []apitypes.JobView {
	th.t.Helper()
	deadline := time.After(3 * time.Minute)
	for {
		var list apitypes.JobList
		if code, e := th.call(th.admin, "GET", "/jobs", nil, &list); code != http.StatusOK {
			th.t.Fatalf("jobs: %d %+v", code, e)
		}
		var out []apitypes.JobView
		for _, j := range list.Jobs {
			if strings.HasPrefix(j.Key, forgework.KeyPrefix) {
				out = append(out, th.job(j.ID))
			}
		}
		if len(out) >= n {
			return out
		}
		select {
		case <-deadline:
			th.t.Fatalf("%d forge jobs, want %d; deliveries %s", len(out), n, th.deliveries())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitDeliveries waits until the hub acted on every delivery it recorded.
func (th *testHub) waitDeliveries() {
	th.t.Helper()
	for th.pendingDeliveries() > 0 {
		select {
		case <-th.t.Context().Done():
			th.t.Fatal("deliveries still pending")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// deliveries says what came of each delivery the hub recorded.
func (th *testHub) deliveries() string {
	th.t.Helper()
	var b strings.Builder
	err := th.h.store.Read(th.t.Context(), func(tx store.Tx) error {
		for _, st := range []store.ForgeDeliveryState{store.DeliveryPending, store.DeliveryDone, store.DeliveryRefused} {
			ds, err := tx.ForgeDeliveries(st, 100)
			if err != nil {
				return err
			}
			for _, d := range ds {
				fmt.Fprintf(&b, "\n%s %s job %q: %s (%d tries) %s", d.State, d.Delivery, d.JobID, d.Reason, d.Tries, d.Event)
			}
		}
		return nil
	})
	if err != nil {
		th.t.Fatal(err)
	}
	return b.String()
}

func (th *testHub) pendingDeliveries() int {
	th.t.Helper()
	var n int
	err := th.h.store.Read(th.t.Context(), func(tx store.Tx) error {
		ds, err := tx.ForgeDeliveries("pending", 100)
		n = len(ds)
		return err
	})
	if err != nil {
		th.t.Fatal(err)
	}
	return n
}

// redeliver posts a captured delivery again, with header instead of its
// own when given.
func (th *testHub) redeliver(d capturedHook, header http.Header) int {
	th.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, th.srv.URL+d.path, bytes.NewReader(d.body))
	if header == nil {
		header = d.header
	}
	req.Header = header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		th.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
