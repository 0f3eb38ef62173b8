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

	"drover/internal/protocol"
	"drover/internal/store"
)

// Every kind of full disk is one refusal: 507 no_space with a message that
// says so.
func TestFullDiskIs507(t *testing.T) {
	h := &Hub{log: slog.New(slog.DiscardHandler), now: time.Now}
	for _, err := range []error{
		fmt.Errorf("append log: %w", store.ErrNoSpace),
		fmt.Errorf("write bundle: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}),
		fmt.Errorf("write bundle: %w", syscall.EDQUOT),
	} {
		ae := h.asAPIError(err)
		if ae.status != http.StatusInsufficientStorage || ae.code != protocol.ErrNoSpace || !strings.Contains(ae.msg, "disk is full") {
			t.Errorf("%v: %d %s %q", err, ae.status, ae.code, ae.msg)
		}
	}
	if ae := h.asAPIError(errors.New("boom")); ae.status != http.StatusInternalServerError {
		t.Errorf("another error: %d", ae.status)
	}
}

// A full disk is logged once per interval, with the refusals between.
func TestFullDiskLoggedOncePerInterval(t *testing.T) {
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
