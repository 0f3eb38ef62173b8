package cli

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"drover/internal/accounts"
	"drover/internal/agent/native"
	"drover/internal/model"
)

// probeTimeout bounds one native account's probe in the doctor.
const probeTimeout = 60 * time.Second

// nativeCheck is what the doctor found of one native account's model
// endpoint: it asks it to call a tool (streamed, then whole) and what
// context it serves, and records that on the account. Its first fields are those of
// sandbox.Check, so that --json stays one list of checks.
type nativeCheck struct {
	Kind   string `json:"kind"` // "native:" + Account
	OK     bool   `json:"ok"`   // it answered the probe
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`

	Account           string `json:"account"`
	Provider          string `json:"provider"`
	Model             string `json:"model"`
	ToolCalls         bool   `json:"tool_calls"`
	StreamedToolCalls bool   `json:"streamed_tool_calls"`
	ContextLength     int64  `json:"context_length,omitempty"`
}

// nativeChecks probes every native account of the runner home at once.
func (a *app) nativeChecks(ctx context.Context, home string) []nativeCheck {
	s, as, err := runnerAccounts(home)
	if err != nil {
		a.log.Warn("doctor: cannot read the runner's accounts", "err", err)
		return nil
	}
	var checks []nativeCheck
	var accts []accounts.Account
	for _, acct := range as {
		if acct.Agent == native.Name {
			accts = append(accts, acct)
			checks = append(checks, nativeCheck{Kind: "native:" + acct.ID, Account: acct.String(), Provider: acct.Provider})
		}
	}
	var wg sync.WaitGroup
	for i, acct := range accts {
		wg.Go(func() { probeAccount(ctx, s, acct, &checks[i]) })
	}
	wg.Wait()
	return checks
}

func probeAccount(ctx context.Context, s *accounts.Store, acct accounts.Account, c *nativeCheck) {
	key := ""
	if acct.Kind == accounts.KindAPIKey {
		var err error
		if key, err = s.Key(acct.ID); err != nil {
			c.Detail = "cannot read its key: " + err.Error()
			return
		}
	}
	cfg := model.Config{Provider: acct.Provider, BaseURL: acct.BaseURL, Model: acct.Model, Key: key, Timeout: probeTimeout, Retries: -1}
	if cfg.Model == "" {
		cfg.Model = model.DefaultModel(acct.Provider)
	}
	c.Model = cfg.Model
	p, err := model.New(cfg)
	if err != nil {
		c.Detail = err.Error()
		return
	}
	f, err := model.Probe(ctx, p)
	if err != nil {
		c.Detail = err.Error()
		var me *model.Error
		if errors.As(err, &me) && me.Kind == model.KindAuth {
			c.Fix = "give it a valid key: drover runner account reset " + acct.ID + " --api-key-stdin"
		}
		return
	}
	c.OK, c.ToolCalls, c.StreamedToolCalls, c.ContextLength, c.Detail = true, f.ToolCalls, f.StreamedToolCalls, f.ContextLength, f.String()
	// Recorded for the native agent, which talks to the model accordingly.
	if err := s.SetCapabilities(acct.ID, accounts.Capabilities{Probed: time.Now(), ToolCalls: f.ToolCalls,
		StreamedToolCalls: f.StreamedToolCalls, ContextLength: f.ContextLength}); err != nil {
		c.OK, c.Detail = false, err.Error()
	}
}

// toolMode is how the native agent calls tools on an account c probed.
func (c nativeCheck) toolMode() string {
	switch {
	case !c.ToolCalls:
		return "text protocol"
	case !c.StreamedToolCalls:
		return "whole answers"
	}
	return "streamed"
}

func printNativeChecks(w io.Writer, checks []nativeCheck) error {
	if len(checks) == 0 {
		return nil
	}
	fprintf(w, "\n")
	tw := newTable(w)
	fprintf(tw, "NATIVE ACCOUNT\tPROVIDER\tMODEL\tTOOL CALLS\tCONTEXT\tDETAIL\n")
	for _, c := range checks {
		mode, ctxLen := "-", "-"
		if c.OK {
			mode = c.toolMode()
		}
		if c.ContextLength > 0 {
			ctxLen = strconv.FormatInt(c.ContextLength, 10)
		}
		fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Account, c.Provider, dash(c.Model), mode, ctxLen, c.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range checks {
		if c.Fix != "" {
			fprintf(w, "to fix %s: %s\n", c.Account, c.Fix)
		}
	}
	return nil
}
