package hub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"drover/internal/netpolicy"
	"drover/internal/protocol"
	"drover/internal/publish"
	"drover/internal/sandbox/egress"
)

// File is the hub's config file (drover hub --config FILE), JSON:
//
//	{"network": {"allow_open": false,
//	             "policies": {"go": ["proxy.golang.org", "sum.golang.org"]}}}
//
// docs/operator.md describes it.
type File struct {
	Network netpolicy.Catalog `json:"network"`
	// Credentials are registry keys the egress proxy adds for the setup
	// phase of projects whose setup policies include the credential's
	// policy: name → credential, its key read from KeyFile.
	Credentials map[string]FileCredential `json:"credentials,omitempty"`
	// Setup is Credentials with their keys, as ReadFile read them.
	Setup []protocol.SetupCredential `json:"-"`
	// Trusted is, per credential name, the runners besides admins' that
	// the operator trusts with it (FileCredential.Runners).
	Trusted map[string][]string `json:"-"`
	// SigningKey is the path of the SSH private key (0600) that signs
	// the published commits of projects that ask for it (drover projects
	// config P --publish-sign).
	SigningKey string `json:"signing_key,omitempty"`
}

// FileCredential is one registry credential of the config file.
type FileCredential struct {
	Policy     string `json:"policy"`
	Upstream   string `json:"upstream"`
	Header     string `json:"header"`
	Prefix     string `json:"prefix,omitempty"`
	KeyFile    string `json:"key_file"`
	KeyEnv     string `json:"key_env"`
	BaseURLEnv string `json:"base_url_env"`
	// Runners are runners, besides those owned by an admin, that may
	// receive the credential: "OWNER/RUNNER" (its owner's and its name).
	Runners []string `json:"runners,omitempty"`
}

// SetupCredentials reads the credentials' keys and checks them.
func (f File) SetupCredentials() ([]protocol.SetupCredential, error) {
	var out []protocol.SetupCredential
	for _, name := range slices.Sorted(maps.Keys(f.Credentials)) {
		fc := f.Credentials[name]
		if f.Network.Policies[fc.Policy] == nil {
			return nil, fmt.Errorf("credential %q: no network policy %q to bring it", name, fc.Policy)
		}
		key, err := os.ReadFile(fc.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("credential %q: read its key: %w", name, err)
		}
		c := protocol.SetupCredential{Name: name, Policy: fc.Policy, Upstream: fc.Upstream, Header: fc.Header, Prefix: fc.Prefix,
			Key: strings.TrimSpace(string(key)), KeyEnv: fc.KeyEnv, BaseURLEnv: fc.BaseURLEnv}
		if _, err := egress.CheckCredential(egress.FromSetup(c)); err != nil {
			return nil, err
		}
		for _, rn := range fc.Runners {
			if owner, runner, ok := strings.Cut(rn, "/"); !ok || owner == "" || runner == "" || strings.Contains(runner, "/") {
				return nil, fmt.Errorf("credential %q: runner %q: want OWNER/RUNNER (the runner's owner and its name)", name, rn)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// ReadFile reads and checks the hub's config file: an unknown field, a
// malformed pattern or one that matches every host is an error that names
// it.
func ReadFile(path string) (File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("read hub config: %w", err)
	}
	var f File
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return File{}, fmt.Errorf("hub config %s: %w", path, err)
	}
	if err := f.Network.Check(); err != nil {
		return File{}, fmt.Errorf("hub config %s: %w", path, err)
	}
	if f.Setup, err = f.SetupCredentials(); err != nil {
		return File{}, fmt.Errorf("hub config %s: %w", path, err)
	}
	if f.SigningKey != "" {
		if err := publish.CheckSigningKey(f.SigningKey); err != nil {
			return File{}, fmt.Errorf("hub config %s: %w", path, err)
		}
	}
	f.Trusted = map[string][]string{}
	for name, fc := range f.Credentials {
		if len(fc.Runners) > 0 {
			f.Trusted[name] = slices.Clone(fc.Runners)
		}
	}
	return f, nil
}
