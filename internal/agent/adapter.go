package agent

import "time"

// Adapter is what one vendor CLI contributes to drover: how to start it,
// how to read what it prints, and how it reaches its model API. The CLI
// agent (package cliagent) does the rest the same way for every CLI.
type Adapter struct {
	Name    string // the agent name jobs use, and the CLI's executable
	Command func(Launch) (Command, error)
	Parse   ParseFunc
	// Endpoint is how the CLI reaches its model API; what else is known of
	// the agent (capabilities, instruction files) is in package facts.
	Endpoint Endpoint
	// HomeDirs are directories of the account directory that the CLI
	// expects in its home (Gemini CLI's .gemini), bound there in the
	// sandbox, whose HOME is its own.
	HomeDirs []string
	// LoggedIn says, without the network, whether a login account's config
	// directory holds the CLI's login (an error wrapping ErrNotLoggedIn
	// when it is missing or expired); nil: the adapter cannot tell.
	LoggedIn func(accountDir string, now time.Time) error
}

// Endpoint is how a CLI reaches its model API.
type Endpoint struct {
	// Upstream is the vendor's API root, used for API-key accounts unless
	// the account or the runner's operator names another.
	Upstream string
	// Header and Prefix carry the key on requests ("x-api-key", or
	// "Authorization" with "Bearer "): the egress proxy swaps the
	// sandbox's placeholder for the real key there.
	Header, Prefix string
	// KeyEnv holds the placeholder inside the sandbox; BaseURLEnv the
	// proxy's credential URL. Adapters that configure the CLI by file point
	// it at these (or at Launch.BaseURL).
	KeyEnv, BaseURLEnv string
	// UpstreamEnv is the runner-side variable an operator sets to send
	// this CLI to a gateway or local model (e.g. ANTHROPIC_BASE_URL).
	UpstreamEnv string
	// Versions are the API version paths the CLI puts after the root
	// itself ("v1"); a base URL given with one is the root without it
	// (see NormalizeBaseURL).
	Versions []string
	// Hosts are host:port pairs an account logged in with the vendor
	// reaches directly (through the egress allowlist).
	Hosts []string
}
