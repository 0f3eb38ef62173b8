package runner

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"

	"drover/internal/netpolicy"
	"drover/internal/protocol"
	"drover/internal/sandbox"
	"drover/internal/sandbox/egress"
)

// phaseNetwork is the sandbox network of one phase of an attempt whose
// job carries a network spec: extra (what a vendor CLI needs for its
// model) plus what the phase's policies allow, with the policy named in
// refusals and the command that widens it. The setup phase's proxy adds
// creds (of the job's setup).
func phaseNetwork(spec protocol.JobSpec, phase string, extra sandbox.Network, creds []protocol.SetupCredential) sandbox.Network {
	n := spec.Network
	if n == nil {
		return extra
	}
	pn := n.Agent
	if phase == netpolicy.PhaseSetup {
		pn = n.Setup
	}
	out := extra
	out.Allow = append(slices.Clone(extra.Allow), pn.Allow...)
	if phase == netpolicy.PhaseSetup {
		// Registry keys of the setup only: the proxy adds them, the
		// sandbox holds a placeholder.
		out.Credentials = slices.Clone(extra.Credentials)
		for _, c := range creds {
			out.Credentials = append(out.Credentials, egress.FromSetup(c))
		}
	}
	out.Open = pn.Open
	out.Policy = phase + ": " + describePhase(pn)
	project := ""
	if spec.Repo != nil {
		project = spec.Repo.Project
	}
	catalog := netpolicy.Catalog{Policies: n.Catalog}
	out.Widen = func(hostport string) string {
		return catalog.WidenCommand(project, phase, pn.Policies, hostport)
	}
	return out
}

// describePhase names a phase's policies for the isolation record; the
// open policy is said in capitals.
func describePhase(pn protocol.PhaseNetwork) string {
	if pn.Open {
		return "OPEN (every host)"
	}
	return netpolicy.Describe(pn.Policies)
}

// describeNetwork is the attempt's policy line: "setup: go; agent: none".
func describeNetwork(spec protocol.JobSpec, setup bool) string {
	if spec.Network == nil {
		return ""
	}
	s := netpolicy.PhaseAgent + ": " + describePhase(spec.Network.Agent)
	if setup {
		s = netpolicy.PhaseSetup + ": " + describePhase(spec.Network.Setup) + "; " + s
	}
	return s
}

// denials counts the hosts the egress proxy refused, per phase.
type denials struct {
	mu    sync.Mutex
	count map[[2]string]int // phase, host → times
	order [][2]string
}

func (d *denials) add(phase, host string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := [2]string{phase, host}
	if d.count == nil {
		d.count = map[[2]string]int{}
	}
	if _, seen := d.count[k]; !seen {
		if len(d.order) >= protocol.MaxDenials {
			return
		}
		d.order = append(d.order, k)
	}
	d.count[k]++
}

// list is what the finish reports.
func (d *denials) list() []protocol.Denial {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []protocol.Denial
	for _, k := range d.order {
		out = append(out, protocol.Denial{Phase: k[0], Host: k[1], Count: d.count[k]})
	}
	return out
}

// evidence is the Policy.Evidence of one phase: it counts the egress
// proxy's refusals, and passes each event on to next when set (a vendor
// CLI's own evidence reader), else writes it readably to out (the log).
func evidence(phase string, d *denials, next, out io.Writer) io.Writer {
	return sandbox.EventWriter(func(ev egress.Event) {
		if !ev.Allowed && (ev.Kind == "connect" || ev.Kind == "http") && ev.Rule == "allowlist" {
			d.add(phase, strings.ToLower(ev.Host))
		}
		if next == nil {
			_, _ = io.WriteString(out, sandbox.EvidenceLine(ev))
			return
		}
		if b, err := json.Marshal(ev); err == nil {
			_, _ = next.Write(append(b, '\n'))
		}
	})
}
