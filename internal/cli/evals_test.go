package cli

import (
	"os"
	"path/filepath"
	"testing"

	"drover/internal/apitypes"
)

// An instance's repo is a local checkout when it names a folder beside the
// dataset or is no project's name; otherwise it is a hub project.
func TestLocalRepo(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "calc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for repo, want := range map[string]bool{
		"calc": true, "./calc": true, "repos/add": true, "/abs/path": true, "../up": true, "django/django": true,
		"web": false, "my-project.x": false,
	} {
		if got := localRepo(dir, repo); got != want {
			t.Errorf("localRepo(%q) = %v, want %v", repo, got, want)
		}
	}
}

// The default key is the request's: the same dataset and settings make
// the same key, any change another.
func TestEvalKeyIsTheRequests(t *testing.T) {
	req := apitypes.EvalRunRequest{Agent: "claude", Attempts: 2, Lines: []apitypes.EvalLine{{Line: 1, Refused: "x"}}}
	other := req
	other.Attempts = 3
	if evalKey(req) != evalKey(req) || evalKey(req) == evalKey(other) {
		t.Fatalf("keys %s %s %s", evalKey(req), evalKey(req), evalKey(other))
	}
}
