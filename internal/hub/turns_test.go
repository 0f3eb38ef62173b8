package hub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
)

func turnRec(turn int, data string) protocol.TurnRecord {
	return protocol.TurnRecord{Turn: turn, Summary: fmt.Sprintf("turn %d", turn), Data: json.RawMessage(data)}
}

func transcriptOf(t *testing.T, sr *scriptRunner, ref protocol.AttemptRef, session string, after int64) protocol.TranscriptPage {
	t.Helper()
	r := sr.request(protocol.TypeTranscript, protocol.GetTranscript{AttemptRef: ref, Session: session, After: after})
	wantOK(t, r)
	var p protocol.TranscriptPage
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTurnsAreEventsTheNextAttemptReads: a model loop's records are turn
// events of the job, in its lease only; a released attempt's next one
// (which may be on any runner) reads the session's records back in order,
// page by page, and no other session's.
func TestTurnsAreEventsTheNextAttemptReads(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1})
	j := th.submitTools("task")
	o := sr.offer()
	first := protocol.Turns{AttemptRef: o.AttemptRef, Session: "s-1", Records: []protocol.TurnRecord{turnRec(0, `{"session":"s-1"}`)}}
	wantErr(t, sr.request(protocol.TypeTurns, first), rules.ErrFenced) // no lease before the accept
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	other, _ := th.dial(th.registerRunner("r2"), protocol.Hello{Slots: 1})

	bad := func(mod func(*protocol.Turns)) protocol.Turns {
		m := protocol.Turns{AttemptRef: o.AttemptRef, Session: "s-1", Records: []protocol.TurnRecord{turnRec(1, `{}`)}}
		mod(&m)
		return m
	}
	for _, tc := range []struct {
		name string
		c    *scriptRunner
		body protocol.Turns
		code string
	}{
		{"another runner's attempt", other, bad(func(*protocol.Turns) {}), rules.ErrFenced},
		{"a session id naming a path", sr, bad(func(m *protocol.Turns) { m.Session = "../s" }), rules.ErrBadRequest},
		{"no records", sr, bad(func(m *protocol.Turns) { m.Records = nil }), rules.ErrBadRequest},
		{"no data", sr, bad(func(m *protocol.Turns) { m.Records[0].Data = nil }), rules.ErrBadRequest},
		{"a negative turn", sr, bad(func(m *protocol.Turns) { m.Records[0].Turn = -1 }), rules.ErrBadRequest},
		{"an unknown kind", sr, bad(func(m *protocol.Turns) { m.Records[0].Kind = "asked" }), rules.ErrBadRequest},
		{"a summary with ESC", sr, bad(func(m *protocol.Turns) { m.Records[0].Summary = "turn\x1b[2J" }), rules.ErrBadRequest},
		{"a record over the limit", sr, bad(func(m *protocol.Turns) {
			m.Records[0].Data = json.RawMessage(`{"x":"` + strings.Repeat("x", protocol.MaxTurnRecord) + `"}`)
		}), rules.ErrBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, tc.c.request(protocol.TypeTurns, tc.body), tc.code) })
	}
	if kinds := eventKinds(th, j.ID); strings.Contains(strings.Join(kinds, " "), protocol.KindTurn) {
		t.Fatalf("a refused request left turn events: %v", kinds)
	}

	// Five records of about 250 KiB, one request each (a batch is at most
	// MaxTurnBatch), and one of another session between them.
	wantOK(t, sr.request(protocol.TypeTurns, first))
	big := `{"y":"` + strings.Repeat("y", 250<<10) + `"}`
	for i := 1; i <= 5; i++ {
		rec := turnRec(i, big)
		if i == 4 {
			rec.Kind = protocol.KindCompaction
		}
		wantOK(t, sr.request(protocol.TypeTurns, protocol.Turns{AttemptRef: o.AttemptRef, Session: "s-1", Records: []protocol.TurnRecord{rec}}))
		if i == 2 {
			wantOK(t, sr.request(protocol.TypeTurns, protocol.Turns{AttemptRef: o.AttemptRef, Session: "s-other", Records: []protocol.TurnRecord{turnRec(9, `{}`)}}))
		}
	}
	sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 0, Attempts: []protocol.Held{{AttemptRef: o.AttemptRef, Phase: protocol.PhaseRunning}}})
	wantOK(t, sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef, Session: "s-1",
		Outcome: job.Outcome{State: job.AttemptReleased, Reason: job.ReasonRunnerShutdown, ExitCode: exit(143)}, LogSHA256: sum(nil)}))
	sr.ws.CloseNow()
	th.waitRunner("r1", false)

	o2 := other.offer() // a runner that never ran the job
	if o2.Spec.Resume == nil || o2.Spec.Resume.Session != "s-1" {
		t.Fatalf("the next offer resumes %+v; want session s-1", o2.Spec.Resume)
	}
	wantOK(t, other.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o2.AttemptRef}))
	var turns []int
	page := protocol.TranscriptPage{More: true}
	pages := 0
	for page.More {
		page = transcriptOf(t, other, o2.AttemptRef, "s-1", page.Next)
		pages++
		for _, r := range page.Records {
			turns = append(turns, r.Turn)
			if (r.Turn == 4) != (r.Kind == protocol.KindCompaction) {
				t.Fatalf("record %d is of kind %q", r.Turn, r.Kind)
			}
		}
	}
	if fmt.Sprint(turns) != "[0 1 2 3 4 5]" || pages != 2 {
		t.Fatalf("read turns %v in %d pages; want 0-5 in 2", turns, pages)
	}
	stale := o.AttemptRef // the released attempt reads nothing more
	wantErr(t, other.request(protocol.TypeTranscript, protocol.GetTranscript{AttemptRef: stale, Session: "s-1"}), rules.ErrFenced)

	var v apitypes.JobView
	if code, e := th.call(th.admin, "GET", "/jobs/"+j.ID+"?events=1", nil, &v); code != http.StatusOK {
		t.Fatalf("job with events: %d %+v", code, e)
	}
	n, compactions := 0, 0
	for _, e := range v.Events {
		if e.Kind == protocol.KindCompaction {
			compactions++
		}
		if e.Kind == protocol.KindTurn || e.Kind == protocol.KindCompaction {
			n++
			if e.Actor != "r1" || !strings.HasPrefix(e.Message, "turn ") {
				t.Fatalf("turn event %+v", e)
			}
		}
	}
	if n != 7 || compactions != 1 {
		t.Fatalf("%d turn events, %d of them compactions; want 7 and 1", n, compactions)
	}
}

// BenchmarkTurnsRequest is what the native agent's durable turn costs the
// runner: one turns request with one 2 KiB record through the WebSocket,
// checked, committed to SQLite (the request ledger and the event) and
// answered. A turn makes two (the model's answer, then the tool results).
//
//	go test ./internal/hub -run XXX -bench TurnsRequest -benchtime 500x
func BenchmarkTurnsRequest(b *testing.B) {
	th := startHub(b, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1})
	th.submitTools("task")
	o := sr.offer()
	wantOK(b, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	data := `{"message":{"role":"user","text":"` + strings.Repeat("x", 2<<10) + `"}}`
	i := 0
	for b.Loop() {
		i++
		wantOK(b, sr.request(protocol.TypeTurns, protocol.Turns{AttemptRef: o.AttemptRef, Session: "s-1", Records: []protocol.TurnRecord{turnRec(i, data)}}))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/request")
}
