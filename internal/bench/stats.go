package bench

import (
	"math"
	"slices"
	"time"
)

type summary struct {
	p50, p90, p99, max, mean time.Duration
}

// summarize returns nearest-rank percentiles: pN is the smallest sample that
// at least N% of the samples do not exceed.
func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var total time.Duration
	for _, d := range s {
		total += d
	}
	return summary{
		p50:  percentile(s, 50),
		p90:  percentile(s, 90),
		p99:  percentile(s, 99),
		max:  s[len(s)-1],
		mean: total / time.Duration(len(s)),
	}
}

// percentile of sorted samples, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}
