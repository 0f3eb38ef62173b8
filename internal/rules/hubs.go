package rules

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// HubURL checks a hub URL and returns it without a trailing slash and with
// scheme and host in lower case, so that two spellings of one hub compare
// equal. A bare "host:port" means http.
func HubURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("hub URL is empty")
	}
	if strings.Contains(s, ",") {
		return "", fmt.Errorf("hub URL %q holds a comma: give one hub here (only `drover runner --hub` takes a list)", s)
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("hub URL %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("hub URL %q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return "", fmt.Errorf("hub URL %q has no host", s)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("hub URL %q: only scheme, host, port and path are allowed", s)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	return strings.TrimRight(u.String(), "/"), nil
}

// MaxHubs bounds a runner's list of hubs.
const MaxHubs = 64

// HubURLs checks a comma-separated list of hub URLs: the hubs of one
// deployment on one database, any of which a runner may talk to. Each is
// a HubURL; none may appear twice (after normalizing) and the list may not
// be empty.
func HubURLs(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("the hub list is empty: give one or more hub URLs, separated by commas")
	}
	parts := strings.Split(list, ",")
	if len(parts) > MaxHubs {
		return nil, fmt.Errorf("%d hubs listed; at most %d", len(parts), MaxHubs)
	}
	out := make([]string, 0, len(parts))
	seen := map[string]bool{}
	for i, p := range parts {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("hub list: entry %d is empty (a stray comma?)", i+1)
		}
		u, err := HubURL(p)
		if err != nil {
			return nil, fmt.Errorf("hub list: entry %d: %w", i+1, err)
		}
		if seen[u] {
			return nil, fmt.Errorf("hub list: %s is listed twice", u)
		}
		seen[u] = true
		out = append(out, u)
	}
	return out, nil
}
