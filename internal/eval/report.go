package eval

import (
	"context"
	"maps"
	"math"
	"slices"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// EvalReport is an evaluation's numbers and its predictions.
func (e *Evals) EvalReport(ctx context.Context, c call.Caller, id string) (apitypes.EvalReport, error) {
	ev, items, err := e.load(ctx, c, id)
	if err != nil {
		return apitypes.EvalReport{}, err
	}
	return report(ev, items), nil
}

// report counts every graded sample once: refused lines and skipped
// samples are listed, never counted; a sample whose agent failed counts
// as not resolved.
func report(ev store.Eval, items []store.EvalItem) apitypes.EvalReport {
	v := viewOf(ev, items)
	r := apitypes.EvalReport{Eval: v, N: max(v.Attempts, 1), Repeats: []apitypes.EvalRepeat{}, Predictions: []apitypes.EvalPrediction{}}
	type tally struct{ n, c int }
	byInstance := map[string]*tally{}
	var order []string
	repeats := map[int]*apitypes.EvalRepeat{}
	for _, it := range items {
		r.CostUSD += it.CostUSD
		r.Tokens += it.Tokens
		switch it.State {
		case store.ItemRefused:
			r.Refused++
			continue
		case store.ItemSkipped:
			r.Skipped++
			continue
		case store.ItemQueued, store.ItemAgent, store.ItemGrading:
			r.Pending++
			continue
		}
		t := byInstance[it.InstanceID]
		if t == nil {
			t = &tally{}
			byInstance[it.InstanceID] = t
			order = append(order, it.InstanceID)
		}
		rp := repeats[it.Repeat]
		if rp == nil {
			rp = &apitypes.EvalRepeat{Repeat: it.Repeat}
			repeats[it.Repeat] = rp
		}
		t.n++
		rp.Total++
		r.Total++
		if it.State == store.ItemResolved {
			t.c++
			rp.Resolved++
			r.Resolved++
		}
		if it.Repeat == 1 && it.Attempt == 1 {
			r.Predictions = append(r.Predictions, apitypes.EvalPrediction{InstanceID: it.InstanceID, ModelNameOrPath: ev.Name, ModelPatch: it.Patch})
		}
	}
	r.Instances = len(order)
	for _, id := range order {
		t := byInstance[id]
		r.PassAt1 += PassAtK(t.n, t.c, 1)
		r.PassAtN += PassAtK(t.n, t.c, r.N)
	}
	if r.Instances > 0 {
		r.PassAt1 /= float64(r.Instances)
		r.PassAtN /= float64(r.Instances)
	}
	if r.Resolved > 0 {
		r.CostPerResolved = r.CostUSD / float64(r.Resolved)
		r.TokensPerResolved = float64(r.Tokens) / float64(r.Resolved)
	}
	var rates []float64
	for _, n := range slices.Sorted(maps.Keys(repeats)) {
		rp := repeats[n]
		rp.Rate = float64(rp.Resolved) / float64(rp.Total)
		r.Repeats = append(r.Repeats, *rp)
		rates = append(rates, rp.Rate)
	}
	r.Min, r.Max, r.Stddev = spread(rates)
	return r
}

// PassAtK is the unbiased estimator of pass@k (Chen et al., 2021) for an
// instance with n samples of which c passed: 1 - C(n-c, k) / C(n, k). With
// fewer than k samples, k is n: 1 when one passed.
func PassAtK(n, c, k int) float64 {
	switch {
	case n <= 0:
		return 0
	case k > n:
		k = n
	}
	if n-c < k {
		return 1
	}
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p
}

// spread is the least, the greatest and the sample standard deviation of
// xs (0 for fewer than two).
func spread(xs []float64) (lo, hi, sd float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	lo, hi = slices.Min(xs), slices.Max(xs)
	if len(xs) < 2 {
		return lo, hi, 0
	}
	var mean float64
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return lo, hi, math.Sqrt(ss / float64(len(xs)-1))
}
