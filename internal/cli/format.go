package cli

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"drover/internal/job"
	"drover/internal/protocol"
)

// Text output of the read commands. --json prints the protocol types instead.

func printJobs(w io.Writer, js []protocol.JobView, now time.Time) error {
	t := newTable(w)
	fmt.Fprintln(t, "ID\tSTATE\tAGENT\tREQUESTER\tRUNNER\tATTEMPTS\tAGE\tEXIT/REASON")
	for _, j := range js {
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, jobState(j), j.Agent, j.Requester,
			dash(j.Runner), len(j.Attempts), ago(j.CreatedAt, now), outcome(j.ExitCode, j.Reason))
	}
	return t.Flush()
}

// printJob prints one job and its attempts, as `drover show` does.
func printJob(w io.Writer, j protocol.JobView, now time.Time) error {
	t := newTable(w)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(t, "%s:\t%s\n", k, v)
		}
	}
	row("Job", j.ID)
	row("State", jobState(j))
	row("Agent", j.Agent)
	row("Args", shellQuote(j.Args))
	row("Labels", formatLabels(j.Labels))
	row("Requester", j.Requester)
	row("Runner", j.Runner)
	row("Key", j.Key)
	row("Project", j.Project)
	row("Base", j.Base)
	row("Head", j.Head)
	row("Mode", j.Mode)
	if j.Tools {
		row("Tools", "yes (completes only by deliver)")
	}
	row("Created", stamp(&j.CreatedAt, now))
	row("Finished", stamp(j.FinishedAt, now))
	if j.ExitCode != nil || j.Reason != job.ReasonNone {
		row("Outcome", outcome(j.ExitCode, j.Reason))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(j.Attempts) == 0 {
		_, err := fmt.Fprintln(w, "\nNo attempts yet.")
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w)
	fmt.Fprintln(t, "ATTEMPT\tSTATE\tRUNNER\tOFFERED\tRAN\tEXIT/REASON\tLOG\tISOLATION\tMESSAGE")
	for _, a := range j.Attempts {
		fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Number, a.State, dash(a.Runner), ago(a.OfferedAt, now),
			ran(a, now), outcome(a.ExitCode, a.Reason), strconv.FormatInt(a.LogSize, 10)+"B", isolation(a.Isolation),
			dash(oneLine(a.Message)))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	var total protocol.Usage
	for _, a := range j.Attempts {
		if u := a.Usage; u != nil {
			fmt.Fprintf(w, "attempt %d used %d input and %d output tokens (cache %d read, %d written), $%.4f\n",
				a.Number, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CostUSD)
			total = total.Add(*u)
		}
	}
	if total != (protocol.Usage{}) {
		fmt.Fprintf(w, "in all: %d input and %d output tokens, $%.4f\n", total.InputTokens, total.OutputTokens, total.CostUSD)
	}
	for _, q := range j.Questions {
		fmt.Fprintln(w)
		printQuestion(w, q, now)
	}
	if j.Summary != "" {
		fmt.Fprintln(w, "\nDelivered:")
		for _, line := range strings.Split(j.Summary, "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	return nil
}

func printRunners(w io.Writer, rs []protocol.RunnerView, now time.Time) error {
	t := newTable(w)
	fmt.Fprintln(t, "NAME\tOWNER\tSTATUS\tSLOTS\tRUNNING\tAGENTS\tLABELS\tLAST SEEN")
	for _, r := range rs {
		status := "offline"
		switch {
		case r.Revoked:
			status = "revoked"
		case r.Connected:
			status = "connected"
		}
		last := "-"
		if r.LastSeen != nil {
			last = ago(*r.LastSeen, now)
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.Name, r.Owner, status, r.Slots, r.Running,
			dash(formatAgents(r)), dash(formatLabels(r.Labels)), last)
	}
	return t.Flush()
}

func jobState(j protocol.JobView) string {
	if j.Cancelling && !j.State.Terminal() {
		return string(j.State) + " (cancelling)"
	}
	return string(j.State)
}

// outcome shows an exit code and a reason; "exited" goes without saying
// when there is a code.
func outcome(code *int, r job.Reason) string {
	var parts []string
	if code != nil {
		parts = append(parts, "exit "+strconv.Itoa(*code))
	}
	if r != job.ReasonNone && (code == nil || r != job.ReasonExited) {
		parts = append(parts, string(r))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// ran is how long an attempt's agent ran (so far).
func ran(a protocol.AttemptView, now time.Time) string {
	if a.StartedAt == nil {
		return "-"
	}
	end := now
	if a.FinishedAt != nil {
		end = *a.FinishedAt
	}
	d := end.Sub(*a.StartedAt)
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// ago is a short age: 5s, 3m, 2h, 4d.
func ago(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case t.IsZero():
		return "-"
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func stamp(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05") + " (" + ago(*t, now) + " ago)"
}

func formatLabels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}

// shellQuote renders argv so that it could be pasted into a shell.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, s := range args {
		if s != "" && strings.IndexFunc(s, func(r rune) bool {
			return !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_@%+=:,./-", r)))
		}) < 0 {
			q[i] = s
			continue
		}
		q[i] = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// checkName refuses names no hub can take (they end up in URL paths and
// tables), before a round trip; the hub has the last word on the rest.
func checkName(what, s string) error {
	if s == "" {
		return usagef("a %s name is required", what)
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '/' }) >= 0 {
		return usagef("%s name %q: no spaces, control characters or slashes", what, s)
	}
	return nil
}

// isolation says in a few words what the attempt's boundary applied.
func isolation(i *protocol.Isolation) string {
	if i == nil {
		return "-"
	}
	if i.Kind == "none" {
		return "none (unisolated)"
	}
	return fmt.Sprintf("%s, network %s", i.Kind, i.Network)
}

// formatAgents lists what a runner can run now, and its limited accounts:
// "exec,claude (codex limited until 15:04)".
func formatAgents(r protocol.RunnerView) string {
	s := strings.Join(r.Agents, ",")
	var limited []string
	for _, a := range r.Accounts {
		if a.State == protocol.AccountLimited {
			name := a.Agent
			if a.Label != "" {
				name += "/" + a.Label
			}
			limited = append(limited, name+" limited until "+a.LimitedUntil.Local().Format("Jan 2 15:04"))
		}
	}
	if len(limited) > 0 {
		s += " (" + strings.Join(limited, "; ") + ")"
	}
	return s
}
