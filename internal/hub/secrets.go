package hub

import (
	"context"
	"errors"
	"net"
	"net/url"
	"regexp"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/netpolicy"
	"drover/internal/protocol"
	"drover/internal/sandbox/egress"
	"drover/internal/store"
)

// Project secrets: credentials a project's owner sets for its setup
// phase. The hub keeps them in its database (0600) and sends them only in
// offers to runners that may receive them (runnerAccess.mayReceive); no
// API answer, event, log line or error ever holds a value.

var headerRE = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// secretCredential is the setup credential a project secret becomes.
func secretCredential(s store.ProjectSecret) protocol.SetupCredential {
	env := protocol.SecretEnv(s.Name)
	return protocol.SetupCredential{Name: "secret " + s.Name, Upstream: s.Upstream, Header: s.Header, Prefix: s.Prefix,
		Key: s.Value, KeyEnv: env, BaseURLEnv: env + "_URL", Secret: true}
}

func secretView(n *namer, s store.ProjectSecret) apitypes.SecretView {
	env := protocol.SecretEnv(s.Name)
	return apitypes.SecretView{Name: s.Name, Upstream: s.Upstream, Header: s.Header, KeyEnv: env, BaseURLEnv: env + "_URL",
		CreatedBy: n.user(s.CreatedBy), CreatedAt: s.CreatedAt}
}

// checkSecret turns a request into the secret it sets, or says what is
// wrong with it (never quoting the value).
func checkSecret(prj, name string, req apitypes.SecretRequest) (store.ProjectSecret, error) {
	if err := protocol.CheckSecretName(name); err != nil {
		return store.ProjectSecret{}, call.BadRequest("%v", err)
	}
	s := store.ProjectSecret{Project: prj, Name: name, Upstream: strings.TrimSpace(req.Host), Header: req.Header, Prefix: req.Prefix,
		Value: req.Value}
	if s.Upstream == "" {
		return s, call.BadRequest("secret %s: name the host it is for (--host HOST[:PORT] or a base URL)", name)
	}
	if !strings.Contains(s.Upstream, "://") {
		s.Upstream = "https://" + s.Upstream
	}
	s.Upstream = strings.TrimSuffix(s.Upstream, "/")
	if s.Header == "" {
		s.Header = "Authorization"
		if s.Prefix == "" {
			s.Prefix = "Bearer "
		}
	}
	if !headerRE.MatchString(s.Header) {
		return s, call.BadRequest("secret %s: header %q is not a header name (letters, digits, '-')", name, s.Header)
	}
	if len(s.Prefix) > 64 || strings.ContainsFunc(s.Prefix, func(r rune) bool { return r < ' ' || r > '~' }) {
		return s, call.BadRequest("secret %s: the prefix is at most 64 printable ASCII characters", name)
	}
	if len(s.Value) < protocol.MinSecretLen || len(s.Value) > protocol.MaxSecretLen || strings.ContainsFunc(s.Value, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return s, call.BadRequest("secret %s: the value is %d to %d bytes without control characters or line breaks", name, protocol.MinSecretLen, protocol.MaxSecretLen)
	}
	if _, err := egress.CheckCredential(egress.FromSetup(secretCredential(s))); err != nil {
		return s, call.BadRequest("secret %s: %v", name, strings.Replace(err.Error(), `credential "secret `+name+`": `, "", 1))
	}
	return s, nil
}

// secretHost is the host:port a secret's requests go to (its upstream
// was checked by checkSecret).
func secretHost(upstream string) string {
	u, err := url.Parse(upstream)
	if err != nil {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// secretProject reads the project whose secrets p manages: its owner's or
// an admin's.
func secretProject(tx store.Tx, p call.Caller, name string) (store.Project, error) {
	prj, err := readProject(tx, name)
	if err != nil {
		return prj, err
	}
	return prj, mayConfigureProject(tx, p, prj)
}

func secretList(tx store.Tx, prj string) (apitypes.SecretList, error) {
	ss, err := tx.ProjectSecrets(prj, false)
	if err != nil {
		return apitypes.SecretList{}, err
	}
	n := newNamer(tx)
	out := apitypes.SecretList{Project: prj, Secrets: []apitypes.SecretView{}}
	for _, s := range ss {
		out.Secrets = append(out.Secrets, secretView(n, s))
	}
	return out, nil
}

// ListSecrets lists a project's secrets: names, hosts and dates, never
// values.
func (h *Hub) ListSecrets(ctx context.Context, p call.Caller, req call.SecretRequest) (apitypes.SecretList, error) {
	var out apitypes.SecretList
	err := h.store.Read(ctx, func(tx store.Tx) error {
		prj, err := secretProject(tx, p, req.Project)
		if err != nil {
			return err
		}
		out, err = secretList(tx, prj.Name)
		return err
	})
	return out, err
}

// SetSecret sets a project's secret and lists them all.
func (h *Hub) SetSecret(ctx context.Context, p call.Caller, req call.SecretRequest) (apitypes.SecretList, error) {
	var out apitypes.SecretList
	var set store.ProjectSecret
	err := h.store.Write(ctx, func(tx store.Tx) error {
		prj, err := secretProject(tx, p, req.Project)
		if err != nil {
			return err
		}
		if set, err = checkSecret(prj.Name, req.Name, req.SecretRequest); err != nil {
			return err
		}
		// A secret opens no host: the project's setup must reach it
		// through the operator's policies.
		host := secretHost(set.Upstream)
		reach, err := h.setupReach(prj)
		if err != nil {
			return err
		}
		if !reach.Allows(host) {
			return call.BadRequest("secret %s: project %s's setup network (%s) does not reach %s; %s", set.Name, prj.Name,
				netpolicy.Describe(prj.Config.SetupNetwork), host,
				h.cfg.Network.WidenCommand(prj.Name, netpolicy.PhaseSetup, prj.Config.SetupNetwork, host))
		}
		existing, err := tx.ProjectSecrets(prj.Name, false)
		if err != nil {
			return err
		}
		if len(existing) >= protocol.MaxSecrets && !containsSecret(existing, set.Name) {
			return call.BadRequest("project %s has %d secrets already, the most it may have", prj.Name, protocol.MaxSecrets)
		}
		set.CreatedBy, set.CreatedAt = p.UserID, h.now()
		if err := tx.PutProjectSecret(set); err != nil {
			return err
		}
		out, err = secretList(tx, prj.Name)
		return err
	})
	if err != nil {
		return out, err
	}
	h.kick() // what the project's jobs need of a runner may have changed
	h.log.Info("project secret set", "project", set.Project, "secret", set.Name, "upstream", set.Upstream, "by", p.Name)
	return out, nil
}

func containsSecret(ss []store.ProjectSecret, name string) bool {
	for _, s := range ss {
		if s.Name == name {
			return true
		}
	}
	return false
}

// RemoveSecret removes a project's secret and lists the others.
func (h *Hub) RemoveSecret(ctx context.Context, p call.Caller, req call.SecretRequest) (apitypes.SecretList, error) {
	name := req.Name
	var out apitypes.SecretList
	var project string
	err := h.store.Write(ctx, func(tx store.Tx) error {
		prj, err := secretProject(tx, p, req.Project)
		if err != nil {
			return err
		}
		project = prj.Name
		if err := tx.RemoveProjectSecret(prj.Name, name); errors.Is(err, store.ErrNotFound) {
			return call.NotFound("project %s has no secret %q", prj.Name, name)
		} else if err != nil {
			return err
		}
		out, err = secretList(tx, prj.Name)
		return err
	})
	if err != nil {
		return out, err
	}
	h.kick()
	h.log.Info("project secret removed", "project", project, "secret", name, "by", p.Name)
	return out, nil
}
