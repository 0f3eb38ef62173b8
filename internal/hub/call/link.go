package call

import (
	"fmt"

	"drover/internal/protocol"
)

// Link is a connected runner as the core sees it: the protocol's pushes,
// the welcome before any of them, and an end. The runner gateway
// implements it over a WebSocket; no call blocks on the peer.
type Link interface {
	protocol.Runner
	Welcome(w protocol.Welcome)
	// Close ends the connection with a close code (protocol.Close* or
	// the standard ones below) and a reason the runner reads.
	Close(code int, reason string)
}

// Standard WebSocket close codes the core ends connections with.
const (
	CloseGoingAway     = 1001                        // the hub or the connection is going away
	CloseTryAgainLater = protocol.CloseTryAgainLater // a passing failure: reconnect
)

// Closed refuses a runner's connection at its hello with a close code;
// the gateway ends the connection with it.
type Closed struct {
	Code   int
	Reason string
}

func (e Closed) Error() string { return fmt.Sprintf("close %d: %s", e.Code, e.Reason) }
