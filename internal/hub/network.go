package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/netpolicy"
	"drover/internal/protocol"
	"drover/internal/publish"
	"drover/internal/store"
)

// Network policies: the operator names them (Config.Network), a project's
// owner picks some for the project's setup and agent phases, a job narrows
// the agent's (netpolicy.Narrow), and the offer carries what they resolve
// to now.

// jobNetwork checks what a submission asks of the network against its
// project: nil keeps the project's policies; a job without a project can
// only ask for none (it has no network).
func jobNetwork(prj *store.Project, req []string) ([]string, error) {
	if req == nil {
		return nil, nil
	}
	if len(req) == 0 {
		return nil, call.BadRequest("--network names policies, or %s", netpolicy.None)
	}
	if prj == nil {
		if len(req) == 1 && req[0] == netpolicy.None {
			return []string{}, nil
		}
		return nil, call.BadRequest("a job without a project has no network; --network %s names policies of a project (drover run --repo)", strings.Join(req, ","))
	}
	out, err := netpolicy.Narrow(prj.Config.AgentNetwork, req)
	if err != nil {
		return nil, call.Forbidden("%v; project %s's owner widens it (drover projects network %s --agent POLICY,...)", err, prj.Name, prj.Name)
	}
	return out, nil
}

// phaseNetwork resolves chosen policies with the operator's catalog as it
// is now: a policy the operator removed (or an "open" they turned off)
// allows nothing.
func (h *Hub) phaseNetwork(names []string) protocol.PhaseNetwork {
	pn := protocol.PhaseNetwork{Policies: []string{}}
	for _, n := range names {
		if n == netpolicy.Open && !h.cfg.Network.AllowOpen || n != netpolicy.Open && h.cfg.Network.Policies[n] == nil {
			continue
		}
		pn.Policies = append(pn.Policies, n)
	}
	m, err := h.cfg.Network.Resolve(pn.Policies)
	if err != nil { // the catalog was checked when the hub started
		return protocol.PhaseNetwork{Policies: []string{}}
	}
	pn.Allow, pn.Open = m.Strings(), m.Open
	return pn
}

// errUntrusted is an offer withdrawn because the runner may not receive
// the credentials of the job's setup (its access changed since the
// dispatcher chose it).
var errUntrusted = errors.New("the runner may not receive the job's setup credentials")

// setupCredentials are the credentials the setup of prj brings, with
// what they need of a runner: the operator's credentials of the setup's
// policies as the catalog resolves them now, and the project's secrets
// for hosts the setup reaches; none without setup commands. With values
// false the project's secrets come without their values (for the
// dispatcher, which only needs their names).
func (h *Hub) setupCredentials(tx store.Tx, prj store.Project, values bool) ([]protocol.SetupCredential, credNeed, error) {
	need := credNeed{projectOwner: prj.OwnerID}
	if !prj.Config.HasSetup() {
		return nil, need, nil
	}
	setup := h.phaseNetwork(prj.Config.SetupNetwork)
	var out []protocol.SetupCredential
	for _, cred := range h.cfg.Credentials {
		if slices.Contains(setup.Policies, cred.Policy) {
			out = append(out, cred)
			need.operator = append(need.operator, cred.Name)
			need.trusted = append(need.trusted, h.cfg.CredentialRunners[cred.Name])
		}
	}
	secrets, err := tx.ProjectSecrets(prj.Name, values)
	if err != nil {
		return nil, need, err
	}
	reach, err := h.setupReach(prj)
	if err != nil {
		return nil, need, err
	}
	for _, s := range secrets {
		// A secret for a host the setup no longer reaches stays home.
		if reach.Allows(secretHost(s.Upstream)) {
			out = append(out, secretCredential(s))
			need.secrets = append(need.secrets, s.Name)
		}
	}
	if need.any() {
		u, err := tx.User(prj.OwnerID)
		if err != nil {
			return nil, need, fmt.Errorf("read owner of project %s: %w", prj.Name, err)
		}
		need.ownerName = u.Name
	}
	return out, need, nil
}

// setupReach is what the setup of prj may reach now.
func (h *Hub) setupReach(prj store.Project) (netpolicy.Matcher, error) {
	setup := h.phaseNetwork(prj.Config.SetupNetwork)
	m, err := netpolicy.NewMatcher(setup.Allow, setup.Open)
	if err != nil {
		return m, fmt.Errorf("resolve the setup network of project %s: %w", prj.Name, err)
	}
	return m, nil
}

// jobNeed is what the setup of j's project needs of a runner's trust.
func (h *Hub) jobNeed(tx store.Tx, j store.Job) (credNeed, error) {
	if j.Project == "" {
		return credNeed{}, nil
	}
	prj, err := tx.Project(j.Project)
	if err != nil {
		return credNeed{}, fmt.Errorf("read project %s: %w", j.Project, err)
	}
	_, need, err := h.setupCredentials(tx, prj, false)
	return need, err
}

// projectSpec adds to an offer to a runner with access ra what the job's
// project configures: the network of each phase, the setup and the
// caches. A setup's credentials go only to a runner that may receive
// them (errUntrusted otherwise).
func (h *Hub) projectSpec(tx store.Tx, ra *runnerAccess, j store.Job, spec *protocol.JobSpec) error {
	if j.Project == "" {
		return nil
	}
	prj, err := tx.Project(j.Project)
	if err != nil {
		return fmt.Errorf("read project %s: %w", j.Project, err)
	}
	c := prj.Config
	agent, err := netpolicy.Narrow(c.AgentNetwork, j.Network)
	if err != nil {
		// The owner narrowed the project since the job was submitted:
		// keep what both allow, never more.
		agent = slices.DeleteFunc(slices.Clone(j.Network), func(n string) bool { return !slices.Contains(c.AgentNetwork, n) })
	}
	spec.Network = &protocol.NetworkSpec{Setup: h.phaseNetwork(c.SetupNetwork), Agent: h.phaseNetwork(agent),
		Catalog: h.cfg.Network.Policies}
	if c.HasSetup() {
		timeout := c.SetupTimeout
		if timeout <= 0 {
			timeout = protocol.DefaultSetupTimeout
		}
		creds, need, err := h.setupCredentials(tx, prj, true)
		if err != nil {
			return err
		}
		if !ra.mayReceive(need) {
			return errUntrusted
		}
		spec.Setup = &protocol.SetupSpec{Commands: c.SetupCommands, Timeout: protocol.Duration(timeout), KeyFiles: c.SetupKeys,
			File: c.SetupFile, Credentials: creds}
		if c.SetupFile != "" {
			spec.Setup.FileApproved = c.SetupApproved
		}
	}
	spec.Caches = c.Caches
	if spec.Repo != nil {
		spec.Repo.Large = c.Large && !spec.Repo.Remote
		spec.Repo.Sparse = c.Sparse
		if len(j.Sparse) > 0 {
			spec.Repo.Sparse = j.Sparse
		}
	}
	return nil
}

// configView is a project's config as the API shows it.
func (h *Hub) configView(prj store.Project) apitypes.ProjectConfig {
	c := prj.Config
	orEmpty := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return apitypes.ProjectConfig{Project: prj.Name, SetupNetwork: orEmpty(c.SetupNetwork), AgentNetwork: orEmpty(c.AgentNetwork),
		SetupCommands: orEmpty(c.SetupCommands), SetupTimeout: protocol.Duration(c.SetupTimeout), Caches: orEmpty(c.Caches),
		SetupKeys: orEmpty(c.SetupKeys), SetupFile: c.SetupFile, SetupApproved: c.SetupApproved, Large: c.Large, Sparse: c.Sparse,
		Forge: c.Forge, ForgeRepo: c.ForgeRepo, Publish: c.Publish, DirectPush: c.DirectPush,
		PublishAuthor: c.PublishAuthor, PublishEmail: c.PublishEmail, PublishSign: c.PublishSign,
		Policies: h.cfg.Network.Policies, AllowOpen: h.cfg.Network.AllowOpen}
}

// applyConfig changes c as req asks, or says what is wrong with it and
// changes nothing.
func (h *Hub) applyConfig(c store.ProjectConfig, req apitypes.ProjectConfigRequest) (store.ProjectConfig, error) {
	var err error
	for _, f := range []struct {
		to   *string
		from *string
	}{{&c.Forge, req.Forge}, {&c.ForgeRepo, req.ForgeRepo}, {&c.Publish, req.Publish},
		{&c.PublishAuthor, req.PublishAuthor}, {&c.PublishEmail, req.PublishEmail}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	for _, f := range []struct {
		to   *bool
		from *bool
	}{{&c.DirectPush, req.DirectPush}, {&c.PublishSign, req.PublishSign}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	if req.SetupNetwork != nil {
		if c.SetupNetwork, err = h.cfg.Network.Choose(*req.SetupNetwork); err != nil {
			return c, call.BadRequest("setup network: %v", err)
		}
	}
	if req.AgentNetwork != nil {
		if c.AgentNetwork, err = h.cfg.Network.Choose(*req.AgentNetwork); err != nil {
			return c, call.BadRequest("agent network: %v", err)
		}
	}
	if req.SetupCommands != nil {
		cmds := *req.SetupCommands
		if len(cmds) > protocol.MaxSetupCommands {
			return c, call.BadRequest("at most %d setup commands", protocol.MaxSetupCommands)
		}
		for _, cmd := range cmds {
			if strings.TrimSpace(cmd) == "" || len(cmd) > protocol.MaxSetupCommand || strings.ContainsRune(cmd, 0) {
				return c, call.BadRequest("a setup command is a non-empty shell command line of at most %d bytes", protocol.MaxSetupCommand)
			}
		}
		c.SetupCommands = slices.Clone(cmds)
	}
	if req.SetupTimeout != nil {
		if d := req.SetupTimeout.D(); d < 0 || d > protocol.MaxSetupTimeout {
			return c, call.BadRequest("setup timeout %s: want 0 (the default, %s) up to %s", d, protocol.DefaultSetupTimeout, protocol.MaxSetupTimeout)
		}
		c.SetupTimeout = req.SetupTimeout.D()
	}
	if req.SetupKeys != nil {
		if len(*req.SetupKeys) > protocol.MaxSetupCommands {
			return c, call.BadRequest("at most %d setup key files", protocol.MaxSetupCommands)
		}
		for _, f := range *req.SetupKeys {
			if err := protocol.CheckKeyFile(f); err != nil {
				return c, call.BadRequest("%v", err)
			}
		}
		c.SetupKeys = slices.Compact(slices.Sorted(slices.Values(*req.SetupKeys)))
	}
	if req.SetupFile != nil {
		if f := *req.SetupFile; f != "" {
			if err := protocol.CheckKeyFile(f); err != nil {
				return c, call.BadRequest("setup file: %v", err)
			}
		}
		c.SetupFile = *req.SetupFile
	}
	if c.SetupApproved, err = applyApprovals(c.SetupApproved, req.ApproveSetup, req.UnapproveSetup); err != nil {
		return c, err
	}
	if req.Large != nil {
		c.Large = *req.Large
	}
	if req.Sparse != nil {
		if err := protocol.CheckSparsePaths(*req.Sparse); err != nil {
			return c, call.BadRequest("%v", err)
		}
		c.Sparse = slices.Compact(slices.Sorted(slices.Values(*req.Sparse)))
	}
	if req.Caches != nil {
		if len(*req.Caches) > protocol.MaxCaches {
			return c, call.BadRequest("at most %d caches", protocol.MaxCaches)
		}
		for _, name := range *req.Caches {
			if err := protocol.CheckCacheName(name); err != nil {
				return c, call.BadRequest("%v", err)
			}
		}
		c.Caches = slices.Compact(slices.Sorted(slices.Values(*req.Caches)))
	}
	return c, nil
}

// applyApprovals adds and removes approved digests of the repository's
// setup script: an approval is content, so it outlives a change of
// SetupFile and matches that content under any name.
func applyApprovals(have, add, remove []string) ([]string, error) {
	if len(add) == 0 && len(remove) == 0 {
		return have, nil
	}
	out := slices.Clone(have)
	for _, h := range remove {
		d, err := protocol.CheckSetupHash(h)
		if err != nil {
			return have, call.BadRequest("%v", err)
		}
		i := slices.Index(out, d)
		if i < 0 {
			return have, call.BadRequest("setup script digest %s is not approved", d)
		}
		out = slices.Delete(out, i, i+1)
	}
	for _, h := range add {
		d, err := protocol.CheckSetupHash(h)
		if err != nil {
			return have, call.BadRequest("%v", err)
		}
		out = append(out, d)
	}
	out = slices.Compact(slices.Sorted(slices.Values(out)))
	if len(out) > protocol.MaxSetupApproved {
		return have, call.BadRequest("at most %d approved versions of the setup script (drop old ones with --unapprove)", protocol.MaxSetupApproved)
	}
	return out, nil
}

// ProjectConfig is a project's network policies, setup and caches
// (members and admins).
func (h *Hub) ProjectConfig(ctx context.Context, p call.Caller, req call.ProjectConfigRequest) (apitypes.ProjectConfig, error) {
	var out apitypes.ProjectConfig
	err := h.store.Read(ctx, func(tx store.Tx) error {
		prj, err := readProject(tx, req.Project)
		if err != nil {
			return err
		}
		if err := mayUseProject(tx, p, prj); err != nil {
			return err
		}
		out = h.configView(prj)
		return nil
	})
	return out, err
}

// SetProjectConfig changes a project's config (owner and admins).
func (h *Hub) SetProjectConfig(ctx context.Context, p call.Caller, req call.ProjectConfigRequest) (apitypes.ProjectConfig, error) {
	var out apitypes.ProjectConfig
	var before, after store.ProjectConfig
	err := h.store.Write(ctx, func(tx store.Tx) error {
		prj, err := readProject(tx, req.Project)
		if err != nil {
			return err
		}
		if err := mayConfigureProject(tx, p, prj); err != nil {
			return err
		}
		before = prj.Config
		if prj.Config, err = h.applyConfig(prj.Config, req.ProjectConfigRequest); err != nil {
			return err
		}
		after = prj.Config
		// The forge's credential is the admin's: only an admin points a
		// project at a repository it writes to.
		if !p.Admin && (after.Forge != before.Forge || after.ForgeRepo != before.ForgeRepo) {
			return call.Forbidden("only an admin maps a project to a forge repository (the forge's credential is the hub's)")
		}
		if err := publish.CheckMapping(tx, prj.Config); err != nil {
			return err
		}
		if err := tx.SetProjectConfig(prj.Name, prj.Config, h.now()); err != nil {
			return err
		}
		out = h.configView(prj)
		return nil
	})
	if err != nil {
		return out, err
	}
	h.kick() // the runners the project's jobs may go to may have changed
	h.log.Info("project config changed", "project", out.Project, "by", p.Name,
		"setup_network", netpolicy.Describe(after.SetupNetwork), "agent_network", netpolicy.Describe(after.AgentNetwork),
		"was_setup_network", netpolicy.Describe(before.SetupNetwork), "was_agent_network", netpolicy.Describe(before.AgentNetwork),
		"setup_commands", len(after.SetupCommands), "setup_file", after.SetupFile, "setup_approved", after.SetupApproved,
		"caches", len(after.Caches))
	return out, nil
}

func readProject(tx store.Tx, name string) (store.Project, error) {
	prj, err := tx.Project(name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Project{}, noProject(name)
	}
	return prj, err
}

// checkDenials bounds what a finish reports the proxy refused.
func checkDenials(ds []protocol.Denial) error {
	if len(ds) > protocol.MaxDenials {
		return call.BadRequest("at most %d denials", protocol.MaxDenials)
	}
	for _, d := range ds {
		if _, _, ok := netpolicy.SplitTarget(d.Host); !ok || len(d.Host) > 300 || d.Count < 1 ||
			(d.Phase != netpolicy.PhaseSetup && d.Phase != netpolicy.PhaseAgent) {
			return call.BadRequest("denial %q (%s phase, %d times) is malformed", d.Host, d.Phase, d.Count)
		}
	}
	return nil
}

// denialEvents records each refused host as an event of the job.
func denialEvents(tx store.Tx, jobID, runner string, iso *protocol.Isolation, at time.Time) error {
	for _, d := range iso.Denials {
		ev := store.Event{JobID: jobID, At: at, Kind: "egress_denied", Actor: runner}
		ev.Message = fmt.Sprintf("%s phase: the egress proxy refused %s (%d times) under %s", d.Phase, d.Host, d.Count, iso.Policy)
		if _, err := tx.AddEvent(ev); err != nil {
			return err
		}
	}
	return nil
}

// addAllow says in each denial of a job's view the command that lets its
// project reach the host, from the operator's policies and the project's
// choice as they are now.
func (h *Hub) addAllow(tx store.Tx, v *apitypes.JobView) error {
	if v.Project == "" {
		return nil
	}
	var prj *store.Project
	for i := range v.Attempts {
		iso := v.Attempts[i].Isolation
		if iso == nil {
			continue
		}
		for k := range iso.Denials {
			if prj == nil {
				p, err := tx.Project(v.Project)
				if err != nil {
					return fmt.Errorf("read project %s: %w", v.Project, err)
				}
				prj = &p
			}
			d := &iso.Denials[k]
			inForce := prj.Config.AgentNetwork
			if d.Phase == netpolicy.PhaseSetup {
				inForce = prj.Config.SetupNetwork
			}
			d.Allow = h.cfg.Network.WidenCommand(v.Project, d.Phase, inForce, d.Host)
		}
	}
	return nil
}
