package cli

import (
	"drover/internal/netpolicy"

	"bytes"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// Text output of the read commands. --json prints the protocol types instead.

// Untrusted text. Most of what the CLI prints was written by someone else:
// job arguments, prompts, questions and answers, summaries, messages, names,
// labels, remotes, the hub's error messages. Such text reaches the terminal
// only through safe, so that none of it can move the cursor, clear the
// screen, retitle the window or reorder what is shown: fprintf applies it
// to every string argument (the format is the CLI's own text) and jsonSafe
// to --json output.

// escaped reports whether r is shown as an escape sequence instead of
// itself: the C0 controls (tab and newline included: a table cell or a line
// must stay one), DEL, the C1 controls (U+009B is a one-character CSI) and
// the bidirectional formatting characters, which reorder the text around them.
func escaped(r rune) bool {
	switch {
	case rules.IsControl(r):
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// safe returns s with every character escaped reports written as a visible
// escape (\t, \n, \r, \x1b, \u009b) and every byte that is not UTF-8 as
// \xHH; the rest of Unicode is kept as it is.
func safe(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || escaped(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && escaped(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case escaped(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// safeArgs passes the string-like arguments of a print through safe:
// strings (and string types), string slices, errors and other Stringers
// that are not numbers. Numbers, booleans and the like cannot hold text.
func safeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, arg := range args {
		out[i] = arg
		v := reflect.ValueOf(arg)
		if !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil() {
			continue // fmt prints <nil>
		}
		switch x := arg.(type) {
		case string:
			out[i] = safe(x)
		case []string:
			ss := make([]string, len(x))
			for j, s := range x {
				ss[j] = safe(s)
			}
			out[i] = ss
		case error:
			out[i] = safe(x.Error())
		case fmt.Stringer:
			if k := v.Kind(); k == reflect.String || k == reflect.Struct || k == reflect.Pointer {
				out[i] = safe(x.String())
			}
		default:
			if v.Kind() == reflect.String {
				out[i] = safe(v.String())
			}
		}
	}
	return out
}

// fprintf is fmt.Fprintf with every string argument made safe; format is
// the CLI's own text. Everything the CLI prints goes through it, but raw
// data: logs, diffs, JSON (see jsonSafe), a new token.
func fprintf(w io.Writer, format string, args ...any) (int, error) {
	return fmt.Fprintf(w, format, safeArgs(args)...)
}

// jsonSafe escapes in JSON what encoding/json leaves as it is but a
// terminal may act on: DEL, the C1 controls and the bidirectional
// formatting characters (it escapes the C0 ones itself). Outside strings
// JSON is ASCII, so each becomes a \uXXXX escape of the same character:
// a decoder reads the same document.
func jsonSafe(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return r >= 0x7f && escaped(r) }) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r >= 0x7f && escaped(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

func printJobs(w io.Writer, js []apitypes.JobView, now time.Time) error {
	t := newTable(w)
	fprintf(t, "ID\tSTATE\tAGENT\tREQUESTER\tRUNNER\tATTEMPTS\tAGE\tEXIT/REASON\n")
	for _, j := range js {
		why := outcome(j.ExitCode, j.Reason)
		if j.State == job.Queued && j.Waiting != "" {
			why = "waiting: " + j.Waiting
		}
		fprintf(t, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, jobState(j), j.Agent, j.Requester,
			dash(j.Runner), len(j.Attempts), ago(j.CreatedAt, now), why)
	}
	return t.Flush()
}

// printJob prints one job and its attempts, as `drover show` does.
func printJob(w io.Writer, j apitypes.JobView, now time.Time) error {
	t := newTable(w)
	row := func(k, v string) {
		if v != "" {
			fprintf(t, "%s:\t%s\n", k, v)
		}
	}
	row("Job", j.ID)
	row("State", jobState(j))
	row("Waiting", j.Waiting)
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
	row("Image", j.Image)
	if len(j.Sparse) > 0 {
		row("Sparse", strings.Join(j.Sparse, ","))
	}
	if j.Network != nil {
		row("Network", "agent narrowed to "+netpolicy.Describe(j.Network))
	}
	row("Created", stamp(&j.CreatedAt, now))
	row("Finished", stamp(j.FinishedAt, now))
	if j.ExitCode != nil || j.Reason != job.ReasonNone {
		row("Outcome", outcome(j.ExitCode, j.Reason))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if j.Publication != nil {
		fprintf(w, "\n")
		if err := printPublication(w, *j.Publication); err != nil {
			return err
		}
	}
	if len(j.Attempts) == 0 {
		_, err := fprintf(w, "\nNo attempts yet.\n")
		return err
	}
	fprintf(w, "\n")
	t = newTable(w)
	fprintf(t, "ATTEMPT\tSTATE\tRUNNER\tACCOUNT\tOFFERED AGO\tRAN FOR\tEXIT/REASON\tLOG\tISOLATION\tMESSAGE\n")
	for _, a := range j.Attempts {
		fprintf(t, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Number, a.State, dash(a.Runner), dash(a.Account), ago(a.OfferedAt, now),
			ran(a, now), outcome(a.ExitCode, a.Reason), strconv.FormatInt(a.LogSize, 10)+"B", isolation(a.Isolation),
			dash(oneLine(a.Message)))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	for _, a := range j.Attempts {
		printEgress(w, a)
	}
	var total protocol.Usage
	for _, a := range j.Attempts {
		if u := a.Usage; u != nil {
			fprintf(w, "attempt %d used %d input and %d output tokens (cache %d read, %d written), $%.4f\n",
				a.Number, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CostUSD)
			total = total.Add(*u)
		}
	}
	if total != (protocol.Usage{}) {
		fprintf(w, "in all: %d input and %d output tokens, $%.4f\n", total.InputTokens, total.OutputTokens, total.CostUSD)
	}
	printTranscript(w, j.Events)
	for _, q := range j.Questions {
		fprintf(w, "\n")
		printQuestion(w, q, now)
	}
	if j.Summary != "" {
		fprintf(w, "\nDelivered:\n")
		for _, line := range strings.Split(j.Summary, "\n") {
			fprintf(w, "  %s\n", line)
		}
	}
	return nil
}

// printTranscript prints a native agent's turns, one line each, from the
// job's turn events.
func printTranscript(w io.Writer, evs []apitypes.EventView) {
	first := true
	for _, e := range evs {
		if e.Kind != protocol.KindTurn && e.Kind != protocol.KindCompaction {
			continue
		}
		if first {
			fprintf(w, "\nTranscript:\n")
			first = false
		}
		fprintf(w, "  %s\n", oneLine(e.Message))
	}
}

func printRunners(w io.Writer, rs []apitypes.RunnerView, now time.Time) error {
	t := newTable(w)
	fprintf(t, "NAME\tOWNER\tACCESS\tSTATUS\tSLOTS\tRUNNING\tAGENTS\tLABELS\tVERSION\tLAST SEEN\n")
	for _, r := range rs {
		status := "offline"
		switch {
		case r.Revoked:
			status = "revoked"
		case r.Connected && r.NotReady != "":
			status = "not ready: " + r.NotReady
		case r.Connected:
			status = "connected"
		}
		last := "-"
		if r.LastSeen != nil {
			last = ago(*r.LastSeen, now)
		}
		fprintf(t, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Name, r.Owner, formatAccess(r), status, r.Slots, r.Running,
			dash(formatAgents(r)), dash(formatLabels(r.Labels)), dash(r.Version), last)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		for _, s := range r.Offered {
			flag := ""
			if s.Project != "" {
				flag = " --project " + s.Project
			}
			fprintf(w, "%s's runner %s waits for your consent: drover runners accept %s%s (or decline)\n", r.Owner, r.Name, r.Name, flag)
		}
	}
	return nil
}

// formatAccess says whose jobs a runner runs: "hub" (everyone's), "private"
// (its owner's), or "shared: user:bob,project:web" (its owner's and theirs;
// a share its recipient has yet to accept "user:bob(pending)"); another's
// runner waiting for the caller's consent "offered: user:alice(pending)".
func formatAccess(r apitypes.RunnerView) string {
	switch {
	case r.Access == apitypes.AccessHub:
		return "hub"
	case len(r.SharedWith) > 0:
		return "shared: " + formatShares(r.SharedWith)
	case len(r.Offered) > 0:
		return "offered: " + formatShares(r.Offered)
	}
	return dash(r.Access) // "-" from a hub that does not say
}

// formatShares lists shares compactly: "user:bob,project:web(pending)".
func formatShares(ss []apitypes.Share) string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		var one string
		switch {
		case s.User != "":
			one = "user:" + s.User
		case s.Project != "":
			one = "project:" + s.Project
		default:
			continue
		}
		if s.Pending {
			one += "(pending)"
		}
		out = append(out, one)
	}
	return strings.Join(out, ",")
}

func jobState(j apitypes.JobView) string {
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
func ran(a apitypes.AttemptView, now time.Time) string {
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

func formatLabels(m map[string]string) string { return rules.FormatLabels(m) }

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

// printEgress says under which network policies an attempt ran and which
// hosts its egress proxy refused, each with the command that allows it.
func printEgress(w io.Writer, a apitypes.AttemptView) {
	i := a.Isolation
	if i == nil || (i.Policy == "" && len(i.Denials) == 0 && len(i.Caches) == 0) {
		return
	}
	if i.Policy != "" {
		fprintf(w, "attempt %d network policy: %s\n", a.Number, i.Policy)
	}
	if len(i.Caches) > 0 {
		reused := ""
		if i.SetupReused {
			reused = " (setup result reused)"
		}
		fprintf(w, "attempt %d caches: %s%s\n", a.Number, strings.Join(i.Caches, ","), reused)
	}
	for _, d := range i.Denials {
		fprintf(w, "attempt %d denied %s (%s phase, %d time(s)); to allow it: %s\n", a.Number, d.Host, d.Phase, d.Count, dash(d.Allow))
	}
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
func formatAgents(r apitypes.RunnerView) string {
	s := strings.Join(r.Agents, ",")
	var limited []string
	for _, a := range r.Accounts {
		name := a.Agent
		if a.Label != "" {
			name += "/" + a.Label
		}
		switch a.State {
		case protocol.AccountLimited:
			limited = append(limited, name+" limited until "+a.LimitedUntil.Local().Format("Jan 2 15:04"))
		case protocol.AccountNeedsLogin, protocol.AccountNeedsAttention:
			limited = append(limited, name+" "+a.State)
		}
	}
	if len(limited) > 0 {
		s += " (" + strings.Join(limited, "; ") + ")"
	}
	return s
}
