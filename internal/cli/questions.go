package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// The person in the loop: questions agents asked, answers, approvals and
// restarts.

func (a *app) questionsCmd() *cobra.Command {
	return answerCmd(a, &cobra.Command{
		Use:   "questions [--json]",
		Short: "List the questions your waiting jobs ask, and answers awaiting your approval",
		Args:  noArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) (apitypes.QuestionList, error) {
		return c.Questions(ctx)
	}, func(w io.Writer, l apitypes.QuestionList) error { return printQuestions(w, l.Questions, time.Now()) })
}

func (a *app) answerJobCmd() *cobra.Command {
	var choice int
	cmd := &cobra.Command{
		Use:   "answer JOB [--choice N] [TEXT...|-] [--json]",
		Short: "Answer the question a waiting job asks",
		Long: `Answer the question a waiting job asks, in TEXT (the remaining arguments
joined by spaces; "-" reads it from stdin) or by picking choice N (from 1).
Your answer to your own job queues it again at once and its agent resumes
with it. Another user's answer waits until the job's requester approves it
(drover approve JOB) or answers instead; the agent never sees it before.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("want JOB and an answer")
			}
			return nil
		},
	}
	cmd = answerCmd(a, cmd, func(ctx context.Context, c *client.Client, args []string) (apitypes.JobView, error) {
		text, err := a.answerText(args[1:])
		if err != nil {
			return apitypes.JobView{}, err
		}
		if strings.TrimSpace(text) == "" && choice == 0 {
			return apitypes.JobView{}, usagef("give an answer: TEXT, - (stdin) or --choice N")
		}
		return c.Answer(ctx, args[0], apitypes.AnswerRequest{Text: text, Choice: choice})
	}, func(w io.Writer, v apitypes.JobView) error {
		if v.State == job.Waiting {
			_, err := fprintf(w, "answer recorded for job %s; it waits for approval by %s (drover approve %s)\n", v.ID, v.Requester, v.ID)
			return err
		}
		_, err := fprintf(w, "job %s answered and %s again\n", v.ID, jobState(v))
		return err
	})
	cmd.Flags().IntVar(&choice, "choice", 0, "pick the question's choice N (from 1)")
	return cmd
}

// answerText joins the answer's words, or reads it from stdin for "-".
func (a *app) answerText(words []string) (string, error) {
	if len(words) != 1 || words[0] != "-" {
		return strings.Join(words, " "), nil
	}
	b, err := io.ReadAll(io.LimitReader(a.env.Stdin, rules.MaxAnswer+1))
	if err != nil {
		return "", fmt.Errorf("read the answer from stdin: %w", err)
	}
	if len(b) > rules.MaxAnswer {
		return "", usagef("the answer is over %d bytes", rules.MaxAnswer)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

func (a *app) approveCmd() *cobra.Command {
	return a.jobActionCmd("approve", "Approve another user's answer to your job's question; the job resumes with it", "",
		(*client.Client).Approve)
}

func (a *app) restartCmd() *cobra.Command {
	return a.jobActionCmd("restart", "Start a waiting, failed, cancelled or unknown job over from its base, with a fresh agent session", "",
		(*client.Client).Restart)
}

// printEvent writes one job event on stderr while a log is followed.
func (a *app) printEvent(e apitypes.EventView) {
	actor := ""
	if e.Actor != "" {
		actor = " (" + e.Actor + ")"
	}
	fprintf(a.env.Stderr, "--- %s %s%s: %s ---\n", e.At.Local().Format("15:04:05"), e.Kind, actor, oneLine(e.Message))
}

func printQuestions(w io.Writer, qs []protocol.QuestionView, now time.Time) error {
	if len(qs) == 0 {
		_, err := fprintf(w, "Nothing waits on you.\n")
		return err
	}
	for _, q := range qs {
		fprintf(w, "job %s ", q.Job)
		printQuestion(w, q, now)
		switch {
		case q.AwaitsApproval():
			fprintf(w, "  approve: drover approve %s, or answer instead: drover answer %s TEXT\n\n", q.Job, q.Job)
		case len(q.Choices) > 0:
			fprintf(w, "  answer: drover answer %s --choice N, or drover answer %s TEXT\n\n", q.Job, q.Job)
		default:
			fprintf(w, "  answer: drover answer %s TEXT\n\n", q.Job)
		}
	}
	return nil
}

// printQuestion prints a question, its choices and its answer, indented.
func printQuestion(w io.Writer, q protocol.QuestionView, now time.Time) {
	head := fmt.Sprintf("question %s (attempt %d, asked %s ago", q.ID, q.Attempt, ago(q.AskedAt, now))
	if q.ExpiresAt != nil {
		if q.ExpiresAt.After(now) {
			head += ", expires in " + ago(now, *q.ExpiresAt)
		} else {
			head += ", expired"
		}
	}
	fprintf(w, "%s):\n", head)
	for _, line := range strings.Split(q.Question, "\n") {
		fprintf(w, "  %s\n", line)
	}
	for i, c := range q.Choices {
		fprintf(w, "  %d) %s\n", i+1, oneLine(c))
	}
	if an := q.Answer; an != nil {
		status := "approved"
		if !an.Approved {
			status = "awaiting approval by the requester"
		} else if an.ApprovedBy != "" && an.ApprovedBy != an.By {
			status = "approved by " + an.ApprovedBy
		}
		pick := ""
		if an.Choice > 0 {
			pick = " (choice " + strconv.Itoa(an.Choice) + ")"
		}
		fprintf(w, "  answer by %s%s, %s:\n", an.By, pick, status)
		for _, line := range strings.Split(an.Text, "\n") {
			fprintf(w, "    %s\n", line)
		}
	}
}
