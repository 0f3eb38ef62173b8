package hub

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"drover/internal/sandbox/sandboxtest"
	"drover/internal/store"
	"drover/internal/testkit"
)

// Several hubs on one data directory and one Postgres database, as a
// deployment on a shared file system runs them (in one test process: flock
// excludes two open files of one process as it does two processes).

// startSharedRepoJob is startRepoJob on Postgres, so a second hub can share
// the first one's data directory and database.
func startSharedRepoJob(t *testing.T) repoSetup {
	t.Helper()
	return startRepoJob(t, Config{Database: testkit.StartPostgres(t)})
}

// twin starts another hub on th's data directory and database.
func (th *testHub) twin() *testHub {
	th.t.Helper()
	h, err := Open(context.Background(), th.cfg)
	if err != nil {
		th.t.Fatal(err)
	}
	tw := &testHub{t: th.t, h: h, srv: httptest.NewServer(h.Handler()), cfg: th.cfg, admin: th.admin}
	th.t.Cleanup(func() {
		tw.srv.CloseClientConnections()
		tw.srv.Close()
		tw.h.Close()
	})
	return tw
}

// A hub starting while another is receiving a publication on the same data
// directory leaves its spooled body alone: the publication completes.
func TestSharedDataDirHubStartKeepsLiveTransfer(t *testing.T) {
	t.Parallel()
	rs := startSharedRepoJob(t)
	th, dir, base, o := rs.th, rs.dir, rs.base, rs.o
	c1 := commitOn(t, dir, base, "src/main.go", "package main // fixed\n")
	b1 := bundle(t, dir, c1, base)

	pr, pw := io.Pipe()
	type answer struct {
		a   publishAnswer
		err error
	}
	done := make(chan answer, 1)
	go func() {
		a, err := publishTo(th.srv.URL, rs.tok, o.AttemptRef, c1, pr, sum(b1), false)
		done <- answer{a, err}
	}()
	half := len(b1) / 2
	if _, err := pw.Write(b1[:half]); err != nil {
		t.Fatal(err)
	}
	sandboxtest.WaitFor(t, "the first hub spools the publication", func() bool { return spooled(t, th.h) > 0 })

	th.twin() // starts, removing leftovers, while the transfer is half done

	if _, err := pw.Write(b1[half:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	got := <-done
	if got.err != nil || got.a.code != http.StatusOK || got.a.res.Head != c1 {
		t.Fatalf("publication across another hub's start: %+v %v", got.a, got.err)
	}
}

// spooled counts the files in h's scratch directory (its lock aside).
func spooled(t *testing.T, h *Hub) int {
	t.Helper()
	ents, err := os.ReadDir(h.scratch.dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if e.Name() != holdLock {
			n++
		}
	}
	return n
}

// A dead hub's scratch directory (its lock released by the kernel) goes at
// the next start; a live hub's stays, and so do leftovers of an older
// drover while it lives.
func TestSharedDataDirRemovesOnlyDeadHubsLeftovers(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{Database: testkit.StartPostgres(t)})
	root := filepath.Join(th.cfg.DataDir, tmpDir)
	dead := filepath.Join(root, "hub-dead")
	for _, p := range []string{filepath.Join(dead, holdLock), filepath.Join(dead, "publish-1.bundle"), filepath.Join(dead, "incoming-1", "pack", "x.pack")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	legacy := filepath.Join(root, "git-1.body")
	if err := os.WriteFile(legacy, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(th.h.scratch.dir, "publish-2.bundle")
	if err := os.WriteFile(live, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	tw := th.twin()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead hub's scratch directory survived the next start: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live hub's spooled file was removed: %v", err)
	}
	if _, err := os.Stat(legacy); err != nil {
		t.Errorf("a leftover of an older drover was removed while another hub lives: %v", err)
	}

	// Both hubs gone, the next start is alone: the older leftovers go too,
	// and each hub removed its own directory on the way out.
	tw.h.Close()
	th.reopen()
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Errorf("a leftover of an older drover survived a lone start: %v", err)
	}
	ents, _ := os.ReadDir(root)
	var dirs []string
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) != 1 || filepath.Join(root, dirs[0]) != th.h.scratch.dir {
		t.Errorf("scratch directories after a lone start: %v, want only %s", dirs, th.h.scratch.dir)
	}
}

// Two hubs receive the same publication at once, as when a runner resends
// it to another hub before the first answered: the job's publications take
// turns across hubs, so both succeed (the second finds it published)
// instead of one failing its ref update midway. Without the cross-process
// lock, both read the old head and one fails.
func TestSharedDataDirSerializesPublications(t *testing.T) {
	t.Parallel()
	rs := startSharedRepoJob(t)
	th, dir, o := rs.th, rs.dir, rs.o
	tw := th.twin()
	head := rs.base
	for round := range 8 {
		c := commitOn(t, dir, head, "src/main.go", fmt.Sprintf("package main // round %d\n", round))
		b := bundle(t, dir, c, head)
		var wg sync.WaitGroup
		answers := make([]publishAnswer, 2)
		errs := make([]error, 2)
		for i, hub := range []*testHub{th, tw} {
			wg.Go(func() {
				answers[i], errs[i] = publishTo(hub.srv.URL, rs.tok, o.AttemptRef, c, strings.NewReader(string(b)), sum(b), false)
			})
		}
		wg.Wait()
		for i, a := range answers {
			if errs[i] != nil || a.code != http.StatusOK || a.res.Head != c {
				t.Fatalf("round %d, hub %d: %+v %v", round, i, a, errs[i])
			}
		}
		if got := th.jobRef("web", o.Job); got != c {
			t.Fatalf("round %d: job ref %s, want %s", round, got, c)
		}
		head = c
	}
	// Both hubs creating one new repository at once: one repository.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, hub := range []*testHub{th, tw} {
		wg.Go(func() { errs[i] = hub.h.ensureRepo(t.Context(), "api") })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || !th.h.repos.Exists("api") {
		t.Fatalf("concurrent creation: %v, exists %v", errs, th.h.repos.Exists("api"))
	}
}

// Hubs first starting at once on one empty database end with one admin
// whose token is the one in the token file, whether they share the data
// directory or each has its own (then exactly one of them holds a token).
func TestSharedDataDirConcurrentFirstStartsMakeOneAdmin(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			db := testkit.StartPostgres(t)
			one := t.TempDir()
			const n = 4
			hubs := make([]*Hub, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			var starts []func()
			var logs [n]bytes.Buffer
			var logMu [n]sync.Mutex
			for i := range n {
				d := one
				if !shared {
					d = t.TempDir()
				}
				cfg := Config{DataDir: d, Database: db, Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu[i], &logs[i]}, nil))}
				// Stores first (migrations take turns), so that the
				// bootstraps race.
				st, err := openStore(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				starts = append(starts, func() {
					if hubs[i], errs[i] = New(context.Background(), cfg, st); errs[i] != nil {
						st.Close()
					}
				})
			}
			for _, start := range starts {
				wg.Go(start)
			}
			wg.Wait()
			for i, h := range hubs {
				if errs[i] != nil {
					t.Fatalf("hub %d: %v", i, errs[i])
				}
				t.Cleanup(func() { h.Close() })
			}
			var admins []store.User
			var tokens int
			for i, h := range hubs {
				if h == hubs[0] || !shared {
					tok, err := os.ReadFile(h.AdminTokenPath())
					if err != nil {
						logMu[i].Lock()
						if !strings.Contains(logs[i].String(), "in the data directory of the first hub started on this database") {
							t.Errorf("hub %d has no token and does not say where it is:\n%s", i, logs[i].String())
						}
						logMu[i].Unlock()
						continue
					}
					tokens++
					p, err := h.AuthenticateToken(t.Context(), strings.TrimSpace(string(tok)))
					if err != nil || !p.Admin {
						t.Errorf("the token in %s is not the admin's: %+v %v", h.AdminTokenPath(), p, err)
					}
				}
			}
			if err := hubs[0].store.Read(t.Context(), func(tx store.Tx) error {
				us, err := tx.Users()
				for _, u := range us {
					if u.Admin {
						admins = append(admins, u)
					}
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if len(admins) != 1 || tokens != 1 {
				t.Fatalf("%d admins, %d token files; want one of each: %+v", len(admins), tokens, admins)
			}
		})
	}
}
