package runner

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/gitcmd"
	"drover/internal/hubrepo"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/sandbox/sandboxtest"
	"drover/internal/testkit/syncbuf"
)

// repoHub extends the fake hub with what jobs with a repository need, on
// real git: the project's bare repository served over smart HTTP (git
// http-backend), the publish endpoint (bundles verified and imported with
// the hub's own workspace code) and the context endpoint.
type repoHub struct {
	*fakeHub
	repos hubrepo.Repos
	src   string // working repository the tests commit in

	mu        sync.Mutex
	heads     map[string]string // job → head
	published []publication
	loseNext  int          // publications applied whose reply is then lost
	refuse    *rules.Error // refuse every publication with this
	context   map[string][]byte
	asked     []string // the hosts (hub addresses) publications and context downloads went to
	// fetches counts the git fetches asked of the hub (their ref
	// discoveries); gitFault, when set, answers the n-th (from 1) in the
	// backend's place when it returns true.
	fetches  int
	gitFault func(n int, w http.ResponseWriter) bool
}

type publication struct {
	job, commit string
	prereqs     string // the bundle's prerequisite lines
	size        int
}

const project = "proj"

func newRepoHub(t *testing.T) *repoHub {
	h := &repoHub{fakeHub: newFakeHub(t), repos: hubrepo.Repos{Root: t.TempDir()}, src: filepath.Join(t.TempDir(), "src"),
		heads: map[string]string{}, context: map[string][]byte{}}
	must(t, h.repos.Create(t.Context(), project))
	must(t, os.MkdirAll(h.src, 0o755))
	h.git("init", "--quiet")
	backend, err := h.repos.HTTPBackend(false, io.Discard)
	must(t, err)
	h.mux.Handle("/git/", h.authorized(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			h.mu.Lock()
			h.fetches++
			n, fault := h.fetches, h.gitFault
			h.mu.Unlock()
			if fault != nil && fault(n, w) {
				return
			}
		}
		rest, _ := strings.CutPrefix(r.URL.Path, "/git/"+project)
		r.URL.Path = "/" + project + ".git" + rest
		backend.ServeHTTP(w, r)
	}))
	h.mux.Handle("POST "+apitypes.APIPrefix+"/runner/publish", h.authorized(h.servePublish))
	h.mux.Handle("GET "+apitypes.APIPrefix+"/runner/context", h.authorized(h.serveContext))
	return h
}

func (h *repoHub) authorized(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, err := auth.BearerToken(r.Header.Get("Authorization")); err != nil || tok != h.token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		next(w, r)
	})
}

func (h *repoHub) git(args ...string) string {
	h.t.Helper()
	out, err := gitcmd.Git{Env: []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}}.
		Run(h.t.Context(), gitcmd.Cmd{Dir: h.src, Args: args})
	if err != nil {
		h.t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

func (h *repoHub) hubGit(args ...string) string {
	h.t.Helper()
	out, err := gitcmd.Git{}.Out(h.t.Context(), h.repos.Dir(project), args...)
	if err != nil {
		h.t.Fatalf("git %v in the hub: %v", args, err)
	}
	return out
}

// commit commits files (a name ending in "*" is executable) in the source
// and puts the commit into the hub's repository, as a user's upload would.
func (h *repoHub) commit(files map[string]string) string {
	h.t.Helper()
	for name, content := range files {
		mode := os.FileMode(0o644)
		if n, ok := strings.CutSuffix(name, "*"); ok {
			name, mode = n, 0o755
		}
		p := filepath.Join(h.src, name)
		must(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(h.t, os.WriteFile(p, []byte(content), mode))
	}
	h.git("add", "--all", "--force")
	h.git("commit", "--quiet", "--allow-empty", "-m", "test")
	id := h.git("rev-parse", "HEAD")
	must(h.t, h.repos.FetchCommit(h.t.Context(), project, "file://"+h.src, id, gitcmd.UploadRefPrefix+id))
	return id
}

// spec is a job on the project at base whose agent runs script.
func (h *repoHub) spec(ref protocol.AttemptRef, base, mode, script string) protocol.JobSpec {
	h.mu.Lock()
	head, ok := h.heads[ref.Job]
	if !ok {
		head = base
		h.heads[ref.Job] = base
	}
	h.mu.Unlock()
	s := shSpec(script)
	s.Requester = "alice"
	s.Mode = mode
	s.Repo = &protocol.RepoSpec{Project: project, Base: base, Head: head, URL: h.srv.URL + "/git/" + project}
	return s
}

func (h *repoHub) head(jobID string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heads[jobID]
}

func (h *repoHub) publications() []publication {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]publication(nil), h.published...)
}

func (h *repoHub) servePublish(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	jobID, commit := q.Get("job"), q.Get("commit")
	body, err := io.ReadAll(r.Body)
	h.expect(err)
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != q.Get("sha256") {
		h.t.Errorf("publication digest differs from its body")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked = append(h.asked, r.Host)
	if h.refuse != nil {
		writeTestJSON(w, http.StatusBadRequest, apitypes.ErrorBody{Error: *h.refuse})
		return
	}
	head := h.heads[jobID]
	if commit == head {
		writeTestJSON(w, http.StatusOK, protocol.PublishResult{Head: head})
		return
	}
	path := filepath.Join(h.t.TempDir(), "pub.bundle")
	must(h.t, os.WriteFile(path, body, 0o600))
	in, err := h.repos.Receive(r.Context(), project, path, commit)
	if err != nil {
		h.t.Errorf("publication refused: %v", err)
		writeTestJSON(w, http.StatusBadRequest, apitypes.ErrorBody{Error: rules.Error{Code: rules.ErrBadRequest, Message: err.Error()}})
		return
	}
	defer in.Close()
	if ok, err := in.IsAncestor(r.Context(), head, commit); err != nil || !ok {
		writeTestJSON(w, http.StatusConflict, struct {
			apitypes.ErrorBody
			Head string `json:"head"`
		}{apitypes.ErrorBody{Error: rules.Error{Code: rules.ErrStaleHead, Message: "stale"}}, head})
		return
	}
	h.expect(in.Accept())
	cur, err := h.repos.Ref(r.Context(), project, gitcmd.JobRef(jobID))
	h.expect(err)
	h.expect(h.repos.UpdateRef(r.Context(), project, gitcmd.JobRef(jobID), commit, cur))
	h.heads[jobID] = commit
	prereqs, _, _ := strings.Cut(string(body), "\nPACK")
	h.published = append(h.published, publication{job: jobID, commit: commit, prereqs: prereqs, size: len(body)})
	if h.loseNext > 0 {
		h.loseNext--
		// Applied, but the runner never hears of it.
		conn, _, err := http.NewResponseController(w).Hijack()
		h.expect(err)
		conn.Close()
		return
	}
	writeTestJSON(w, http.StatusOK, protocol.PublishResult{Head: commit})
}

func (h *repoHub) serveContext(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked = append(h.asked, r.Host)
	tw := tar.NewWriter(w)
	for name, data := range h.context {
		h.expect(tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}))
		_, err := tw.Write(data)
		h.expect(err)
	}
	h.expect(tw.Close())
}

func writeTestJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (h *repoHub) show(rev string) string { return h.hubGit("show", rev) }

func TestRepoJobPublishesItsWork(t *testing.T) {
	h := newRepoHub(t)
	base := h.commit(map[string]string{".gitignore": "*.o\n", "a.txt": "a\n", "run.sh": "#!/bin/sh\n"})
	h.context["notes/brief.md"] = []byte("do the thing\n")
	tr := startRunner(t, h.fakeHub, "", nil)
	h.waitConn(0)
	ref := newRef()
	spec := h.spec(ref, base, protocol.ModeFix, `
		test "$(cat a.txt)" = a || exit 3
		cp "$DROVER_CONTEXT_DIR/notes/brief.md" brief.md
		echo "context mode $(stat -c %a "$DROVER_CONTEXT_DIR/notes/brief.md") $(stat -c %a "$DROVER_CONTEXT_DIR/notes")"
		echo new > new.txt && chmod +x run.sh && echo obj > build.o && ln -s a.txt link
		git commit -qam "the agent's own commit" 2>/dev/null; echo agent done`)
	spec.Context = []protocol.ContextFile{{Name: "notes/brief.md", Size: 13}}
	h.offer(ref, spec)
	fin := h.waitFinish(ref.Attempt)
	log := string(h.log(ref.Attempt))
	wantOutcome(t, fin, job.AttemptCompleted, job.ReasonExited, intp(0))
	// Read-only for the agent (root ignores modes; a sandbox mounts it read-only).
	if !strings.Contains(log, "context mode 444 555\n") || !strings.Contains(log, "drover: published ") {
		t.Fatalf("log:\n%s", log)
	}
	head := h.head(ref.Job)
	if head == base {
		t.Fatal("nothing was published")
	}
	tree := h.hubGit("ls-tree", "-r", head)
	for _, want := range []string{"100755 blob", "\trun.sh", "\tnew.txt", "\tbrief.md", "120000 blob"} {
		if !strings.Contains(tree, want) {
			t.Errorf("published tree lacks %q:\n%s", want, tree)
		}
	}
	if strings.Contains(tree, "build.o") {
		t.Error("an ignored file was published")
	}
	if meta := h.hubGit("log", "-1", "--format=%P|%an|%cn|%B", head); !strings.HasPrefix(meta, base+"|alice|drover|") ||
		!strings.Contains(meta, "Drover-Job: "+ref.Job) || !strings.Contains(meta, "Drover-Attempt: "+ref.Attempt) {
		t.Fatalf("commit: %s", meta)
	}
	if pubs := h.publications(); len(pubs) != 1 || !strings.Contains(pubs[0].prereqs, "-"+base) {
		t.Fatalf("publications %+v", pubs)
	}
	sandboxtest.WaitFor(t, "context folder removed", func() bool { return !exists(tr.contextPath(ref.Attempt)) })
}

// The runner lets the worktree's file-system monitor take its base before
// the agent starts (Worktree.Ready): the attempt's publication is then
// narrowed to the paths the agent wrote, not a scan of the whole worktree.
func TestPublicationIsNarrowedByTheMonitor(t *testing.T) {
	h := newRepoHub(t)
	base := h.commit(map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
	var logs syncbuf.Buffer
	startRunner(t, h.fakeHub, "", func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), &logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, h.spec(ref, base, protocol.ModeFix, `echo changed > d/b.txt`))
	wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	if h.head(ref.Job) == base {
		t.Fatal("nothing was published")
	}
	if out := logs.String(); !strings.Contains(out, `msg="publication narrowed by the file-system monitor"`) {
		t.Fatalf("the publication was not narrowed:\n%s", out)
	}
}

// The hub applies a publication but its reply is lost: the runner sends the
// same bundle again and the hub answers with the head it already holds.
// Then the hub holds a newer head the runner never heard of (an earlier
// publication of the job whose reply was lost): the runner fetches it,
// checks it descends from the head it knew and publishes only the rest.
func TestPublicationAfterLostReplies(t *testing.T) {
	h := newRepoHub(t)
	base := h.commit(map[string]string{"a.txt": "a\n"})
	startRunner(t, h.fakeHub, "", nil)
	h.waitConn(0)

	ref := newRef()
	h.loseNext = 1
	h.offer(ref, h.spec(ref, base, protocol.ModeFix, "echo b > b.txt"))
	wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	if pubs := h.publications(); len(pubs) != 1 || h.head(ref.Job) != pubs[0].commit {
		t.Fatalf("after a lost reply: publications %+v, head %s", pubs, h.head(ref.Job))
	}

	ref2 := newRef()
	spec := h.spec(ref2, base, protocol.ModeFix, "echo part1 > p1.txt && echo part2 > p2.txt")
	// What the hub holds: the first part on top of base, published by this
	// job before (its reply lost), while the runner was told base.
	h.git("checkout", "--quiet", "--detach", base)
	earlier := h.commit(map[string]string{"p1.txt": "part1\n"})
	h.mu.Lock()
	h.heads[ref2.Job] = earlier
	h.mu.Unlock()
	h.offer(ref2, spec)
	fin := h.waitFinish(ref2.Attempt)
	wantOutcome(t, fin, job.AttemptCompleted, job.ReasonExited, intp(0))
	log := string(h.log(ref2.Attempt))
	head := h.head(ref2.Job)
	if parent := h.hubGit("rev-parse", head+"^"); parent != earlier {
		t.Fatalf("final head %s has parent %s, want the hub's newer head %s\n%s", head, parent, earlier, log)
	}
	if got := h.hubGit("diff-tree", "--no-commit-id", "--name-only", "-r", head); got != "p2.txt" {
		t.Fatalf("the last publication changes %q, want only what the hub lacked (p2.txt)", got)
	}
	pubs := h.publications()
	if last := pubs[len(pubs)-1]; !strings.Contains(last.prereqs, "-"+earlier) {
		t.Fatalf("the bundle does not build on the newer head: %q", last.prereqs)
	}
	if !strings.Contains(log, "a reply was lost") {
		t.Fatalf("log:\n%s", log)
	}
}

func TestObserveModeFailsOnChangesAndPublishesNothing(t *testing.T) {
	h := newRepoHub(t)
	base := h.commit(map[string]string{"a.txt": "a\n"})
	startRunner(t, h.fakeHub, "", func(c *Config) { c.Slots = 2 })
	h.waitConn(0)
	clean, dirty := newRef(), newRef()
	h.offer(clean, h.spec(clean, base, protocol.ModeObserve, "cat a.txt && echo report > report.txt"))
	h.offer(dirty, h.spec(dirty, base, protocol.ModeObserve, "echo changed > a.txt"))
	wantOutcome(t, h.waitFinish(clean.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	fin := h.waitFinish(dirty.Attempt)
	if fin.Outcome.State != job.AttemptFailed || fin.Outcome.Reason != job.ReasonObserveChanged || !strings.Contains(fin.Outcome.Message, "a.txt") {
		t.Fatalf("observe violation: %+v", fin.Outcome)
	}
	if !strings.Contains(string(h.log(dirty.Attempt)), "changes are discarded") {
		t.Fatalf("log: %s", h.log(dirty.Attempt))
	}
	if pubs := h.publications(); len(pubs) != 0 {
		t.Fatalf("observe mode published %+v", pubs)
	}
}

// A job's next attempt at the head it left resumes in the kept worktree:
// nothing is checked out, and what the earlier attempt left (ignored build
// output here) is still there.
func TestNextAttemptResumesKeptWorktree(t *testing.T) {
	h := newRepoHub(t)
	base := h.commit(map[string]string{".gitignore": "*.o\n", "a.txt": "a\n"})
	startRunner(t, h.fakeHub, "", nil)
	h.waitConn(0)
	first := newRef()
	h.offer(first, h.spec(first, base, protocol.ModeFix, "echo cache > build.o && echo b > b.txt && exit 1"))
	wantOutcome(t, h.waitFinish(first.Attempt), job.AttemptFailed, job.ReasonExited, intp(1))
	published := h.head(first.Job)
	if published == base {
		t.Fatal("the failed attempt's work was not published")
	}
	second := protocol.AttemptRef{Job: first.Job, Attempt: newRef().Attempt, Epoch: 2}
	h.offer(second, h.spec(second, base, protocol.ModeFix, "cat build.o b.txt"))
	wantOutcome(t, h.waitFinish(second.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	log := string(h.log(second.Attempt))
	if !strings.Contains(log, "resumed") || !strings.Contains(log, "cache\nb\n") || !strings.Contains(log, "nothing to publish") {
		t.Fatalf("log of the second attempt:\n%s", log)
	}
}

func TestCancelledAttemptPublishesWhatItProduced(t *testing.T) {
	h := newRepoHub(t)
	base := h.commit(map[string]string{"a.txt": "a\n"})
	startRunner(t, h.fakeHub, "", nil)
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, h.spec(ref, base, protocol.ModeFix, "echo partial > partial.txt && echo started && exec sleep 1000"))
	sandboxtest.WaitFor(t, "the agent started", func() bool { return strings.Contains(string(h.log(ref.Attempt)), "started") })
	h.current().send(protocol.TypeCancel, protocol.CancelOrder{AttemptRef: ref, Reason: "user"})
	fin := h.waitFinish(ref.Attempt)
	if fin.Outcome.State != job.AttemptCancelled {
		t.Fatalf("outcome %+v", fin.Outcome)
	}
	if got := h.hubGit("show", h.head(ref.Job)+":partial.txt"); got != "partial" {
		t.Fatalf("partial work published as %q", got)
	}
}

func TestWorkspaceFailuresFailTheAttempt(t *testing.T) {
	h := newRepoHub(t)
	base := h.commit(map[string]string{"a.txt": "a\n"})
	startRunner(t, h.fakeHub, "", nil)
	h.waitConn(0)

	missing := newRef()
	spec := h.spec(missing, strings.Repeat("ab", 20), protocol.ModeFix, "echo should not run")
	h.offer(missing, spec)
	fin := h.waitFinish(missing.Attempt)
	if fin.Outcome.State != job.AttemptFailed || fin.Outcome.Reason != job.ReasonWorkspace || strings.Contains(string(h.log(missing.Attempt)), "should not run") {
		t.Fatalf("unfetchable base: %+v\n%s", fin.Outcome, h.log(missing.Attempt))
	}

	refused := newRef()
	h.mu.Lock()
	h.refuse = &rules.Error{Code: rules.ErrBadRequest, Message: "nope"}
	h.mu.Unlock()
	h.offer(refused, h.spec(refused, base, protocol.ModeFix, "echo b > b.txt"))
	fin = h.waitFinish(refused.Attempt)
	log := string(h.log(refused.Attempt))
	if fin.Outcome.State != job.AttemptFailed || fin.Outcome.Reason != job.ReasonWorkspace || !strings.Contains(log, "publication failed") {
		t.Fatalf("refused publication: %+v\n%s", fin.Outcome, log)
	}
	if !strings.Contains(fin.Outcome.Message, "nope") {
		t.Fatalf("message %q does not say why", fin.Outcome.Message)
	}
}

// The runner refreshes files in the agent's copy of the admin dir while
// the agent runs (a widened cone): a symlink the agent put there leads
// nowhere outside it.
func TestCopyAdminStaysInTheAgentsCopy(t *testing.T) {
	admin, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(admin, "info"), 0o700))
	must(t, os.WriteFile(filepath.Join(admin, "info", "sparse-checkout"), []byte("/*\n!/*/\n/lib/\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(admin, "HEAD"), []byte("abc\n"), 0o600))
	must(t, copyAdminFiles(admin, dst, "HEAD", "index", "info/sparse-checkout"))
	if b, err := os.ReadFile(filepath.Join(dst, "info", "sparse-checkout")); err != nil || !strings.Contains(string(b), "/lib/") {
		t.Fatalf("copied cone %q, %v", b, err)
	}
	must(t, os.RemoveAll(filepath.Join(dst, "info")))
	must(t, os.Symlink(outside, filepath.Join(dst, "info")))
	if err := copyAdminFiles(admin, dst, "info/sparse-checkout"); err == nil {
		t.Fatal("copied through the agent's symlink")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("the copy wrote outside the agent's admin dir: %v", ents)
	}
}

// A hub that cannot be reached for a while (restarting: refusing, cutting
// connections, or a proxy's 503) while an attempt fetches its base is
// waited out: the fetch is tried again until it works, and the attempt
// completes. A refusal (404, 403, a commit the hub lacks) fails the
// attempt at once with workspace_error.
func TestFetchWaitsOutAnUnreachableHub(t *testing.T) {
	unavailable := func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }
	cut := func(w http.ResponseWriter) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	status := func(code int) func(http.ResponseWriter) { return func(w http.ResponseWriter) { w.WriteHeader(code) } }
	for _, tc := range []struct {
		name    string
		fail    func(http.ResponseWriter)
		down    int  // fetches failed before the hub is back
		missing bool // the job's base is a commit the hub lacks
		want    job.AttemptState
		tries   int
	}{
		{"503", unavailable, 3, false, job.AttemptCompleted, 4},
		{"connection cut", cut, 2, false, job.AttemptCompleted, 3},
		{"404", status(http.StatusNotFound), 1000, false, job.AttemptFailed, 1},
		{"403", status(http.StatusForbidden), 1000, false, job.AttemptFailed, 1},
		{"missing commit", nil, 0, true, job.AttemptFailed, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newRepoHub(t)
			base := h.commit(map[string]string{"a.txt": "a\n"})
			if tc.missing {
				base = strings.Repeat("ab", 20)
			}
			h.gitFault = func(n int, w http.ResponseWriter) bool {
				if n > tc.down {
					return false
				}
				tc.fail(w)
				return true
			}
			startRunner(t, h.fakeHub, "", nil)
			h.waitConn(0)
			ref := newRef()
			h.offer(ref, h.spec(ref, base, protocol.ModeFix, "cat a.txt"))
			fin := h.waitFinish(ref.Attempt)
			log := string(h.log(ref.Attempt))
			h.mu.Lock()
			tries := h.fetches
			h.mu.Unlock()
			if fin.Outcome.State != tc.want || tries != tc.tries {
				t.Fatalf("outcome %+v after %d fetches, want %s after %d\n%s", fin.Outcome, tries, tc.want, tc.tries, log)
			}
			waited := strings.Count(log, "drover: the hub is unreachable; fetching again")
			if tc.want == job.AttemptCompleted && (waited != 1 || !strings.Contains(log, "a\n")) {
				t.Fatalf("the log says %d times that it waits for the hub:\n%s", waited, log)
			}
			if tc.want == job.AttemptFailed && (fin.Outcome.Reason != job.ReasonWorkspace || waited != 0) {
				t.Fatalf("a refusal: %+v\n%s", fin.Outcome, log)
			}
		})
	}
}

// A cancel stops the wait for an unreachable hub.
func TestCancelStopsTheWaitForTheHub(t *testing.T) {
	h := newRepoHub(t)
	base := h.commit(map[string]string{"a.txt": "a\n"})
	h.gitFault = func(_ int, w http.ResponseWriter) bool { w.WriteHeader(http.StatusServiceUnavailable); return true }
	startRunner(t, h.fakeHub, "", nil)
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, h.spec(ref, base, protocol.ModeFix, "echo should not run"))
	sandboxtest.WaitFor(t, "the attempt waits for the hub", func() bool {
		return strings.Contains(string(h.log(ref.Attempt)), "the hub is unreachable")
	})
	h.current().send(protocol.TypeCancel, protocol.CancelOrder{AttemptRef: ref, Reason: "user"})
	if fin := h.waitFinish(ref.Attempt); fin.Outcome.State != job.AttemptCancelled {
		t.Fatalf("outcome %+v\n%s", fin.Outcome, h.log(ref.Attempt))
	}
}
