package testkit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"drover/internal/testkit/ciskip"
)

// AgentCLI returns the directory holding the pinned vendor CLI name
// (claude, codex, opencode or gemini): $DROVER_AGENT_CLIS when set, else
// the cache directory scripts/test installs scripts/agent-clis.txt into.
// Without the CLI there the test is skipped, or with CI=true fails, since
// CI must never skip silently.
func AgentCLI(t testing.TB, name string) string {
	t.Helper()
	dir, err := agentCLIDir()
	if err == nil {
		var st os.FileInfo
		st, err = os.Stat(filepath.Join(dir, name))
		if err == nil && (st.IsDir() || st.Mode()&0o111 == 0) {
			err = fmt.Errorf("%s is not an executable", filepath.Join(dir, name))
		}
	}
	if err != nil {
		ciskip.Skipf(t, "agent CLI %s not installed (%v); run scripts/test, which installs the pinned CLIs, or set DROVER_AGENT_CLIS", name, err)
	}
	return dir
}

func agentCLIDir() (string, error) {
	if d := os.Getenv("DROVER_AGENT_CLIS"); d != "" {
		return d, nil
	}
	pins, err := AgentCLIPins()
	if err != nil {
		return "", err
	}
	cache := os.Getenv("DROVER_CLI_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "drover", "agent-clis")
	}
	return filepath.Join(cache, pinKey(pins), "node_modules", ".bin"), nil
}

// pinKey names the cache directory of a pin list: the first 12 hex digits
// of the SHA-256 of its package lines, each ending in a newline.
// scripts/test computes the same.
func pinKey(pins []string) string {
	var b bytes.Buffer
	for _, l := range pins {
		b.WriteString(l + "\n")
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])[:12]
}

// pinLines is a pin list's package@version lines, trimmed; comments and
// blank lines do not count.
func pinLines(pins []byte) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(pins))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// AgentCLIPins is scripts/agent-clis.txt's npm package@version lines: the
// agent CLIs the suite runs, which deploy/Containerfile installs too.
func AgentCLIPins() ([]string, error) {
	root, err := findModuleRoot()
	if err != nil {
		return nil, err
	}
	pins, err := os.ReadFile(filepath.Join(root, "scripts", "agent-clis.txt"))
	if err != nil {
		return nil, fmt.Errorf("reading the agent CLI pins: %w", err)
	}
	return pinLines(pins), nil
}

// findModuleRoot walks up from the working directory (a test runs in its
// package's directory) to the one holding go.mod.
func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
