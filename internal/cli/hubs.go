package cli

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
)

func (a *app) hubsCmd() *cobra.Command {
	list := func(ctx context.Context, c *client.Client, _ []string) (apitypes.HubList, error) { return c.Hubs(ctx) }
	text := func(w io.Writer, l apitypes.HubList) error { return printHubs(w, l.Hubs, time.Now()) }
	return answerCmd(a, &cobra.Command{
		Use:   "hubs [--json]",
		Short: "List the live hubs sharing the hub's database, and which one leads",
		Long: `List the live hubs sharing the hub's database: their id, public URL, drover
version, how many runner connections each holds, when each started and was
last seen, and which one leads (runs lease expiry, question expiry and the
other hub-wide duties). The hub that answered is marked with *. A hub on
SQLite is the only one, and leads.`,
		Args: noArgs,
	}, list, text)
}

func printHubs(w io.Writer, hs []apitypes.HubView, now time.Time) error {
	t := newTable(w)
	fprintf(t, "ID\tURL\tVERSION\tCONNECTIONS\tROLE\tSTARTED\tLAST SEEN\n")
	for _, h := range hs {
		id, role := h.ID, "follower"
		if h.Self {
			id += " *"
		}
		if h.Leader {
			role = "leader"
		}
		fprintf(t, "%s\t%s\t%s\t%d\t%s\t%s\t%s ago\n", id, dash(h.URL), dash(h.Version), h.Conns, role,
			day(h.StartedAt), ago(h.LastSeen, now))
	}
	return t.Flush()
}
