//go:build !drover_runner

package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/job"
	"drover/internal/sandbox"
)

// The demo's story, told with drover's own commands: each step prints the
// command a user would type and runs that very command line in this process
// (Run, with the demo's hub and token), so the demo goes through the same
// code as the user will.

// demoRun is one run of the demo.
type demoRun struct {
	a     *app
	git   string
	root  string
	repo  string // the demo's checkout; "." in the commands shown
	agent string
	box   string // the runner's sandbox: bwrap or none
	hub   string
	token string
}

// say starts a step of the story.
func (d *demoRun) say(format string, args ...any) {
	fprintf(d.a.env.Stdout, "\n==> "+format+"\n", args...)
}

// note adds a line to a step.
func (d *demoRun) note(format string, args ...any) {
	fprintf(d.a.env.Stdout, "    "+format+"\n", args...)
}

// typed prints a command line as the user would type it.
func (d *demoRun) typed(format string, args ...any) {
	fprintf(d.a.env.Stdout, "$ "+format+"\n", args...)
}

// drover shows and runs one drover command line.
func (d *demoRun) drover(ctx context.Context, args ...string) error {
	_, err := d.droverOut(ctx, args...)
	return err
}

// droverOut shows and runs one drover command line and returns its stdout.
// Commands that work in a checkout are shown as typed in it ("--repo ."),
// and run with --repo set to it.
func (d *demoRun) droverOut(ctx context.Context, args ...string) (string, error) {
	d.typed("drover %s", shellQuote(args))
	run := slices.Clone(args)
	if i := slices.Index(run, "--repo"); i >= 0 && i+1 < len(run) && run[i+1] == "." {
		run[i+1] = d.repo
	} else if len(run) > 0 && (run[0] == "fetch" || run[0] == "diff") {
		run = append(run, "--repo", d.repo)
	}
	// A pipeline file is read from the current directory, here the checkout.
	if len(run) > 2 && run[0] == "pipeline" && run[1] == "run" && !filepath.IsAbs(run[2]) {
		run[2] = filepath.Join(d.repo, run[2])
	}
	var out bytes.Buffer
	env := Env{
		Stdin:  strings.NewReader(""),
		Stdout: io.MultiWriter(d.a.env.Stdout, &out),
		Stderr: d.a.env.Stderr,
		Getenv: func(k string) string {
			switch k {
			case "DROVER_HUB":
				return d.hub
			case "DROVER_TOKEN":
				return d.token
			}
			return d.a.env.Getenv(k)
		},
	}
	if code := Run(ctx, run, env); code != 0 {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		return "", fmt.Errorf("'drover %s' exited %d", shellQuote(args), code)
	}
	return out.String(), nil
}

// shellGit shows and runs a git command in the checkout.
func (d *demoRun) shellGit(ctx context.Context, args ...string) error {
	d.typed("git %s", shellQuote(args))
	return demoGit(ctx, d.git, d.repo, d.a.env.Stdout, d.a.env.Stderr, args...)
}

// The story's jobs: for exec, shell scripts; for a vendor agent, prompts.
const (
	demoFixScript = `sh test.sh; sleep 0.5; echo fixing greet.sh; sed -i s/wrold/world/ greet.sh; sleep 0.5; sh test.sh`
	demoAskScript = `set -e; a=$(drover tool ask "Add a CHANGELOG entry for the fix?" --choice yes --choice no); ` +
		`echo "answer: $a"; if [ "$a" = yes ]; then echo "- greet.sh: world, not wrold" >> CHANGELOG.md; fi; drover tool deliver "CHANGELOG: $a"`
	demoFixPrompt = `The test fails: run 'sh test.sh', fix greet.sh so that it passes, run the test again, then deliver.`
	demoAskPrompt = `Use the ask tool to ask me exactly "Add a CHANGELOG entry for the fix?" with the choices yes and no, ` +
		`then stop. Once answered: if yes, add the line "- greet.sh: world, not wrold" to CHANGELOG.md; then deliver.`
	demoAnswer = "yes"
)

// story runs the demo's jobs on a fresh repository.
func (d *demoRun) story(ctx context.Context) error {
	if err := makeDemoRepo(ctx, d.git, d.repo); err != nil {
		return err
	}
	d.say("1. a repository with a failing test (%s): greet.sh says \"Hello, wrold\"; test.sh wants \"Hello, world\"", d.repo)
	d.typed("cd %s", d.repo)

	fix := []string{"run", "--repo", ".", "--wait", "--agent", d.agent, "--"}
	ask := []string{"run", "--repo", ".", "--tools", "--agent", d.agent, "--"}
	if d.agent == "exec" {
		fix = append(fix, "sh", "-c", demoFixScript)
		ask = append(ask, "sh", "-c", demoAskScript)
	} else {
		fix, ask = append(fix, demoFixPrompt), append(ask, demoAskPrompt)
	}
	where := "a bubblewrap sandbox"
	if d.box == sandbox.KindNone {
		where = "an UNISOLATED process (--sandbox none)"
	}
	d.say("2. a fix-mode job: in %s, on a worktree of that commit, its agent edits greet.sh and runs the test; its log, live", where)
	if err := d.drover(ctx, fix...); err != nil {
		return err
	}
	id1, err := d.lastJob(ctx)
	if err != nil {
		return err
	}
	d.say("3. what came back is a verified commit: the change, then the commit as a local branch")
	if err := d.drover(ctx, "diff", id1); err != nil {
		return err
	}
	if err := d.drover(ctx, "fetch", id1); err != nil {
		return err
	}
	if err := d.shellGit(ctx, "log", "--stat", "--format=%h %s (%an)", "main..drover/"+id1); err != nil {
		return err
	}

	d.say("4. a job on that branch whose agent asks a person through drover's tools, and waits without holding the runner")
	ask = slices.Insert(ask, 3, "--ref", "drover/"+id1)
	out, err := d.droverOut(ctx, ask...)
	if err != nil {
		return err
	}
	id2 := strings.TrimSpace(out)
	if err := d.drover(ctx, "logs", "-f", id2); err != nil {
		return err
	}
	if v, err := d.waitJob(ctx, id2, func(v apitypes.JobView) bool { return v.State == job.Waiting }); err != nil {
		return err
	} else if v.State != job.Waiting {
		return fmt.Errorf("the asking job ended %s", describeEnd(v))
	}
	if err := d.drover(ctx, "questions"); err != nil {
		return err
	}
	d.say("5. the answer queues the job again; it resumes with the answer and delivers")
	if err := d.drover(ctx, "answer", id2, demoAnswer); err != nil {
		return err
	}
	if err := d.drover(ctx, "logs", "-f", id2); err != nil {
		return err
	}
	end, err := d.waitJob(ctx, id2, func(apitypes.JobView) bool { return false })
	if err != nil {
		return err
	}
	if end.State != job.Completed {
		return fmt.Errorf("the asking job ended %s", describeEnd(end))
	}
	if err := d.drover(ctx, "show", id2); err != nil {
		return err
	}
	if err := d.drover(ctx, "diff", id2); err != nil {
		return err
	}
	return d.pipelineChapter(ctx)
}

// lastJob is the id of the newest job, the one `run --wait` just ran.
func (d *demoRun) lastJob(ctx context.Context) (string, error) {
	c, err := client.New(d.hub, d.token)
	if err != nil {
		return "", err
	}
	l, err := c.Jobs(ctx, client.JobFilter{Limit: 1})
	if err != nil {
		return "", fmt.Errorf("find the demo's job: %w", err)
	}
	if len(l.Jobs) == 0 {
		return "", fmt.Errorf("the hub lists no job")
	}
	return l.Jobs[0].ID, nil
}

// waitJob waits until the job is in a state done accepts, or ended.
func (d *demoRun) waitJob(ctx context.Context, id string, done func(apitypes.JobView) bool) (apitypes.JobView, error) {
	c, err := client.New(d.hub, d.token)
	if err != nil {
		return apitypes.JobView{}, err
	}
	for {
		v, err := c.Job(ctx, id)
		if err != nil {
			return v, fmt.Errorf("look at job %s: %w", id, err)
		}
		if done(v) || v.State.Terminal() {
			return v, nil
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// demoFiles are the demo repository: a greeting with a typo and its test.
var demoFiles = [][2]string{
	{"README.md", "A throwaway repository made by drover demo.\n"},
	{"greet.sh", "#!/bin/sh\necho \"Hello, wrold\"\n"},
	{"test.sh", `#!/bin/sh
# The test: greet.sh greets the world.
got=$(sh greet.sh)
if [ "$got" != "Hello, world" ]; then
	echo "FAIL: greet.sh says '$got', want 'Hello, world'"
	exit 1
fi
echo "PASS: greet.sh says '$got'"
`},
}
