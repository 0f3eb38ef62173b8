package agent_test

import (
	"strings"
	"testing"

	"drover/internal/agent"
	"drover/internal/agent/claude"
	"drover/internal/agent/codex"
	"drover/internal/agent/gemini"
	"drover/internal/agent/opencode"
)

// Every form the vendors' SDKs and gateways document for a base URL is the
// same API root for each CLI, whichever way drover was given it.
func TestBaseURLFormsPerAgent(t *testing.T) {
	const root = "http://127.0.0.1:11434"
	for _, tc := range []struct {
		ad    agent.Adapter
		forms []string // each must normalise to root
	}{
		{claude.Adapter(), []string{root, root + "/", root + "/v1", root + "/v1/", " " + root + "/v1 "}},
		{codex.Adapter(), []string{root, root + "/", root + "/v1", root + "/v1/", "HTTP://127.0.0.1:11434/v1"}},
		{opencode.Adapter(), []string{root, root + "/", root + "/v1", root + "/v1//"}},
		{gemini.Adapter(), []string{root, root + "/", root + "/v1beta", root + "/v1beta/", root + "/v1"}},
	} {
		ep := tc.ad.Endpoint
		for _, form := range tc.forms {
			got, err := ep.NormalizeBaseURL(form)
			if err != nil || got != root {
				t.Errorf("%s: NormalizeBaseURL(%q) = %q, %v; want %q", tc.ad.Name, form, got, err, root)
			}
			for _, from := range []string{"account", ep.UpstreamEnv} {
				acct, env := form, ""
				if from != "account" {
					acct, env = "", form
				}
				got, src, err := ep.ResolveBaseURL(acct, env)
				if err != nil || got != root || src != from {
					t.Errorf("%s: ResolveBaseURL(%q, %q) = %q from %q, %v; want %q from %q", tc.ad.Name, acct, env, got, src, err, root, from)
				}
			}
		}
		// A gateway's own path prefix stays; only the CLI's version goes.
		if got, _ := ep.NormalizeBaseURL("https://gw.example/openai/v1/"); got != "https://gw.example/openai" {
			t.Errorf("%s: gateway prefix: got %q", tc.ad.Name, got)
		}
		if got, from, err := ep.ResolveBaseURL("", ""); err != nil || got != ep.Upstream || from != "vendor" {
			t.Errorf("%s: no base URL resolves to %q from %q (%v), want the vendor's %q", tc.ad.Name, got, from, err, ep.Upstream)
		}
	}
}

func TestBaseURLRefusals(t *testing.T) {
	const secret = "sk-secret-in-url"
	ep := codex.Adapter().Endpoint
	for _, tc := range []struct{ in, want string }{
		{"ftp://x.example", "want http:// or https://"},
		{"api.openai.com/v1", "want http:// or https://"},
		{"https:///v1", "no host"},
		{"http://gw.example/v1", "plain http only to a loopback address"},
		{"https://u:" + secret + "@gw.example", "credentials"},
		{"https://gw.example/?key=" + secret, "no query"},
		{"https://gw.example/#" + secret, "no query or fragment"},
	} {
		_, err := ep.NormalizeBaseURL(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NormalizeBaseURL(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("error %q quotes the URL's secret", err)
		}
	}
	if _, from, err := ep.ResolveBaseURL("", "http://gw.example/v1"); err == nil || !strings.Contains(err.Error(), "OPENAI_BASE_URL") || from != "OPENAI_BASE_URL" {
		t.Errorf("a bad OPENAI_BASE_URL: from %q, %v; want an error naming the variable", from, err)
	}
}
