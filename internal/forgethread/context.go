package forgethread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"drover/internal/forge"
	"drover/internal/protocol"
	"drover/internal/store"
)

// Bounds of the forge section of an agent's context.
const (
	// maxText bounds one text (a body, a comment) in it, in bytes.
	maxText = 8 << 10
	// maxChecks bounds the checks listed.
	maxChecks = 100
	// readTimeout bounds the reads of one context call.
	readTimeout = 30 * time.Second
)

// Context reads job jobID's thread from the forge for its agent, now: nil
// for a job without one. The caller has checked that jobID is the asking
// attempt's job, so the agent reads its own thread only. What the forge
// does not answer becomes a note in the section, and what does not fit
// protocol.ForgeBudget is left out with a note: it fails only when the
// hub's own store does.
func (s *Service) Context(ctx context.Context, jobID string) (*protocol.ForgeContext, error) {
	th, err := s.thread(ctx, jobID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read the forge thread of job %s: %w", jobID, err)
	}
	t := targetOf(th)
	fc := &protocol.ForgeContext{Forge: th.Forge, Repo: th.Repo, Number: th.Number, IsPR: th.IsPR}
	f, kind, err := s.core.Forge(ctx, th.Forge)
	if err != nil {
		msg := "the forge connection could not be opened"
		switch {
		case errors.Is(err, ErrNoThreads):
			msg = ErrNoThreads.Error()
		case errors.Is(err, store.ErrNotFound):
			msg = "the forge connection " + th.Forge + " is gone"
		}
		fc.Notes = append(fc.Notes, msg)
		return fc, nil
	}
	// The agent waits on this call: a slow forge costs it notes, not time.
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	r := reader{fc: fc, budget: protocol.ForgeBudget}
	n := forge.ThreadNumber(kind, t.Number, t.IsPR)
	is, err := f.Issue(ctx, t.Repo, n)
	if r.ok("the issue", err) {
		fc.URL, fc.Title, fc.Author, fc.State, fc.IsPR = is.URL, r.text(is.Title), is.Author, is.State, is.IsPR
		fc.Body, fc.Labels = r.text(is.Body), is.Labels
		fc.HeadSHA, fc.HeadBranch, fc.BaseBranch = is.HeadSHA, is.HeadBranch, is.BaseBranch
		r.spend(fc)
	}
	if fc.IsPR && fc.HeadSHA != "" {
		cs, err := f.Checks(ctx, t.Repo, fc.HeadSHA)
		if r.ok("the checks", err) {
			if len(cs) > maxChecks {
				r.note(fmt.Sprintf("%d of %d checks left out", len(cs)-maxChecks, len(cs)))
				cs = cs[:maxChecks]
			}
			for _, c := range cs {
				fc.Checks = append(fc.Checks, protocol.ForgeCheck{Name: r.text(c.Name), Status: c.Status, Conclusion: c.Conclusion, URL: c.URL})
			}
		}
		r.spend(fc.Checks)
	}
	if fc.IsPR {
		rts, err := f.ReviewThreads(ctx, t.Repo, n)
		if r.ok("the review threads", err) {
			fc.Threads = keepNewest(&r, "unresolved review threads", rts, func(rt ReviewThread) (protocol.ForgeReviewThread, bool) {
				ft := protocol.ForgeReviewThread{Path: rt.Path, Line: rt.Line}
				for _, c := range rt.Comments {
					ft.Comments = append(ft.Comments, r.comment(c))
				}
				return ft, !rt.Resolved
			})
		}
		rvs, err := f.Reviews(ctx, t.Repo, n)
		if r.ok("the reviews", err) {
			fc.Reviews = keepNewest(&r, "reviews", rvs, func(rv Review) (protocol.ForgeReview, bool) {
				return protocol.ForgeReview{Author: rv.Author, State: rv.State, Body: r.text(rv.Body), CommitID: rv.CommitID}, true
			})
		}
	}
	cs, err := f.Comments(ctx, t.Repo, n)
	if r.ok("the comments", err) {
		fc.Comments = keepNewest(&r, "comments", cs, func(c Comment) (protocol.ForgeComment, bool) { return r.comment(c), true })
	}
	return fc, nil
}

// reader fills a forge section within its budget of bytes.
type reader struct {
	fc     *protocol.ForgeContext
	budget int
}

// ok says whether a read succeeded, noting the failure when it did not.
func (r *reader) ok(what string, err error) bool {
	if err != nil {
		r.note(what + " could not be read: " + noteOf(err))
	}
	return err == nil
}

func (r *reader) note(s string) { r.fc.Notes = append(r.fc.Notes, s) }

// text is one text of the section, cut at maxText bytes.
func (r *reader) text(s string) string { return clip(s, maxText) }

func (r *reader) comment(c Comment) protocol.ForgeComment {
	return protocol.ForgeComment{Author: c.Author, Body: r.text(c.Body), CreatedAt: c.CreatedAt.UTC()}
}

// spend takes v's size from the budget; fits does when it fits.
func (r *reader) spend(v any) { r.budget -= size(v) }

func (r *reader) fits(v any) bool {
	n := size(v)
	if n > r.budget {
		return false
	}
	r.budget -= n
	return true
}

func size(v any) int {
	b, _ := json.Marshal(v) // the section's types always encode
	return len(b)
}

// keepNewest views items (oldest first), keeps those view selects, and of
// them the newest that fit the budget: the answer is oldest first, with a
// note of how many older ones were left out.
func keepNewest[T, V any](r *reader, what string, items []T, view func(T) (V, bool)) []V {
	var kept []V
	left := 0
	for i := len(items) - 1; i >= 0; i-- {
		v, ok := view(items[i])
		if !ok {
			continue
		}
		if left > 0 || !r.fits(v) {
			left++
			continue
		}
		kept = append(kept, v)
	}
	slices.Reverse(kept)
	if left > 0 {
		r.note(fmt.Sprintf("the %d oldest %s were left out: the section holds at most %d bytes", left, what, protocol.ForgeBudget))
	}
	return kept
}

// noteOf is a forge's error as a note to the agent: what forge.Error says
// (never a credential).
func noteOf(err error) string {
	if fe, ok := errors.AsType[*forge.Error](err); ok {
		return fe.Error()
	}
	return "the forge did not answer"
}
