package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// jobSpec is the deterministic part of one campaign job, all of it from
// the seed and the job's index: what it prints is recomputed by the
// checker from these alone.
type jobSpec struct {
	Index int
	Tag   string // unique in the campaign: seed and index
	Lines int    // lines printed
	Pad   string // the text after each line's number
	Every int    // sleep after every Every lines
	Nap   string // sleep(1) argument
	Keyed bool   // submitted with an idempotency key
	// Retry: the campaign, as the job's owner, retries it (once) when it
	// finds it unknown.
	Retry bool
}

func newJobSpec(seed uint64, i int) jobSpec {
	r := rand.New(rand.NewPCG(seed, uint64(i)+0x9e3779b97f4a7c15))
	pad := make([]byte, 20+r.IntN(100))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for k := range pad {
		pad[k] = letters[r.IntN(len(letters))]
	}
	s := jobSpec{Index: i, Tag: fmt.Sprintf("c%d-%d", seed, i), Lines: 20 + r.IntN(400), Pad: string(pad), Every: 10 + r.IntN(40), Nap: "0.05", Keyed: r.IntN(2) == 0, Retry: r.IntN(2) == 0}
	if r.IntN(4) == 0 {
		s.Nap = "0.3" // a long job, for the kills to find mid-run
	}
	return s
}

// key is the idempotency key of a keyed job.
func (s jobSpec) key() string { return "chaos-" + s.Tag }

// argv is the exec job: a shell loop printing Lines lines, napping now and
// then so that faults land while it runs.
func (s jobSpec) argv() []string {
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do printf 'chaos %s %%05d %s\n' $i; i=$((i+1)); if [ $((i %% %d)) -eq 0 ]; then sleep %s; fi; done; exit 0`,
		s.Lines, s.Tag, s.Pad, s.Every, s.Nap)
	return []string{"sh", "-c", script, "chaos-" + s.Tag}
}

// expected is exactly what the job prints.
func (s jobSpec) expected() []byte {
	var b strings.Builder
	for i := range s.Lines {
		fmt.Fprintf(&b, "chaos %s %05d %s\n", s.Tag, i, s.Pad)
	}
	return []byte(b.String())
}

// tagOf finds the campaign tag in a job's argv ("" when it has none).
func tagOf(args []string) string {
	if len(args) == 4 && strings.HasPrefix(args[3], "chaos-") {
		return strings.TrimPrefix(args[3], "chaos-")
	}
	return ""
}
