package hub

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/localrepo"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// Real git against a real hub: repositories, source pushes, publications.

var tgit = gitcmd.Git{}

// gitT runs git in dir and returns its trimmed output.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := tgit.Out(context.Background(), dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return out
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sourceRepo makes a working repository with one commit and returns its
// directory and that commit.
func sourceRepo(t testing.TB) (string, string) {
	t.Helper()
	dir := t.TempDir()
	gitT(t, dir, "init", "--quiet", dir)
	writeFile(t, filepath.Join(dir, "README"), "hello\n")
	writeFile(t, filepath.Join(dir, "src/main.go"), "package main\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "--quiet", "-m", "base")
	return dir, gitT(t, dir, "rev-parse", "HEAD")
}

// commitOn makes a commit on parent (detached) changing file, and returns it.
func commitOn(t *testing.T, dir, parent, file, content string) string {
	t.Helper()
	gitT(t, dir, "checkout", "--quiet", "--detach", parent)
	writeFile(t, filepath.Join(dir, file), content)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "--quiet", "-m", "change "+file)
	return gitT(t, dir, "rev-parse", "HEAD")
}

// bundle makes a bundle of tip (advertised as refs/heads/result) without
// what the exclusions reach.
func bundle(t *testing.T, dir, tip string, exclude ...string) []byte {
	t.Helper()
	gitT(t, dir, "update-ref", "refs/heads/result", tip)
	f := filepath.Join(t.TempDir(), "b.bundle")
	args := []string{"bundle", "create", "--quiet", f, "refs/heads/result"}
	for _, e := range exclude {
		args = append(args, "^"+e)
	}
	gitT(t, dir, args...)
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (th *testHub) gitURL(project string) string { return th.srv.URL + "/git/" + project }

// push sends commit from dir to the project as an upload.
func (th *testHub) push(dir, project, commit string) {
	th.t.Helper()
	co := localrepo.Checkout{Git: tgit, Dir: dir}
	if err := co.Push(context.Background(), th.gitURL(project), th.admin, commit, gitcmd.UploadRefPrefix+"t-"+commit[:8]); err != nil {
		th.t.Fatalf("push: %v", err)
	}
}

func (th *testHub) submitRepo(req apitypes.SubmitRequest) (apitypes.JobView, int, rules.Error) {
	th.t.Helper()
	if req.Agent == "" {
		req.Agent, req.Args = "exec", []string{"true"}
	}
	var v apitypes.JobView
	code, e := th.call(th.admin, "POST", "/jobs", req, &v)
	return v, code, e
}

// repoJob pushes a source, submits a fix job on it and has a runner accept
// it. It returns the source directory, the base and the running offer.
func (th *testHub) repoJob(sr *scriptRunner, project string, ctxFiles ...rules.ContextUpload) (string, string, protocol.Offer) {
	th.t.Helper()
	dir, base := sourceRepo(th.t)
	th.push(dir, project, base)
	v, code, e := th.submitRepo(apitypes.SubmitRequest{Repo: &apitypes.SubmitRepo{Project: project, Base: base}, Context: ctxFiles})
	if code != http.StatusCreated {
		th.t.Fatalf("submit: %d %+v", code, e)
	}
	o := sr.offer()
	if o.Job != v.ID {
		th.t.Fatalf("offer for %s, want %s", o.Job, v.ID)
	}
	wantOK(th.t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	return dir, base, o
}

type publishAnswer struct {
	code int
	res  protocol.PublishResult
	err  rules.Error
}

// publish posts a bundle with a given digest (sum of the bundle when "").
// sparse is the runner's worktree's cone.
func (th *testHub) publish(token string, ref protocol.AttemptRef, commit string, b []byte, digest string, checkpoint bool, sparse ...string) publishAnswer {
	th.t.Helper()
	if digest == "" {
		digest = sum(b)
	}
	a, err := publishTo(th.srv.URL, token, ref, commit, bytes.NewReader(b), digest, checkpoint, sparse...)
	if err != nil {
		th.t.Fatal(err)
	}
	return a
}

// publishTo sends a publication to the hub at base, from any goroutine.
func publishTo(base, token string, ref protocol.AttemptRef, commit string, body io.Reader, digest string, checkpoint bool, sparse ...string) (publishAnswer, error) {
	q := url.Values{"job": {ref.Job}, "attempt": {ref.Attempt}, "epoch": {itoa(ref.Epoch)}, "commit": {commit}, "sha256": {digest}}
	if len(sparse) > 0 {
		q["sparse"] = sparse
	}
	if checkpoint {
		q.Set("checkpoint", "1")
	}
	req, _ := http.NewRequest("POST", base+apitypes.APIPrefix+"/runner/publish?"+q.Encode(), body)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return publishAnswer{}, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	a := publishAnswer{code: resp.StatusCode}
	_ = json.Unmarshal(data, &a.res) // a stale_head answer carries the head too
	var eb apitypes.ErrorBody
	if json.Unmarshal(data, &eb) == nil {
		a.err = eb.Error
	}
	return a, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func (th *testHub) repoDir(project string) string { return th.h.repos.Dir(project) }

// hubHas reports whether the hub's repository holds an object.
func (th *testHub) hubHas(project, id string) bool {
	th.t.Helper()
	ok, err := th.h.repos.HasCommit(context.Background(), project, id)
	if err != nil {
		th.t.Fatal(err)
	}
	return ok
}

func (th *testHub) jobRef(project, jobID string) string {
	th.t.Helper()
	id, err := th.h.repos.Ref(context.Background(), project, gitcmd.JobRef(jobID))
	if err != nil {
		th.t.Fatal(err)
	}
	return id
}

// repoSetup is a hub with runner r1 connected and running a fix job on
// project web.
type repoSetup struct {
	th        *testHub
	tok       string // r1's token
	sr        *scriptRunner
	dir, base string
	o         protocol.Offer
}

func startRepoJob(t *testing.T, cfg Config, ctxFiles ...rules.ContextUpload) repoSetup {
	t.Helper()
	th := startHub(t, cfg)
	tok := th.registerRunner("r1")
	sr, _ := th.dial(tok, protocol.Hello{})
	dir, base, o := th.repoJob(sr, "web", ctxFiles...)
	return repoSetup{th: th, tok: tok, sr: sr, dir: dir, base: base, o: o}
}

func TestPublicationMovesTheHeadOnce(t *testing.T) {
	t.Parallel()
	rs := startRepoJob(t, Config{})
	th, tok, dir, base, o := rs.th, rs.tok, rs.dir, rs.base, rs.o
	if o.Spec.Repo == nil || o.Spec.Repo.Base != base || o.Spec.Repo.Head != base || o.Spec.Mode != protocol.ModeFix ||
		o.Spec.Repo.URL != th.gitURL("web") || o.Spec.Repo.Remote {
		t.Fatalf("offer spec: %+v %+v", o.Spec, o.Spec.Repo)
	}
	if got := th.jobRef("web", o.Job); got != base {
		t.Fatalf("job ref after submit = %s, want the base %s", got, base)
	}

	c1 := commitOn(t, dir, base, "src/main.go", "package main // fixed\n")
	b1 := bundle(t, dir, c1, base)
	a := th.publish(tok, o.AttemptRef, c1, b1, "", false)
	if a.code != http.StatusOK || a.res.Head != c1 {
		t.Fatalf("publish: %+v", a)
	}
	if v := th.job(o.Job); v.Head != c1 || v.Base != base || v.Project != "web" || v.Mode != "fix" {
		t.Fatalf("job after publish: %+v", v)
	}
	if got := th.jobRef("web", o.Job); got != c1 {
		t.Fatalf("job ref = %s, want %s", got, c1)
	}
	// The same commit again (a lost reply): a no-op with the same head.
	if a := th.publish(tok, o.AttemptRef, c1, b1, "", false); a.code != http.StatusOK || a.res.Head != c1 || a.res.Checkpoint != 0 {
		t.Fatalf("republish: %+v", a)
	}
	// A checkpoint on top makes a numbered ref.
	c2 := commitOn(t, dir, c1, "NOTES", "more\n")
	a = th.publish(tok, o.AttemptRef, c2, bundle(t, dir, c2, c1), "", true)
	if a.code != http.StatusOK || a.res.Head != c2 || a.res.Checkpoint != 1 {
		t.Fatalf("checkpoint: %+v", a)
	}
	if id, _ := th.h.repos.Ref(context.Background(), "web", gitcmd.CheckpointRef(o.Job, 1)); id != c2 {
		t.Fatalf("checkpoint ref = %q, want %s", id, c2)
	}

	// A commit built on the old head while the hub has a newer one (the
	// runner lost a reply): 409 stale_head, with the head to continue from.
	c3 := commitOn(t, dir, c1, "OTHER", "x\n")
	a = th.publish(tok, o.AttemptRef, c3, bundle(t, dir, c3, c1), "", false)
	if a.code != http.StatusConflict || a.err.Code != rules.ErrStaleHead || a.res.Head != c2 {
		t.Fatalf("stale head: %+v", a)
	}
	if v := th.job(o.Job); v.Head != c2 {
		t.Fatalf("stale publication moved the head to %s", v.Head)
	}
}

// A hub killed while git moved a job's ref leaves REF.lock beside it,
// which git takes for another update in progress: the job's next
// publication and checkpoint must still go through (they take the job's
// lock, so no update can be in progress).
func TestPublicationClearsAStaleRefLock(t *testing.T) {
	t.Parallel()
	rs := startRepoJob(t, Config{})
	th, tok, dir, base, o := rs.th, rs.tok, rs.dir, rs.base, rs.o
	for _, ref := range []string{gitcmd.JobRef(o.Job), gitcmd.CheckpointRef(o.Job, 1)} {
		lock := filepath.Join(th.repoDir("web"), filepath.FromSlash(ref)+".lock")
		if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(lock, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c1 := commitOn(t, dir, base, "src/main.go", "package main // fixed\n")
	if a := th.publish(tok, o.AttemptRef, c1, bundle(t, dir, c1, base), "", true); a.code != http.StatusOK || a.res.Head != c1 || a.res.Checkpoint != 1 {
		t.Fatalf("checkpoint over stale ref locks: %+v", a)
	}
	if got := th.jobRef("web", o.Job); got != c1 {
		t.Fatalf("job ref = %s, want %s", got, c1)
	}
	if id, _ := th.h.repos.Ref(context.Background(), "web", gitcmd.CheckpointRef(o.Job, 1)); id != c1 {
		t.Fatalf("checkpoint ref = %q, want %s", id, c1)
	}
}

// A sparse job's publication carries the runner's cone: folders the agent
// added become the job's, so that its next attempts start from them; a
// folder the commit lacks is left out, a malformed one refuses the
// publication with nothing stored, and a cone adding nothing changes
// nothing.
func TestPublicationWidensTheJobsCone(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := th.registerRunner("r1")
	sr, _ := th.dial(tok, protocol.Hello{})
	dir, _ := sourceRepo(t)
	writeFile(t, filepath.Join(dir, "docs/a.md"), "a\n")
	writeFile(t, filepath.Join(dir, "lib/b.go"), "package lib\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "--quiet", "-m", "more folders")
	base := gitT(t, dir, "rev-parse", "HEAD")
	th.push(dir, "web", base)
	v, code, e := th.submitRepo(apitypes.SubmitRequest{Repo: &apitypes.SubmitRepo{Project: "web", Base: base}, Sparse: []string{"src"}})
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %+v", code, e)
	}
	o := sr.offer()
	if o.Spec.Repo == nil || !slices.Equal(o.Spec.Repo.Sparse, []string{"src"}) {
		t.Fatalf("offer's cone: %+v", o.Spec.Repo)
	}
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	widened := func() int { return th.countEvents(v.ID, "sparse") }

	c1 := commitOn(t, dir, base, "docs/a.md", "a, edited\n")
	if a := th.publish(tok, o.AttemptRef, c1, bundle(t, dir, c1, base), "", true, "docs", "src"); a.code != http.StatusOK {
		t.Fatalf("publish with a widened cone: %+v", a)
	}
	if got := th.job(v.ID); got.Head != c1 || !slices.Equal(got.Sparse, []string{"docs", "src"}) || widened() != 1 {
		t.Fatalf("after the widened publication: head %s, cone %v, %d sparse events", got.Head, got.Sparse, widened())
	}

	c2 := commitOn(t, dir, c1, "src/main.go", "package main // 2\n")
	if a := th.publish(tok, o.AttemptRef, c2, bundle(t, dir, c2, c1), "", true, "../etc", "src"); a.code != http.StatusBadRequest || !strings.Contains(a.err.Message, "../etc") {
		t.Fatalf("publish with a malformed cone: %+v", a)
	}
	if got := th.job(v.ID); got.Head != c1 {
		t.Fatalf("a refused publication moved the head to %s", got.Head)
	}

	gitT(t, dir, "checkout", "--quiet", "--detach", c2)
	gitT(t, dir, "rm", "--quiet", "-r", "lib")
	gitT(t, dir, "commit", "--quiet", "-m", "no lib")
	c3 := gitT(t, dir, "rev-parse", "HEAD")
	for _, tc := range []struct {
		commit, parent string
		cone           []string
	}{
		{c2, c1, []string{"docs", "src"}},        // nothing new
		{c3, c2, []string{"docs", "lib", "src"}}, // lib is not in c3
	} {
		if a := th.publish(tok, o.AttemptRef, tc.commit, bundle(t, dir, tc.commit, tc.parent), "", true, tc.cone...); a.code != http.StatusOK {
			t.Fatalf("publish %v: %+v", tc.cone, a)
		}
	}
	if got := th.job(v.ID); got.Head != c3 || !slices.Equal(got.Sparse, []string{"docs", "src"}) || widened() != 1 {
		t.Fatalf("after publications adding nothing: head %s, cone %v, %d sparse events", got.Head, got.Sparse, widened())
	}
}

// brokenCommit writes, with hash-object --literally, a commit whose tree
// has two entries of one name (fsck: duplicateEntries), on parent.
func brokenCommit(t *testing.T, dir, parent string) string {
	t.Helper()
	blob := gitT(t, dir, "hash-object", "-w", "README")
	raw, err := hex.DecodeString(blob)
	if err != nil {
		t.Fatal(err)
	}
	var tree bytes.Buffer
	for range 2 {
		tree.WriteString("100644 same\x00")
		tree.Write(raw)
	}
	treeFile := filepath.Join(t.TempDir(), "tree")
	if err := os.WriteFile(treeFile, tree.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	treeID := gitT(t, dir, "hash-object", "-w", "--literally", "-t", "tree", treeFile)
	return gitT(t, dir, "commit-tree", treeID, "-p", parent, "-m", "broken")
}

func TestTamperedPublicationsAreRefused(t *testing.T) {
	t.Parallel()
	rs := startRepoJob(t, Config{})
	th, tok, dir, base, o := rs.th, rs.tok, rs.dir, rs.base, rs.o
	otherTok := th.registerRunner("r2")

	good := commitOn(t, dir, base, "src/main.go", "package main // fixed\n")
	goodBundle := bundle(t, dir, good, base)
	flipped := bytes.Clone(goodBundle)
	flipped[len(flipped)-30] ^= 0x01 // inside the pack

	other := commitOn(t, dir, base, "OTHER", "x\n")
	gitT(t, dir, "update-ref", "refs/heads/second", other)
	twoRefsFile := filepath.Join(t.TempDir(), "two.bundle")
	gitT(t, dir, "bundle", "create", "--quiet", twoRefsFile, "refs/heads/second", "refs/heads/result", "^"+base)
	twoRefs, _ := os.ReadFile(twoRefsFile)

	gitT(t, dir, "checkout", "--quiet", "--orphan", "unrelated")
	gitT(t, dir, "commit", "--quiet", "-m", "unrelated root")
	unrelated := gitT(t, dir, "rev-parse", "HEAD")

	broken := brokenCommit(t, dir, base)

	stale := o.AttemptRef
	stale.Epoch++
	tests := []struct {
		name   string
		token  string
		ref    protocol.AttemptRef
		commit string
		body   []byte
		digest string
		status int
		code   string
		reason string
	}{
		{"wrong digest", tok, o.AttemptRef, good, goodBundle, sum([]byte("other")), 400, rules.ErrBadRequest, "SHA-256"},
		{"flipped byte, digest of the original", tok, o.AttemptRef, good, flipped, sum(goodBundle), 400, rules.ErrBadRequest, "SHA-256"},
		{"flipped byte, digest of what was sent", tok, o.AttemptRef, good, flipped, "", 400, rules.ErrBadRequest, "validation"},
		{"second ref", tok, o.AttemptRef, good, twoRefs, "", 400, rules.ErrBadRequest, "2 refs"},
		{"ref is not the commit", tok, o.AttemptRef, other, goodBundle, "", 400, rules.ErrBadRequest, "not at the published commit"},
		{"not descending from the base", tok, o.AttemptRef, unrelated, bundle(t, dir, unrelated), "", 400, rules.ErrBadRequest, "does not descend from the job's base"},
		{"object failing fsck", tok, o.AttemptRef, broken, bundle(t, dir, broken, base), "", 400, rules.ErrBadRequest, "validation"},
		{"not a bundle", tok, o.AttemptRef, good, []byte("hello"), "", 400, rules.ErrBadRequest, "not a git bundle"},
		{"stale epoch", tok, stale, good, goodBundle, "", 409, rules.ErrFenced, "epoch"},
		{"another runner", otherTok, o.AttemptRef, good, goodBundle, "", 409, rules.ErrFenced, "another runner"},
		{"user token", th.admin, o.AttemptRef, good, goodBundle, "", 403, rules.ErrForbidden, "runner token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := th.publish(tt.token, tt.ref, tt.commit, tt.body, tt.digest, false)
			t.Logf("%d %s: %s", a.code, a.err.Code, a.err.Message)
			if a.code != tt.status || a.err.Code != tt.code || !strings.Contains(a.err.Message, tt.reason) {
				t.Fatalf("got %d %+v, want %d %s mentioning %q", a.code, a.err, tt.status, tt.code, tt.reason)
			}
			if v := th.job(o.Job); v.Head != base {
				t.Fatalf("refused publication moved the head to %s", v.Head)
			}
			if got := th.jobRef("web", o.Job); got != base {
				t.Fatalf("refused publication moved the job ref to %s", got)
			}
			if th.hubHas("web", tt.commit) {
				t.Fatalf("refused publication stored commit %s", tt.commit)
			}
		})
	}
	for _, dir := range []string{filepath.Join(th.repoDir("web"), "objects"), th.h.scratch.dir} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "incoming-") {
				t.Fatalf("quarantine %s left behind in %s", e.Name(), dir)
			}
		}
	}
	// After all that, the good one goes through.
	if a := th.publish(tok, o.AttemptRef, good, goodBundle, "", false); a.code != http.StatusOK || a.res.Head != good {
		t.Fatalf("good publication after refusals: %+v", a)
	}
}

func TestPublicationLimitsAndModes(t *testing.T) {
	t.Parallel()
	rs := startRepoJob(t, Config{TransferCap: 512})
	th, tok, sr, dir, base, o := rs.th, rs.tok, rs.sr, rs.dir, rs.base, rs.o
	big := commitOn(t, dir, base, "big.bin", strings.Repeat("random-ish content ", 4000)+o.Job)
	a := th.publish(tok, o.AttemptRef, big, bundle(t, dir, big, base), "", false)
	if a.code != http.StatusRequestEntityTooLarge || a.err.Code != rules.ErrTooLarge || !strings.Contains(a.err.Message, "drover projects map") {
		t.Fatalf("over the cap: %+v", a)
	}

	// An observe-mode job publishes nothing.
	v, code, e := th.submitRepo(apitypes.SubmitRequest{Repo: &apitypes.SubmitRepo{Project: "web", Base: base}, Mode: protocol.ModeObserve})
	if code != http.StatusCreated || v.Mode != protocol.ModeObserve {
		t.Fatalf("observe submit: %d %+v", code, e)
	}
	runToEnd(t, sr, o, "", 0)
	o2 := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o2.AttemptRef}))
	small := commitOn(t, dir, base, "x", "y")
	if a := th.publish(tok, o2.AttemptRef, small, bundle(t, dir, small, base), "", false); a.code != http.StatusConflict || a.err.Code != rules.ErrConflict {
		t.Fatalf("observe publish: %+v", a)
	}
	// A finished attempt can no longer publish.
	if a := th.publish(tok, o.AttemptRef, small, bundle(t, dir, small, base), "", false); a.code != http.StatusConflict || a.err.Code != rules.ErrFenced {
		t.Fatalf("publish after finish: %+v", a)
	}
}

func TestSubmitWithARepositoryIsChecked(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	dir, base := sourceRepo(t)
	th.push(dir, "web", base)
	unpushed := commitOn(t, dir, base, "NEW", "new\n")

	// A submodule (gitlink) and an LFS filter, each pushed, each refused.
	gitT(t, dir, "checkout", "--quiet", "--detach", base)
	gitT(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+base+",vendor/lib")
	gitT(t, dir, "commit", "--quiet", "-m", "submodule")
	withSubmodule := gitT(t, dir, "rev-parse", "HEAD")
	th.push(dir, "web", withSubmodule)
	gitT(t, dir, "checkout", "--quiet", "--detach", base)
	writeFile(t, filepath.Join(dir, "assets/.gitattributes"), "# images\n*.png filter=lfs diff=lfs merge=lfs -text\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "--quiet", "-m", "lfs")
	withLFS := gitT(t, dir, "rev-parse", "HEAD")
	th.push(dir, "web", withLFS)

	repo := func(p, b string) *apitypes.SubmitRepo { return &apitypes.SubmitRepo{Project: p, Base: b} }
	tests := []struct {
		name string
		req  apitypes.SubmitRequest
		want string
	}{
		{"no such project", apitypes.SubmitRequest{Repo: repo("nope", base)}, "push the commit first"},
		{"commit not pushed", apitypes.SubmitRequest{Repo: repo("web", unpushed)}, "push the commit first"},
		{"bad project name", apitypes.SubmitRequest{Repo: repo("Web/x", base)}, "project name"},
		{"short base", apitypes.SubmitRequest{Repo: repo("web", base[:12])}, "40-hex"},
		{"bad mode", apitypes.SubmitRequest{Repo: repo("web", base), Mode: "yolo"}, "mode"},
		{"mode without a repository", apitypes.SubmitRequest{Mode: "fix"}, "repository"},
		{"context without a repository", apitypes.SubmitRequest{Context: []rules.ContextUpload{{Name: "a", Data: []byte("x")}}}, "repository"},
		{"submodule", apitypes.SubmitRequest{Repo: repo("web", withSubmodule)}, "submodule"},
		{"lfs filter", apitypes.SubmitRequest{Repo: repo("web", withLFS)}, "filter=lfs"},
		{".env context file", apitypes.SubmitRequest{Repo: repo("web", base), Context: []rules.ContextUpload{{Name: ".env", Data: []byte("A=1")}}}, ".env"},
		{"escaping context file", apitypes.SubmitRequest{Repo: repo("web", base), Context: []rules.ContextUpload{{Name: "../x", Data: []byte("A=1")}}}, "clean relative path"},
		{"private key context file", apitypes.SubmitRequest{Repo: repo("web", base), Context: []rules.ContextUpload{{Name: "notes.txt",
			Data: []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")}}}, "private key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, code, e := th.submitRepo(tt.req)
			if code != http.StatusBadRequest || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("got %d %+v, want 400 mentioning %q", code, e, tt.want)
			}
		})
	}
	var list apitypes.JobList
	th.call(th.admin, "GET", "/jobs", nil, &list)
	if len(list.Jobs) != 0 {
		t.Fatalf("refused submissions made %d jobs", len(list.Jobs))
	}
}

func TestContextFilesAreServedToTheAttempt(t *testing.T) {
	t.Parallel()
	rs := startRepoJob(t, Config{}, rules.ContextUpload{Name: "spec.md", Data: []byte("# spec\n")},
		rules.ContextUpload{Name: "data/in.json", Data: []byte(`{"a":1}`)})
	th, tok, o := rs.th, rs.tok, rs.o
	if len(o.Spec.Context) != 2 || o.Spec.Context[0].Name != "data/in.json" || o.Spec.Context[1].Size != 7 {
		t.Fatalf("offer context: %+v", o.Spec.Context)
	}
	get := func(token string, ref protocol.AttemptRef) (int, map[string]string) {
		q := url.Values{"job": {ref.Job}, "attempt": {ref.Attempt}, "epoch": {itoa(ref.Epoch)}}
		req, _ := http.NewRequest("GET", th.srv.URL+apitypes.APIPrefix+"/runner/context?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, nil
		}
		out := map[string]string{}
		tr := tar.NewReader(resp.Body)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
		return resp.StatusCode, out
	}
	code, got := get(tok, o.AttemptRef)
	if code != http.StatusOK || got["spec.md"] != "# spec\n" || got["data/in.json"] != `{"a":1}` || len(got) != 2 {
		t.Fatalf("context: %d %v", code, got)
	}
	stale := o.AttemptRef
	stale.Epoch = 9
	if code, _ := get(tok, stale); code != http.StatusConflict {
		t.Fatalf("stale epoch got %d", code)
	}
	if code, _ := get(th.registerRunner("r2"), o.AttemptRef); code != http.StatusConflict {
		t.Fatalf("another runner got %d", code)
	}
}

// gitAs runs a git fetch or push against the hub with a token header
// (or none), returning git's error.
func gitAs(t *testing.T, dir, token string, args ...string) error {
	t.Helper()
	var env []string
	if token != "" {
		env = []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Bearer " + token}
	}
	_, err := tgit.Run(context.Background(), gitcmd.Cmd{Dir: dir, Env: env, Args: args})
	return err
}

func TestGitHTTPAuthorization(t *testing.T) {
	t.Parallel()
	rs := startRepoJob(t, Config{})
	th, tok, dir, base, o := rs.th, rs.tok, rs.dir, rs.base, rs.o
	// A second project that r1 holds no attempt of.
	dir2, base2 := sourceRepo(t)
	th.push(dir2, "api", base2)

	clone := t.TempDir()
	gitT(t, clone, "init", "--quiet", "--bare", clone)
	fetch := func(token, project, what string) error {
		return gitAs(t, clone, token, "fetch", "--quiet", th.gitURL(project), "+"+what+":refs/t/x")
	}
	// A user reads with plain git, by ref or by id.
	if err := fetch(th.admin, "web", gitcmd.JobRef(o.Job)); err != nil {
		t.Fatalf("user fetch of the job ref: %v", err)
	}
	if got := gitT(t, clone, "rev-parse", "refs/t/x"); got != base {
		t.Fatalf("fetched %s, want %s", got, base)
	}
	// HTTP Basic with the token as password works too.
	u, _ := url.Parse(th.gitURL("api"))
	u.User = url.UserPassword("any", th.admin)
	if err := gitAs(t, clone, "", "fetch", "--quiet", u.String(), "+"+base2+":refs/t/y"); err != nil {
		t.Fatalf("basic-auth fetch: %v", err)
	}
	// The runner reads the project of its attempt, by id.
	if err := fetch(tok, "web", base); err != nil {
		t.Fatalf("runner fetch of its project: %v", err)
	}

	refused := []struct {
		name string
		err  error
		want string
	}{
		{"no token", fetch("", "web", base), "could not read Username"}, // a 401 asks for credentials
		{"unknown token", fetch("drv_u_nope", "web", base), "could not read Username"},
		{"runner on another project", fetch(tok, "api", base2), "403"},
		{"runner push", gitAs(t, dir, tok, "push", "--quiet", th.gitURL("web"), base+":refs/drover/uploads/r"), "403"},
		{"user push to a branch", gitAs(t, dir, th.admin, "push", "--quiet", th.gitURL("web"), base+":refs/heads/main"), "refs/drover/uploads"},
		{"user push to a job ref", gitAs(t, dir, th.admin, "push", "--quiet", "--force", th.gitURL("web"),
			commitOn(t, dir, base, "Y", "y")+":"+gitcmd.JobRef(o.Job)), "refs/drover/uploads"},
		{"user rewrite of an upload", gitAs(t, dir, th.admin, "push", "--quiet", "--force", th.gitURL("web"),
			commitOn(t, dir, base, "Z", "z")+":"+gitcmd.UploadRefPrefix+"t-"+base[:8]), "written once"},
		{"user fetch of a missing project", fetch(th.admin, "nope", base), "no project nope on the hub"},
	}
	for _, tt := range refused {
		t.Logf("%s: %v", tt.name, tt.err)
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error mentioning %q", tt.name, tt.err, tt.want)
		}
	}
	if id, _ := th.h.repos.Ref(context.Background(), "web", "refs/heads/main"); id != "" {
		t.Fatalf("a refused push created refs/heads/main")
	}

	// A revoked runner token reads nothing.
	if code, e := th.call(th.admin, "POST", "/runners/r1/revoke", nil, nil); code != http.StatusOK {
		t.Fatalf("revoke: %d %+v", code, e)
	}
	if err := fetch(tok, "web", base); err == nil || !strings.Contains(err.Error(), "could not read Username") {
		t.Fatalf("revoked runner fetch: %v", err)
	}
}

func TestProjectsCanBeMappedToARemote(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := th.registerRunner("r1")
	sr, _ := th.dial(tok, protocol.Hello{})
	remote, base := sourceRepo(t) // a remote the hub can read without credentials

	var pv apitypes.ProjectView
	if code, e := th.call(th.admin, "PUT", "/projects/lib", apitypes.MapProjectRequest{Remote: remote}, &pv); code != http.StatusOK || pv.Remote != remote {
		t.Fatalf("map: %d %+v", code, e)
	}
	user := th.addUser("bob")
	if code, _ := th.call(user, "PUT", "/projects/lib", apitypes.MapProjectRequest{Remote: "x"}, nil); code != http.StatusForbidden {
		t.Fatalf("non-admin map: %d", code)
	}
	// The base need not be on the hub: runners fetch it from the remote.
	v, code, e := th.submitRepo(apitypes.SubmitRequest{Repo: &apitypes.SubmitRepo{Project: "lib", Base: base}})
	if code != http.StatusCreated {
		t.Fatalf("submit on a mapped project: %d %+v", code, e)
	}
	o := sr.offer()
	if o.Spec.Repo == nil || o.Spec.Repo.URL != remote || !o.Spec.Repo.Remote {
		t.Fatalf("offer repo: %+v", o.Spec.Repo)
	}
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	// A publication makes the hub fetch the base it lacks from the remote.
	c1 := commitOn(t, remote, base, "fix.txt", "fixed\n")
	if a := th.publish(tok, o.AttemptRef, c1, bundle(t, remote, c1, base), "", false); a.code != http.StatusOK || a.res.Head != c1 {
		t.Fatalf("publish on a mapped project: %+v", a)
	}
	if got := th.job(v.ID); got.Head != c1 {
		t.Fatalf("head %s", got.Head)
	}
	var pl apitypes.ProjectList
	th.call(th.admin, "GET", "/projects", nil, &pl)
	if len(pl.Projects) != 1 || pl.Projects[0].Name != "lib" || pl.Projects[0].Remote != remote || !pl.Projects[0].Hosted {
		t.Fatalf("projects: %+v", pl)
	}
}

// addUser makes a user and returns its token.
func (th *testHub) addUser(name string) string {
	th.t.Helper()
	var r apitypes.NewUserResponse
	if code, e := th.call(th.admin, "POST", "/users", apitypes.NewUserRequest{Name: name}, &r); code != http.StatusCreated {
		th.t.Fatalf("add user: %d %+v", code, e)
	}
	if th.tokens == nil {
		th.tokens = map[string]string{}
	}
	th.tokens[name] = r.Token
	return r.Token
}

// tokenOf is the token of the user addUser made (or the admin).
func (th *testHub) tokenOf(name string) string {
	th.t.Helper()
	if name == "admin" {
		return th.admin
	}
	tok, ok := th.tokens[name]
	if !ok {
		th.t.Fatalf("no token of user %s", name)
	}
	return tok
}

func TestLargePushesAndTheTransferCap(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{TransferCap: 2 << 20})
	dir, base := sourceRepo(t)
	noise := make([]byte, 3<<20)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "small.bin"), string(noise[:1<<20+1<<19])) // over git's 1 MiB post buffer: chunked, probed
	small := commitOn(t, dir, base, "x", "x")
	th.push(dir, "web", small)
	writeFile(t, filepath.Join(dir, "big.bin"), string(noise))
	big := commitOn(t, dir, small, "y", "y")
	err := (localrepo.Checkout{Git: tgit, Dir: dir}).Push(context.Background(), th.gitURL("web"), th.admin, big, gitcmd.UploadRefPrefix+"big")
	if err == nil || !strings.Contains(err.Error(), "413") {
		t.Fatalf("push over the cap: %v", err)
	}
	if th.hubHas("web", big) {
		t.Fatal("a push over the cap was stored")
	}
}
