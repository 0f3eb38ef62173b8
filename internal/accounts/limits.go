package accounts

import (
	"fmt"
	"math"
)

// Limits are spend limits (0: none) a runner enforces itself: its own,
// and each account's alongside them.
type Limits struct {
	JobsPerHour int     `json:"jobs_per_hour,omitempty"`     // attempts taken in any hour
	TurnsPerJob int     `json:"turns_per_job,omitempty"`     // model turns of one attempt, where its agent reports them
	SpendPerDay float64 `json:"spend_per_day_usd,omitempty"` // USD of reported usage per UTC day
}

// Check refuses a negative or non-finite limit.
func (l Limits) Check() error {
	if l.JobsPerHour < 0 || l.TurnsPerJob < 0 || !(l.SpendPerDay >= 0) || math.IsInf(l.SpendPerDay, 0) {
		return fmt.Errorf("limits must be 0 (no limit) or more: %d jobs per hour, %d turns per job, $%v per day", l.JobsPerHour, l.TurnsPerJob, l.SpendPerDay)
	}
	return nil
}

// SetLimits replaces the limits of the account ref names.
func (s *Store) SetLimits(ref string, l Limits) (Account, error) {
	if err := l.Check(); err != nil {
		return Account{}, fmt.Errorf("set limits of account %q: %w", ref, err)
	}
	var got Account
	err := s.update(func(ix *index) error {
		i, err := find(ix.Accounts, ref)
		if err != nil {
			return err
		}
		ix.Accounts[i].Limits = l
		got = ix.Accounts[i]
		return nil
	}, nil)
	if err != nil {
		return Account{}, fmt.Errorf("set limits of account %q: %w", ref, err)
	}
	return got, nil
}
