package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/attemptgroup/request"
	"drover/internal/client"
	"drover/internal/hub/call"
	"drover/internal/rules"
)

// groupOptions are drover run's flags for several attempts side by side.
type groupOptions struct {
	attempts    int
	agents      []string
	verify      string
	judge       string
	pickByJudge bool
}

// groupOnly are drover run's flags that only a group takes.
var groupOnly = []string{"verify", "judge", "pick-by-judge"}

func (o *groupOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&o.attempts, "attempts", 0, fmt.Sprintf("run N attempts side by side on the same base (at most %d); see drover compare, drover pick", request.MaxAttempts))
	f.StringSliceVar(&o.agents, "agents", nil, "with --attempts: each attempt's agent, AGENT or AGENT:ACCOUNT (native:ACCOUNT), one per attempt")
	f.StringVar(&o.verify, "verify", "", "with --attempts: a shell command run at each attempt's commit in its own sandbox, e.g. \"go test ./...\"")
	f.StringVar(&o.judge, "judge", "", "with --attempts: an agent, AGENT or AGENT:ACCOUNT, that ranks the attempts once they ended (in observe mode; it picks nothing)")
	f.BoolVar(&o.pickByJudge, "pick-by-judge", false, "with --judge and --verify: pick the attempt the judge ranked first, when its verdict is valid and that attempt's verify passed")
}

// on says whether drover run starts a group instead of a job.
func (o *groupOptions) on(cmd *cobra.Command) bool {
	f := cmd.Flags()
	return f.Changed("attempts") || f.Changed("agents")
}

// runGroup starts a group of attempts at the checkout src names: the
// request is checked whole before anything is pushed.
func (a *app) runGroup(cmd *cobra.Command, o groupOptions, src sourceOptions, agent, key, modelName string, asJSON bool, args []string) error {
	for _, fl := range []string{"wait", "tools", "network", "sparse", "fallback", "label", "account", "context", "from-pr", "mode"} {
		if cmd.Flags().Changed(fl) {
			return usagef("--%s does not go with --attempts (each attempt is a fix-mode job of its agent; --agents AGENT:ACCOUNT pins an account)", fl)
		}
	}
	if src.repo == "" {
		return usagef("--attempts runs on a git checkout: give --repo PATH")
	}
	if cmd.Flags().Changed("attempts") && o.attempts < 1 {
		return usagef("--attempts %d: want at least 1", o.attempts)
	}
	if cmd.Flags().Changed("judge") && strings.TrimSpace(o.judge) == "" {
		return usagef("--judge names an agent, AGENT or AGENT:ACCOUNT")
	}
	req := apitypes.GroupRequest{Attempts: o.attempts, Agents: o.agents, Agent: strings.TrimSpace(agent), Model: modelName,
		Verify: o.verify, Key: key, Prompt: strings.Join(args, " "), Judge: strings.TrimSpace(o.judge), PickByJudge: o.pickByJudge}
	if _, _, err := request.Check(req); err != nil {
		var r *call.Refusal
		if errors.As(err, &r) {
			return usagef("%s", r.Msg)
		}
		return err
	}
	c, err := a.client(cmd.Context())
	if err != nil {
		return err
	}
	sub := apitypes.SubmitRequest{Agent: req.Agent, Args: args}
	if err := a.applySource(cmd.Context(), c, src, &sub); err != nil {
		return err
	}
	req.Project, req.Base = sub.Repo.Project, sub.Repo.Base
	v, started, err := c.StartGroup(cmd.Context(), req)
	if err != nil {
		return err
	}
	if !started {
		fprintf(a.env.Stderr, "key %q was used before: group %s (%s)\n", key, v.ID, v.State)
	}
	if asJSON {
		return printJSON(a.env.Stdout, v)
	}
	if _, err := fprintf(a.env.Stdout, "%s\n", v.ID); err != nil {
		return err
	}
	fprintf(a.env.Stderr, "%d attempts started; compare them with drover compare %s, keep one with drover pick %s ATTEMPT\n", len(v.Attempts), v.ID, v.ID)
	return nil
}

func (a *app) compareCmd() *cobra.Command {
	return answerCmd(a, &cobra.Command{
		Use:   "compare GROUP [--json]",
		Short: "Show a group's attempts side by side: state, verify, changes, tokens, cost, wall time and diffs",
		Long: `Show the attempts of a group (drover run --attempts N) side by side: each
attempt's state, its verify command's result, the files and lines it changed,
its tokens, cost and wall time, then each attempt's diff against the base.
Only who may see the group's jobs may compare it. --json prints the group
with every diff, for scripts.`,
		Args: exactArgs("GROUP"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.GroupView, error) {
		return c.Group(ctx, args[0])
	}, func(w io.Writer, v apitypes.GroupView) error { return printGroup(w, v, true) })
}

func (a *app) pickCmd() *cobra.Command {
	return answerCmd(a, &cobra.Command{
		Use:   "pick GROUP ATTEMPT [--json]",
		Short: "Make one attempt of a group its result (published as a pull request when the project has a forge)",
		Long: `Make attempt ATTEMPT (from 1, as drover compare numbers them) the group's
result: its commit is kept at refs/drover/groups/GROUP in the project's
repository on the hub, and, when the project maps to a forge, its job is
published as a pull request the usual way (drover publish). Only the group's
requester or an admin picks; a group has one result: picking it again
carries on its publication. An attempt that did not complete, or changed
nothing, cannot be picked.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := exactArgs("GROUP", "ATTEMPT")(cmd, args); err != nil {
				return err
			}
			if k, err := strconv.Atoi(args[1]); err != nil || k < 1 {
				return usagef("ATTEMPT %q: want an attempt's number, from 1", args[1])
			}
			return nil
		},
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.GroupView, error) {
		k, _ := strconv.Atoi(args[1]) // checked by Args
		return c.PickGroup(ctx, args[0], k)
	}, func(w io.Writer, v apitypes.GroupView) error { return printGroup(w, v, false) })
}

// printGroup prints a group's table, then, with diffs, each attempt's diff.
func printGroup(w io.Writer, v apitypes.GroupView, diffs bool) error {
	fprintf(w, "group %s on %s at %s: %s", v.ID, v.Project, shortCommit(v.Base), v.State)
	if v.Reason != "" {
		fprintf(w, " (%s)", v.Reason)
	}
	fprintf(w, "\n")
	if v.Verify != "" {
		fprintf(w, "verify: %s\n", v.Verify)
	}
	t := newTable(w)
	fprintf(t, "#\tAGENT\tSTATE\tVERIFY\tFILES\t+/-\tTOKENS\tCOST\tWALL\tJOB\n")
	for _, at := range v.Attempts {
		agent := at.Agent
		if at.Account != "" {
			agent += ":" + at.Account
		}
		mark := ""
		if at.Number == v.Picked {
			mark = "*"
		}
		fprintf(t, "%d%s\t%s\t%s\t%s\t%d\t+%d/-%d\t%d\t$%.4f\t%s\t%s\n", at.Number, mark, dash(agent), at.State, at.Verify,
			at.Files, at.Added, at.Deleted, at.Tokens, at.CostUSD, (time.Duration(at.WallSeconds) * time.Second).String(), dash(at.Job))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if v.Picked != 0 {
		fprintf(w, "result: attempt %d, %s at %s\n", v.Picked, v.Result, v.Ref)
		if p := v.Publication; p != nil {
			fprintf(w, "publication: %s %s %s\n", p.State, p.Mode, dash(p.URL))
		}
	}
	printJudge(w, v.Judge)
	if !diffs {
		return nil
	}
	for _, at := range v.Attempts {
		if at.Diff == "" {
			continue
		}
		fprintf(w, "\n=== attempt %d (%s, %s) ===\n", at.Number, at.Agent, shortCommit(at.Commit))
		for line := range strings.Lines(at.Diff) {
			fprintf(w, "%s\n", strings.TrimSuffix(line, "\n"))
		}
		if at.DiffTruncated {
			fprintf(w, "(diff cut at %d bytes: drover diff %s shows it whole)\n", request.MaxDiff, at.Job)
		}
	}
	return nil
}

// printJudge prints a group's judge and its verdict; the verdict's words
// are the judge's, escaped.
func printJudge(w io.Writer, j *apitypes.GroupJudge) {
	if j == nil {
		return
	}
	agent := j.Agent
	if j.Account != "" {
		agent += ":" + j.Account
	}
	fprintf(w, "judge: %s, %s", agent, j.State)
	if j.Job != "" {
		fprintf(w, " (job %s)", j.Job)
	}
	if j.PickByJudge {
		fprintf(w, ", picks the attempt it ranks first")
	}
	fprintf(w, "\n")
	if j.Reason != "" {
		fprintf(w, "  %s\n", rules.Escape(j.Reason, false))
	}
	switch j.Verdict {
	case "valid":
		for i, r := range j.Ranking {
			fprintf(w, "  %d. attempt %d: %s\n", i+1, r.Attempt, rules.Escape(r.Reason, false))
		}
	case "invalid":
		fprintf(w, "  verdict invalid, not trusted: %s\n", rules.Escape(j.Invalid, false))
	}
	if j.Pick != "" {
		fprintf(w, "  %s\n", rules.Escape(j.Pick, false))
	}
}
