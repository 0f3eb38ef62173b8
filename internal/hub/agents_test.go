package hub

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
)

// A job is offered only to a runner that lists its agent; an attempt
// released because its account hit a limit goes back to the queue at once
// without draining the runner, which keeps running what it still can.
func TestAgentJobsGoOnlyToRunnersThatHaveTheAgent(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	var v apitypes.JobView
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "claude", Args: []string{"write hello.txt"}}, &v); code != http.StatusCreated {
		t.Fatalf("submit: %d %v", code, e)
	}
	if !v.Tools {
		t.Fatalf("a vendor agent's job has no tools: %+v", v)
	}
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{}) // an older runner: exec only
	if f, err := sr.tryRead(300 * time.Millisecond); err == nil {
		t.Fatalf("a runner without claude got %s", f.Type)
	}
	sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 1, Agents: []string{"exec", "claude"},
		Accounts: []protocol.AccountInfo{{ID: "acct_1", Agent: "claude", Kind: "api-key", State: protocol.AccountReady}}})
	o := sr.offer()
	if o.Job != v.ID || o.Spec.Agent != "claude" || !o.Spec.Tools {
		t.Fatalf("offer %+v", o)
	}
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 1, Agents: []string{"exec"},
		Attempts: []protocol.Held{{AttemptRef: o.AttemptRef, Phase: protocol.PhaseRunning}}})
	wantOK(t, sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef,
		Outcome: job.Outcome{State: job.AttemptReleased, Reason: job.ReasonLimited, Message: "account limited"}, LogSHA256: sum(nil)}))
	th.waitJob(v.ID, func(j apitypes.JobView) bool { return j.State == job.Queued })
	// Its only claude account is limited: the job waits for another.
	if f, err := sr.tryRead(300 * time.Millisecond); err == nil && f.Type == protocol.TypeOffer {
		t.Fatalf("offered again to a runner whose claude accounts are limited")
	}
	exec := th.submit("true")
	if o := sr.offer(); o.Job != exec.ID {
		t.Fatalf("the runner was drained by the limit: offer %+v", o)
	}
	sr2, _ := th.dial(th.registerRunner("r2"), protocol.Hello{Slots: 1, Agents: []string{"exec", "claude"}})
	if o2 := sr2.offer(); o2.Job != v.ID || o2.Epoch != 2 {
		t.Fatalf("offer to a runner with a ready account: %+v", o2)
	}
}

func TestBadAgentListsCloseTheConnection(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := th.registerRunner("r1")
	many := make([]string, protocol.MaxAgents+1)
	for i := range many {
		many[i] = "a"
	}
	for _, hello := range []protocol.Hello{
		{Agents: many},
		{Agents: []string{""}},
		{Accounts: []protocol.AccountInfo{{ID: ""}}},
		{Agents: []string{"exec\x1b[2J"}},
		{Accounts: []protocol.AccountInfo{{ID: "a1", Agent: "claude", Label: "work\u009b31m", Kind: "login", State: protocol.AccountReady}}},
		{Accounts: []protocol.AccountInfo{{ID: "a1\n", Agent: "claude", Kind: "login", State: protocol.AccountReady}}},
		{Accounts: []protocol.AccountInfo{{ID: "a1", Agent: "claude", Kind: "login", State: "ready\x00"}}},
		{Labels: map[string]string{"zone": "lab\x1b[0m"}},
	} {
		ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(th.srv.URL, "http")+apitypes.APIPrefix+"/runner/connect",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
		if err != nil {
			t.Fatal(err)
		}
		sr := newScriptRunner(t, ws)
		hello.Protocol, hello.Slots = protocol.Version, 1
		sr.send(protocol.TypeHello, "", hello)
		if _, err := sr.tryRead(5 * time.Second); websocket.CloseStatus(err) != protocol.CloseRefused {
			t.Errorf("hello %+v: want a refusal, got %v", hello, err)
		}
	}
	// A status reporting such an account closes the connection too, and
	// the account is not recorded.
	sr, _ := th.dial(tok, protocol.Hello{})
	sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 1, Agents: []string{"exec", "claude"},
		Accounts: []protocol.AccountInfo{{ID: "a1", Agent: "claude", Label: "\x1b[31mwork", Kind: "login", State: protocol.AccountReady}}})
	for {
		if _, err := sr.tryRead(5 * time.Second); err != nil {
			if websocket.CloseStatus(err) != protocol.CloseProtocol {
				t.Fatalf("status with a control character: want a protocol close, got %v", err)
			}
			break
		}
	}
	if got := th.accounts(th.admin); len(got) != 0 {
		t.Fatalf("accounts recorded from a refused status: %+v", got)
	}
}

// The dispatcher offers a vendor agent's job on the runner holding the
// owner's best-ranked ready account, and names that account in the offer.
func TestDispatchPrefersTheOwnersAccountOrder(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	hello := func(id string) protocol.Hello {
		return protocol.Hello{Slots: 1, Agents: []string{"exec", "claude"},
			Accounts: []protocol.AccountInfo{{ID: id, Agent: "claude", Kind: "api-key", State: protocol.AccountReady}}}
	}
	sr1, _ := th.dial(th.registerRunner("r1"), hello("acct_a"))
	sr2, _ := th.dial(th.registerRunner("r2"), hello("acct_b"))
	var list apitypes.AccountList
	if code, e := th.call(th.admin, "POST", "/accounts/move", apitypes.MoveAccountRequest{Runner: "r2", ID: "acct_b", Position: 1}, &list); code != http.StatusOK {
		t.Fatalf("move: %d %v", code, e)
	}
	var v apitypes.JobView
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "claude", Args: []string{"hi"}}, &v); code != http.StatusCreated {
		t.Fatalf("submit: %d %v", code, e)
	}
	if o := sr2.offer(); o.Job != v.ID || o.Account != "acct_b" {
		t.Fatalf("offer %+v, want job %s with the preferred account acct_b on r2", o, v.ID)
	}
	if f, err := sr1.tryRead(300 * time.Millisecond); err == nil && f.Type == protocol.TypeOffer {
		t.Fatal("r1 got the job too")
	}
	// With r2 busy, the next job takes r1's account.
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "claude", Args: []string{"again"}}, &v); code != http.StatusCreated {
		t.Fatalf("submit: %d %v", code, e)
	}
	if o := sr1.offer(); o.Job != v.ID || o.Account != "acct_a" {
		t.Fatalf("offer %+v, want job %s with acct_a on r1", o, v.ID)
	}
}

// A job pinned to an account runs only on the runner holding it, never on
// a better-ranked one, and bad pins are refused at submit.
func TestJobPinnedToAnAccount(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	hello := func(id, label string) protocol.Hello {
		return protocol.Hello{Slots: 1, Agents: []string{"exec", "claude"},
			Accounts: []protocol.AccountInfo{{ID: id, Label: label, Agent: "claude", Kind: "api-key", State: protocol.AccountReady}}}
	}
	sr1, _ := th.dial(th.registerRunner("r1"), hello("acct_a", "work"))
	sr2, _ := th.dial(th.registerRunner("r2"), hello("acct_b", "personal"))
	for _, bad := range []apitypes.SubmitRequest{
		{Agent: "exec", Args: []string{"true"}, Account: "work"},
		{Agent: "claude", Args: []string{"hi"}, Account: strings.Repeat("x", 65)},
	} {
		if code, _ := th.call(th.admin, "POST", "/jobs", bad, nil); code != http.StatusBadRequest {
			t.Errorf("submit %+v: %d, want 400", bad, code)
		}
	}
	var v apitypes.JobView
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "claude", Args: []string{"hi"}, Account: "personal"}, &v); code != http.StatusCreated {
		t.Fatalf("submit: %d %v", code, e)
	}
	if v.Account != "personal" {
		t.Fatalf("job view %+v", v)
	}
	o := sr2.offer()
	if o.Job != v.ID || o.Account != "acct_b" || o.Spec.Account != "personal" {
		t.Fatalf("offer %+v, want the job on r2's acct_b, pinned", o)
	}
	// The attempt keeps the account its offer named, for the job's pages.
	if code, e := th.call(th.admin, "GET", "/jobs/"+v.ID, nil, &v); code != http.StatusOK || len(v.Attempts) != 1 || v.Attempts[0].Account != "acct_b" {
		t.Fatalf("job after the offer: %d %v %+v, want its attempt on acct_b", code, e, v.Attempts)
	}
	if f, err := sr1.tryRead(300 * time.Millisecond); err == nil && f.Type == protocol.TypeOffer {
		t.Fatal("r1 was offered a job pinned to r2's account")
	}
}

// Only ready accounts are offered jobs: one that needs a login or its
// owner's attention is passed over however well it ranks, and a runner
// with no other gets no offer.
func TestDispatchSkipsAccountsThatNeedLoginOrAttention(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	acct := func(id, state string) protocol.AccountInfo {
		return protocol.AccountInfo{ID: id, Agent: "claude", Kind: "login", State: state}
	}
	// r1 lists claude (as a runner from before the states might) with
	// nothing ready; r2's best two need fixing, its third is ready.
	sr1, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1, Agents: []string{"exec", "claude"},
		Accounts: []protocol.AccountInfo{acct("acct_l", protocol.AccountNeedsLogin), acct("acct_n", protocol.AccountNeedsAttention)}})
	sr2, _ := th.dial(th.registerRunner("r2"), protocol.Hello{Slots: 1, Agents: []string{"exec", "claude"},
		Accounts: []protocol.AccountInfo{acct("acct_x", protocol.AccountNeedsLogin), acct("acct_y", protocol.AccountNeedsAttention), acct("acct_r", protocol.AccountReady)}})
	for _, move := range []apitypes.MoveAccountRequest{{Runner: "r1", ID: "acct_l", Position: 1}, {Runner: "r2", ID: "acct_x", Position: 2}} {
		if code, e := th.call(th.admin, "POST", "/accounts/move", move, nil); code != http.StatusOK {
			t.Fatalf("move %+v: %d %v", move, code, e)
		}
	}
	var v apitypes.JobView
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "claude", Args: []string{"hi"}}, &v); code != http.StatusCreated {
		t.Fatalf("submit: %d %v", code, e)
	}
	if o := sr2.offer(); o.Job != v.ID || o.Account != "acct_r" {
		t.Fatalf("offer %+v, want job %s with r2's ready acct_r", o, v.ID)
	}
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "claude", Args: []string{"again"}}, &v); code != http.StatusCreated {
		t.Fatalf("submit: %d %v", code, e)
	}
	if f, err := sr1.tryRead(500 * time.Millisecond); err == nil && f.Type == protocol.TypeOffer {
		t.Fatalf("r1 was offered a job with no ready account: %s", f.Body)
	}
}
