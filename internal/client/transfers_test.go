package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// A publication that could not reach the hub is sent again whole (the hub
// deduplicates by commit), and a stale head comes back typed, with the
// head to continue from.
func TestPublishRetriesWholeAndTypesAStaleHead(t *testing.T) {
	bundle := []byte("# v2 git bundle\n...")
	var got [][]byte
	c, f := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, b)
		q := r.URL.Query()
		if r.Method != http.MethodPost || r.URL.Path != apitypes.APIPrefix+"/runner/publish" || q.Get("epoch") != "3" ||
			q.Get("checkpoint") != "1" || q["sparse"][0] != "lib" || r.ContentLength != int64(len(bundle)) {
			t.Errorf("request %s %s (%d bytes)", r.Method, r.URL, r.ContentLength)
		}
		if q.Get("commit") == "stale" {
			writeJSON(w, http.StatusConflict, struct {
				apitypes.ErrorBody
				Head string `json:"head"`
			}{apitypes.ErrorBody{Error: rules.Error{Code: rules.ErrStaleHead, Message: "stale"}}, "newer"})
			return
		}
		writeJSON(w, http.StatusOK, protocol.PublishResult{Head: q.Get("commit"), Checkpoint: 1})
	}), 1)
	ref := protocol.AttemptRef{Job: "j-1", Attempt: "a-1", Epoch: 3}
	p := protocol.Publication{Commit: "c1", SHA256: "d", Checkpoint: true, Sparse: []string{"lib"}, Bundle: bytes.NewReader(bundle), Size: int64(len(bundle))}
	res, err := c.Publish(context.Background(), ref, p)
	if err != nil || res.Head != "c1" || res.Checkpoint != 1 || f.calls.Load() != 2 || len(got) != 1 || !bytes.Equal(got[0], bundle) {
		t.Fatalf("publish: %+v %v after %d tries, the hub read %q", res, err, f.calls.Load(), got)
	}
	p.Commit = "stale"
	_, err = c.Publish(context.Background(), ref, p)
	sh, ok := errors.AsType[*protocol.StaleHeadError](err)
	if pe, _ := errors.AsType[*rules.Error](err); !ok || sh.Head != "newer" || pe == nil || pe.Code != rules.ErrStaleHead {
		t.Fatalf("stale head: %v", err)
	}
}
