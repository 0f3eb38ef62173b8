package sandbox

import "context"

// Host is a sandbox kind checked once on this machine. A runner checks its
// kind when it starts and builds every attempt's boundary from the Host:
// bubblewrap's version is not asked again, and the probe of an attempt's
// boundary is bounded by the attempt's context alone, not by a timer of its
// own, so a runner paused while it builds one (a suspended VM, SIGSTOP)
// does not fail the job.
type Host struct {
	bwrap *bwrapHost
}

// Probe checks that p's kind works here, as New does, and returns what it
// learnt.
func Probe(ctx context.Context, p Policy) (*Host, error) {
	p, err := p.normalize()
	if err != nil {
		return nil, err
	}
	if p.Kind != KindBwrap {
		if _, err := New(ctx, p); err != nil {
			return nil, err
		}
		return &Host{}, nil
	}
	bh, err := checkBwrap(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := bh.boundary(ctx, p, probeTimeout); err != nil {
		return nil, err
	}
	return &Host{bwrap: &bh}, nil
}

// New returns p's boundary, as the package's New does, from what Probe
// learnt where it can.
func (h *Host) New(ctx context.Context, p Policy) (Boundary, error) {
	p, err := p.normalize()
	if err != nil {
		return nil, err
	}
	if p.Kind == KindBwrap && h != nil && h.bwrap != nil {
		return h.bwrap.boundary(ctx, p, 0)
	}
	return New(ctx, p)
}
