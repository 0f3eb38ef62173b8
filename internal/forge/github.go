package forge

import (
	"errors"
	"net/http"
)

// newGitHub is the Client of GitHub or GitHub Enterprise Server.
func newGitHub(Conn, *http.Client) (Client, error) {
	return nil, errors.New("forge: GitHub is not supported yet")
}
