package hub

import (
	"log/slog"
	"time"

	"drover/internal/protocol"
)

// Config is the hub's configuration. Zero values take the defaults below.
type Config struct {
	Listen       string        // address for Run, default 127.0.0.1:7700
	DataDir      string        // holds drover.db and admin.token
	Lease        time.Duration // how long a runner may be gone before its attempts expire (60s)
	Heartbeat    time.Duration // runner heartbeat interval (10s); silence for 3 intervals closes a connection
	OfferTimeout time.Duration // how long an offer may stay unaccepted on a connected runner (30s)
	LogFlush     time.Duration // runner log batching interval (1s)
	LogBatch     int           // runner log batching size (256 KiB)
	LogChunk     int           // largest log chunk (1 MiB)
	LogCap       int64         // per-attempt log cap (64 MiB)
	Sweep        time.Duration // slow safety sweep (30s)
	Logger       *slog.Logger
}

func (c *Config) defaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:7700"
	}
	if c.Lease <= 0 {
		c.Lease = 60 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 10 * time.Second
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
	if c.Sweep <= 0 {
		c.Sweep = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
