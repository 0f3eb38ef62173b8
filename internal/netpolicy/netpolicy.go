// Package netpolicy holds the rules of named network policies, in one
// place: the host[:port] pattern and its matcher (the egress proxy matches
// with it), the operator's catalog of policies, the choice a project's
// owner makes for its setup and agent phases, how a job narrows that
// choice (never widening it), and the command that widens a project for a
// denied host.
package netpolicy

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Reserved policy names.
const (
	None = "none" // no network at all
	Open = "open" // every host: only when the operator enables it
)

// Phases of an attempt a policy applies to.
const (
	PhaseSetup = "setup"
	PhaseAgent = "agent"
)

// DefaultPort is the port of a pattern that names none.
const DefaultPort = 443

// Pattern is one host[:port] pattern: an exact host (a DNS name or an IP
// address) or "*.domain" (every host below domain, not domain itself), and
// one port.
type Pattern struct {
	Host     string // lower case, without the "*." of a wildcard
	Wildcard bool
	Port     int
}

var labelRE = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$`)

// ParsePattern parses and checks a pattern. A pattern that would match
// every host ("*", "*.com": a wildcard over a top-level domain) or that is
// not a host name or address is refused.
func ParsePattern(s string) (Pattern, error) {
	raw := strings.TrimSpace(s)
	if raw == "" {
		return Pattern{}, errors.New("empty host pattern")
	}
	host, port := raw, ""
	if h, p, err := net.SplitHostPort(raw); err == nil {
		host, port = h, p
	} else if strings.Count(raw, ":") == 1 || strings.HasPrefix(raw, "[") {
		return Pattern{}, fmt.Errorf("host pattern %q: %w", s, err)
	}
	p := Pattern{Port: DefaultPort}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return Pattern{}, fmt.Errorf("host pattern %q: port %q is not a number from 1 to 65535", s, port)
		}
		p.Port = n
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ip := net.ParseIP(host); ip != nil {
		p.Host = ip.String()
		if ip.IsUnspecified() {
			return Pattern{}, fmt.Errorf("host pattern %q: the unspecified address is no host", s)
		}
		return p, nil
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		p.Wildcard, host = true, rest
		if !strings.Contains(host, ".") {
			return Pattern{}, fmt.Errorf("host pattern %q matches a whole top-level domain: name a domain below it", s)
		}
	}
	if host == "" || host == "*" {
		return Pattern{}, fmt.Errorf("host pattern %q matches every host: name the hosts (the operator's %q policy is for an open network)", s, Open)
	}
	if len(host) > 253 {
		return Pattern{}, fmt.Errorf("host pattern %q: host name longer than 253 characters", s)
	}
	for _, l := range strings.Split(host, ".") {
		if !labelRE.MatchString(l) {
			return Pattern{}, fmt.Errorf("host pattern %q: %q is not a host name label (letters, digits, '-', '_'; a '*' only as the whole first label)", s, l)
		}
	}
	p.Host = host
	return p, nil
}

// String is the pattern's canonical form, host:port.
func (p Pattern) String() string {
	h := p.Host
	if p.Wildcard {
		h = "*." + h
	}
	return net.JoinHostPort(h, strconv.Itoa(p.Port))
}

// Match reports whether the pattern allows hostport (host:port as a client
// asked for it).
func (p Pattern) Match(hostport string) bool {
	host, port, ok := SplitTarget(hostport)
	if !ok || port != p.Port {
		return false
	}
	if p.Wildcard {
		return strings.HasSuffix(host, "."+p.Host)
	}
	return host == p.Host
}

// SplitTarget normalizes a host:port target: lower case, no trailing dot,
// IP addresses in their canonical form.
func SplitTarget(hostport string) (host string, port int, ok bool) {
	h, ps, err := net.SplitHostPort(strings.TrimSpace(hostport))
	if err != nil {
		return "", 0, false
	}
	n, err := strconv.Atoi(ps)
	if err != nil || n < 1 || n > 65535 || h == "" {
		return "", 0, false
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if ip := net.ParseIP(h); ip != nil {
		h = ip.String()
	}
	return h, n, true
}

// Matcher is a set of patterns, or every host when open.
type Matcher struct {
	Patterns []Pattern
	Open     bool
}

// NewMatcher parses patterns.
func NewMatcher(patterns []string, open bool) (Matcher, error) {
	m := Matcher{Open: open}
	for _, s := range patterns {
		p, err := ParsePattern(s)
		if err != nil {
			return Matcher{}, err
		}
		m.Patterns = append(m.Patterns, p)
	}
	return m, nil
}

// Allows reports whether hostport may be reached.
func (m Matcher) Allows(hostport string) bool {
	if m.Open {
		_, _, ok := SplitTarget(hostport)
		return ok
	}
	for _, p := range m.Patterns {
		if p.Match(hostport) {
			return true
		}
	}
	return false
}

// Strings lists the patterns in canonical form, sorted.
func (m Matcher) Strings() []string {
	out := make([]string, 0, len(m.Patterns))
	for _, p := range m.Patterns {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// Catalog is the operator's named policies (from the hub's config file).
type Catalog struct {
	// AllowOpen lets projects choose the "open" policy.
	AllowOpen bool `json:"allow_open,omitempty"`
	// Policies maps a name to its host[:port] patterns.
	Policies map[string][]string `json:"policies,omitempty"`
}

// Check validates every name and pattern of the catalog.
func (c Catalog) Check() error {
	for _, name := range c.Names() {
		if name == None || name == Open {
			return fmt.Errorf("network policy %q: the name is reserved", name)
		}
		if !nameRE.MatchString(name) {
			return fmt.Errorf("network policy %q: a name is lower-case letters, digits, '.', '_' and '-', at most 64", name)
		}
		if len(c.Policies[name]) == 0 {
			return fmt.Errorf("network policy %q lists no hosts", name)
		}
		for _, s := range c.Policies[name] {
			if _, err := ParsePattern(s); err != nil {
				return fmt.Errorf("network policy %q: %w", name, err)
			}
		}
	}
	return nil
}

// Names lists the catalog's policies, sorted.
func (c Catalog) Names() []string {
	out := make([]string, 0, len(c.Policies))
	for n := range c.Policies {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Choose checks a project owner's choice of policies for one phase and
// returns it normalized: sorted, without duplicates, [] for "none". Every
// name must be the catalog's, "open" only when the operator allows it, and
// "none" or "open" only alone.
func (c Catalog) Choose(names []string) ([]string, error) {
	out := []string{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == None:
			if len(names) > 1 {
				return nil, fmt.Errorf("network policy %q stands alone", None)
			}
			return []string{}, nil
		case n == Open:
			if !c.AllowOpen {
				return nil, fmt.Errorf("network policy %q is not enabled on this hub: its operator enables it with \"allow_open\" in the hub's config", Open)
			}
			if len(names) > 1 {
				return nil, fmt.Errorf("network policy %q allows every host already: name it alone", Open)
			}
			return []string{Open}, nil
		case c.Policies[n] == nil:
			return nil, fmt.Errorf("no network policy %q on this hub (it has: %s)", n, c.list())
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (c Catalog) list() string {
	names := append(c.Names(), None)
	if c.AllowOpen {
		names = append(names, Open)
	}
	return strings.Join(names, ", ")
}

// Narrow applies a job's request to what its project allows for a phase:
// nil keeps the project's choice; ["none"] is no network; otherwise every
// requested policy must be one the project allows (any of the catalog's
// when the project allows "open"). It never widens.
func Narrow(allowed, requested []string) ([]string, error) {
	if requested == nil {
		return slices.Clone(allowed), nil
	}
	out := []string{}
	for _, n := range requested {
		switch {
		case n == None:
			if len(requested) > 1 {
				return nil, fmt.Errorf("--network %s stands alone", None)
			}
			return []string{}, nil
		case slices.Contains(allowed, n):
		case n != Open && slices.Contains(allowed, Open):
		default:
			return nil, fmt.Errorf("network policy %q is not one this job's project allows its agent (it allows: %s): a job narrows its project's network, never widens it", n, Describe(allowed))
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Describe names policies for people: "none" for no network.
func Describe(names []string) string {
	if len(names) == 0 {
		return None
	}
	return strings.Join(names, ",")
}

// Resolve turns chosen policy names into a matcher. A name the catalog no
// longer has allows nothing.
func (c Catalog) Resolve(names []string) (Matcher, error) {
	var patterns []string
	for _, n := range names {
		if n == Open {
			if !c.AllowOpen {
				continue // the operator turned it off: nothing widened
			}
			return Matcher{Open: true}, nil
		}
		patterns = append(patterns, c.Policies[n]...)
	}
	return NewMatcher(patterns, false)
}

// WidenCommand says how a project's owner lets the phase reach hostport:
// the command that adds the narrowest of the catalog's policies allowing
// it, or what to ask the operator when none does.
func (c Catalog) WidenCommand(project, phase string, inForce []string, hostport string) string {
	if project == "" {
		return "jobs without a project have no network policy: run the job on a project whose owner chose one"
	}
	best, size := "", 0
	for _, n := range c.Names() {
		m, err := c.Resolve([]string{n})
		if err != nil || !m.Allows(hostport) || slices.Contains(inForce, n) {
			continue
		}
		if best == "" || len(c.Policies[n]) < size {
			best, size = n, len(c.Policies[n])
		}
	}
	if best == "" {
		return fmt.Sprintf("no network policy on this hub allows %s: ask its operator to add it to one in the hub's config, then run drover projects network %s --%s POLICY", hostport, project, phase)
	}
	names := slices.DeleteFunc(slices.Clone(inForce), func(n string) bool { return n == None })
	return fmt.Sprintf("drover projects network %s --%s %s", project, phase, strings.Join(append(names, best), ","))
}
