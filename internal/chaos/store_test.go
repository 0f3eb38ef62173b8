package chaos

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/hub"
	"drover/internal/job"
	"drover/internal/testkit"
)

// TestCheckerReadsEitherEngine: the checker reads the facts of a hub on
// SQLite and of one on Postgres (--db) through the same store interface.
func TestCheckerReadsEitherEngine(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "hub")
			var db string
			if engine == "postgres" {
				db = testkit.StartPostgres(t)
			}
			h, err := hub.Open(ctx, hub.Config{DataDir: dir, Database: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h.Handler())
			tok, err := os.ReadFile(h.AdminTokenPath())
			if err != nil {
				t.Fatal(err)
			}
			c, err := client.New(srv.URL, strings.TrimSpace(string(tok)))
			if err != nil {
				t.Fatal(err)
			}
			argv := []string{"sh", "-c", "echo " + engine}
			v, _, err := c.Submit(ctx, apitypes.SubmitRequest{Agent: "exec", Args: argv, Key: "k-" + engine})
			if err != nil {
				t.Fatal(err)
			}
			srv.Close()
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}

			camp := &campaign{hubs: []*hubProc{{dir: dir, db: db}}}
			f, err := camp.readFacts(ctx)
			if err != nil {
				t.Fatalf("read the facts of a hub on %s: %v", engine, err)
			}
			if len(f.jobs) != 1 || f.jobs[0].ID != v.ID || f.jobs[0].State != job.Queued || !slices.Equal(f.jobs[0].Args, argv) || f.jobs[0].Key != "k-"+engine {
				t.Fatalf("facts of a hub on %s: jobs %+v; want the one job submitted, %s", engine, f.jobs, v.ID)
			}
		})
	}
}
