package attemptgroup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/rules"
)

// Limits on a judge's verdict.
const (
	// MaxVerdict bounds a verdict, in bytes (a delivery's summary is
	// bounded the same way, and further).
	MaxVerdict = rules.MaxSummary
	// MaxReason bounds each attempt's reason.
	MaxReason = 2000
)

// ParseVerdict reads a judge's verdict on n attempts strictly: well-formed
// JSON (rules.CheckJSON) of a GroupVerdict with no unknown field, and a
// ranking of every attempt exactly once, by its name, each with a reason
// in plain text. It returns the ranking by attempt number, best first.
// A verdict it refuses is never trusted: the error says why.
func ParseVerdict(data []byte, n int) ([]apitypes.GroupRanked, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the judge delivered nothing")
	}
	if len(data) > MaxVerdict {
		return nil, fmt.Errorf("%d bytes; the limit is %d", len(data), MaxVerdict)
	}
	if err := rules.CheckJSON(data); err != nil {
		return nil, fmt.Errorf("not a JSON verdict: %w", err)
	}
	var v struct {
		Ranking *[]apitypes.GroupRank `json:"ranking"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not a verdict: %w", err)
	}
	if v.Ranking == nil {
		return nil, errors.New("no ranking")
	}
	out := make([]apitypes.GroupRanked, 0, n)
	seen := map[int]bool{}
	for i, r := range *v.Ranking {
		k, ok := attemptNumber(r.Attempt, n)
		switch {
		case !ok:
			return nil, fmt.Errorf("place %d: %q is not an attempt of this group (attempt-1 to attempt-%d)", i+1, rules.Clip(r.Attempt, 40), n)
		case seen[k]:
			return nil, fmt.Errorf("place %d: %s is ranked twice", i+1, r.Attempt)
		}
		if err := rules.CheckText(r.Attempt+"'s reason", r.Reason, MaxReason); err != nil {
			return nil, fmt.Errorf("place %d: %w", i+1, err)
		}
		seen[k] = true
		out = append(out, apitypes.GroupRanked{Attempt: k, Reason: r.Reason})
	}
	for k := 1; k <= n; k++ {
		if !seen[k] {
			return nil, fmt.Errorf("%s is not ranked: every attempt must be", stepID("attempt", k))
		}
	}
	return out, nil
}

// attemptNumber is K of the name attempt-K, when 1 ≤ K ≤ n.
func attemptNumber(name string, n int) (int, bool) {
	rest, ok := strings.CutPrefix(name, "attempt-")
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 1 || k > n || stepID("attempt", k) != name {
		return 0, false
	}
	return k, true
}
