package rules

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// CheckBaseURL is what every API root a person gives drover must be (an
// account's --base-url, a vendor variable in the runner's environment):
// http or https, a host, no credentials, query or fragment, and plain http
// only to a loopback address (where nothing on the wire can read the key).
// It answers the URL without a trailing slash. Errors name the host at
// most: a pasted URL may carry a secret. Empty stays empty.
func CheckBaseURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("base URL: not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("base URL: want http:// or https://")
	case u.Host == "" || u.Hostname() == "":
		return "", errors.New("base URL: no host")
	case u.User != nil:
		return "", errors.New("base URL: must not hold credentials (user:password@); give the key with the account instead")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", errors.New("base URL: no query or fragment")
	case u.Scheme == "http" && !loopback(u.Hostname()):
		return "", fmt.Errorf("base URL: plain http only to a loopback address, not %s; use https", u.Hostname())
	}
	return strings.TrimRight(u.String(), "/"), nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
