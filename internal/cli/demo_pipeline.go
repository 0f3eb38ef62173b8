//go:build !drover_runner

package cli

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"drover/examples/pipelines"
	"drover/internal/client"
)

// pipelineChapter runs the review-loop example on the demo's repository:
// it converges in two rounds, then runs again as replays. Its steps are
// exec steps whatever the demo's agent.
func (d *demoRun) pipelineChapter(ctx context.Context) error {
	if err := writeReviewLoop(d.repo); err != nil {
		return err
	}
	if err := demoGitQuiet(ctx, d.git, d.repo, []string{"add", pipelines.Dir}, demoCommit("the review-loop pipeline")); err != nil {
		return err
	}
	file := path.Join(pipelines.Dir, "review-loop.yaml")
	d.say("6. a pipeline, committed as %s: a builder and an adversary (two scripts, exec steps) in a review loop", file)
	d.note("the adversary rejects round 1, the builder answers its verdict, round 2 is approved, the work merges")
	run := []string{"pipeline", "run", file, "--repo", ".", "--wait"}
	if err := d.drover(ctx, run...); err != nil {
		return err
	}
	id, err := d.lastPipeline(ctx)
	if err != nil {
		return err
	}
	d.say("7. the pipeline's steps, their rounds and their jobs, as the hub keeps them")
	if err := d.drover(ctx, "pipeline", "show", id); err != nil {
		return err
	}
	d.say("8. the same file on the same commit again: every step's result is replayed, no job runs, nothing is spent")
	return d.drover(ctx, run...)
}

// writeReviewLoop writes the example's files into the repository at dir,
// where its commands look for them.
func writeReviewLoop(dir string) error {
	files := pipelines.ReviewLoop()
	names, err := fs.Glob(files, "*")
	if err != nil {
		return fmt.Errorf("list the review-loop example: %w", err)
	}
	to := filepath.Join(dir, filepath.FromSlash(pipelines.Dir))
	if err := os.MkdirAll(to, 0o755); err != nil {
		return fmt.Errorf("write the review-loop example: %w", err)
	}
	for _, name := range names {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			return fmt.Errorf("read the review-loop example: %w", err)
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o644); err != nil {
			return fmt.Errorf("write the review-loop example: %w", err)
		}
	}
	return nil
}

// lastPipeline is the id of the newest pipeline, the one `pipeline run
// --wait` just ran.
func (d *demoRun) lastPipeline(ctx context.Context) (string, error) {
	c, err := client.New(d.hub, d.token)
	if err != nil {
		return "", err
	}
	l, err := c.Pipelines(ctx, 1)
	if err != nil {
		return "", fmt.Errorf("find the demo's pipeline: %w", err)
	}
	if len(l.Pipelines) == 0 {
		return "", fmt.Errorf("the hub lists no pipeline")
	}
	return l.Pipelines[0].ID, nil
}
