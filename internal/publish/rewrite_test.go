package publish_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/publish"
	"drover/internal/store"
	"drover/internal/testkit"
)

// signingKey makes an Ed25519 key (mode 0600) for the bench's hub and an
// allowed-signers file that trusts it for drover's committer email.
func (b *bench) signingKey() (key, allowed string) {
	b.t.Helper()
	dir := b.t.TempDir()
	key = filepath.Join(dir, "hub_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "drover hub", "-f", key).CombinedOutput(); err != nil {
		b.t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		b.t.Fatal(err)
	}
	allowed = filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(allowed, []byte("drover@localhost namespaces=\"git\" "+string(pub)), 0o600); err != nil {
		b.t.Fatal(err)
	}
	b.key = key
	return key, allowed
}

// twoCommitJob adds a completed job of two commits on main, of project
// config cfg.
func (b *bench) twoCommitJob(id string, cfg store.ProjectConfig) publish.Job {
	b.t.Helper()
	// Dated in the past: a rewrite keeps them.
	b.env = []string{"GIT_AUTHOR_DATE=2001-02-03T04:05:06+0100", "GIT_COMMITTER_DATE=2001-02-03T05:06:07+0100"}
	first := b.commit(b.base, "first of "+id)
	head := b.commit(first, "second of "+id+"\n\nWhy it was done.\n\nSigned-off-by: t <t@t>")
	b.env = nil
	cfg.Forge, cfg.ForgeRepo = "gitea", b.repo
	j := publish.Job{View: apitypes.JobView{ID: id, State: job.Completed, Agent: "exec", Args: []string{"fix it"},
		Requester: "alice", Project: "app", Base: b.base, Head: head, Mode: protocol.ModeFix}, Config: cfg, RepoDir: b.hubDir}
	b.add(j)
	return j
}

// fetched fetches branch from Gitea into the work clone and answers
// git log's lines of format for base..branch, oldest first.
func (b *bench) fetched(branch, format string) []string {
	b.t.Helper()
	b.run(b.work, "fetch", "-q", b.g.URL+"/"+b.repo+".git", "+refs/heads/"+branch+":refs/remotes/gitea/"+branch)
	return strings.Split(b.out(b.work, "log", "--reverse", "--format="+format, b.base+"..refs/remotes/gitea/"+branch), "\n")
}

// TestPublishRewritesAuthorAndSigns: a project that asks for it publishes
// its jobs' commits with the requester as author, the agent in a
// Co-authored-by trailer, the same trees and dates, signed with the hub's
// SSH key (git verify-commit accepts them); asking again is answered from
// the record (the rewrite gives the same commit), with no forge call.
func TestPublishRewritesAuthorAndSigns(t *testing.T) {
	b := newBench(t)
	_, allowed := b.signingKey()
	s := b.service(t.Context())
	j := b.twoCommitJob("r1", store.ProjectConfig{PublishAuthor: publish.AuthorRequester, PublishSign: true})
	v, err := s.PublishJob(t.Context(), alice, "r1", apitypes.PublishRequest{})
	if err != nil || v.State != "done" || v.Commit == j.View.Head || v.Pushed != v.Commit {
		t.Fatalf("publication = %+v, %v; want done with a rewritten commit", v, err)
	}
	if ps := b.pulls(); len(ps) != 1 || ps[0].Head.Sha != v.Commit {
		t.Fatalf("pull requests = %+v, want one at %s", ps, v.Commit)
	}
	got := b.fetched("drover/r1", "%an <%ae>|%cn <%ce>|%ad|%cd|%T|%(trailers:key=Co-authored-by,valueonly,separator=)")
	want := strings.Split(b.out(b.work, "log", "--reverse", "--format=alice <alice@users.noreply.127.0.0.1>|drover <drover@localhost>|%ad|%cd|%T|exec <exec@agents.drover.invalid>",
		b.base+".."+j.View.Head), "\n")
	if len(got) != 2 || len(want) != 2 {
		t.Fatalf("commits on Gitea %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] || !strings.Contains(got[i], "2001") {
			t.Errorf("commit %d on Gitea:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	msg := b.out(b.work, "log", "-1", "--format=%B", "refs/remotes/gitea/drover/r1")
	if msg != "second of r1\n\nWhy it was done.\n\nSigned-off-by: t <t@t>\nCo-authored-by: exec <exec@agents.drover.invalid>" {
		t.Errorf("message = %q", msg)
	}
	for _, c := range []string{v.Commit, v.Commit + "^"} {
		if _, err := b.git.Run(t.Context(), gitcmd.Cmd{Dir: b.work, Args: []string{"-c", "gpg.ssh.allowedSignersFile=" + allowed,
			"verify-commit", c}}); err != nil {
			t.Errorf("verify-commit %s: %v", c, err)
		}
	}
	if ref := b.out(b.hubDir, "rev-parse", publish.PublishedRefPrefix+"r1"); ref != v.Commit {
		t.Errorf("%sr1 = %s, want %s", publish.PublishedRefPrefix, ref, v.Commit)
	}

	before := b.proxy.Count("", "")
	again, err := b.service(t.Context()).PublishJob(t.Context(), alice, "r1", apitypes.PublishRequest{})
	if err != nil || again.Commit != v.Commit || again.PR != v.PR {
		t.Fatalf("publishing again = %+v, %v; want the same commit %s", again, err, v.Commit)
	}
	if n := b.proxy.Count("", "") - before; n != 0 {
		t.Errorf("publishing again made %d forge requests, want 0", n)
	}
}

// TestPublishRefusesAnOpenSigningKey: a signing key others may read, or
// none, ends a signed publication before any forge call, its reason
// naming what to fix.
func TestPublishRefusesAnOpenSigningKey(t *testing.T) {
	b := newBench(t)
	key, _ := b.signingKey()
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	s := b.service(t.Context())
	b.twoCommitJob("r2", store.ProjectConfig{PublishSign: true})
	before := b.proxy.Count("", "")
	_, err := s.PublishJob(t.Context(), alice, "r2", apitypes.PublishRequest{})
	if err == nil || !strings.Contains(err.Error(), "mode 0644") || !strings.Contains(err.Error(), "chmod 600") ||
		!strings.Contains(err.Error(), publish.CodeRewrite) {
		t.Fatalf("publication with a key of mode 0644: %v", err)
	}
	if err := publish.CheckSigningKey(key); err == nil {
		t.Error("CheckSigningKey accepts a key of mode 0644")
	}
	b.key = ""
	if _, err := b.service(t.Context()).PublishJob(t.Context(), alice, "r2", apitypes.PublishRequest{}); err == nil ||
		!strings.Contains(err.Error(), "no signing key") {
		t.Fatalf("publication without a hub key: %v", err)
	}
	if n := b.proxy.Count("", "") - before; n != 0 {
		t.Errorf("refused publications made %d forge requests", n)
	}
	if err := b.st.Read(t.Context(), func(tx store.Tx) error { _, err := tx.Publication("r2"); return err }); err == nil {
		t.Error("a refused publication was recorded")
	}
}

// TestPublishRewrittenResumesOnce: a publication its job's completion
// recorded (Intent) is rewritten before its push; a hub that dies after
// the push, in the pull request call, resumes into one pull request at
// the same rewritten commit, with no second push.
func TestPublishRewrittenResumesOnce(t *testing.T) {
	b := newBench(t)
	b.signingKey()
	cfg := store.ProjectConfig{Forge: "gitea", ForgeRepo: b.repo, Publish: apitypes.PublishPR,
		PublishAuthor: publish.AuthorRequester, PublishSign: true}
	hubCtx, kill := context.WithCancel(t.Context())
	s := b.service(hubCtx)
	j := b.twoCommitJob("r3", cfg)
	now := time.Now()
	if err := b.st.Write(t.Context(), func(tx store.Tx) error {
		if err := tx.PutProject(store.Project{Name: "app", OwnerID: alice.UserID, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		if err := tx.SetProjectConfig("app", cfg, now); err != nil {
			return err
		}
		_, err := publish.Intent(tx, store.Job{ID: "r3", State: job.Completed, Project: "app", Base: j.View.Base, Head: j.View.Head,
			Mode: protocol.ModeFix}, now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b.proxy.On(http.MethodPost, "/pulls", -1, testkit.Hold)
	go func() {
		<-b.proxy.Seen(http.MethodPost, "/pulls")
		kill() // the hub dies in the call
	}()
	s.JobCompleted(t.Context(), "r3")
	s.Wait()
	var p store.Publication
	read := func() {
		t.Helper()
		if err := b.st.Read(t.Context(), func(tx store.Tx) error { var err error; p, err = tx.Publication("r3"); return err }); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if p.State != store.PublicationPending || p.Commit == j.View.Head || p.Pushed != p.Commit || b.branch("drover/r3") != p.Commit {
		t.Fatalf("record after the hub died = %+v; branch at %s", p, b.branch("drover/r3"))
	}
	pushed := p.Commit
	b.proxy.Clear()
	s2 := b.service(t.Context())
	if err := s2.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	s2.Wait()
	read()
	ps := b.pulls()
	if len(ps) != 1 || ps[0].Head.Sha != pushed || p.State != store.PublicationDone || p.Commit != pushed {
		t.Fatalf("after the restart: pull requests %+v, record %+v; want one at %s", ps, p, pushed)
	}
	if n := b.proxy.Count(http.MethodPost, pushPath); n != 1 {
		t.Errorf("%d pushes, want 1", n)
	}
}
