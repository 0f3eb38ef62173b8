package runner

import (
	"net"
	"net/http"
	"time"

	"drover/internal/protocol"
)

// hubClient is the HTTP client a runner connection is dialed with: its
// TCP connection carries the runner's keepalive and, on Linux, a user
// timeout (hubDialer), so that a hub whose host or network vanished is
// noticed by the kernel rather than by pings the hub must wake up for.
func hubClient(heartbeat time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         hubDialer(heartbeat).DialContext,
		TLSHandshakeTimeout: dialTimeout,
	}}
}

// hubDialer dials with the runner connection's TCP keepalive
// (protocol.KeepAlive) and a user timeout of three heartbeats: a
// heartbeat the hub's kernel does not acknowledge within that ends the
// connection.
func hubDialer(heartbeat time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: dialTimeout, KeepAliveConfig: protocol.KeepAlive(heartbeat), Control: userTimeout(3 * heartbeat)}
}
