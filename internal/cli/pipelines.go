package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/pipeline/spec"
	"drover/internal/retry"
	"drover/internal/rules"
)

// Pipeline states (PipelineView.State); every one but running is an end.
const (
	pipelineRunning    = "running"
	pipelineDone       = "done"
	pipelineNeedsHuman = "needs_human"
	pipelineFailed     = "failed"
	pipelineCancelled  = "cancelled"
)

// Exit codes of `pipeline run --wait` for a pipeline that ended other than
// done; 1 and 2 stay drover's error and usage codes.
const (
	exitPipelineNeedsHuman = 3
	exitPipelineFailed     = 4
	exitPipelineCancelled  = 5
)

// pipelineWait is how `pipeline run --wait` polls: soon after a change,
// seldom while nothing happens.
var pipelineWait = retry.Policy{First: 250 * time.Millisecond, Max: 5 * time.Second}

func (a *app) pipelineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Run a pipeline file on the hub, show, cancel or retry a pipeline",
		Args:  noArgs,
		RunE:  showHelp,
	}
	cmd.AddCommand(a.pipelineRunCmd(), a.pipelineShowCmd(), a.pipelineCancelCmd(), a.pipelineRetryCmd())
	return cmd
}

func (a *app) pipelineRunCmd() *cobra.Command {
	var repo, project, key string
	var params []string
	var staged, wait, asJSON bool
	cmd := &cobra.Command{
		Use:   "run FILE [--repo DIR] [--project P] [--param k=v]... [--staged] [--key K] [--wait] [--json]",
		Short: "Start a pipeline file's steps on the hub and print its id",
		Long: `Start a pipeline and print its id (or, with --json, the pipeline).

FILE is read and checked here first, with the prompt files it names
(prompt_file, a path inside the repository --repo); a bad file is refused
with its file:line and nothing is pushed. Then the repository's HEAD is
pinned and pushed to the hub as 'drover run --repo' does (a checkout with
uncommitted changes to tracked files is refused), and the hub runs the steps
as jobs of yours on the project (--project, default the checkout's
directory name).

--param gives the file's params, NAME=VALUE (repeatable); one without a
default must be given. --staged runs every step but publishes nothing: the
publish step says what it would have published. --key makes the start
idempotent: the same key returns the pipeline it started the first time.

--wait follows the pipeline's events until it ends, then prints its steps and
exits 0 when it is done, 3 when it needs a person (drover pipeline retry),
4 when it failed and 5 when it was cancelled.`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			values, err := parseParams(params)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			co, err := a.checkout(ctx, repo)
			if err != nil {
				return err
			}
			req, err := readPipeline(co.Dir, args[0], values)
			if err != nil {
				return err
			}
			req.Staged, req.Key = staged, key
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			src, err := a.pinSource(ctx, c, sourceOptions{repo: co.Dir, project: project})
			if err != nil {
				return err
			}
			req.Project, req.Base = src.Project, src.Base
			v, started, err := c.RunPipeline(ctx, req)
			if err != nil {
				return err
			}
			if !started {
				fprintf(a.env.Stderr, "key %q was used before: pipeline %s (%s)\n", key, v.ID, v.State)
			}
			if wait {
				return a.waitPipeline(ctx, c, v.ID, asJSON)
			}
			if asJSON {
				return printJSON(a.env.Stdout, v)
			}
			_, err = fprintf(a.env.Stdout, "%s\n", v.ID)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&repo, "repo", ".", "the git checkout whose HEAD the pipeline starts at, and where its prompt files are")
	f.StringVar(&project, "project", "", "the hub project (default: the checkout's directory name)")
	f.StringArrayVar(&params, "param", nil, "a param of the file, NAME=VALUE (repeatable)")
	f.BoolVar(&staged, "staged", false, "run every step but publish nothing; the publish step says what it would publish")
	f.StringVar(&key, "key", "", "idempotency key: the same key returns the same pipeline")
	f.BoolVar(&wait, "wait", false, "follow the pipeline to its end; exit 0 done, 3 needs a person, 4 failed, 5 cancelled")
	f.BoolVar(&asJSON, "json", false, "print the pipeline as JSON")
	return cmd
}

// parseParams reads --param NAME=VALUE items; a malformed or repeated one
// is a usage error.
func parseParams(items []string) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if len(items) > spec.MaxParams {
		return nil, usagef("%d params; the limit is %d", len(items), spec.MaxParams)
	}
	out := make(map[string]string, len(items))
	for _, it := range items {
		name, value, ok := strings.Cut(it, "=")
		switch {
		case !ok:
			return nil, usagef("--param %q: want NAME=VALUE", it)
		case name == "":
			return nil, usagef("--param %q: the name is empty", it)
		}
		// The hub's rule for a param's value (internal/pipeline).
		if err := rules.CheckPlainText("--param "+name, value, true); err != nil {
			return nil, usagef("%v", err)
		}
		if _, dup := out[name]; dup {
			return nil, usagef("--param %s is given twice", name)
		}
		out[name] = value
	}
	return out, nil
}

// readPipeline reads and checks the pipeline file at path (relative to the
// current directory) and the prompt files it names (relative to the
// repository root), and makes the request that sends them; the params must
// be the file's and give each one that has no default. Nothing is sent yet.
func readPipeline(root, path string, params map[string]string) (apitypes.PipelineRunRequest, error) {
	data, err := readSpecFile(os.Stat, os.Open, path)
	if err != nil {
		return apitypes.PipelineRunRequest{}, fmt.Errorf("read pipeline file: %w", err)
	}
	req := apitypes.PipelineRunRequest{File: pipelineName(root, path), Source: string(data),
		Files: map[string]string{}, Params: params}
	if !utf8.Valid(data) {
		return req, fmt.Errorf("%s is not UTF-8 text", path)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return req, fmt.Errorf("open the repository: %w", err)
	}
	defer r.Close()
	pl, err := spec.Parse(req.File, data, func(p string) ([]byte, error) {
		// os.Root refuses what leads out of the repository, by .. or by a
		// symlink; the context-file rule refuses .git and secrets.
		data, err := readSpecFile(r.Stat, r.Open, p)
		if err != nil {
			return nil, err
		}
		if err := rules.CheckContextFile(p, data); err != nil {
			return nil, err
		}
		if !utf8.Valid(data) {
			return nil, errors.New("not UTF-8 text")
		}
		req.Files[p] = string(data)
		return data, nil
	})
	if err != nil {
		return req, err
	}
	if len(req.Files) == 0 {
		req.Files = nil
	}
	if _, err := pl.Bind(params); err != nil {
		return req, usagef("%v", err)
	}
	if b, err := json.Marshal(req); err == nil && len(b) > apitypes.MaxPipelineRequest {
		return req, fmt.Errorf("%s and its prompt files are %d bytes; the hub takes %d", req.File, len(b), apitypes.MaxPipelineRequest)
	}
	return req, nil
}

// readSpecFile reads a pipeline or prompt file through stat and open (the
// file system's or a directory's): a regular file, looked at before it is
// opened (a FIFO would block the open), of at most spec.MaxFile bytes.
func readSpecFile(stat func(string) (fs.FileInfo, error), open func(string) (*os.File, error), path string) ([]byte, error) {
	st, err := stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	return readOpened(f, st, spec.MaxFile)
}

// pipelineName names the file for the hub's messages: its path in the
// repository, else its base name (no local path leaves the machine).
func pipelineName(root, path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		if rel, err := filepath.Rel(root, abs); err == nil && filepath.IsLocal(rel) {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.Base(path)
}

// waitPipeline prints a pipeline's events as they come until it ends, then
// the pipeline, and exits with the code its end has.
func (a *app) waitPipeline(ctx context.Context, c *client.Client, id string, asJSON bool) error {
	ctx, stop := a.interruptContext(ctx)
	defer stop()
	v, err := a.followPipeline(ctx, c, id)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped waiting; pipeline %s goes on (drover pipeline cancel %s)", id, id)
		}
		return err
	}
	if asJSON {
		err = printJSON(a.env.Stdout, v)
	} else {
		err = printPipeline(a.env.Stdout, v, time.Now())
	}
	if err != nil {
		return err
	}
	if code := pipelineExitCode(v.State); code != 0 {
		return exitCode(code)
	}
	return nil
}

// followPipeline polls the pipeline and its events, printing each new one
// on stderr, until the pipeline is no longer running.
func (a *app) followPipeline(ctx context.Context, c *client.Client, id string) (apitypes.PipelineView, error) {
	var after int64
	for n := 0; ; n++ {
		// The view first: the events read after it hold all that led to it.
		v, err := c.Pipeline(ctx, id)
		if err != nil {
			return v, err
		}
		evs, err := c.PipelineEvents(ctx, id, after)
		if err != nil {
			return v, err
		}
		for _, e := range evs.Events {
			after = e.Seq
			printPipelineEvent(a.env.Stderr, e)
			n = 0
		}
		if v.State != pipelineRunning {
			return v, nil
		}
		if err := retry.Sleep(ctx, pipelineWait.Delay(n)); err != nil {
			return v, err
		}
	}
}

func printPipelineEvent(w io.Writer, e apitypes.PipelineEventView) {
	step := ""
	if e.Step != "" {
		step = " " + e.Step
	}
	fprintf(w, "%s %s%s: %s\n", e.At.Local().Format("15:04:05"), e.Kind, step, e.Message)
}

// pipelineExitCode is what `pipeline run --wait` exits with for a pipeline
// that ended.
func pipelineExitCode(state string) int {
	switch state {
	case pipelineDone:
		return 0
	case pipelineNeedsHuman:
		return exitPipelineNeedsHuman
	case pipelineCancelled:
		return exitPipelineCancelled
	}
	return exitPipelineFailed
}

func (a *app) pipelinesCmd() *cobra.Command {
	var limit int
	return withLimit(answerCmd(a, &cobra.Command{
		Use:   "pipelines [--limit N] [--json]",
		Short: "List pipelines, newest first",
		Args:  noArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) (apitypes.PipelineList, error) {
		return c.Pipelines(ctx, limit)
	}, func(w io.Writer, l apitypes.PipelineList) error { return printPipelines(w, l.Pipelines, time.Now()) }), &limit, "pipelines")
}

// withLimit gives a list command --limit (50 by default; 0 the hub's
// default), refusing a negative one before it asks the hub.
func withLimit(cmd *cobra.Command, limit *int, what string) *cobra.Command {
	cmd.Flags().IntVar(limit, "limit", 50, "at most this many "+what+" (0: the hub's default)")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if *limit < 0 {
			return usagef("--limit must not be negative")
		}
		return nil
	}
	return cmd
}

func (a *app) pipelineShowCmd() *cobra.Command {
	return answerCmd(a, &cobra.Command{
		Use:   "show ID [--json]",
		Short: "Show a pipeline's steps in the file's order, their runs and what they cost",
		Args:  exactArgs("ID"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.PipelineView, error) {
		return c.Pipeline(ctx, args[0])
	}, func(w io.Writer, v apitypes.PipelineView) error { return printPipeline(w, v, time.Now()) })
}

func (a *app) pipelineCancelCmd() *cobra.Command {
	return answerCmd(a, &cobra.Command{
		Use:   "cancel ID [--json]",
		Short: "Cancel a pipeline and its steps' jobs",
		Args:  exactArgs("ID"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.PipelineView, error) {
		return c.CancelPipeline(ctx, args[0])
	}, printPipelineState)
}

func (a *app) pipelineRetryCmd() *cobra.Command {
	return answerCmd(a, &cobra.Command{
		Use:   "retry ID STEP [--json]",
		Short: "Start a step again: a failed or unknown job, or one more round of a loop that stopped for a person",
		Args:  exactArgs("ID", "STEP"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.PipelineView, error) {
		return c.RetryPipeline(ctx, args[0], args[1])
	}, printPipelineState)
}

func printPipelineState(w io.Writer, v apitypes.PipelineView) error {
	_, err := fprintf(w, "pipeline %s %s\n", v.ID, v.State)
	return err
}

func printPipelines(w io.Writer, ps []apitypes.PipelineView, now time.Time) error {
	t := newTable(w)
	fprintf(t, "ID\tNAME\tPROJECT\tSTATE\tSTEPS\tCOST\tTOKENS\tAGE\n")
	for _, p := range ps {
		fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", p.ID, p.Name, p.Project, p.State, stepsDone(p),
			cost(p.CostUSD), p.Tokens, ago(p.CreatedAt, now))
	}
	return t.Flush()
}

// stepsDone is "done/total" of a pipeline's steps, as the hub counts them.
func stepsDone(p apitypes.PipelineView) string {
	if p.StepsTotal == 0 {
		return "-"
	}
	return strconv.Itoa(p.StepsDone) + "/" + strconv.Itoa(p.StepsTotal)
}

func cost(usd float64) string { return fmt.Sprintf("$%.4f", usd) }

// shortCommit is a commit id cut to what a person reads.
func shortCommit(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// printPipeline prints a pipeline as a tree: each step in the file's order
// with its state, rounds and cost, under it its runs and, for a publish
// step, its publication.
func printPipeline(w io.Writer, v apitypes.PipelineView, now time.Time) error {
	staged := ""
	if v.Staged {
		staged = " (staged: publishes nothing)"
	}
	fprintf(w, "pipeline %s %s: %s%s\n", v.ID, v.Name, v.State, staged)
	fprintf(w, "  project %s at %s, by %s, started %s ago\n", v.Project, shortCommit(v.Base), v.Requester, ago(v.CreatedAt, now))
	if v.Reason != "" {
		fprintf(w, "  reason: %s\n", v.Reason)
	}
	if v.Result != "" {
		fprintf(w, "  result: %s\n", v.Result)
	}
	for _, s := range v.Steps {
		rounds := ""
		if s.MaxRounds > 0 {
			rounds = fmt.Sprintf(", round %d/%d", s.Rounds, s.MaxRounds)
		}
		fprintf(w, "%s [%s] %s%s, %s, %d tokens\n", s.ID, s.Kind, s.State, rounds, cost(s.CostUSD), s.Tokens)
		if s.Reason != "" {
			fprintf(w, "  reason: %s\n", s.Reason)
		}
		for _, r := range s.Runs {
			printPipelineRun(w, r)
		}
		// A publish step that published nothing (no forge mapped) says
		// so in its reason.
		if p := s.Publication; p != nil && (p.Staged || s.State != "skipped") {
			printStepPublication(w, *p)
		}
	}
	_, err := fprintf(w, "in all: %s, %d tokens\n", cost(v.CostUSD), v.Tokens)
	return err
}

func printPipelineRun(w io.Writer, r apitypes.PipelineRunView) {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("job %s %s, %d attempt(s)", dash(r.Job), dash(r.JobState), r.Attempts))
	if r.Replayed {
		b.WriteString(", replayed")
	}
	if r.Commit != "" {
		b.WriteString(", commit " + shortCommit(r.Commit))
	}
	item := ""
	if r.ItemValue != "" {
		item = " item " + r.ItemValue
	}
	fprintf(w, "  - %s%s: %s %s\n", r.Key, item, r.State, b.String())
	if r.Reason != "" {
		fprintf(w, "    reason: %s\n", r.Reason)
	}
}

// printStepPublication says what a publish step published or, staged,
// would have.
func printStepPublication(w io.Writer, p apitypes.PipelineStaged) {
	where := p.Mode
	if p.Branch != "" {
		where += " to branch " + p.Branch
	}
	if where == "" {
		where = "the project's default way"
	}
	switch {
	case p.Staged:
		fprintf(w, "  would publish %s (%s)\n", shortCommit(p.Commit), where)
	case p.Done != nil:
		d := p.Done
		fprintf(w, "  published %s: %s %s\n", shortCommit(p.Commit), d.State, dash(d.URL))
		if d.Code != "" || d.Reason != "" {
			fprintf(w, "    %s: %s\n", dash(d.Code), dash(d.Reason))
		}
	default:
		fprintf(w, "  publishing %s (%s) by job %s\n", shortCommit(p.Commit), where, dash(p.Job))
	}
}
