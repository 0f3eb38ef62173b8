package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"drover/internal/client"
	"drover/internal/fsutil"
)

const (
	defaultHub     = "http://127.0.0.1:7700"
	defaultListen  = "127.0.0.1:7700"
	adminTokenFile = "admin.token" // in the hub's data directory, see hub.Open
	maxTokenLen    = 256           // what the hub accepts in a bearer header
)

// Directories, after the XDG base directory spec.

// home returns $HOME, or what the OS says when it is unset.
func (a *app) home() (string, error) {
	if h := a.env.Getenv("HOME"); h != "" {
		return h, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find home directory (set HOME): %w", err)
	}
	return h, nil
}

// xdg returns $envVar/drover/sub, or ~/fallback/drover/sub. The spec says
// to ignore a relative value.
func (a *app) xdg(envVar, fallback string, sub ...string) (string, error) {
	base := a.env.Getenv(envVar)
	if !filepath.IsAbs(base) {
		h, err := a.home()
		if err != nil {
			return "", err
		}
		base = filepath.Join(h, fallback)
	}
	return filepath.Join(append([]string{base, "drover"}, sub...)...), nil
}

// dataDir is the hub's default data directory.
func (a *app) dataDir() (string, error) { return a.xdg("XDG_DATA_HOME", ".local/share") }

// configPath is where `drover login` saves the client settings.
func (a *app) configPath() (string, error) {
	return a.xdg("XDG_CONFIG_HOME", ".config", "client.json")
}

// runnerHome is the default home of `drover runner`.
func (a *app) runnerHome() (string, error) { return a.xdg("XDG_STATE_HOME", ".local/state", "runner") }

// localRunnerHome is the home of the runner `drover up` runs, apart from
// runnerHome so that up never overwrites a real runner's login.
func (a *app) localRunnerHome() (string, error) {
	return a.xdg("XDG_STATE_HOME", ".local/state", "local")
}

// clientConfig is client.json.
type clientConfig struct {
	Hub   string `json:"hub"`
	Token string `json:"token"`
}

// loadConfig reads client.json; a missing file is an empty config.
func loadConfig(path string) (clientConfig, error) {
	var c clientConfig
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read client config: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("read client config %s: %w", path, err)
	}
	return c, nil
}

// saveConfig writes client.json readable by its owner only, through a
// temporary file so a crash never leaves half a token behind.
func saveConfig(path string, c clientConfig) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode client config: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create config directory: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("save client config: %w", err)
	}
	return nil
}

// readToken reads a token from a file, or from stdin for "-".
func (a *app) readToken(path string) (string, error) {
	var b []byte
	var err error
	switch f, ok := a.env.Stdin.(*os.File); {
	case path == "-" && ok && isTerminal(f):
		// Enter ends a token typed or pasted into a terminal.
		var line string
		line, err = bufio.NewReader(io.LimitReader(f, 4096)).ReadString('\n')
		if errors.Is(err, io.EOF) {
			err = nil // Ctrl-D: take what was typed
		}
		b = []byte(line)
	case path == "-":
		b, err = io.ReadAll(io.LimitReader(a.env.Stdin, 4096))
	default:
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	switch {
	case t == "":
		return "", fmt.Errorf("read token from %s: it is empty", nameOf(path))
	case len(t) > maxTokenLen || strings.IndexFunc(t, unicode.IsSpace) >= 0:
		return "", fmt.Errorf("read token from %s: it is not a token (one line without spaces)", nameOf(path))
	}
	return t, nil
}

func nameOf(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// settings are the hub and token a client command uses.
type settings struct {
	Hub       string
	Token     string
	TokenFrom string // where the token came from, for messages
	Saved     string // the saved login's path, when the token came from it
}

// hubURL resolves the hub URL: --hub, $DROVER_HUB, the saved login, the default.
func (a *app) hubURL(saved clientConfig) (string, error) {
	for _, s := range []string{a.hubFlag, a.env.Getenv("DROVER_HUB"), saved.Hub} {
		if s != "" {
			return client.NormalizeURL(s)
		}
	}
	return defaultHub, nil
}

// settings resolves the client settings in the order rootLong documents.
func (a *app) settings() (settings, error) {
	cfgPath, err := a.configPath()
	if err != nil {
		return settings{}, err
	}
	saved, err := loadConfig(cfgPath)
	if err != nil {
		return settings{}, err
	}
	hub, err := a.hubURL(saved)
	if err != nil {
		return settings{}, err
	}
	s := settings{Hub: hub}
	if a.tokenFile != "" {
		s.Token, err = a.readToken(a.tokenFile)
		s.TokenFrom = nameOf(a.tokenFile)
		return s, err
	}
	if t := strings.TrimSpace(a.env.Getenv("DROVER_TOKEN")); t != "" {
		s.Token, s.TokenFrom = t, "$DROVER_TOKEN"
		return s, nil
	}
	// A saved token goes only to the hub it was saved for.
	if savedHub, err := client.NormalizeURL(saved.Hub); err == nil && savedHub == hub && saved.Token != "" {
		s.Token, s.TokenFrom, s.Saved = saved.Token, cfgPath, cfgPath
		return s, nil
	}
	if isDefaultLocalHub(hub) {
		dir, err := a.dataDir()
		if err != nil {
			return s, err
		}
		p := filepath.Join(dir, adminTokenFile)
		if _, err := os.Stat(p); err == nil {
			s.Token, err = a.readToken(p)
			s.TokenFrom = p
			return s, err
		}
	}
	return s, nil
}

// isDefaultLocalHub reports whether u is the hub `drover hub` starts by default.
func isDefaultLocalHub(u string) bool {
	switch u {
	case defaultHub, "http://localhost:7700", "http://[::1]:7700":
		return true
	}
	return false
}

// client returns an API client with the resolved settings.
func (a *app) client(ctx context.Context) (*client.Client, error) {
	c, _, err := a.clientSettings(ctx)
	return c, err
}

// clientSettings returns an API client and the settings it was made with.
func (a *app) clientSettings(ctx context.Context) (*client.Client, settings, error) {
	s, err := a.settings()
	if err != nil {
		return nil, s, err
	}
	if s.Token == "" {
		// A mistyped --hub or $DROVER_HUB has no saved token either: say
		// what is wrong first.
		if c, err := client.New(s.Hub, ""); err == nil {
			if err := c.Reach(ctx); err != nil {
				return nil, s, fmt.Errorf("%w; check --hub, $DROVER_HUB or the saved login", err)
			}
		}
		return nil, s, fmt.Errorf("no token for %s: run 'drover login --hub %s', or use --token-file or $DROVER_TOKEN", s.Hub, s.Hub)
	}
	a.log.Debug("client settings", "hub", s.Hub, "token_from", s.TokenFrom)
	c, err := client.New(s.Hub, s.Token)
	return c, s, err
}
