package agent

import (
	"drover/internal/rules"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// NormalizeBaseURL is the one place a base URL a person gave drover (an
// account's --base-url, or a vendor variable such as OPENAI_BASE_URL in the
// runner's environment) becomes the API root the adapters build on: the
// forms the vendors' own SDKs document are all accepted, with or without a
// trailing slash and with or without the API version the CLI adds itself
// (e.Versions: "/v1" for OpenAI's and Anthropic's SDKs, "/v1beta" for
// Gemini's). "http://h:11434/v1/" and "http://h:11434" are the same root.
// It checks what every endpoint needs: http or https, a host, no
// credentials, query or fragment, and plain http only to a loopback
// address (where nothing on the wire can read the key). Errors name the
// host at most: a pasted URL may carry a secret. Empty stays empty.
func (e Endpoint) NormalizeBaseURL(raw string) (string, error) {
	checked, err := rules.CheckBaseURL(raw)
	if err != nil || checked == "" {
		return "", err
	}
	u, err := url.Parse(checked)
	if err != nil {
		return "", errors.New("base URL: not a URL")
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	p := strings.TrimRight(u.Path, "/")
	for _, v := range e.Versions {
		if cut, ok := strings.CutSuffix(p, "/"+strings.Trim(v, "/")); ok {
			p = strings.TrimRight(cut, "/")
			break
		}
	}
	u.Path, u.RawPath = p, ""
	return u.String(), nil
}

// ResolveBaseURL is the API root an account of this CLI talks to, and
// where it came from: the account's own base URL, else the operator's
// (the runner's UpstreamEnv), else the vendor's. Both given ones pass
// through NormalizeBaseURL.
func (e Endpoint) ResolveBaseURL(account, operator string) (root, from string, err error) {
	if account != "" {
		root, err = e.NormalizeBaseURL(account)
		return root, "account", err
	}
	if operator != "" {
		root, err = e.NormalizeBaseURL(operator)
		if err != nil {
			err = fmt.Errorf("%s: %w", e.UpstreamEnv, err)
		}
		return root, e.UpstreamEnv, err
	}
	return e.Upstream, "vendor", nil
}
