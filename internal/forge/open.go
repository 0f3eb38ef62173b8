package forge

import (
	"errors"
	"fmt"
	"io"
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

// Open is the Client of the connection, which is also Threads and Hooks (each forge's client
// is, checked as it compiles). httpClient may be nil for one with a minute's timeout per call.
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

// errReplyTooLarge is an answer over maxReply bytes, which boundReplies stops reading.
var errReplyTooLarge = fmt.Errorf("an answer over %d bytes", maxReply)

// boundReplies stops reading an answer at maxReply bytes: the API clients (go-github,
// GitLab's) read bodies whole.
type boundReplies struct{ next http.RoundTripper }

func (b boundReplies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := orDefault(b.next).RoundTrip(req)
	if err == nil {
		resp.Body = &boundBody{ReadCloser: resp.Body}
	}
	return resp, err
}

type boundBody struct {
	io.ReadCloser
	read int64
}

func (b *boundBody) Read(p []byte) (int, error) {
	if b.read > maxReply {
		return 0, errReplyTooLarge
	}
	// At most one byte past the bound, which tells a longer answer from one of maxReply
	// bytes, and which the reader never sees.
	p = p[:min(int64(len(p)), maxReply+1-b.read)]
	n, err := b.ReadCloser.Read(p)
	if b.read += int64(n); b.read > maxReply {
		return n - 1, errReplyTooLarge
	}
	return n, err
}

func orDefault(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		return http.DefaultTransport
	}
	return rt
}
