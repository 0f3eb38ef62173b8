// Package catalog is the runner's side of the agents of package facts: the
// code that runs each (the exec agent, a vendor CLI's adapter, the native
// model loop), keyed by the facts' names. Only the runner's commands build
// it, so the hub and the runner's accounts, which read facts alone, link
// neither the model SDKs nor the sandbox.
package catalog

import (
	"fmt"
	"slices"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/claude"
	"drover/internal/agent/cliagent"
	"drover/internal/agent/codex"
	agentexec "drover/internal/agent/exec"
	"drover/internal/agent/facts"
	"drover/internal/agent/gemini"
	"drover/internal/agent/native"
	"drover/internal/agent/opencode"
)

// Adapters are the vendor CLIs' adapters, in the order of facts.CLIs.
func Adapters() []agent.Adapter {
	return []agent.Adapter{claude.Adapter(), codex.Adapter(), opencode.Adapter(), gemini.Adapter()}
}

// Adapter is the adapter of the vendor CLI called name.
func Adapter(name string) (agent.Adapter, bool) {
	ads := Adapters()
	i := slices.IndexFunc(ads, func(ad agent.Adapter) bool { return ad.Name == name })
	if i < 0 {
		return agent.Adapter{}, false
	}
	return ads[i], true
}

// LoggedIn says, without the network, whether dir, a login account's
// config directory, holds the vendor login of the agent called name: an
// error wrapping agent.ErrNotLoggedIn when it is missing or expired; nil
// when it is there or the agent cannot tell.
func LoggedIn(name, dir string, now time.Time) error {
	if ad, ok := Adapter(name); ok && ad.LoggedIn != nil {
		return ad.LoggedIn(dir, now)
	}
	return nil
}

// Config is what a runner's operator decides for its agents.
type Config struct {
	// Path is the search path for the vendor CLIs (PATH-style).
	Path string
	// Env holds the operator's endpoint variables (Endpoint.UpstreamEnv,
	// e.g. ANTHROPIC_BASE_URL) by name.
	Env map[string]string
	// Models overrides the model per agent name.
	Models map[string]string
}

// Catalog is every agent of package facts as a runner's operator
// configured it.
type Catalog struct {
	*agent.Registry
	path string
}

// New builds every agent of package facts as cfg configures it. It fails
// when an agent has no implementation, or an implementation no facts.
func New(cfg Config) (*Catalog, error) {
	ads := Adapters()
	var list []agent.Agent
	for _, f := range facts.All() {
		var a agent.Agent
		switch f.Kind {
		case facts.KindCommand:
			a = agentexec.New()
		case facts.KindNative:
			a = native.New(native.Config{Model: cfg.Models[f.Name]})
		case facts.KindCLI:
			i := slices.IndexFunc(ads, func(ad agent.Adapter) bool { return ad.Name == f.Name })
			if i < 0 {
				return nil, fmt.Errorf("agent %s has no adapter", f.Name)
			}
			ad := ads[i]
			ads = slices.Delete(ads, i, i+1)
			a = cliagent.New(ad, cliagent.Config{
				Path:     cfg.Path,
				Upstream: cfg.Env[ad.Endpoint.UpstreamEnv],
				Model:    cfg.Models[f.Name],
			})
		}
		if a == nil || a.Name() != f.Name {
			return nil, fmt.Errorf("agent %s (kind %d) has no implementation", f.Name, f.Kind)
		}
		list = append(list, a)
	}
	if len(ads) > 0 {
		return nil, fmt.Errorf("adapter %s is no vendor CLI of package facts", ads[0].Name)
	}
	reg, err := agent.NewRegistry(list...)
	if err != nil {
		return nil, err
	}
	return &Catalog{Registry: reg, path: cfg.Path}, nil
}

// Available says whether this runner can run the agent called name: a
// vendor CLI must be installed on the configured path.
func (c *Catalog) Available(name string) error {
	if f, ok := facts.Lookup(name); ok && f.Kind == facts.KindCLI {
		_, err := agent.Locate(name, c.path)
		return err
	}
	return nil
}

// LoggedIn is the package's LoggedIn.
func (*Catalog) LoggedIn(name, dir string, now time.Time) error { return LoggedIn(name, dir, now) }
