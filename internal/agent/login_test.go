package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/claude"
	"drover/internal/agent/codex"
	"drover/internal/agent/gemini"
	"drover/internal/agent/opencode"
)

// Each CLI's login is read from the files its own login command leaves in
// the account's config directory, without the network.
func TestLoggedInPerAgent(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Hour).UnixMilli(), now.Add(time.Hour).UnixMilli()
	for _, tc := range []struct {
		name string
		ad   agent.Adapter
		file string // relative to the account directory; "" writes none
		data string
		ok   bool
	}{
		{"claude without a login", claude.Adapter(), "", "", false},
		{"claude logged in", claude.Adapter(), ".credentials.json", `{"claudeAiOauth":{"accessToken":"a","refreshToken":"r","expiresAt":` + itoa(past) + `}}`, true},
		{"claude expired without a refresh token", claude.Adapter(), ".credentials.json", `{"claudeAiOauth":{"accessToken":"a","expiresAt":` + itoa(past) + `}}`, false},
		{"claude not yet expired", claude.Adapter(), ".credentials.json", `{"claudeAiOauth":{"accessToken":"a","expiresAt":` + itoa(future) + `}}`, true},
		{"claude empty file", claude.Adapter(), ".credentials.json", `{}`, false},
		{"claude garbage", claude.Adapter(), ".credentials.json", `not json`, false},
		{"codex without a login", codex.Adapter(), "", "", false},
		{"codex ChatGPT login", codex.Adapter(), "auth.json", `{"OPENAI_API_KEY":null,"tokens":{"id_token":"i","access_token":"a","refresh_token":"r"}}`, true},
		{"codex API key login", codex.Adapter(), "auth.json", `{"OPENAI_API_KEY":"sk-x"}`, true},
		{"codex logged out", codex.Adapter(), "auth.json", `{"OPENAI_API_KEY":null,"tokens":null}`, false},
		{"gemini without a login", gemini.Adapter(), "", "", false},
		{"gemini logged in", gemini.Adapter(), ".gemini/oauth_creds.json", `{"access_token":"a","refresh_token":"r","expiry_date":` + itoa(past) + `}`, true},
		{"gemini expired, no refresh", gemini.Adapter(), ".gemini/oauth_creds.json", `{"access_token":"a","expiry_date":` + itoa(past) + `}`, false},
		{"opencode without a login", opencode.Adapter(), "", "", false},
		{"opencode logged in", opencode.Adapter(), "data/opencode/auth.json", `{"anthropic":{"type":"oauth","refresh":"r"}}`, true},
		{"opencode no provider", opencode.Adapter(), "data/opencode/auth.json", `{}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				p := filepath.Join(dir, tc.file)
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(tc.data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := tc.ad.LoggedIn(dir, now)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, agent.ErrNotLoggedIn)) {
				t.Errorf("LoggedIn = %v, want logged in %v", err, tc.ok)
			}
		})
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
