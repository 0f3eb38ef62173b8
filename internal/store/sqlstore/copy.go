package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// copyTables are every table of the logical schema, parents before the
// rows that reference them, with the columns a copy moves (a generated
// column, jobs.queue_shape, is made again by the target).
var copyTables = []struct{ name, cols string }{
	{Users.Name, Users.List()},
	{Tokens.Name, Tokens.List()},
	{Runners.Name, Runners.List()},
	{Projects.Name, Projects.List()},
	{"project_members", "project, user_id, created_at"},
	{Jobs.Name, Jobs.List()},
	{Attempts.Name, Attempts.List()},
	{"log_chunks", `attempt_id, "offset", data`},
	{"events", EventCols},
	{"requests", "runner_id, request_id, response, created_at"},
	{"meta", "key, value"},
	{"context_files", "job_id, name, size, data"},
	{Questions.Name, Questions.List()},
	{Accounts.Name, Accounts.List()},
	{"shares", ShareCols},
	{Launches.Name, Launches.List()},
	{Registrations.Name, Registrations.List()},
	{LaunchFailures.Name, LaunchFailures.List()},
	{"project_secrets", "project, name, upstream, header, prefix, value, created_by, created_at"},
	{Forges.Name, Forges.List()},
	{ForgeOAuth.Name, ForgeOAuth.List()},
	{OIDCProviders.Name, OIDCProviders.List()},
	{OIDCLinks.Name, OIDCLinks.List()},
	{Publications.Name, Publications.List()},
	{Pipelines.Name, Pipelines.List()},
	{PipelineRuns.Name, PipelineRuns.List()},
	{StepResults.Name, StepResults.List()},
	{"pipeline_events", PipelineEventCols},
	{Evals.Name, Evals.List()},
	{EvalItems.Name, EvalItems.List()},
	{ForgeThreads.Name, ForgeThreads.List()},
	{ForgeTriggers.Name, ForgeTriggers.List()},
	{ForgeLinks.Name, ForgeLinks.List()},
	{ForgeDeliveries.Name, ForgeDeliveries.List()},
	{Webhooks.Name, Webhooks.List()},
	{"job_changes", JobChangeCols},
	{WebhookDeliveries.Name, WebhookDeliveries.List()},
	{Hubs.Name, Hubs.List()},
	{RunnerHubs.Name, RunnerHubs.List()},
	{LeaderTerm.Name, LeaderTerm.List()},
}

// gone says a table's rows are not moved: they are what hub processes
// recorded of themselves (membership, held connections, the leader term),
// dead once the source hub stopped.
func gone(table string) bool {
	switch table {
	case Hubs.Name, RunnerHubs.Name, LeaderTerm.Name:
		return true
	}
	return false
}

// CopiedTables names the tables a copy moves, in copy order.
func CopiedTables() []string {
	out := make([]string, len(copyTables))
	for i, t := range copyTables {
		out[i] = t.name
	}
	return out
}

// Copied counts the rows a copy moved, by table, in copy order.
type Copied []struct {
	Table string
	Rows  int64
}

func (c Copied) String() string {
	parts := make([]string, len(c))
	for i, t := range c {
		parts[i] = fmt.Sprintf("%s %d", t.Table, t.Rows)
	}
	return strings.Join(parts, ", ")
}

// Empty reports the first table of tx's database that has rows ("" when
// none has): a copy goes only into an empty database.
func Empty(ctx context.Context, tx *sql.Tx) (string, error) {
	for _, t := range copyTables {
		var any bool
		if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM "+t.name+")").Scan(&any); err != nil {
			return "", fmt.Errorf("check %s is empty: %w", t.name, err)
		}
		if any {
			return t.name, nil
		}
	}
	return "", nil
}

// Copy moves every row of src's database into dst's, whose statements
// take d's placeholders. Values go as src's driver read them, except
// into boolean columns, which SQLite keeps as integers.
func Copy(ctx context.Context, src, dst *sql.Tx, d *Dialect) (Copied, error) {
	var out Copied
	for _, t := range copyTables {
		var n int64
		var err error
		if !gone(t.name) {
			n, err = copyTable(ctx, src, dst, d, t.name, t.cols)
		}
		if err != nil {
			return out, fmt.Errorf("copy %s: %w", t.name, err)
		}
		out = append(out, struct {
			Table string
			Rows  int64
		}{t.name, n})
	}
	return out, nil
}

func copyTable(ctx context.Context, src, dst *sql.Tx, d *Dialect, table, cols string) (int64, error) {
	ncols := strings.Count(cols, ",") + 1
	insert := fmt.Sprintf("INSERT INTO %s (%s) VALUES (?%s)", table, cols, strings.Repeat(", ?", ncols-1))
	if d.Rebind != nil {
		insert = d.Rebind(insert)
	}
	// The target's column types, for the booleans.
	probe, err := dst.QueryContext(ctx, "SELECT "+cols+" FROM "+table+" WHERE false")
	if err != nil {
		return 0, err
	}
	types, err := probe.ColumnTypes()
	probe.Close()
	if err != nil {
		return 0, err
	}
	stmt, err := dst.PrepareContext(ctx, insert)
	if err != nil {
		return 0, err
	}
	defer stmt.Close()
	rows, err := src.QueryContext(ctx, "SELECT "+cols+" FROM "+table)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	vals, ptrs := make([]any, ncols), make([]any, ncols)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var n int64
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		for i, ct := range types {
			if v, ok := vals[i].(int64); ok && strings.EqualFold(ct.DatabaseTypeName(), "bool") {
				vals[i] = v != 0
			}
		}
		if _, err := stmt.ExecContext(ctx, vals...); err != nil {
			return n, fmt.Errorf("row %d: %w", n+1, err)
		}
		n++
	}
	return n, rows.Err()
}
