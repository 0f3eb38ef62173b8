package publish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/hub/call"
	"drover/internal/rules"
	"drover/internal/store"
)

// maxSecret bounds a token or a private key.
const maxSecret = 64 << 10

// PutForge adds forge connection name, or replaces it (admins only). Its
// credential is stored in the hub's store and never shown again.
func (s *Service) PutForge(ctx context.Context, c call.Caller, name string, req apitypes.ForgeRequest) (apitypes.ForgeView, error) {
	if !c.Admin {
		return apitypes.ForgeView{}, call.Forbidden("only an admin adds forge connections")
	}
	if !rules.ValidName(name) {
		return apitypes.ForgeView{}, call.BadRequest("forge name %q: letters, digits, '-', '_' and '.', starting with a letter or digit", rules.Escape(call.Truncate(name, 80), false))
	}
	if len(req.Token) > maxSecret || len(req.PrivateKey) > maxSecret {
		return apitypes.ForgeView{}, call.BadRequest("a forge credential is at most %d bytes", maxSecret)
	}
	conn := forge.Conn{Kind: req.Kind, URL: req.URL, Token: req.Token, AppID: req.AppID, PrivateKey: []byte(req.PrivateKey)}
	// Open checks what it can without calling the forge (the URL, the
	// token's characters, the key's form); its errors never quote them.
	if _, err := forge.Open(conn, nil); err != nil {
		return apitypes.ForgeView{}, call.BadRequest("%v", err)
	}
	secret := req.Token
	if req.AppID != 0 {
		secret = req.PrivateKey
	}
	now := s.cfg.Now()
	f := store.Forge{Name: name, Kind: req.Kind, URL: req.URL, AppID: req.AppID, Secret: secret,
		CreatedBy: c.UserID, CreatedAt: now, UpdatedAt: now}
	var out store.Forge
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		if err := tx.PutForge(f); err != nil {
			return err
		}
		var err error
		out, err = tx.Forge(name)
		return err
	})
	if err != nil {
		return apitypes.ForgeView{}, fmt.Errorf("store forge %s: %w", name, err)
	}
	s.cfg.Logger.Info("forge connection set", "forge", name, "kind", req.Kind, "by", c.Name)
	return forgeView(out, nil), nil
}

// ListForges lists the forge connections, with the projects mapped to
// each that c may see; never a credential.
func (s *Service) ListForges(ctx context.Context, c call.Caller) (apitypes.ForgeList, error) {
	out := apitypes.ForgeList{Forges: []apitypes.ForgeView{}}
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		fs, err := tx.Forges(false)
		if err != nil {
			return err
		}
		mapped, err := mappedProjects(tx, c)
		if err != nil {
			return err
		}
		out.Forges = out.Forges[:0]
		for _, f := range fs {
			out.Forges = append(out.Forges, forgeView(f, mapped[f.Name]))
		}
		return nil
	})
	if err != nil {
		return apitypes.ForgeList{}, fmt.Errorf("list forges: %w", err)
	}
	return out, nil
}

// RemoveForge removes forge connection name (admins only), refused while
// a project maps to it.
func (s *Service) RemoveForge(ctx context.Context, c call.Caller, name string) (apitypes.ForgeView, error) {
	if !c.Admin {
		return apitypes.ForgeView{}, call.Forbidden("only an admin removes forge connections")
	}
	var out store.Forge
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		f, err := tx.Forge(name)
		if errors.Is(err, store.ErrNotFound) {
			return call.NotFound("no forge named %q", rules.Escape(call.Truncate(name, 80), false))
		} else if err != nil {
			return err
		}
		prjs, err := tx.Projects()
		if err != nil {
			return err
		}
		var using []string
		for _, p := range prjs {
			if p.Config.Forge == name {
				using = append(using, p.Name)
			}
		}
		if len(using) > 0 {
			return call.Conflict("forge %s is mapped by project(s) %v; map them elsewhere first (drover projects config P --forge \"\")", name, using)
		}
		out = f
		out.Secret = ""
		return tx.RemoveForge(name)
	})
	if err != nil {
		return apitypes.ForgeView{}, err
	}
	s.cfg.Logger.Info("forge connection removed", "forge", name, "by", c.Name)
	return forgeView(out, nil), nil
}

// CheckMapping is the rule of a project's forge mapping: both or neither
// of forge and repo, a forge connection that exists, a repository name by
// forge.ParseRepo's rules for the forge's kind, a publish default of pr, branch or none, and
// commits' authoring by checkAuthoring's.
// The core calls it inside the transaction that sets the project's config.
func CheckMapping(tx store.Tx, cfg store.ProjectConfig) error {
	switch {
	case cfg.Forge == "" && cfg.ForgeRepo == "":
		if cfg.Publish != "" && cfg.Publish != "none" {
			return call.BadRequest("publish %s needs a forge: map the project with --forge NAME --forge-repo OWNER/REPO", cfg.Publish)
		}
		return checkAuthoring(cfg)
	case cfg.Forge == "" || cfg.ForgeRepo == "":
		return call.BadRequest("a forge mapping needs both the forge's name and OWNER/REPO")
	}
	f, err := tx.Forge(cfg.Forge)
	if errors.Is(err, store.ErrNotFound) {
		return call.BadRequest("no forge named %q; an admin adds it (drover forges add)", rules.Escape(call.Truncate(cfg.Forge, 80), false))
	} else if err != nil {
		return err
	}
	repo, err := forge.ParseRepo(cfg.ForgeRepo)
	if err == nil {
		err = repo.CheckKind(f.Kind)
	}
	if err != nil {
		return call.BadRequest("%v", err)
	}
	if !slices.Contains([]string{"", "none", apitypes.PublishPR, apitypes.PublishBranch}, cfg.Publish) {
		return call.BadRequest("publish %q: want pr, branch or none", rules.Escape(call.Truncate(cfg.Publish, 40), false))
	}
	return checkAuthoring(cfg)
}

// mappedProjects are the projects c may see by the forge they map to.
func mappedProjects(tx store.Tx, c call.Caller) (map[string][]string, error) {
	prjs, err := tx.Projects()
	if err != nil {
		return nil, err
	}
	var mine []string
	if !c.Admin {
		if mine, err = tx.ProjectsOf(c.UserID); err != nil {
			return nil, err
		}
	}
	out := map[string][]string{}
	for _, p := range prjs {
		if p.Config.Forge != "" && (c.Admin || slices.Contains(mine, p.Name)) {
			out[p.Config.Forge] = append(out[p.Config.Forge], p.Name)
		}
	}
	return out, nil
}

func forgeView(f store.Forge, projects []string) apitypes.ForgeView {
	return apitypes.ForgeView{Name: f.Name, Kind: f.Kind, URL: f.URL, AppID: f.AppID, CreatedBy: f.CreatedBy,
		CreatedAt: f.CreatedAt, Projects: projects}
}

// Conn is what dials the forge connection the hub stores as f.
func Conn(f store.Forge) forge.Conn {
	conn := forge.Conn{Kind: f.Kind, URL: f.URL, AppID: f.AppID}
	if f.AppID != 0 {
		conn.PrivateKey = []byte(f.Secret)
	} else {
		conn.Token = f.Secret
	}
	return conn
}

// client opens forge connection name, counting its requests.
func (s *Service) client(ctx context.Context, name string) (forge.Client, error) {
	var f store.Forge
	err := s.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		f, err = tx.Forge(name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, failf(CodeNotMapped, "the project's forge %s is gone; an admin adds it again (drover forges add %s)", name, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read forge %s: %w", name, err)
	}
	cl, err := Open(f, s.cfg.HTTP)
	if err != nil {
		return nil, failf(CodeNotMapped, "forge %s: %v", name, err)
	}
	return counted{Client: cl, forge: name, m: s.cfg.Metrics}, nil
}

// Open is the client of forge connection f, with its credential (a token
// or a GitHub App's key). httpClient may be nil (forge.Open).
func Open(f store.Forge, httpClient *http.Client) (forge.Client, error) {
	return forge.Open(Conn(f), httpClient)
}

// Metrics are publishing's Prometheus metrics.
type Metrics struct {
	requests     *prometheus.CounterVec
	publications *prometheus.CounterVec
}

// NewMetrics registers publishing's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_forge_requests_total",
			Help: "Calls to forges' APIs, by forge connection, operation and outcome code (ok, or the forge error's code).",
		}, []string{"forge", "op", "code"}),
		publications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_publications_total",
			Help: "Publications of jobs' results to forges that ended, by outcome code (ok, remote_moved, forge_unauthorized, ...).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.requests, m.publications)
	return m
}

func (m *Metrics) request(forgeName, op string, err error) {
	if m == nil {
		return
	}
	code := "ok"
	if fe, ok := errors.AsType[*forge.Error](err); ok {
		code = fe.Code
	} else if err != nil {
		code = "error"
	}
	m.requests.WithLabelValues(forgeName, op, code).Inc()
}

func (m *Metrics) outcome(code string) {
	if m != nil {
		m.publications.WithLabelValues(code).Inc()
	}
}

// counted is a forge.Client whose calls are counted.
type counted struct {
	forge.Client
	forge string
	m     *Metrics
}

func (c counted) FindPR(ctx context.Context, repo forge.Repo, head, base string) (forge.PR, bool, error) {
	pr, ok, err := c.Client.FindPR(ctx, repo, head, base)
	c.m.request(c.forge, "find_pr", err)
	return pr, ok, err
}

func (c counted) CreatePR(ctx context.Context, repo forge.Repo, n forge.NewPR) (forge.PR, error) {
	pr, err := c.Client.CreatePR(ctx, repo, n)
	c.m.request(c.forge, "create_pr", err)
	return pr, err
}

func (c counted) GetPR(ctx context.Context, repo forge.Repo, number int) (forge.PR, error) {
	pr, err := c.Client.GetPR(ctx, repo, number)
	c.m.request(c.forge, "get_pr", err)
	return pr, err
}

func (c counted) FindPRByHeadSHA(ctx context.Context, repo forge.Repo, sha string) (forge.PR, bool, error) {
	pr, ok, err := c.Client.FindPRByHeadSHA(ctx, repo, sha)
	c.m.request(c.forge, "find_pr_by_head", err)
	return pr, ok, err
}

func (c counted) DefaultBranch(ctx context.Context, repo forge.Repo) (string, error) {
	b, err := c.Client.DefaultBranch(ctx, repo)
	c.m.request(c.forge, "default_branch", err)
	return b, err
}
