package forge

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Conn is a forge connection as the hub keeps it: which forge, where, and its credential (a
// token, or a GitHub App's id and private key). Token and PrivateKey are secrets.
type Conn struct {
	Kind       string
	URL        string // the forge's root: https://github.com, https://gitea.example.com, ...
	Token      string
	AppID      int64
	PrivateKey []byte // PEM
}

// Validate checks the kind, the URL and that exactly one credential fits the kind: a GitHub App
// (id and private key) only on GitHub.
func (c Conn) Validate() error {
	if !slices.Contains(Kinds(), c.Kind) {
		return fmt.Errorf("forge kind %q: want one of %s", clip(c.Kind), strings.Join(Kinds(), ", "))
	}
	app := c.AppID != 0 || len(c.PrivateKey) > 0
	switch {
	case strings.TrimSpace(c.URL) == "":
		return errors.New("forge: a URL is required")
	case app && c.Token != "":
		return errors.New("forge: give a token or a GitHub App, not both")
	case app && c.Kind != KindGitHub:
		return fmt.Errorf("forge: a GitHub App is a credential of GitHub only, not of %s; give a token", c.Kind)
	case app && (c.AppID <= 0 || len(c.PrivateKey) == 0):
		return errors.New("forge: a GitHub App needs both its id and its private key")
	case !app && c.Token == "":
		return errors.New("forge: a token (or, on GitHub, an App's id and private key) is required")
	}
	return nil
}

// checkToken refuses a token that is missing or could break out of its header. The token is
// never quoted: an error must not carry it, even a wrong one.
func checkToken(forge, token string) error {
	if token == "" {
		return fmt.Errorf("forge: a %s token is required", forge)
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("forge: the %s token holds a space or a character that is not printable ASCII", forge)
		}
	}
	return nil
}

// Open is the Client of the connection. httpClient may be nil for one with a minute's timeout
// per call.
func Open(c Conn, httpClient *http.Client) (Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	switch c.Kind {
	case KindGitea:
		return NewGitea(c.URL, c.Token, httpClient)
	case KindGitHub:
		return newGitHub(c, httpClient)
	default:
		return newGitLab(c, httpClient)
	}
}
