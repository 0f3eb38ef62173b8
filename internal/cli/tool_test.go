package cli

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"drover/internal/tools"
)

// toolBackend is an attempt's tools as a test sees them: what was asked
// and delivered, and the job's questions.
type toolBackend struct {
	mu        sync.Mutex
	questions []tools.QuestionRecord
	asked     []tools.Question
	delivered string
	widened   [][]string
}

func (b *toolBackend) SparseAdd(_ context.Context, paths []string) (tools.SparseResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.widened = append(b.widened, paths)
	return tools.SparseResult{Added: paths, Cone: append([]string{"lib"}, paths...)}, nil
}

func (b *toolBackend) Ask(_ context.Context, q tools.Question) (tools.AskResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, q)
	return tools.AskResult{QuestionID: "q-1"}, nil
}

func (b *toolBackend) Checkpoint(context.Context, string) (tools.CheckpointResult, error) {
	return tools.CheckpointResult{Head: "abc"}, nil
}

func (b *toolBackend) Deliver(_ context.Context, summary string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.delivered = summary
	return nil
}

func (b *toolBackend) Context(context.Context) (tools.JobContext, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return tools.JobContext{JobID: "j-1", Attempt: 1, Questions: b.questions}, nil
}

// toolServer serves b's tools with a token and returns the MCP config's path.
func toolServer(t *testing.T, b *toolBackend) (string, string) {
	t.Helper()
	token := tools.NewToken()
	srv, err := tools.NewServer(tools.New(b), token, tools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := tools.WriteMCPConfig(cfg, hs.URL+tools.Path, token); err != nil {
		t.Fatal(err)
	}
	return cfg, token
}

// A script's ask: the first time it asks and exits 3; once the job has an
// approved answer to the same question, it prints the answer and asks
// nothing. The token is read from the config file only and never printed.
func TestToolAskAsksOnceThenPrintsTheAnswer(t *testing.T) {
	b := &toolBackend{}
	cfg, token := toolServer(t, b)
	env := map[string]string{"DROVER_MCP_CONFIG": cfg}
	r := runCLI(t, env, "", "tool", "ask", "Add a changelog?", "--choice", "yes", "--choice", "no")
	if r.code != exitAsked || r.stdout != "" || !strings.Contains(r.stderr, `asked "Add a changelog?"`) {
		t.Fatalf("first ask: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if len(b.asked) != 1 || b.asked[0].Text != "Add a changelog?" || strings.Join(b.asked[0].Choices, ",") != "yes,no" {
		t.Fatalf("asked %+v", b.asked)
	}
	// The resumed attempt has a server of its own.
	b.questions = []tools.QuestionRecord{
		{ID: "q-0", Question: "Another question?", Answer: &tools.Answer{Text: "no", Approved: true}},
		{ID: "q-1", Question: "Add a changelog?", Answer: &tools.Answer{Text: "yes\nplease", Approved: true}},
	}
	cfg, token2 := toolServer(t, b)
	env["DROVER_MCP_CONFIG"] = cfg
	r = runCLI(t, env, "", "tool", "ask", "Add a changelog?", "--choice", "yes", "--choice", "no")
	if r.code != 0 || r.stdout != "yes\nplease\n" || len(b.asked) != 1 {
		t.Fatalf("resumed ask: %d %q %q, asked %d times", r.code, r.stdout, r.stderr, len(b.asked))
	}
	r = runCLI(t, env, "", "tool", "deliver", "all done")
	if r.code != 0 || b.delivered != "all done" {
		t.Fatalf("deliver: %d %q %q, delivered %q", r.code, r.stdout, r.stderr, b.delivered)
	}
	r = runCLI(t, env, "", "tool", "context")
	if r.code != 0 || !strings.Contains(r.stdout, `"job_id": "j-1"`) {
		t.Fatalf("context: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, token) || strings.Contains(r.stdout+r.stderr, token2) {
		t.Fatal("the token was printed")
	}
}

// --expires-in reaches the ask tool in whole seconds; anything else is a
// usage error that asks nothing.
func TestToolAskExpiresIn(t *testing.T) {
	b := &toolBackend{}
	cfg, _ := toolServer(t, b)
	env := map[string]string{"DROVER_MCP_CONFIG": cfg}
	for _, bad := range []string{"1500ms", "-1s", "soon"} {
		if r := runCLI(t, env, "", "tool", "ask", "Quick?", "--expires-in", bad); r.code != 2 {
			t.Errorf("--expires-in %s: %d %q", bad, r.code, r.stderr)
		}
	}
	if len(b.asked) != 0 {
		t.Fatalf("a bad --expires-in asked %+v", b.asked)
	}
	r := runCLI(t, env, "", "tool", "ask", "Quick?", "--expires-in", "2m")
	if r.code != exitAsked || len(b.asked) != 1 || b.asked[0].ExpiresInSeconds != 120 {
		t.Fatalf("ask --expires-in 2m: %d %q, asked %+v", r.code, r.stderr, b.asked)
	}
}

func TestToolOutsideAJobSaysSo(t *testing.T) {
	r := runCLI(t, nil, "", "tool", "deliver", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "inside a job submitted with --tools") {
		t.Fatalf("%d %q", r.code, r.stderr)
	}
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, map[string]string{"DROVER_MCP_CONFIG": cfg}, "", "tool", "deliver", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "names no drover server") {
		t.Fatalf("%d %q", r.code, r.stderr)
	}
}

// `drover tool sparse add` hands its folders to the sparse_add tool and
// says what the checkout holds now; without a folder it is a usage error.
func TestToolSparseAdd(t *testing.T) {
	b := &toolBackend{}
	cfg, _ := toolServer(t, b)
	env := map[string]string{"DROVER_MCP_CONFIG": cfg}
	r := runCLI(t, env, "", "tool", "sparse", "add", "other/dir", "more")
	if r.code != 0 || !strings.Contains(r.stderr, "Added other/dir, more") || !strings.Contains(r.stderr, "lib, other/dir, more") {
		t.Fatalf("sparse add: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, env, "", "tool", "sparse", "add")
	if r.code != 2 || !strings.Contains(r.stderr, "PATH") {
		t.Fatalf("sparse add without a folder: %d %q", r.code, r.stderr)
	}
	if len(b.widened) != 1 || strings.Join(b.widened[0], ",") != "other/dir,more" {
		t.Fatalf("widened %v", b.widened)
	}
}
