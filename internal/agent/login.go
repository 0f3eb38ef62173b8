package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// ErrNotLoggedIn is wrapped by the errors of an Adapter's LoggedIn: the
// account's vendor login is missing or has expired.
var ErrNotLoggedIn = errors.New("not logged in")

// LoginFile checks a CLI's login file (JSON, in the account's config
// directory) without the network: it must exist and hold a non-empty
// string at one of the dotted paths in tokens ("tokens.refresh_token"). When
// expires names a number of milliseconds since the epoch and refresh
// names no token, a past expiry is an expired login. The errors wrap
// ErrNotLoggedIn and name the file, never its content.
func LoginFile(path string, now time.Time, tokens []string, expires, refresh string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: no login in %s", ErrNotLoggedIn, path)
	}
	if err != nil {
		return fmt.Errorf("read the login %s: %w", path, err)
	}
	var doc map[string]any
	if json.Unmarshal(b, &doc) != nil {
		return fmt.Errorf("%w: %s is not a login file (not JSON)", ErrNotLoggedIn, path)
	}
	found := false
	for _, p := range tokens {
		if s, _ := lookup(doc, p).(string); s != "" {
			found = true
			break
		}
	}
	if !found {
		return fmt.Errorf("%w: %s holds no token", ErrNotLoggedIn, path)
	}
	if expires != "" {
		ms, ok := lookup(doc, expires).(float64)
		tok, _ := lookup(doc, refresh).(string)
		if ok && ms > 0 && tok == "" && now.After(time.UnixMilli(int64(ms))) {
			return fmt.Errorf("%w: the login in %s expired at %s", ErrNotLoggedIn, path, time.UnixMilli(int64(ms)).UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// lookup follows a dotted path through decoded JSON objects.
func lookup(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// HasLoginFile is LoginFile for a file that is one JSON object keyed by
// provider (opencode's auth.json): some entry must be there.
func HasLoginFile(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: no login in %s", ErrNotLoggedIn, path)
	}
	if err != nil {
		return fmt.Errorf("read the login %s: %w", path, err)
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(b, &doc) != nil || len(doc) == 0 {
		return fmt.Errorf("%w: %s holds no provider's login", ErrNotLoggedIn, path)
	}
	return nil
}
