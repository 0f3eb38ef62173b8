package cli

import (
	"context"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
)

// webhooksCmd is `webhooks add|list|remove|deliveries`: the caller's
// outbound webhooks of jobs' events.
func (a *app) webhooksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhooks add|list|remove|deliveries",
		Short: "Add, list and remove webhooks the hub POSTs jobs' events to, and see their deliveries",
		Long: `A webhook is a URL the hub POSTs jobs' events to: job.queued, job.started,
job.asked (the agent asked a question) and job.finished. Without --project
it hears of your own jobs; with --project P, of the jobs on P you may see.

Each body is signed with the hook's secret, printed once when you add it:
the X-Drover-Signature header is t=UNIX,v1=HEX, the HMAC-SHA256 of
"UNIX.BODY" (see the operator's guide to verify it). X-Drover-Delivery is
the same on every try of a delivery: receivers dedupe by it. Delivery is at
least once; a failing receiver gets the event again with backoff, for a day
at most (drover webhooks deliveries ID shows what happened).

--format slack or matrix sends a chat message's text instead of the JSON
event (a Slack incoming webhook, a Matrix hook bridge).`,
		Args: noArgs,
		RunE: showHelp,
	}
	ids := exactArgs("ID")
	var events, project, format string
	add := answerCmd(a, &cobra.Command{
		Use:   "add URL --events job.finished,job.asked,... [--project P] [--format json|slack|matrix] [--json]",
		Short: "Add a webhook; its signing secret is printed once",
		Args:  exactArgs("URL"),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return checkFlagRules(cmd)
		},
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.WebhookView, error) {
		var evs []string
		for e := range strings.SplitSeq(events, ",") {
			if e = strings.TrimSpace(e); e != "" {
				evs = append(evs, e)
			}
		}
		return c.AddWebhook(ctx, apitypes.WebhookRequest{URL: args[0], Events: evs, Project: project, Format: format})
	}, func(w io.Writer, v apitypes.WebhookView) error {
		fprintf(a.env.Stderr, "webhook %s added for %s; its signing secret (shown this once) is:\n", v.ID, strings.Join(v.Events, ","))
		_, err := fprintf(w, "%s\n", v.Secret)
		return err
	})
	f := add.Flags()
	f.StringVar(&events, "events", "", "the events to send, comma-separated: job.queued, job.started, job.asked, job.finished")
	f.StringVar(&project, "project", "", "hear of the jobs on this project you may see (default: your own jobs)")
	f.StringVar(&format, "format", "json", "the body: json (the event), slack or matrix (a chat message)")
	_ = add.MarkFlagRequired("events")

	list := answerCmd(a, &cobra.Command{
		Use:   "list [--json]",
		Short: "List your webhooks (an admin: everyone's), never a secret",
		Args:  noArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) (apitypes.WebhookList, error) {
		return c.Webhooks(ctx)
	}, func(w io.Writer, l apitypes.WebhookList) error {
		if len(l.Webhooks) == 0 {
			_, err := fprintf(w, "no webhooks (drover webhooks add)\n")
			return err
		}
		t := newTable(w)
		fprintf(t, "ID\tURL\tEVENTS\tPROJECT\tFORMAT\tOWNER\tCREATED\n")
		for _, h := range l.Webhooks {
			fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.ID, h.URL, strings.Join(h.Events, ","), dash(h.Project), h.Format,
				h.Owner, day(h.CreatedAt))
		}
		return t.Flush()
	})

	remove := answerCmd(a, &cobra.Command{
		Use:   "remove ID [--json]",
		Short: "Remove a webhook and its delivery log; nothing more is sent to it",
		Args:  ids,
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.WebhookView, error) {
		return c.RemoveWebhook(ctx, args[0])
	}, func(w io.Writer, v apitypes.WebhookView) error {
		_, err := fprintf(w, "webhook %s removed\n", v.ID)
		return err
	})

	var limit int
	deliveries := answerCmd(a, &cobra.Command{
		Use:   "deliveries ID [--limit N] [--json]",
		Short: "Show a webhook's delivery log, newest first: event, tries, last status and error",
		Args:  ids,
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.WebhookDeliveryList, error) {
		return c.WebhookDeliveries(ctx, args[0], limit)
	}, func(w io.Writer, l apitypes.WebhookDeliveryList) error {
		if len(l.Deliveries) == 0 {
			_, err := fprintf(w, "no deliveries yet\n")
			return err
		}
		now := time.Now()
		t := newTable(w)
		fprintf(t, "DELIVERY\tEVENT\tJOB\tSTATE\tTRIES\tSTATUS\tCREATED\tLAST\tERROR\n")
		for _, d := range l.Deliveries {
			status := "-"
			if d.Status != 0 {
				status = strconv.Itoa(d.Status)
			}
			last := ago(d.UpdatedAt, now) + " ago"
			if d.State == "pending" && d.Attempts > 0 {
				last += ", next in " + ago(now, d.NextAt)
			}
			fprintf(t, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.ID, d.Event, d.JobID, d.State, d.Attempts, status,
				ago(d.CreatedAt, now)+" ago", last, dash(d.Error))
		}
		return t.Flush()
	})
	deliveries.Flags().IntVar(&limit, "limit", 0, "how many (default 100, at most 1000)")
	cmd.AddCommand(add, list, remove, deliveries)
	return cmd
}
