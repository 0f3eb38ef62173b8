package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"drover/internal/pipeline/spec"
	"drover/internal/rules"
	"drover/internal/store"
)

// readOutcome is how a step another reads ended, and the commit its
// change starts from.
type readOutcome struct {
	spec.ReadOutcome
	from string
}

// readOutcomes are how the steps s reads ended (each has: s waits for
// them), in the order of its reads.
func (ps *pass) readOutcomes(s *spec.Step) []readOutcome {
	out := make([]readOutcome, 0, len(s.Reads))
	for _, id := range s.Reads {
		o := readOutcome{ReadOutcome: spec.ReadOutcome{Step: id, State: string(store.RunDone)}}
		r := ps.latestRun(id)
		switch {
		case r != nil && r.State != store.RunDone:
			o.State = string(r.State) // failed, unknown or skipped
		case ps.out[id].failed:
			o.State = string(store.RunSkipped)
		default:
			o.Commit = ps.out[id].commit
			if r != nil && r.Commit == o.Commit {
				o.from = r.Input
			}
		}
		out = append(out, o)
	}
	return out
}

// readFiles are the context files of a step that reads others: each one's
// outcome in spec.ReadsFile, and the diff of each one's change.
func (ps *pass) readFiles(ctx context.Context, reads []readOutcome) ([]rules.ContextUpload, error) {
	var files []rules.ContextUpload
	outcomes := make([]spec.ReadOutcome, 0, len(reads))
	for _, o := range reads {
		if o.from != "" && o.Commit != "" && o.from != o.Commit {
			diff, err := ps.e.cfg.Git.Out(ctx, ps.dir, "diff", "--no-ext-diff", "--no-textconv", o.from, o.Commit)
			if err != nil {
				return nil, fmt.Errorf("diff step %s's change: %w", o.Step, err)
			}
			if len(diff) > spec.MaxReadDiff {
				diff, o.DiffTruncated = strings.ToValidUTF8(diff[:spec.MaxReadDiff], ""), true
			}
			if diff != "" {
				o.Diff = o.Step + ".diff"
				files = append(files, rules.ContextUpload{Name: o.Diff, Data: []byte(diff + "\n")})
			}
		}
		outcomes = append(outcomes, o.ReadOutcome)
	}
	b, err := json.MarshalIndent(outcomes, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the steps read: %w", err)
	}
	return append(files, rules.ContextUpload{Name: spec.ReadsFile, Data: append(b, '\n')}), nil
}
