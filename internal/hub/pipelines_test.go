package hub

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/eval"
	"drover/internal/job"
	"drover/internal/pipeline"
	"drover/internal/protocol"
	"drover/internal/store"
)

// A pipeline's steps publish nothing on their own: a project's default
// publication (--publish pr) is its publish step's to make, not every
// step's; a plain job on the project still makes it.
func TestPipelineStepsSkipTheProjectsDefaultPublication(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := th.registerRunner("r1")
	sr, _ := th.dial(tok, protocol.Hello{Slots: 1})
	dir, base := sourceRepo(t)
	th.push(dir, "web", base)
	now := time.Now()
	if err := th.h.store.Write(t.Context(), func(tx store.Tx) error {
		// A forge nobody answers: the plain job's publication stays pending.
		if err := tx.PutForge(store.Forge{Name: "f", Kind: "gitea", URL: "http://127.0.0.1:1", Secret: "s", CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		return tx.SetProjectConfig("web", store.ProjectConfig{Forge: "f", ForgeRepo: "o/r", Publish: "pr"}, now)
	}); err != nil {
		t.Fatal(err)
	}
	run := func(key string) string {
		v, code, e := th.submitRepo(apitypes.SubmitRequest{Key: key, Repo: &apitypes.SubmitRepo{Project: "web", Base: base}})
		if code != http.StatusCreated {
			t.Fatalf("submit: %d %+v", code, e)
		}
		o := sr.offer()
		wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
		head := commitOn(t, dir, base, "a.txt", key+"\n")
		if a := th.publish(tok, o.AttemptRef, head, bundle(t, dir, head, base), "", false); a.code != http.StatusOK {
			t.Fatalf("publish: %+v", a)
		}
		wantOK(t, sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef,
			Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)}, LogSHA256: sum(nil)}))
		return v.ID
	}
	step, plain := run(pipeline.KeyPrefix+"p-1:build#1:1"), run("")
	sample := run(eval.KeyPrefix + "e-1:a#1#1:agent") // nor does an evaluation's
	for _, c := range []struct {
		id   string
		want bool
	}{{step, false}, {plain, true}, {sample, false}} {
		err := th.h.store.Read(t.Context(), func(tx store.Tx) error {
			_, err := tx.Publication(c.id)
			return err
		})
		if got := err == nil; got != c.want || (err != nil && !errors.Is(err, store.ErrNotFound)) {
			t.Errorf("job %s: publication recorded %v (%v), want %v", c.id, got, err, c.want)
		}
	}
}
