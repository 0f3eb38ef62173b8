package gitcmd

import (
	"errors"
	"regexp"
	"strings"
)

// unreachable is what git (through curl) says when a remote was not reached
// or stopped answering mid-transfer: refused, reset, timed out, cut, or a
// 5xx of the server or a proxy before it, a name not resolved, a rate
// limit (429). A refusal (404, 401/403, a
// missing commit) or a damaged pack says none of it.
var unreachable = regexp.MustCompile(`(?i)failed to connect to|couldn't connect to server|connection refused|` +
	`connection reset|timed out|empty reply from server|transfer closed with|recv failure|send failure|` +
	`was not closed cleanly|tls connection was non-properly terminated|` +
	`returned error: 5\d\d|rpc failed; http 5\d\d|could not resolve host|` +
	`returned error: 429|rpc failed; http 429`)

// Unreachable reports whether err is a git command that failed because its
// remote could not be reached, or broke off, rather than because the remote
// refused it: worth another try once the remote is back.
func Unreachable(err error) bool {
	var ge *Error
	if !errors.As(err, &ge) {
		return false
	}
	return unreachable.MatchString(strings.TrimSpace(ge.Stderr))
}
