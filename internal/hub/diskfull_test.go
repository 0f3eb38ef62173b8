package hub

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// Every kind of full disk is one refusal: 507 no_space with a message that
// says so.
func TestFullDiskIs507(t *testing.T) {
	t.Parallel()
	h := &Hub{log: slog.New(slog.DiscardHandler), now: time.Now}
	for _, err := range []error{
		fmt.Errorf("append log: %w", store.ErrNoSpace),
		fmt.Errorf("write bundle: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}),
		fmt.Errorf("write bundle: %w", syscall.EDQUOT),
	} {
		ae := h.AsRefusal(err)
		if ae.Status != http.StatusInsufficientStorage || ae.Code != rules.ErrNoSpace || !strings.Contains(ae.Msg, "disk is full") {
			t.Errorf("%v: %d %s %q", err, ae.Status, ae.Code, ae.Msg)
		}
	}
	if ae := h.AsRefusal(errors.New("boom")); ae.Status != http.StatusInternalServerError {
		t.Errorf("another error: %d", ae.Status)
	}
}

// A full disk is logged once per interval, with the refusals between.
func TestFullDiskLoggedOncePerInterval(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var d diskFullLog
	t0 := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		at     time.Duration
		logged bool
	}{
		{0, true},
		{time.Second, false},
		{diskFullInterval - time.Second, false},
		{diskFullInterval, true},
		{diskFullInterval + time.Millisecond, false},
		{3 * diskFullInterval, true},
	} {
		buf.Reset()
		d.report(log, t0.Add(tc.at), store.ErrNoSpace)
		if got := buf.Len() > 0; got != tc.logged {
			t.Errorf("at %s: logged %v, want %v", tc.at, got, tc.logged)
		}
		if tc.at == diskFullInterval && !strings.Contains(buf.String(), "refused_since_last_report=2") {
			t.Errorf("at %s: %s", tc.at, buf.String())
		}
	}
}

// A runner that says it is not ready (its disk is below its floor, or it
// is at a spend limit) is offered nothing: its jobs wait saying why,
// `runners` shows the reason, and a status without it brings the offer.
func TestNotReadyRunnerIsOfferedNothing(t *testing.T) {
	t.Parallel()
	for _, why := range []string{
		"disk full: 3.0 MiB free in the runner's home, below its floor of 256.0 MiB (--min-free)",
		"at its limit of 10 jobs per hour (--max-jobs-per-hour) until 15:04:05 UTC",
		"at its limit of $5.00 per day (--max-spend-per-day, $5.10 spent) until 2026-12-02 00:00:00 UTC",
	} {
		t.Run(why[:12], func(t *testing.T) {
			th := startHub(t, Config{})
			sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1, NotReady: why})
			j := th.submitAs(th.admin, apitypes.SubmitRequest{})
			v := th.waitQueued(j.ID, "not ready (r1: "+why+")")
			if len(v.Attempts) != 0 {
				t.Fatalf("attempts of a job only a not-ready runner could take: %+v", v.Attempts)
			}
			if rv := th.runnersOf(th.admin)["r1"]; !rv.Connected || rv.NotReady != why {
				t.Fatalf("runner view: connected %v, not_ready %q", rv.Connected, rv.NotReady)
			}
			sr.noOfferYet()

			sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 1, Attempts: []protocol.Held{}})
			sr.offerFor(j.ID)
			if rv := th.runnersOf(th.admin)["r1"]; rv.NotReady != "" {
				t.Fatalf("runner view after a ready status: not_ready %q", rv.NotReady)
			}
		})
	}
}

// A not-ready reason a terminal could be fooled by closes the connection.
func TestNotReadyReasonIsPlainText(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	for i, why := range []string{"disk \x1b[2Jfull", strings.Repeat("x", protocol.MaxNotReady+1)} {
		sr, _ := th.dial(th.registerRunner(fmt.Sprintf("r%d", i)), protocol.Hello{Slots: 1})
		sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 1, Attempts: []protocol.Held{}, NotReady: why})
		if code := sr.waitClosed(); code != protocol.CloseProtocol {
			t.Errorf("status with not_ready %q: close %d, want %d", why[:min(len(why), 20)], code, protocol.CloseProtocol)
		}
	}
}

// A runner's version is shown as its hello said it; one that is not a
// short plain text closes the connection.
func TestRunnerVersionIsShownAndPlainText(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.dial(th.registerRunner("good"), protocol.Hello{RunnerVersion: "v1.2.3 (abc123)"})
	if got := th.runnersOf(th.admin)["good"].Version; got != "v1.2.3 (abc123)" {
		t.Fatalf("version shown: %q", got)
	}
	for i, v := range []string{"v1\x1b[2J", strings.Repeat("v", protocol.MaxVersion+1)} {
		sr := th.sayHello(th.srv.URL, th.registerRunner(fmt.Sprintf("bad%d", i)), protocol.Hello{RunnerVersion: v})
		if code := sr.waitClosed(); code != protocol.CloseRefused {
			t.Errorf("hello with version %q: close %d, want %d", v[:min(len(v), 20)], code, protocol.CloseRefused)
		}
	}
}
