package hub

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"drover/internal/forgethread"
	"drover/internal/forgework"
	"drover/internal/gitcmd"
	"drover/internal/netpolicy"
	"drover/internal/protocol"
	"drover/internal/store"
	"drover/internal/webhook"
)

// Config is the hub's configuration. Zero values take the defaults below.
type Config struct {
	Listen  string // address for Run, default 127.0.0.1:7700
	DataDir string // holds drover.db (unless Database is set), admin.token and hosted repositories
	// Database is a postgres:// URL to keep the hub's state in Postgres;
	// "" keeps it in SQLite in DataDir.
	Database     string
	Lease        time.Duration // how long a runner may be gone before its attempts expire (60s)
	Heartbeat    time.Duration // runner heartbeat interval (20s); silence for 3 intervals closes a connection
	OfferTimeout time.Duration // how long an offer may stay unaccepted on a connected runner (30s)
	LogFlush     time.Duration // runner log batching interval (1s)
	LogBatch     int           // runner log batching size (256 KiB)
	LogChunk     int           // largest log chunk (1 MiB)
	LogCap       int64         // per-attempt log cap (64 MiB)
	Sweep        time.Duration // slow safety sweep (30s)
	// Hints carries hints between the hubs on one database (nil: the
	// store's, when it has them, as Postgres does).
	Hints Hints
	// CrossSweep is how often a hub with other hubs beside it re-reads what
	// their hints would have told it (5s): a lost hint costs at most that.
	CrossSweep time.Duration
	// HubTTL is how long a hub not seen is still live, and a leader term
	// lasts unrenewed (15s); a new leader takes over within it.
	HubTTL time.Duration
	// HubHeartbeat is how often a hub records itself and renews (or tries
	// for) the leader term: HubTTL/3, and never more than that.
	HubHeartbeat time.Duration
	// TransferCap bounds one source push or result publication (64 MiB).
	TransferCap int64
	// PublicURL is the hub's URL as runners reach it, for the git URLs in
	// offers. Empty: the scheme and host the runner connected with
	// (X-Forwarded-Proto and X-Forwarded-Host honoured).
	PublicURL string
	// Git runs git for the hub's repositories (zero value: git from PATH).
	Git gitcmd.Git
	// ForgeHTTP is the client of forges' APIs; nil for one with a
	// minute's timeout per call.
	ForgeHTTP *http.Client
	// SigningKey is the path of the SSH private key (0600) that signs
	// the published commits of projects that ask (File.SigningKey).
	SigningKey string
	// Webhooks tunes outbound webhooks' sending (timeout, retries,
	// sweep); the hub sets its Store, Logger and Now.
	Webhooks webhook.Config
	// Connection timeouts of Serve's HTTP server. A request's headers must
	// arrive within ReadHeaderTimeout (10s); its body may pause at most
	// ReadTimeout between two reads (1m), however long the whole body
	// takes; a keep-alive connection idle for IdleTimeout (1m) is closed.
	// Handlers and runner WebSockets are not bounded by them.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// SessionTTL is how long a web sign-in lasts (12h).
	SessionTTL time.Duration
	// MetricsToken, when set, lets GET /metrics on the hub's address in
	// with "Authorization: Bearer MetricsToken"; without it /metrics is
	// served there to nobody (serve MetricsHandler on an address of its
	// own instead).
	MetricsToken string
	// MetricsListen, when set, is an address Serve also serves /metrics on,
	// to anyone who reaches it (a private interface, for a scraper).
	MetricsListen string
	Logger        *slog.Logger
	// Network is the operator's named network policies (the hub's config
	// file), which projects choose from; checked by Open.
	Network netpolicy.Catalog
	// Credentials are the operator's registry credentials (File.Setup):
	// each goes, in the offer, to the setup phase of jobs whose project's
	// setup policies include its policy.
	Credentials []protocol.SetupCredential
	// CredentialRunners names, per credential, the runners ("OWNER/RUNNER")
	// besides admins' that may receive it (File.Trusted).
	CredentialRunners map[string][]string

	// threadForge opens a forge connection's threads in tests, in place
	// of its client, until package forge's clients read threads.
	threadForge func(f store.Forge) (forgethread.Forge, error)
	// wrapForgework, in tests, stands between forge triggers and the
	// hub's core (a load test's forge in memory).
	wrapForgework func(forgework.Core) forgework.Core

	// IdleHeartbeat is how seldom a runner holding no attempts heartbeats
	// (6 × Heartbeat, 2 min by default; negative: as often as Heartbeat).
	// docs/reliability.md, "A runner's liveness".
	IdleHeartbeat time.Duration
}

func (c *Config) defaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:7700"
	}
	if c.Lease <= 0 {
		c.Lease = 60 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 20 * time.Second
	}
	switch {
	case c.IdleHeartbeat == 0:
		c.IdleHeartbeat = 6 * c.Heartbeat
	case c.IdleHeartbeat < c.Heartbeat:
		c.IdleHeartbeat = c.Heartbeat // offered to no runner (protocol.LivenessWindow)
	}
	if c.OfferTimeout <= 0 {
		c.OfferTimeout = 30 * time.Second
	}
	if c.LogFlush <= 0 {
		c.LogFlush = time.Second
	}
	if c.LogBatch <= 0 {
		c.LogBatch = 256 << 10
	}
	if c.LogChunk <= 0 || c.LogChunk > protocol.MaxLogChunk {
		c.LogChunk = protocol.MaxLogChunk
	}
	if c.LogCap <= 0 {
		c.LogCap = protocol.DefaultLogCap
	}
	if c.TransferCap <= 0 {
		c.TransferCap = protocol.DefaultTransferCap
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.SessionTTL <= 0 {
		c.SessionTTL = 12 * time.Hour
	}
	if c.Sweep <= 0 {
		c.Sweep = 30 * time.Second
	}
	if c.CrossSweep <= 0 {
		c.CrossSweep = 5 * time.Second
	}
	if c.HubTTL <= 0 {
		c.HubTTL = 15 * time.Second
	}
	if c.HubHeartbeat <= 0 || c.HubHeartbeat > c.HubTTL/3 {
		c.HubHeartbeat = c.HubTTL / 3 // renewed well inside the trust window
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = time.Minute
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
