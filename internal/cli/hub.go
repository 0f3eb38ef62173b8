//go:build !drover_runner

package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/agent/catalog"
	"drover/internal/client"
	"drover/internal/hub"
	"drover/internal/protocol"
	"drover/internal/runner"
	"drover/internal/webhook"
)

// listeningPrefix starts the line `drover hub` prints on stdout once it
// accepts connections; `drover demo` reads the address from it.
const listeningPrefix = "drover hub listening on "

// hubOptions are the flags `hub` and `up` share.
type hubOptions struct {
	listen       string
	data         string
	db           string
	lease        time.Duration
	heartbeat    time.Duration
	idleBeat     time.Duration
	offerTimeout time.Duration
	hubTTL       time.Duration
	logCap       int64
	transferCap  int64
	publicURL    string
	// webhookPrivate lets users' webhooks reach loopback and private addresses
	webhookPrivate bool
	readTimeout    time.Duration
	idleTimeout    time.Duration
	config         string
	// metricsListen serves /metrics there, to anyone who reaches it;
	// metricsTokenFile holds a token that lets /metrics in on --listen.
	metricsListen    string
	metricsTokenFile string
	sandbox          sandboxOptions // up's local runner
}

func (o *hubOptions) addFlags(cmd *cobra.Command, all bool) {
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", defaultListen, "address to listen on")
	f.StringVar(&o.data, "data", "", "data directory (default $XDG_DATA_HOME/drover or ~/.local/share/drover)")
	f.StringVar(&o.db, "db", "", "keep the hub's state in this Postgres database (postgres://USER:PASSWORD@HOST:PORT/DB); default SQLite in the data directory")
	f.StringVar(&o.config, "config", "", "the hub's config file (JSON): the operator's named network policies (see docs/operator.md)")
	if !all {
		return
	}
	f.DurationVar(&o.lease, "lease", 60*time.Second, "how long a runner may be gone before its attempts expire")
	f.DurationVar(&o.heartbeat, "heartbeat", 20*time.Second, "runner heartbeat interval; three silent intervals close a connection")
	f.DurationVar(&o.idleBeat, "idle-heartbeat", 0, "heartbeat interval of a runner holding no attempts (default 6 × --heartbeat; -1s: --heartbeat)")
	f.DurationVar(&o.offerTimeout, "offer-timeout", 30*time.Second, "how long an offer may stay unaccepted")
	f.DurationVar(&o.hubTTL, "hub-ttl", 15*time.Second, "with several hubs on one database: how long a silent hub still counts as live, and a leader term lasts unrenewed")
	f.Int64Var(&o.logCap, "log-cap", protocol.DefaultLogCap, "per-attempt log cap in bytes")
	f.Int64Var(&o.transferCap, "transfer-cap", protocol.DefaultTransferCap, "largest source push or result publication in bytes")
	f.BoolVar(&o.webhookPrivate, "webhook-private", false, "let users' webhooks post to loopback, private and link-local addresses (the hub's own host and network)")
	f.StringVar(&o.publicURL, "url", "", "the hub's URL as runners reach it, for the git URLs in offers (default: what each runner connected to)")
	f.DurationVar(&o.readTimeout, "read-timeout", time.Minute, "longest pause while a request body arrives; a slower client is cut off")
	f.DurationVar(&o.idleTimeout, "idle-timeout", time.Minute, "how long an idle keep-alive connection stays open")
	f.StringVar(&o.metricsListen, "metrics-listen", "", "serve Prometheus metrics at /metrics on this address too, without a token (keep it private)")
	f.StringVar(&o.metricsTokenFile, "metrics-token-file", "", "file holding a token that lets GET /metrics in on --listen (Authorization: Bearer TOKEN)")
}

func (a *app) hubCmd() *cobra.Command {
	var o hubOptions
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Run the hub: the API, the runner gateway and the queue",
		Long: `Run the hub until SIGINT or SIGTERM, then shut down gracefully.

On first start the hub writes an admin token to DATA/admin.token (0600) and
says where. On the same machine the CLI uses it by itself with the default
--listen and --data; elsewhere pass it with --token-file.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := a.signalContext(cmd.Context())
			defer stop()
			h, ln, _, err := a.openHub(ctx, o)
			if err != nil {
				return err
			}
			return a.serveHub(ctx, h, ln)
		},
	}
	o.addFlags(cmd, true)
	cmd.AddCommand(a.copyDBCmd())
	cmd.AddCommand(a.hubServiceCmd())
	return cmd
}

// openHub opens the hub's state and its listener and says where both are.
func (a *app) openHub(ctx context.Context, o hubOptions) (*hub.Hub, net.Listener, string, error) {
	if o.lease < 0 || o.heartbeat < 0 || o.offerTimeout < 0 || o.hubTTL < 0 || o.logCap < 0 || o.transferCap < 0 || o.readTimeout < 0 || o.idleTimeout < 0 {
		return nil, nil, "", usagef("durations, --log-cap and --transfer-cap must not be negative")
	}
	if o.publicURL != "" {
		u, err := client.NormalizeURL(o.publicURL)
		if err != nil {
			return nil, nil, "", usagef("--url: %v", err)
		}
		o.publicURL = u
	}
	data := o.data
	if data == "" {
		d, err := a.dataDir()
		if err != nil {
			return nil, nil, "", err
		}
		data = d
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, nil, "", fmt.Errorf("create data directory: %w", err)
	}
	var file hub.File
	if o.config != "" {
		f, err := hub.ReadFile(o.config)
		if err != nil {
			return nil, nil, "", usagef("--config: %v", err)
		}
		file = f
	}
	_, statErr := os.Stat(filepath.Join(data, adminTokenFile))
	first := errors.Is(statErr, fs.ErrNotExist)

	var metricsToken string
	if o.metricsTokenFile != "" {
		b, err := os.ReadFile(o.metricsTokenFile)
		if err != nil {
			return nil, nil, "", fmt.Errorf("read --metrics-token-file: %w", err)
		}
		if metricsToken = strings.TrimSpace(string(b)); metricsToken == "" {
			return nil, nil, "", usagef("--metrics-token-file %s is empty", o.metricsTokenFile)
		}
	}
	h, err := hub.Open(ctx, hub.Config{Listen: o.listen, DataDir: data, Database: o.db, Lease: o.lease, Heartbeat: o.heartbeat, IdleHeartbeat: o.idleBeat,
		OfferTimeout: o.offerTimeout, HubTTL: o.hubTTL, LogCap: o.logCap, TransferCap: o.transferCap, PublicURL: o.publicURL,
		ReadTimeout: o.readTimeout, IdleTimeout: o.idleTimeout, MetricsToken: metricsToken, MetricsListen: o.metricsListen,
		Logger: a.log, Network: file.Network, Credentials: file.Setup, CredentialRunners: file.Trusted, SigningKey: file.SigningKey,
		Webhooks: webhook.Config{AllowPrivate: o.webhookPrivate}})
	if err != nil {
		return nil, nil, "", fmt.Errorf("open hub in %s: %w", data, err)
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		h.Close()
		return nil, nil, "", fmt.Errorf("listen: %w", err)
	}
	url := "http://" + ln.Addr().String()
	fprintf(a.env.Stdout, "%s%s\n", listeningPrefix, url)
	if first {
		p := h.AdminTokenPath()
		if p == "" {
			p = filepath.Join(data, adminTokenFile)
		}
		// A new data directory on a database another hub started holds no token.
		if _, err := os.Stat(p); err == nil {
			fprintf(a.env.Stdout, "first start: the admin token is in %s (keep it secret)\n", p)
		}
	}
	return h, ln, url, nil
}

// serveHub serves until ctx ends, then closes the hub.
func (a *app) serveHub(ctx context.Context, h *hub.Hub, ln net.Listener) error {
	err := h.Serve(ctx, ln)
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

func (a *app) upCmd() *cobra.Command {
	var o hubOptions
	var slots int
	var home string
	var minFree int64
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a hub and one local runner in one process",
		Long: `Run a hub and a runner named "local" in this process, for one machine.
The runner's home defaults to $XDG_STATE_HOME/drover/local (or
~/.local/state/drover/local), apart from the home of 'drover runner'.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if slots < 1 {
				return usagef("--slots must be at least 1")
			}
			if err := o.sandbox.check(); err != nil {
				return err
			}
			if home == "" {
				h, err := a.localRunnerHome()
				if err != nil {
					return err
				}
				home = h
			}
			return a.up(cmd.Context(), o, runner.Config{Home: home, Slots: slots, MinFree: minFree})
		},
	}
	o.addFlags(cmd, false)
	cmd.Flags().IntVar(&slots, "slots", 1, "jobs the local runner runs at once")
	cmd.Flags().StringVar(&home, "home", "", "local runner home")
	addMinFreeFlag(cmd, &minFree)
	o.sandbox.addFlags(cmd)
	return cmd
}

// up runs the hub and the local runner. The runner stops first so that it
// can hand its attempts back to a hub that is still there.
func (a *app) up(ctx context.Context, o hubOptions, rc runner.Config) error {
	home, slots := rc.Home, rc.Slots
	ctx, stop := a.signalContext(ctx)
	defer stop()
	h, ln, url, err := a.openHub(ctx, o)
	if err != nil {
		return err
	}
	runCtx, stopRunner := context.WithCancel(ctx)
	defer stopRunner()
	hubCtx, stopHub := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHub()
	served := make(chan error, 1)
	go func() {
		served <- a.serveHub(hubCtx, h, ln)
		stopRunner() // a runner without its hub has nothing to do
	}()
	stopAll := func(err error) error {
		stopRunner()
		stopHub()
		return errors.Join(err, <-served)
	}

	token, err := h.EnsureLocalRunner(ctx, "local")
	if err != nil {
		return stopAll(fmt.Errorf("register the local runner: %w", err))
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return stopAll(fmt.Errorf("create runner home: %w", err))
	}
	if err := runner.SaveLogin(home, runner.Login{Hub: url, Name: "local", Token: token}); err != nil {
		return stopAll(fmt.Errorf("save the local runner's login: %w", err))
	}
	rc.Logger, rc.Sandbox = a.log, o.sandbox.policy()
	rc.Images = o.sandbox.images
	if rc.Agents, err = catalog.New(catalog.Config{}); err != nil {
		return stopAll(fmt.Errorf("start the local runner: %w", err))
	}
	r, err := runner.New(rc)
	if err != nil {
		return stopAll(fmt.Errorf("start the local runner: %w", err))
	}
	fprintf(a.env.Stdout, "runner \"local\" runs %d job(s) at a time (home %s)\n", slots, home)
	fprintf(a.env.Stdout, "submit a job from another terminal:\n  drover %srun --wait --agent exec -- echo hello\n", a.upClientFlags(o, url))
	err = r.Run(runCtx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("local runner: %w", err)
	}
	return stopAll(err)
}

// upClientFlags returns the flags a client on this machine needs to reach
// the hub `up` started; none with the defaults.
func (a *app) upClientFlags(o hubOptions, url string) string {
	def, err := a.dataDir()
	if err == nil && isDefaultLocalHub(url) && (o.data == "" || o.data == def) {
		return ""
	}
	data := o.data
	if data == "" {
		data = def
	}
	return fmt.Sprintf("--hub %s --token-file %s ", url, filepath.Join(data, adminTokenFile))
}
