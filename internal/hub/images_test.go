package hub

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/protocol"
)

// A job naming an image is offered only to a runner whose allow-list
// offers it: with none connected it waits, saying why, while the runner
// that offers nothing takes the job that names no image.
func TestJobImageGoesOnlyToARunnerOfferingIt(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	plain, _ := th.dial(th.registerRunner("plain"), protocol.Hello{})
	v := th.submitAs(th.admin, apitypes.SubmitRequest{Image: "a/x:1"})
	if v.Image != "a/x:1" {
		t.Fatalf("submitted job's image = %q", v.Image)
	}
	th.waitQueued(v.ID, "no connected runner you may use offers the image a/x:1")
	other := th.submitAs(th.admin, apitypes.SubmitRequest{})
	if o := plain.offer(); o.Job != other.ID || o.Spec.Image != "" {
		t.Fatalf("the runner offering no image was offered %s (image %q), want %s", o.Job, o.Spec.Image, other.ID)
	}

	th.dial(th.registerRunner("wrong"), protocol.Hello{Images: []string{"b/*", "a/x:2"}})
	th.waitQueued(v.ID, "offers the image a/x:1")
	offering, _ := th.dial(th.registerRunner("offering"), protocol.Hello{Images: []string{"a/*"}})
	if o := offering.offer(); o.Job != v.ID || o.Spec.Image != "a/x:1" {
		t.Fatalf("offered %s with image %q, want %s in a/x:1", o.Job, o.Spec.Image, v.ID)
	}
	if got := th.job(v.ID); got.Runner != "offering" || got.Image != "a/x:1" {
		t.Fatalf("job = runner %q image %q", got.Runner, got.Image)
	}
}

// A bad image is refused at submit, and a bad allow-list at the hello.
func TestImageRuleAtSubmitAndHello(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	for _, bad := range []string{"-v", "a b", "Upper/case", "img@sha256:short", strings.Repeat("a", 600)} {
		code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Image: bad}, nil)
		if code != http.StatusBadRequest || !strings.Contains(e.Message, "image") {
			t.Errorf("submit image %q: %d %v, want 400", bad, code, e)
		}
	}
	sr := th.sayHello(th.srv.URL, th.registerRunner("r1"), protocol.Hello{Images: []string{"--privileged*"}})
	_, err := sr.tryRead(10 * time.Second)
	if websocket.CloseStatus(err) != protocol.CloseRefused || !strings.Contains(err.Error(), "image pattern") {
		t.Fatalf("hello with a bad allow-list: %v, want close %d", err, protocol.CloseRefused)
	}
}
