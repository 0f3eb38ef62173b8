package cliagent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/claude"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/sandbox"
)

const resultOK = `{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"6710a4b5-3c87-486a-b50a-770055a78eaa","total_cost_usd":0.5,"usage":{"input_tokens":20,"output_tokens":10}}`

// Every way a CLI can misbehave ends the attempt with a reason that names
// the CLI, never a hung slot. The real CLIs cannot be made to crash, flood
// or hang on cue, so a stand-in script named claude does it here; the real
// ones run end to end in the e2e tests.
func TestMisbehavingCLI(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  string // "" installs no CLI
		timeout time.Duration
		reason  job.Reason
		code    int
		msg     string // in the result's message; "" means no message
		check   func(t *testing.T, r agent.Result)
	}{
		{name: "missing", reason: job.ReasonSpawnFailed, code: -1, msg: "claude: claude: not installed"},
		{name: "crashes", script: "echo boom >&2; exit 3", reason: job.ReasonExited, code: 3,
			msg: "claude: exited with status 3 without a final result line"},
		{name: "malformed", script: "echo '{not json'; echo plain text", reason: job.ReasonExited, code: 1,
			msg: "without a final result line"},
		{name: "no result", script: `echo '{"type":"system","subtype":"init","session_id":"s1"}'`, reason: job.ReasonExited, code: 1,
			msg: "exited with status 0 without a final result line"},
		{name: "hangs", script: "exec sleep 600", timeout: 300 * time.Millisecond, reason: job.ReasonTimeout, code: 143,
			msg: "claude: ran past its time limit of 300ms"},
		{name: "floods", script: "head -c 20000000 /dev/zero | tr '\\0' a; echo; echo '" + resultOK + "'", reason: job.ReasonExited, code: 1,
			msg: "claude: read output: bufio.Scanner: token too long"},
		{name: "succeeds", script: `echo '{"type":"system","subtype":"init","session_id":"6710a4b5-3c87-486a-b50a-770055a78eaa"}'; echo '` + resultOK + "'", reason: job.ReasonExited, code: 0,
			check: func(t *testing.T, r agent.Result) {
				if r.Session != "6710a4b5-3c87-486a-b50a-770055a78eaa" || r.Usage.CostUSD != 0.5 || r.Usage.InputTokens != 20 {
					t.Errorf("session %q usage %+v", r.Session, r.Usage)
				}
			}},
		{name: "refused", script: `echo '{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Failed to authenticate. API Error: 401 authentication_error","session_id":"s3"}'; exit 1`,
			reason: job.ReasonAuthFailed, code: 1, msg: "claude: API error 401: Failed to authenticate"},
		{name: "limited", script: `echo '{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429 rate limit reached","session_id":"s2"}'; exit 1`,
			reason: job.ReasonExited, code: 1, msg: "rate limit",
			check: func(t *testing.T, r agent.Result) {
				if r.Limit == nil || !r.Limit.ResetsAt.After(time.Now()) {
					t.Errorf("limit %+v, want one with a reset time", r.Limit)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			if tc.script != "" {
				if err := os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			g := New(claude.Adapter(), Config{Path: bin})
			var out strings.Builder
			a := testAttempt(t, &out)
			a.Spec.Timeout = protocol.Duration(tc.timeout)
			r, err := g.Run(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			if r.Reason != tc.reason || r.ExitCode != tc.code {
				t.Errorf("result %+v, want %s with code %d", r, tc.reason, tc.code)
			}
			if (tc.msg == "") != (r.Message == "") || !strings.Contains(r.Message, tc.msg) {
				t.Errorf("message %q, want %q", r.Message, tc.msg)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func testAttempt(t *testing.T, out *strings.Builder) agent.Attempt {
	root := t.TempDir()
	dir := filepath.Join(root, "worktree")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return agent.Attempt{
		Ref:     protocol.AttemptRef{Job: "j", Attempt: "a", Epoch: 1},
		Spec:    protocol.JobSpec{Agent: claude.Name, Args: []string{"do it"}},
		Dir:     dir,
		Env:     []string{"PATH=/usr/bin:/bin"},
		Output:  out,
		Grace:   50 * time.Millisecond,
		Prompt:  "do it",
		Home:    filepath.Join(root, "home"),
		Account: &agent.Account{ID: "acct_1", Dir: filepath.Join(root, "account"), Key: "sk-test-secret"},
		Sandbox: func(extra agent.Extra) (sandbox.Boundary, error) {
			return sandbox.New(context.Background(), sandbox.Policy{Kind: sandbox.KindNone, Root: dir, Env: extra.Env,
				ReadOnly: extra.ReadOnly, ReadWrite: extra.ReadWrite, Logger: slog.New(slog.DiscardHandler)})
		},
	}
}

// The egress proxy's evidence of the last call to the provider settles an
// attempt the provider refused (auth_failed) or that never reached it
// (endpoint_unreachable), whatever the CLI printed or how it exited.
func TestRefusalFromEvidence(t *testing.T) {
	const up = "http://127.0.0.1:9"
	call := func(status int, errText string) string {
		return `{"kind":"credential","allowed":true,"host":"127.0.0.1:9","rule":"credential claude","status":` +
			strconv.Itoa(status) + `,"error":"` + errText + `"}` + "\n"
	}
	for _, tc := range []struct {
		name   string
		events string
		exit   int
		reason job.Reason
		msg    string
	}{
		{"401 then exit 0", call(401, ""), 0, job.ReasonAuthFailed, "the provider at " + up + " refused the account's key (HTTP 401 Unauthorized)"},
		{"403", call(200, "") + call(403, ""), 1, job.ReasonAuthFailed, "HTTP 403 Forbidden"},
		{"401 then a good call", call(401, "") + call(200, ""), 0, job.ReasonExited, ""},
		{"unreachable", call(502, "dial tcp 127.0.0.1:9: connect: connection refused"), 1, job.ReasonEndpointUnreachable,
			"cannot reach the model API at " + up + ": dial tcp 127.0.0.1:9: connect: connection refused"},
		{"429 is a limit, not a refusal", call(429, ""), 1, job.ReasonExited, ""},
		{"a refused connect is no provider's answer", `{"kind":"connect","allowed":false,"host":"x:443","status":403}` + "\n", 1, job.ReasonExited, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New(claude.Adapter(), Config{})
			var out strings.Builder
			ev := &evidence{out: &out}
			if _, err := io.WriteString(sandbox.EventWriter(ev.take), tc.events); err != nil {
				t.Fatal(err)
			}
			r := agent.Result{ExitCode: tc.exit, Reason: job.ReasonExited}
			g.refused(&r, ev.lastCall(), up)
			if r.Reason != tc.reason || !strings.Contains(r.Message, tc.msg) || (tc.reason != job.ReasonExited && r.ExitCode == 0) {
				t.Errorf("result %+v, want %s with %q and a failing exit code", r, tc.reason, tc.msg)
			}
			if !strings.Contains(out.String(), "[drover egress]") {
				t.Errorf("the evidence did not reach the log: %q", out.String())
			}
		})
	}
}
