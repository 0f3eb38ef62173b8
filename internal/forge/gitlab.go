package forge

import (
	"errors"
	"net/http"
)

// newGitLab is the Client of GitLab.
func newGitLab(Conn, *http.Client) (Client, error) {
	return nil, errors.New("forge: GitLab is not supported yet")
}
