package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/rules"
)

// fakePipelinesCore is fakeCore with Pipelines: it records the last call
// (op, caller, id and its argument) and answers a view named after it.
type fakePipelinesCore struct {
	fakeCore
	last *pipelineCall
}

type pipelineCall struct {
	op, user, id string
	arg          any
}

func (f fakePipelinesCore) note(op string, p call.Caller, id string, arg any) apitypes.PipelineView {
	*f.last = pipelineCall{op: op, user: p.UserID, id: id, arg: arg}
	return apitypes.PipelineView{ID: id, Name: op}
}

func (f fakePipelinesCore) RunPipeline(_ context.Context, p call.Caller, req apitypes.PipelineRunRequest) (apitypes.PipelineView, bool, error) {
	v := f.note("run", p, "", req)
	return v, req.Key != "again", nil
}

func (f fakePipelinesCore) ListPipelines(_ context.Context, p call.Caller, limit int) (apitypes.PipelineList, error) {
	f.note("list", p, "", limit)
	return apitypes.PipelineList{Pipelines: []apitypes.PipelineView{{ID: "p1"}}}, nil
}

func (f fakePipelinesCore) ShowPipeline(_ context.Context, p call.Caller, id string) (apitypes.PipelineView, error) {
	if id == "missing" {
		f.note("show", p, id, nil)
		return apitypes.PipelineView{}, call.NotFound("pipeline %s not found", id)
	}
	return f.note("show", p, id, nil), nil
}

func (f fakePipelinesCore) CancelPipeline(_ context.Context, p call.Caller, id string) (apitypes.PipelineView, error) {
	return f.note("cancel", p, id, nil), nil
}

func (f fakePipelinesCore) RetryPipeline(_ context.Context, p call.Caller, id string, req apitypes.PipelineRetryRequest) (apitypes.PipelineView, error) {
	return f.note("retry", p, id, req), nil
}

func (f fakePipelinesCore) PipelineEvents(_ context.Context, p call.Caller, id string, after int64) (apitypes.PipelineEventList, error) {
	f.note("events", p, id, after)
	return apitypes.PipelineEventList{Events: []apitypes.PipelineEventView{{Seq: after + 1}}}, nil
}

// TestPipelineRoutes: each route reaches its operation with the caller,
// the path's id and the decoded request, answers its status, and refuses
// bad input with a clear 4xx before the operation runs.
func TestPipelineRoutes(t *testing.T) {
	p := apitypes.APIPrefix
	big := `{"file":"a.yaml","source":"` + strings.Repeat("x", apitypes.MaxPipelineRequest) + `"}`
	for _, tc := range []struct {
		name, method, path, body, token string
		status                          int
		code, answer                    string        // answer: what the body holds
		want                            *pipelineCall // nil: the operation must not run
	}{
		{"run started", "POST", p + "/pipelines", `{"file":"a.yaml","source":"name: a","project":"p","base":"abc","key":"k"}`, "u",
			http.StatusCreated, "", `"name":"run"`, &pipelineCall{op: "run", user: "u1", arg: apitypes.PipelineRunRequest{File: "a.yaml", Source: "name: a", Project: "p", Base: "abc", Key: "k"}}},
		{"run same key", "POST", p + "/pipelines", `{"file":"a.yaml","source":"s","key":"again"}`, "u",
			http.StatusOK, "", `"name":"run"`, &pipelineCall{op: "run", user: "u1", arg: apitypes.PipelineRunRequest{File: "a.yaml", Source: "s", Key: "again"}}},
		{"run unknown field", "POST", p + "/pipelines", `{"file":"a.yaml","sourec":"s"}`, "u", http.StatusBadRequest, rules.ErrBadRequest, "", nil},
		{"run too large", "POST", p + "/pipelines", big, "u", http.StatusRequestEntityTooLarge, rules.ErrTooLarge, "", nil},
		{"run runner token", "POST", p + "/pipelines", `{}`, "r", http.StatusForbidden, rules.ErrForbidden, "", nil},
		{"run no token", "POST", p + "/pipelines", `{}`, "", http.StatusUnauthorized, rules.ErrUnauthorized, "", nil},
		{"list", "GET", p + "/pipelines", "", "u", http.StatusOK, "", `"id":"p1"`, &pipelineCall{op: "list", user: "u1", arg: 0}},
		{"list limit", "GET", p + "/pipelines?limit=7", "", "u", http.StatusOK, "", `"id":"p1"`, &pipelineCall{op: "list", user: "u1", arg: 7}},
		{"list limit zero", "GET", p + "/pipelines?limit=0", "", "u", http.StatusBadRequest, rules.ErrBadRequest, "", nil},
		{"list limit word", "GET", p + "/pipelines?limit=many", "", "u", http.StatusBadRequest, rules.ErrBadRequest, "", nil},
		{"list limit too big", "GET", p + "/pipelines?limit=1001", "", "u", http.StatusBadRequest, rules.ErrBadRequest, "", nil},
		{"show", "GET", p + "/pipelines/p1", "", "u", http.StatusOK, "", `"id":"p1"`, &pipelineCall{op: "show", user: "u1", id: "p1"}},
		{"show not found", "GET", p + "/pipelines/missing", "", "u", http.StatusNotFound, rules.ErrNotFound, "not found", &pipelineCall{op: "show", user: "u1", id: "missing"}},
		{"cancel", "POST", p + "/pipelines/p1/cancel", "", "u", http.StatusOK, "", `"name":"cancel"`, &pipelineCall{op: "cancel", user: "u1", id: "p1"}},
		{"retry", "POST", p + "/pipelines/p1/retry", `{"step":"review"}`, "u", http.StatusOK, "", `"name":"retry"`,
			&pipelineCall{op: "retry", user: "u1", id: "p1", arg: apitypes.PipelineRetryRequest{Step: "review"}}},
		{"retry unknown field", "POST", p + "/pipelines/p1/retry", `{"stpe":"review"}`, "u", http.StatusBadRequest, rules.ErrBadRequest, "", nil},
		{"retry no body", "POST", p + "/pipelines/p1/retry", ``, "u", http.StatusBadRequest, rules.ErrBadRequest, "", nil},
		{"events", "GET", p + "/pipelines/p1/events", "", "u", http.StatusOK, "", `"seq":1,`, &pipelineCall{op: "events", user: "u1", id: "p1", arg: int64(0)}},
		{"events after", "GET", p + "/pipelines/p1/events?after=41", "", "u", http.StatusOK, "", `"seq":42,`, &pipelineCall{op: "events", user: "u1", id: "p1", arg: int64(41)}},
		{"events after negative", "GET", p + "/pipelines/p1/events?after=-1", "", "u", http.StatusBadRequest, rules.ErrBadRequest, "", nil},
		{"events after overflow", "GET", p + "/pipelines/p1/events?after=9223372036854775808", "", "u", http.StatusBadRequest, rules.ErrBadRequest, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := &pipelineCall{}
			api := New(fakePipelinesCore{fakeCore: testAPI().core.(fakeCore), last: last}, Config{Logger: slog.New(slog.DiscardHandler)})
			mux := http.NewServeMux()
			api.Register(mux)
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if status, code := errorOf(t, rec); status != tc.status || code != tc.code {
				t.Fatalf("got %d %q (%s), want %d %q", status, code, rec.Body, tc.status, tc.code)
			}
			if tc.want == nil {
				if last.op != "" {
					t.Fatalf("operation ran: %+v", *last)
				}
				return
			}
			if last.op != tc.want.op || last.user != tc.want.user || last.id != tc.want.id || !equalJSON(t, last.arg, tc.want.arg) {
				t.Fatalf("call %+v, want %+v", *last, *tc.want)
			}
			if !strings.Contains(rec.Body.String(), tc.answer) {
				t.Fatalf("answer %s lacks %s", rec.Body, tc.answer)
			}
		})
	}
}

// equalJSON compares two values by their JSON.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}
