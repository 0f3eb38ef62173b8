package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
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
	c.Model = acct.Model
	if c.Model == "" {
		c.Model = model.DefaultModel(acct.Provider)
	}
	p, err := probeNative(ctx, acct, key)
	if err != nil {
		c.Detail = err.Error()
		var me *model.Error
		if errors.As(err, &me) && me.Kind == model.KindAuth {
			c.Fix = "give it a valid key: drover runner account reset " + acct.ID + " --api-key-stdin"
		}
		return
	}
	if p.BaseURL != acct.BaseURL {
		// The runner calls the URL stored, which would answer 404.
		c.Detail = fmt.Sprintf("%s answers 404; %s answers", acct.BaseURL, p.BaseURL)
		c.Fix = "remove the account and add it again with --base-url " + p.BaseURL
		return
	}
	f := p.Found
	c.OK, c.ToolCalls, c.StreamedToolCalls, c.ContextLength, c.Detail = true, f.ToolCalls, f.StreamedToolCalls, f.ContextLength, f.String()
	// Recorded for the native agent, which talks to the model accordingly;
	// a probe that passes also makes an account refused before ready.
	if err := s.SetCapabilities(acct.ID, p.capabilities()); err != nil {
		c.OK, c.Detail = false, err.Error()
	}
}

// probed is what a probe of a native account's endpoint found, and the
// base URL it found it at.
type probed struct {
	Found   model.Found
	BaseURL string
}

func (p probed) capabilities() accounts.Capabilities {
	return accounts.Capabilities{Probed: time.Now(), ToolCalls: p.Found.ToolCalls, StreamedToolCalls: p.Found.StreamedToolCalls,
		ContextLength: p.Found.ContextLength}
}

// probeNative asks acct's model endpoint, with key, to call a tool (see
// model.Probe). An OpenAI-compatible base URL without /v1 that answers
// 404 is tried again with /v1 (Ollama serves /v1/chat/completions); the
// URL that answered is returned. An error names the URLs tried, never the
// key.
func probeNative(ctx context.Context, acct accounts.Account, key string) (probed, error) {
	try := func(base string) (model.Found, error) {
		p, err := model.New(model.Config{Provider: acct.Provider, BaseURL: base, Model: acct.Model, Key: key, Timeout: probeTimeout, Retries: -1})
		if err != nil {
			return model.Found{}, err
		}
		return model.Probe(ctx, p)
	}
	f, err := try(acct.BaseURL)
	var me *model.Error
	if err == nil || acct.Provider != model.OpenAICompatible || strings.HasSuffix(acct.BaseURL, "/v1") ||
		!errors.As(err, &me) || me.Status != http.StatusNotFound {
		return probed{f, acct.BaseURL}, err
	}
	v1 := acct.BaseURL + "/v1"
	f, err2 := try(v1)
	if err2 != nil {
		return probed{}, fmt.Errorf("%s: %w; %s: %w", acct.BaseURL, err, v1, err2)
	}
	return probed{f, v1}, nil
}

// toolMode is how the native agent calls tools on an account with c
// probed: "-" when never probed (taken as streamed).
func toolMode(c *accounts.Capabilities) string {
	switch {
	case c == nil:
		return "-"
	case !c.ToolCalls:
		return "text protocol"
	case !c.StreamedToolCalls:
		return "whole answers"
	}
	return "streamed"
}

// toolMode is how the native agent calls tools on an account c probed.
func (c nativeCheck) toolMode() string {
	return toolMode(&accounts.Capabilities{ToolCalls: c.ToolCalls, StreamedToolCalls: c.StreamedToolCalls})
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
