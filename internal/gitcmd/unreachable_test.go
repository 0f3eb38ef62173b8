package gitcmd

import (
	"errors"
	"fmt"
	"testing"
)

// What git 2.39 (curl) prints for each failure.
func TestUnreachable(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		want   bool
	}{
		{"fatal: unable to access 'http://h/git/p/': Failed to connect to h port 80 after 0 ms: Couldn't connect to server", true},
		{"fatal: unable to access 'http://h/git/p/': Failed to connect to h port 80: Connection refused", true},
		{"fatal: unable to access 'http://h/git/p/': The requested URL returned error: 503", true},
		{"fatal: unable to access 'http://h/git/p/': The requested URL returned error: 502", true},
		{"fatal: unable to access 'http://h/git/p/': Empty reply from server", true},
		{"fatal: unable to access 'http://h/git/p/': Recv failure: Connection reset by peer", true},
		{"fatal: unable to access 'http://h/git/p/': Connection timed out after 300001 milliseconds", true},
		{"error: RPC failed; curl 18 transfer closed with outstanding read data remaining\nfatal: early EOF", true},
		{"error: RPC failed; HTTP 504 curl 22 The requested URL returned error: 504", true},
		{"fatal: unable to access 'https://h/o/r/': Could not resolve host: h", true},
		{"fatal: unable to access 'https://h/o/r/': The requested URL returned error: 429", true},
		{"error: RPC failed; HTTP 413 curl 22 The requested URL returned error: 413\nfatal: the remote end hung up unexpectedly", false},
		{"fatal: repository 'http://h/git/p/' not found", false},
		{"fatal: unable to access 'http://h/git/p/': The requested URL returned error: 403", false},
		{"fatal: unable to access 'http://h/git/p/': The requested URL returned error: 401", false},
		{"fatal: remote error: upload-pack: not our ref 0123456789012345678901234567890123456789", false},
		{"error: inflate: data stream error (incorrect header check)\nfatal: pack has bad object at offset 12: inflate returned -3\nfatal: fetch-pack: invalid index-pack output", false},
	} {
		err := fmt.Errorf("fetch: %w", &Error{Args: []string{"fetch"}, Code: 128, Stderr: tc.stderr})
		if got := Unreachable(err); got != tc.want {
			t.Errorf("Unreachable(%q) = %v, want %v", tc.stderr, got, tc.want)
		}
	}
	if Unreachable(errors.New("connection refused")) {
		t.Error("an error that is not git's counts as unreachable")
	}
}
