package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/eval/dataset"
	"drover/internal/gitcmd"
	"drover/internal/retry"
	"drover/internal/rules"
)

func (a *app) evalCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Run an agent over a dataset of SWE-bench-shaped instances, graded by jobs of their own",
		Args:  noArgs,
		RunE:  showHelp,
	}
	cmd.AddCommand(a.evalRunCmd(), a.evalReportCmd(), a.evalCancelCmd(), a.evalListCmd())
	return cmd
}

func (a *app) evalRunCmd() *cobra.Command {
	var req apitypes.EvalRunRequest
	var wall time.Duration
	var wait, asJSON bool
	cmd := &cobra.Command{
		Use:   "run DATASET.jsonl --agent A [--attempts N] [--repeats R] [--max-parallel P] [--max-cost USD] [--wait]",
		Short: "Start an evaluation of an agent over a dataset and print its id",
		Long: `Start an evaluation and print its id.

Each line of DATASET.jsonl is an instance: {"instance_id", "repo",
"base_commit", "problem_statement", "test_cmd"} or, instead of or with
test_cmd, "FAIL_TO_PASS" and "PASS_TO_PASS" lists (each test a command, or
with test_cmd its argument). repo is a project on the hub, or a local
checkout (a path, relative to the dataset's folder) that is pushed as
'drover run --repo' pushes one, at base_commit.

Each instance runs --attempts times in each of --repeats repeats: an agent
job at base_commit with the problem statement as its prompt (an exec agent
runs --exec CMD with it as $1), then a grading job with no network and no
agent that runs the base's tests on the agent's result without its changes
to test files. A bad line is refused with its reason, the rest goes on.

The same dataset and settings return the evaluation they started (or give
--key); an instance never runs twice. --wait follows it to its end and
prints its report (drover eval report).`,
		Args: exactArgs("DATASET"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if req.Agent == "" {
				return usagef("an evaluation needs --agent")
			}
			req.GradeWallS = int(wall / time.Second)
			if wall != 0 && req.GradeWallS < 1 {
				return usagef("--grade-wall %s: at least one second", wall)
			}
			f, err := os.Open(args[0])
			if err != nil {
				return fmt.Errorf("read dataset: %w", err)
			}
			lines, err := dataset.Read(f)
			f.Close()
			if err != nil {
				return err
			}
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			req.Lines = a.pushInstances(ctx, c, filepath.Dir(args[0]), lines)
			if req.Key == "" {
				req.Key = evalKey(req)
			}
			// The list's name for it; a file name no one could read is left out
			// rather than refusing the run.
			if name := rules.Clip(filepath.Base(args[0]), 200); rules.CheckPlainText("dataset", name, false) == nil {
				req.Dataset = name
			}
			v, started, err := c.StartEval(ctx, req)
			if err != nil {
				return err
			}
			if !started {
				fprintf(a.env.Stderr, "this evaluation was started before: %s (%s)\n", v.ID, v.State)
			}
			for _, it := range v.Items {
				if it.State == "refused" {
					fprintf(a.env.Stderr, "line %d refused: %s\n", it.Line, it.Reason)
				}
			}
			if wait {
				return a.waitEval(ctx, c, v.ID, asJSON)
			}
			if asJSON {
				return printJSON(a.env.Stdout, v)
			}
			_, err = fprintf(a.env.Stdout, "%s\n", v.ID)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Agent, "agent", "", "the agent of every instance (claude, codex, native:ACCOUNT, exec, ...)")
	f.StringVar(&req.Exec, "exec", "", "an exec agent's command, run by sh -c with the problem statement as $1")
	f.StringVar(&req.Model, "model", "", "the model a native agent asks for")
	f.StringVar(&req.Name, "name", "", "the predictions' model_name_or_path (default: the agent and model)")
	f.IntVar(&req.Attempts, "attempts", 1, "samples of each instance in each repeat (pass@N)")
	f.IntVar(&req.Repeats, "repeats", 1, "runs of the whole dataset, for the spread between runs")
	f.IntVar(&req.MaxParallel, "max-parallel", 0, "items running at once (default 8)")
	f.Float64Var(&req.MaxCostUSD, "max-cost", 0, "stop starting items once the agents spent this many USD (0: no limit)")
	f.DurationVar(&wall, "grade-wall", 0, "each test's wall limit in grading (default 10m)")
	f.StringVar(&req.Key, "key", "", "idempotency key (default: one made of the dataset and settings)")
	f.BoolVar(&wait, "wait", false, "follow the evaluation to its end and print its report")
	f.BoolVar(&asJSON, "json", false, "print the evaluation (or with --wait its report) as JSON")
	return cmd
}

// pushInstances pushes the base commit of each instance whose repo is a
// local checkout to the hub, and names its project instead; a base the
// checkout lacks refuses the line.
func (a *app) pushInstances(ctx context.Context, c *client.Client, dir string, lines []apitypes.EvalLine) []apitypes.EvalLine {
	type pushed struct {
		project string
		err     error
	}
	done := map[string]pushed{}
	for i, l := range lines {
		if l.Instance == nil || !localRepo(dir, l.Instance.Repo) {
			continue
		}
		path := l.Instance.Repo
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		k := path + "\x00" + l.Instance.BaseCommit
		p, ok := done[k]
		if !ok {
			src, err := a.pinSource(ctx, c, sourceOptions{repo: path, ref: l.Instance.BaseCommit})
			if err == nil && src.Base != l.Instance.BaseCommit {
				err = fmt.Errorf("base_commit %s is not a commit of %s", l.Instance.BaseCommit, path)
			}
			if err == nil {
				p.project = src.Project
			}
			p.err = err
			done[k] = p
		}
		if p.err != nil {
			lines[i].Instance, lines[i].Refused = nil, rules.Clip(p.err.Error(), 500)
			continue
		}
		in := *l.Instance
		in.Repo = p.project
		lines[i].Instance = &in
	}
	return lines
}

// localRepo says whether an instance's repo is a local checkout rather
// than a project: a path that is not a project's name, or a folder that
// exists.
func localRepo(dir, repo string) bool {
	if !gitcmd.ValidProject(repo) || strings.HasPrefix(repo, ".") {
		return true
	}
	st, err := os.Stat(filepath.Join(dir, repo))
	return err == nil && st.IsDir()
}

// evalKey is the idempotency key of an evaluation's request: the same
// dataset (as pushed) and settings start one evaluation.
func evalKey(req apitypes.EvalRunRequest) string {
	b, _ := json.Marshal(req) // plain values: cannot fail
	sum := sha256.Sum256(b)
	return "eval-" + hex.EncodeToString(sum[:16])
}

// evalWait is how eval run --wait polls.
var evalWait = retry.Policy{First: 250 * time.Millisecond, Max: 5 * time.Second}

func (a *app) waitEval(ctx context.Context, c *client.Client, id string, asJSON bool) error {
	ctx, stop := a.interruptContext(ctx)
	defer stop()
	last := ""
	for n := 0; ; n++ {
		v, err := c.Eval(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("stopped waiting; evaluation %s goes on (drover eval cancel %s)", id, id)
			}
			return err
		}
		if s := countsLine(v.Counts); s != last {
			fprintf(a.env.Stderr, "%s: %s\n", id, s)
			last, n = s, 0
		}
		if v.State != "running" {
			break
		}
		if err := retry.Sleep(ctx, evalWait.Delay(n)); err != nil {
			return fmt.Errorf("stopped waiting; evaluation %s goes on (drover eval cancel %s)", id, id)
		}
	}
	r, err := c.EvalReport(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(a.env.Stdout, r)
	}
	return printEvalReport(a.env.Stdout, r)
}

func countsLine(m map[string]int) string {
	var parts []string
	for _, s := range []string{"queued", "agent", "grading", "resolved", "unresolved", "refused", "skipped"} {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[s], s))
		}
	}
	return strings.Join(parts, ", ")
}

func (a *app) evalReportCmd() *cobra.Command {
	var predictions string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "report EVAL [--predictions FILE] [--json]",
		Short: "Show an evaluation's numbers; write its predictions in SWE-bench's JSONL",
		Long: `Show an evaluation's numbers: resolved/total (each graded sample once:
instance × repeat × attempt), pass@1 and pass@N (the unbiased estimator,
N the attempts), cost and tokens per resolved sample, and the resolved
share of each repeat with its min, max and standard deviation; then each
sample's state and reason.

--predictions FILE writes each instance's first sample (repeat 1, attempt 1)
as SWE-bench predictions, one JSON object a line: instance_id,
model_name_or_path, model_patch.`,
		Args: exactArgs("EVAL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			r, err := c.EvalReport(ctx, args[0])
			if err != nil {
				return err
			}
			if predictions != "" {
				if err := writePredictions(predictions, r.Predictions); err != nil {
					return err
				}
			}
			if asJSON {
				return printJSON(a.env.Stdout, r)
			}
			return printEvalReport(a.env.Stdout, r)
		},
	}
	cmd.Flags().StringVar(&predictions, "predictions", "", "write the predictions, SWE-bench JSONL, to FILE")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func writePredictions(path string, ps []apitypes.EvalPrediction) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, p := range ps {
		if err := enc.Encode(p); err != nil {
			return fmt.Errorf("encode prediction %s: %w", p.InstanceID, err)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write predictions: %w", err)
	}
	return nil
}

func printEvalReport(w io.Writer, r apitypes.EvalReport) error {
	v := r.Eval
	pct := func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
	share := 0.0
	if r.Total > 0 {
		share = float64(r.Resolved) / float64(r.Total)
	}
	fprintf(w, "evaluation %s (%s): %s, %d instances, %d attempts × %d repeats\n", v.ID, v.State, v.Name, r.Instances, v.Attempts, v.Repeats)
	fprintf(w, "resolved %d/%d (%s)  pass@1 %.3f  pass@%d %.3f\n", r.Resolved, r.Total, pct(share), r.PassAt1, r.N, r.PassAtN)
	fprintf(w, "cost $%.4f, %d tokens; per resolved $%.4f, %.0f tokens\n", r.CostUSD, r.Tokens, r.CostPerResolved, r.TokensPerResolved)
	var reps []string
	for _, rp := range r.Repeats {
		reps = append(reps, fmt.Sprintf("%d: %d/%d", rp.Repeat, rp.Resolved, rp.Total))
	}
	fprintf(w, "repeats %s; min %s max %s stddev %s\n", strings.Join(reps, ", "), pct(r.Min), pct(r.Max), pct(r.Stddev))
	fprintf(w, "pending %d, refused %d, skipped %d\n\n", r.Pending, r.Refused, r.Skipped)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fprintf(tw, "LINE\tINSTANCE\tREPEAT\tATTEMPT\tSTATE\tREASON\n")
	for _, it := range v.Items {
		fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\n", it.Line, it.InstanceID, it.Repeat, it.Attempt, it.State, rules.Clip(it.Reason, 120))
	}
	return tw.Flush()
}

func (a *app) evalCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel EVAL",
		Short: "Cancel an evaluation: its running jobs are cancelled, the rest skipped",
		Args:  exactArgs("EVAL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			v, err := c.CancelEval(ctx, args[0])
			if err != nil {
				return err
			}
			_, err = fprintf(a.env.Stdout, "%s %s\n", v.ID, v.State)
			return err
		},
	}
}

func (a *app) evalListCmd() *cobra.Command {
	var limit int
	return withLimit(answerCmd(a, &cobra.Command{
		Use:   "list [--limit N] [--json]",
		Short: "List the evaluations you may see, newest first",
		Long: `List the evaluations you may see (yours; an admin sees everyone's),
newest first, one a line: its id, dataset, agent, state, items ended of
all (DONE), samples resolved of those graded (RESOLVED), what its agents
cost so far, and when it started.`,
		Args: noArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) (apitypes.EvalList, error) {
		return c.Evals(ctx, limit)
	}, func(w io.Writer, l apitypes.EvalList) error { return printEvals(w, l.Evals, time.Now()) }), &limit, "evaluations")
}

func printEvals(w io.Writer, evs []apitypes.EvalView, now time.Time) error {
	t := newTable(w)
	fprintf(t, "ID\tDATASET\tAGENT\tSTATE\tDONE\tRESOLVED\tCOST\tCREATED\n")
	for _, v := range evs {
		dataset := v.Dataset
		if dataset == "" {
			dataset = "-" // started by an API call that named none
		}
		fprintf(t, "%s\t%s\t%s\t%s\t%d/%d\t%d/%d\t%s\t%s\n", v.ID, dataset, v.Agent, v.State, v.Done, v.Total,
			v.Resolved, v.Graded, cost(v.CostUSD), ago(v.CreatedAt, now))
	}
	return t.Flush()
}
