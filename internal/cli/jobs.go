package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// Exit codes of `run --wait` besides the job's own.
const (
	exitFailed   = 1 // failed without an exit code
	exitNoResult = 2 // cancelled, unknown: no result to pass on
)

func (a *app) runCmd() *cobra.Command {
	var agent, key, account, network, modelName, fallback, image string
	var sparse []string
	var labels []string
	var wait, asJSON, tools bool
	var src sourceOptions
	var group groupOptions
	cmd := &cobra.Command{
		Use:   "run --agent AGENT [--repo PATH [--ref REF] [--dirty] [--mode fix|observe]] [--context FILE]... [--tools] [--account ID|LABEL] [--network none|POLICY,...] [--model M] [--image REF] [--label k=v]... [--key K] [--wait] [--json] [--attempts N [--agents A,B,...] [--verify CMD] [--judge AGENT [--pick-by-judge]]] -- ARGS...",
		Short: "Submit a job and print its id",
		Long: `Submit a job and print its id (or, with --json, the job).

--key makes the submission idempotent: submitting the same key again returns
the job it made the first time. --wait follows the job's log on stdout, status
lines on stderr, and exits with the job's exit code (1 if it failed without
one, 2 if it was cancelled or its outcome is unknown). With --json, --wait
prints the finished job instead of its log.

--repo runs the job on a git checkout: drover pins its exact commit (HEAD, or
--ref), pushes it to the hub as refs/drover/uploads/ID (git sends only what
the hub lacks) and the runner works in a worktree of exactly that commit. A
checkout with uncommitted changes to tracked files is refused unless --dirty,
which sends the working tree (untracked files too, ignored ones not) as a
throwaway commit without touching your index, HEAD or branches. Submodules
and filtered (e.g. LFS) repositories are refused. In fix mode the result
comes back as a commit: drover fetch JOB, drover diff JOB.

--context attaches files the agent can read in $DROVER_CONTEXT_DIR (outside
its worktree). A relative path keeps its path there, an absolute one its base
name. Symlinks, special files, .env files and private keys are refused.

--tools gives the agent drover's tools (ask, checkpoint, deliver, context).
Such a job completes only when its agent delivers; when it asks, the job
waits for an answer (drover questions, drover answer) without holding a
runner.

Vendor agents (claude, codex, opencode, gemini) and drover's own agent
(native) take the prompt as ARGS and always get the tools. The hub runs such
a job under the best-ranked ready account of that agent (drover accounts);
--account pins it to one account, by id or label: it then runs only there
and waits while that account is limited. --model picks a native job's model
on its account's provider (the endpoint stays the runner operator's).
--fallback names a native job's fallback account, by id or label: when the
account it runs under is limited or unavailable, the job continues the same
transcript on it (on the same runner, if you may use it there).

--network narrows what the agent of a job on a project may reach: none, or
some of the network policies its project's owner chose (drover projects
config PROJECT). A policy the project does not allow is refused: a job never
widens its project's network.

--image runs the job in that container image
([registry[:port]/]name[:tag][@sha256:digest]) instead of its runner's
sandbox: it is offered only to a runner started with --sandbox docker or
podman whose --images allow that image, and waits, saying so, while none is
connected.

--attempts N runs N attempts at the prompt side by side on the same base
(--repo): N sibling jobs, each in its own worktree, spread across runners,
with --agent for all or --agents one per attempt (AGENT or AGENT:ACCOUNT,
e.g. claude,codex,native:local). --verify CMD runs CMD at each attempt's
commit in its own sandbox. It prints the group's id: drover compare GROUP
shows the attempts side by side, drover pick GROUP ATTEMPT keeps one.
--judge AGENT[:ACCOUNT] adds a judge: once the attempts and their verify
ended, that agent, in observe mode, reads every attempt's diff and verify
result and ranks them; drover compare shows its verdict. It picks nothing
unless --pick-by-judge (which needs --verify): then the attempt it ranked
first is picked, as drover pick does, when its verdict is valid and that
attempt's verify passed.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if group.on(cmd) {
				if cmd.Flags().Changed("image") {
					return usagef("--image does not go with --attempts")
				}
				return a.runGroup(cmd, group, src, agent, key, modelName, asJSON, args)
			}
			for _, fl := range groupOnly {
				if cmd.Flags().Changed(fl) {
					return usagef("--%s goes with --attempts N", fl)
				}
			}
			req, err := submitRequest(agent, labels, key, args)
			if err != nil {
				return err
			}
			req.Tools, req.Account, req.Model, req.Fallback = tools, account, modelName, fallback
			if err := protocol.CheckSparsePaths(sparse); err != nil {
				return usagef("--sparse: %v", err)
			}
			req.Sparse = sparse
			if cmd.Flags().Changed("image") {
				if err := rules.CheckImage(image); err != nil {
					return usagef("--image: %v", err)
				}
				req.Image = image
			}
			if cmd.Flags().Changed("network") {
				if req.Network = splitList(network); len(req.Network) == 0 {
					return usagef("--network names policies of the job's project, or none")
				}
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if err := a.applySource(cmd.Context(), c, src, &req); err != nil {
				return err
			}
			v, created, err := c.Submit(cmd.Context(), req)
			if err != nil {
				return err
			}
			if !created {
				fprintf(a.env.Stderr, "key %q was used before: job %s (%s)\n", key, v.ID, v.State)
			}
			if !wait {
				if asJSON {
					return printJSON(a.env.Stdout, v)
				}
				_, err := fprintf(a.env.Stdout, "%s\n", v.ID)
				return err
			}
			return a.waitRun(cmd.Context(), c, v.ID, asJSON)
		},
	}
	f := cmd.Flags()
	// ARGS are the agent's: flags after the first of them belong to it.
	f.SetInterspersed(false)
	f.StringVar(&agent, "agent", "", "agent to run the job with, e.g. exec (required)")
	f.StringArrayVar(&labels, "label", nil, "runner label the job needs, k=v (repeatable)")
	f.StringVar(&key, "key", "", "idempotency key: the same key returns the same job")
	f.BoolVar(&wait, "wait", false, "follow the job to its end and exit with its exit code")
	f.BoolVar(&asJSON, "json", false, "print the job as JSON")
	f.BoolVar(&tools, "tools", false, "give the agent drover's tools; the job completes only by deliver")
	f.StringSliceVar(&sparse, "sparse", nil, "the job's worktree holds only these folders of the repository (cone-mode sparse checkout; repeat or comma-separate)")
	f.StringVar(&fallback, "fallback", "", "a native job's fallback account (id or label): when its account is limited or unavailable, the job continues its transcript there")
	f.StringVar(&modelName, "model", "", "the model a native agent's job uses instead of its account's (the endpoint stays the runner operator's)")
	f.StringVar(&network, "network", "", "narrow the agent's network: none, or some of the project's policies (comma-separated); never wider than the project allows")
	f.StringVar(&account, "account", "", "run a vendor agent's job only under this runner account (id or label; see drover accounts)")
	f.StringVar(&image, "image", "", "the container image the job runs in, offered only to runners whose --images allow it")
	src.addFlags(cmd)
	group.addFlags(cmd)
	return cmd
}

// waitRun waits for a submitted job to end, following its log unless the
// answer is JSON, and turns its outcome into drover's exit code.
func (a *app) waitRun(ctx context.Context, c *client.Client, id string, asJSON bool) error {
	ctx, stop := a.interruptContext(ctx)
	defer stop()
	var end apitypes.JobView
	var err error
	if asJSON {
		end, err = c.Wait(ctx, id)
	} else {
		fprintf(a.env.Stderr, "job %s submitted; following its log\n", id)
		wctx, wstop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); a.sayWhyQueued(wctx, c, id) }()
		end, err = a.follow(ctx, c, id)
		wstop()
		<-done
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped waiting; job %s goes on (drover cancel %s)", id, id)
		}
		return err
	}
	if asJSON {
		if err := printJSON(a.env.Stdout, end); err != nil {
			return err
		}
	} else {
		fprintf(a.env.Stderr, "job %s %s\n", end.ID, describeEnd(end))
	}
	if code := jobExitCode(end); code != 0 {
		return exitCode(code)
	}
	return nil
}

// whyQueuedEvery is how often `run --wait` asks why a queued job waits.
const whyQueuedEvery = 2 * time.Second

// sayWhyQueued tells, on stderr, why the job waits in the queue whenever
// the hub's reason changes, until ctx ends or the job does.
func (a *app) sayWhyQueued(ctx context.Context, c *client.Client, id string) {
	last := ""
	for {
		v, err := c.Job(ctx, id)
		if err != nil || v.State.Terminal() {
			return
		}
		if v.State == job.Queued && v.Waiting != "" && v.Waiting != last {
			fprintf(a.env.Stderr, "job %s is queued: %s\n", id, v.Waiting)
		}
		if v.State == job.Queued {
			last = v.Waiting
		} else {
			last = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(whyQueuedEvery):
		}
	}
}

// submitRequest checks a submission as the hub will, to fail before a round trip.
func submitRequest(agent string, labels []string, key string, args []string) (apitypes.SubmitRequest, error) {
	req := apitypes.SubmitRequest{Agent: strings.TrimSpace(agent), Args: args, Key: key}
	if req.Agent == "" {
		return req, usagef("--agent is required")
	}
	if req.Args == nil {
		req.Args = []string{}
	}
	if len(args) > rules.MaxArgs {
		return req, usagef("%d arguments; the limit is %d", len(args), rules.MaxArgs)
	}
	n := 0
	for _, s := range args {
		n += len(s)
	}
	if n > rules.MaxArgsBytes {
		return req, usagef("arguments are %d bytes; the limit is %d", n, rules.MaxArgsBytes)
	}
	lm, err := parseLabels(labels)
	if err != nil {
		return req, err
	}
	req.Labels = lm
	return req, nil
}

// parseLabels reads k=v items into a map (nil for none), by the hub's
// rule (protocol.ParseLabels): a label it would refuse is a usage error.
func parseLabels(items []string) (map[string]string, error) {
	m, err := rules.ParseLabels(items)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return m, nil
}

// follow writes a job's log to stdout, attempt by attempt with a separator
// line on stderr, and returns the job once it ended.
func (a *app) follow(ctx context.Context, c *client.Client, id string, opts ...client.FollowOption) (apitypes.JobView, error) {
	opts = append(opts, client.OnAttempt(a.attemptSeparator))
	if err := c.FollowLog(ctx, id, 0, 0, a.env.Stdout, opts...); err != nil {
		return apitypes.JobView{}, err
	}
	return c.Job(ctx, id)
}

func (a *app) attemptSeparator(at apitypes.AttemptView) {
	if at.Runner == "" {
		fprintf(a.env.Stderr, "--- attempt %d ---\n", at.Number)
		return
	}
	fprintf(a.env.Stderr, "--- attempt %d on %s ---\n", at.Number, at.Runner)
}

func describeEnd(j apitypes.JobView) string {
	if o := outcome(j.ExitCode, j.Reason); o != "-" {
		return string(j.State) + " (" + o + ")"
	}
	return string(j.State)
}

// jobExitCode is what `run --wait` exits with for a job that ended.
func jobExitCode(j apitypes.JobView) int {
	switch j.State {
	case job.Completed:
		return 0
	case job.Failed:
		if j.ExitCode != nil && *j.ExitCode > 0 && *j.ExitCode < 256 {
			return *j.ExitCode
		}
		return exitFailed
	}
	return exitNoResult
}

func (a *app) jobsCmd() *cobra.Command {
	var state string
	var limit int
	cmd := answerCmd(a, &cobra.Command{
		Use:   "jobs [--state S] [--limit N] [--json]",
		Short: "List jobs, newest first",
		Args:  noArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if state != "" && !job.State(state).Valid() {
				return usagef("--state %q: want one of %s", state, joinStates())
			}
			if limit < 0 {
				return usagef("--limit must not be negative")
			}
			return nil
		},
	}, func(ctx context.Context, c *client.Client, _ []string) (apitypes.JobList, error) {
		return c.Jobs(ctx, client.JobFilter{State: job.State(state), Limit: limit})
	}, func(w io.Writer, l apitypes.JobList) error { return printJobs(w, l.Jobs, time.Now()) })
	cmd.Flags().StringVar(&state, "state", "", "only jobs in this state: "+joinStates())
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many jobs (0: the hub's default)")
	return cmd
}

func joinStates() string {
	s := make([]string, len(job.States))
	for i, st := range job.States {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

func (a *app) showCmd() *cobra.Command {
	return answerCmd(a, &cobra.Command{
		Use:   "show JOB [--json]",
		Short: "Show a job, its attempts, questions and delivery (with --json, its events too)",
		Args:  exactArgs("JOB"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.JobView, error) {
		return c.JobWithEvents(ctx, args[0])
	}, func(w io.Writer, v apitypes.JobView) error { return printJob(w, v, time.Now()) })
}

func (a *app) cancelCmd() *cobra.Command {
	return a.jobActionCmd("cancel", "Cancel a job; a running one stops on its runner", "",
		(*client.Client).Cancel)
}

func (a *app) retryCmd() *cobra.Command {
	return a.jobActionCmd("retry", "Queue another attempt of a failed, cancelled or unknown job",
		`Queue another attempt of a job that ended failed or cancelled, or whose
outcome is unknown (its runner vanished while it may have been running: look
at what it may have done first). 'drover restart' starts such a job over
from its base with a fresh agent session instead. A completed job is not
retried (submit it again), and a queued, running or waiting one has nothing
to retry.`,
		(*client.Client).Retry)
}

// jobActionCmd makes `cancel` and `retry`, which differ only in the call.
func (a *app) jobActionCmd(name, short, long string,
	do func(*client.Client, context.Context, string) (apitypes.JobView, error)) *cobra.Command {
	return answerCmd(a, &cobra.Command{
		Use:   name + " JOB [--json]",
		Short: short,
		Long:  long,
		Args:  exactArgs("JOB"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.JobView, error) {
		v, err := do(c, ctx, args[0])
		var pe *rules.Error
		if errors.As(err, &pe) && pe.Code == rules.ErrConflict {
			return v, fmt.Errorf("cannot %s job %s: %s", name, args[0], pe.Message)
		}
		return v, err
	}, func(w io.Writer, v apitypes.JobView) error {
		_, err := fprintf(w, "job %s %s\n", v.ID, jobState(v))
		return err
	})
}
