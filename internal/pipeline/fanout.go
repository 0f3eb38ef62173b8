package pipeline

import (
	"bytes"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"drover/internal/gitcmd"
	"drover/internal/pipeline/spec"
	"drover/internal/rules"
	"drover/internal/store"
)

// fanOut advances a for_each step: one job per item, each on the step's
// input commit and its own branch, at most max_parallel at once, and never
// two whose touches overlap at the same time. It is done when every item
// is; its output is the items' commits, in item order.
func (ps *pass) fanOut(ctx context.Context, s *spec.Step) error {
	f := s.ForEach
	items, err := ps.items(s)
	if err != nil {
		ps.failed = fmt.Sprintf("step %s: %v", s.ID, err)
		return nil
	}
	in, err := ps.input(ctx, s, nil)
	if err != nil || in == "" {
		return err
	}
	globs := make([][]string, len(items))
	for i, it := range items {
		if globs[i], err = spec.Touches(f.Touches, it, ps.params); err != nil {
			ps.failed = fmt.Sprintf("step %s: item %q: %v", s.ID, it, err)
			return nil
		}
	}
	commits := make([]string, len(items))
	var active [][]string
	var waiting []int
	done := 0
	for i := range items {
		r := ps.runs[runKey(s.ID, i, 1)]
		switch {
		case r == nil:
			waiting = append(waiting, i)
		case r.State == store.RunRunning:
			active = append(active, globs[i])
		case ps.settled(s, r):
			commits[i] = r.Commit
			done++
		default:
			return nil // failed or unknown: settled said why
		}
	}
	// Items recorded earlier replay first, at no cost and without a slot;
	// the others start together (each submission checks its source).
	var starts []int
	for _, i := range waiting {
		if len(active)+len(starts) >= f.MaxParallel {
			break
		}
		if overlapsAny(globs[i], active) {
			continue
		}
		r, err := ps.start(ctx, s, i, items[i], 1, in, "", false)
		if err != nil {
			return err
		}
		if r != nil {
			commits[i] = r.Commit
			done++
			continue
		}
		starts = append(starts, i)
		active = append(active, globs[i])
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, i := range starts {
		g.Go(func() error {
			_, err := ps.ensure(gctx, s, i, items[i], 1, in, "")
			return err
		})
	}
	if err := g.Wait(); err != nil || ps.failed != "" {
		return err
	}
	if done == len(items) {
		ps.out[s.ID] = &output{commit: in, items: commits}
	}
	return nil
}

// items are a for_each step's items: its own, or what the step it names
// delivered (a JSON list of strings, or an object whose "items" is one).
func (ps *pass) items(s *spec.Step) ([]string, error) {
	f := s.ForEach
	var items []string
	if f.From == "" {
		for _, it := range f.Items {
			items = append(items, spec.Expand(it, ps.lookup("")))
		}
		return items, nil
	}
	data := []byte(ps.out[f.From].summary)
	if err := rules.CheckJSON(data); err != nil {
		return nil, fmt.Errorf("step %s delivered no list of items: %w", f.From, err)
	}
	if err := json.Unmarshal(data, &items); err != nil {
		var obj struct {
			Items []string `json:"items"`
		}
		if err := json.Unmarshal(data, &obj); err != nil || obj.Items == nil {
			return nil, fmt.Errorf("step %s delivered no list of items (a JSON list of strings, or {\"items\": [...]})", f.From)
		}
		items = obj.Items
	}
	if len(items) > spec.MaxItems {
		return nil, fmt.Errorf("step %s delivered %d items; the limit is %d", f.From, len(items), spec.MaxItems)
	}
	for _, it := range items {
		if err := rules.CheckText("item", it, rules.MaxArgsBytes); err != nil {
			return nil, fmt.Errorf("step %s delivered an item that cannot be one: %w", f.From, err)
		}
	}
	return items, nil
}

// overlapsAny says whether globs overlap any of others.
func overlapsAny(globs []string, others [][]string) bool {
	for _, o := range others {
		for _, a := range globs {
			for _, b := range o {
				if overlap(a, b) {
					return true
				}
			}
		}
	}
	return false
}

// overlap says whether two touches globs may name a file in common. It
// errs on the side of yes: two globs overlap unless the fixed parts before
// their first wildcard differ before either ends.
func overlap(a, b string) bool {
	pa, pb := literal(a), literal(b)
	return strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)
}

// literal is a glob up to its first wildcard.
func literal(g string) string {
	if i := strings.IndexAny(g, `*?[`); i >= 0 {
		return g[:i]
	}
	return g
}

// integrate merges the commits of the steps it names, in their order (a
// for_each step's items in item order), on the hub: the merge is made the
// same way every time (its date is the pipeline's start), recorded as a
// job of the requester, and a conflict stops the pipeline for a person,
// naming the item and the files.
func (ps *pass) integrate(ctx context.Context, s *spec.Step) error {
	key := runKey(s.ID, -1, 1)
	if r := ps.runs[key]; r != nil {
		if ps.settled(s, r) {
			ps.out[s.ID] = &output{commit: r.Commit}
		}
		return nil
	}
	type part struct{ what, commit string }
	var parts []part
	for _, id := range s.Steps {
		o := ps.out[id]
		if o == nil {
			return nil // validation puts them upstream; a repeated step may be in a later round
		}
		if ps.byID[id].ForEach != nil {
			for i, c := range o.items {
				parts = append(parts, part{fmt.Sprintf("%s item %d (%s)", id, i, ps.runs[runKey(id, i, 1)].ItemValue), c})
			}
			continue
		}
		parts = append(parts, part{id, o.commit})
	}
	now := ps.e.cfg.Now()
	r := &store.PipelineRun{PipelineID: ps.p.ID, Key: key, Step: s.ID, Round: 1, Item: -1, Tries: 1, CreatedAt: now, UpdatedAt: now}
	head := parts[0].commit
	r.Input = head
	inputs := make([]string, len(parts))
	for i, pt := range parts {
		inputs[i] = "merge=" + pt.commit
	}
	r.Hash = s.Hash(inputs...)
	// The same commits merged before replay that merge and its job: a
	// merge made again would differ by its date.
	var res store.StepResult
	err := ps.e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		res, err = tx.StepResult(ps.p.Project, r.Hash)
		return err
	})
	switch {
	case err == nil:
		r.State, r.Replayed, r.JobID, r.Commit = store.RunDone, true, res.JobID, res.Commit
		ps.replays++
		if err := ps.save(ctx, r, "replayed", fmt.Sprintf("step %s replayed the merge of job %s (%s)", key, res.JobID, short(res.Commit))); err != nil {
			return err
		}
		ps.out[s.ID] = &output{commit: r.Commit}
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("look up step %s's recorded merge: %w", key, err)
	}
	var names []string
	for _, pt := range parts[1:] {
		next, conflicts, err := ps.merge(ctx, head, pt.commit, fmt.Sprintf("Merge %s into the pipeline's work", pt.what))
		if err != nil {
			return err
		}
		if conflicts != nil {
			r.State = store.RunNeedsHuman
			r.Reason = fmt.Sprintf("merging %s conflicts in %s", pt.what, strings.Join(conflicts, ", "))
			if err := ps.save(ctx, r, "conflict", "step "+key+": "+r.Reason); err != nil {
				return err
			}
			ps.settled(s, r)
			return nil
		}
		head = next
		names = append(names, pt.what)
	}
	v, err := ps.e.core.Record(ctx, ps.c, Recorded{
		Key: fmt.Sprintf("%s%s:%s:1", KeyPrefix, ps.p.ID, key), Project: ps.p.Project, Base: parts[0].commit, Head: head,
		Agent: "integrate", Summary: fmt.Sprintf("merged %s onto %s", strings.Join(names, ", "), parts[0].what),
	})
	if err != nil {
		return fmt.Errorf("record step %s's merge: %w", key, err)
	}
	r.JobID, r.State, r.Commit = v.ID, store.RunDone, head
	if err := ps.saveWith(ctx, r, "merged", fmt.Sprintf("step %s merged %d commits into %s (job %s)", key, len(parts), short(head), v.ID),
		&store.StepResult{Project: ps.p.Project, Hash: r.Hash, JobID: v.ID, Commit: head, CreatedAt: now}); err != nil {
		return err
	}
	ps.out[s.ID] = &output{commit: head}
	return nil
}

// ancestor says whether commit a is an ancestor of b in the project's
// repository.
func (ps *pass) ancestor(ctx context.Context, a, b string) (bool, error) {
	_, err := ps.e.cfg.Git.Run(ctx, gitcmd.Cmd{Dir: ps.dir, Args: []string{"merge-base", "--is-ancestor", a, b}})
	var ge *gitcmd.Error
	if errors.As(err, &ge) && ge.Code == 1 {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("compare commits %s and %s: %w", short(a), short(b), err)
	}
	return true, nil
}

// merge merges b into a in the hub's repository without a worktree: a
// fast-forward when one holds the other, else a merge commit of git
// merge-tree's tree with a fixed identity and date, so the same inputs
// make the same commit. conflicts names the files when they conflict.
func (ps *pass) merge(ctx context.Context, a, b, msg string) (string, []string, error) {
	if ok, err := ps.ancestor(ctx, b, a); err != nil || ok {
		return a, nil, err
	}
	if ok, err := ps.ancestor(ctx, a, b); err != nil || ok {
		return b, nil, err
	}
	out, err := ps.e.cfg.Git.Run(ctx, gitcmd.Cmd{Dir: ps.dir, Args: []string{"merge-tree", "--write-tree", "--name-only", "--no-messages", a, b}})
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var ge *gitcmd.Error
	if errors.As(err, &ge) && ge.Code == 1 {
		if len(lines) < 2 {
			return "", []string{"(git named no file)"}, nil
		}
		return "", lines[1:], nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("merge %s into %s: %w", short(b), short(a), err)
	}
	date := fmt.Sprintf("%d +0000", ps.p.CreatedAt.Unix())
	env := []string{
		"GIT_AUTHOR_NAME=drover", "GIT_AUTHOR_EMAIL=drover@localhost", "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=drover", "GIT_COMMITTER_EMAIL=drover@localhost", "GIT_COMMITTER_DATE=" + date,
	}
	c, err := ps.e.cfg.Git.Run(ctx, gitcmd.Cmd{Dir: ps.dir, Env: env, Stdin: bytes.NewReader([]byte(msg + "\n")),
		Args: []string{"commit-tree", lines[0], "-p", a, "-p", b}})
	if err != nil {
		return "", nil, fmt.Errorf("commit the merge of %s into %s: %w", short(b), short(a), err)
	}
	return strings.TrimSpace(string(c)), nil, nil
}
