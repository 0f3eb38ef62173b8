package runner

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/sandbox"
	"drover/internal/sandbox/sandboxtest"
)

// A podman runner with --images a/* announces them, runs a job naming a/x
// in a/x (the engine's argv says so, after "--"), its other jobs in its
// own image, and refuses a job naming b/y without giving it to the engine.
func TestJobImagesOnAContainerRunner(t *testing.T) {
	eng := sandboxtest.FakeEngineOnPath(t, "own/img:1", "a/x", "b/y")
	h := newFakeHub(t)
	startRunner(t, h, "", func(c *Config) {
		c.Sandbox = sandbox.Policy{Kind: sandbox.KindPodman, Image: "own/img:1"}
		c.Images = []string{"a/*"}
	})
	h.waitConn(0)
	var hello protocol.Hello
	must(t, json.Unmarshal(h.received(protocol.TypeHello)[0].f.Body, &hello))
	if !slices.Equal(hello.Images, []string{"a/*"}) {
		t.Fatalf("hello images = %q", hello.Images)
	}
	image := func(run []string) string { return run[slices.Index(run, "--")+1] }

	ok := newRef()
	spec := shSpec("echo in-image")
	spec.Image = "a/x"
	h.offer(ok, spec)
	wantOutcome(t, h.waitFinish(ok.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	if runs := eng.All(t, "run"); len(runs) != 1 || image(runs[0]) != "a/x" {
		t.Fatalf("engine runs %q, want one in a/x", runs)
	}

	own := newRef()
	h.offer(own, shSpec("echo own"))
	wantOutcome(t, h.waitFinish(own.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	if runs := eng.All(t, "run"); len(runs) != 2 || image(runs[1]) != "own/img:1" {
		t.Fatalf("engine runs %q, want the second in own/img:1", runs)
	}

	refused := newRef()
	spec.Image = "b/y"
	h.offer(refused, spec)
	fin := h.waitFinish(refused.Attempt)
	wantOutcome(t, fin, job.AttemptFailed, job.ReasonSpawnFailed, nil)
	if !strings.Contains(fin.Outcome.Message, "does not offer image b/y") {
		t.Fatalf("refusal = %q", fin.Outcome.Message)
	}
	for _, c := range eng.Calls(t) {
		if slices.Contains(c, "b/y") {
			t.Fatalf("b/y reached the engine: %q", c)
		}
	}
}

// An image missing from the machine, on a runner that may not pull, fails
// that job with the fix, not the runner.
func TestMissingJobImageFailsTheJob(t *testing.T) {
	eng := sandboxtest.FakeEngineOnPath(t, "own/img:1")
	h := newFakeHub(t)
	startRunner(t, h, "", func(c *Config) {
		c.Sandbox = sandbox.Policy{Kind: sandbox.KindDocker, Image: "own/img:1"}
		c.Images = []string{"a/*"}
	})
	h.waitConn(0)
	ref := newRef()
	spec := shSpec("echo never")
	spec.Image = "a/missing"
	h.offer(ref, spec)
	fin := h.waitFinish(ref.Attempt)
	if fin.Outcome.State != job.AttemptFailed || !strings.Contains(fin.Outcome.Message, "docker pull a/missing") {
		t.Fatalf("outcome = %+v", fin.Outcome)
	}
	if runs := eng.All(t, "run"); len(runs) != 0 {
		t.Fatalf("engine ran %q", runs)
	}
	ok := newRef()
	h.offer(ok, shSpec("echo fine"))
	wantOutcome(t, h.waitFinish(ok.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
}

// An allow-list needs a container sandbox, and the hub's rule.
func TestNewChecksImages(t *testing.T) {
	for _, c := range []struct {
		kind   string
		images []string
		want   string
	}{
		{sandbox.KindBwrap, []string{"a/*"}, "are for --sandbox docker or podman"},
		{sandbox.KindNone, []string{"a/*"}, "are for --sandbox docker or podman"},
		{sandbox.KindPodman, []string{"-a*"}, "image pattern"},
	} {
		if err := checkImages(c.kind, c.images); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: %v, want %q", c.kind, c.images, err, c.want)
		}
	}
	if err := checkImages(sandbox.KindDocker, []string{"a/*", "b:1"}); err != nil {
		t.Fatal(err)
	}
}
