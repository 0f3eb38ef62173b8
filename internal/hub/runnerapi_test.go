package hub

import (
	"context"
	"net/http"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/protocol"
	"drover/internal/protocol/protocoltest"
	"drover/internal/rules"
)

// wireCaller carries a protocol.Client's frames over a scripted runner's
// connection, so the contract runs through the real gateway and store.
type wireCaller struct{ sr *scriptRunner }

func (w wireCaller) Call(_ context.Context, _ string, f protocol.Frame) (protocol.Reply, error) {
	return w.sr.requestID(f.Type, f.ID, f.Body), nil
}

func (w wireCaller) Send(_ context.Context, f protocol.Frame) error {
	w.sr.send(f.Type, "", f.Body)
	return nil
}

// The real hub keeps the contract the fake of protocoltest keeps
// (TestFakeKeepsTheContract), so runner tests on the fake hold for it:
// frames through its gateway, publication and context files through the
// runner's HTTP client (client.Client) on its endpoints.
func TestHubKeepsTheProtocolContract(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := th.registerRunner("r1")
	sr, _ := th.dial(tok, protocol.Hello{})
	dir, base := sourceRepo(t)
	th.push(dir, "web", base)
	v, code, e := th.submitRepo(apitypes.SubmitRequest{Repo: &apitypes.SubmitRepo{Project: "web", Base: base},
		Context: []rules.ContextUpload{{Name: "notes/brief.md", Data: []byte("do it\n")}}})
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %+v", code, e)
	}
	o := sr.offer()
	if o.Job != v.ID {
		t.Fatalf("offer for %s, want %s", o.Job, v.ID)
	}
	tr, err := client.New(th.srv.URL, tok)
	if err != nil {
		t.Fatal(err)
	}
	c := commitOn(t, dir, base, "src/main.go", "package main // fixed\n")
	protocoltest.Contract(t, protocol.Client{Caller: wireCaller{sr}}, tr, o.AttemptRef, protocoltest.Work{
		Commit: c, Bundle: bundle(t, dir, c, base), Context: map[string]string{"notes/brief.md": "do it\n"}})
	if got := th.jobRef("web", o.Job); got != c {
		t.Fatalf("job ref = %s, want %s", got, c)
	}
}
