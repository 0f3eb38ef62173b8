package gitcmd

import "fmt"

// Refusal is a source or a transfer drover refuses, with a reason that is
// safe and useful to show the sender. Anything else is an internal fault.
type Refusal struct{ Reason string }

func (e *Refusal) Error() string { return e.Reason }

// Refusef makes a *Refusal.
func Refusef(format string, args ...any) error {
	return &Refusal{Reason: fmt.Sprintf(format, args...)}
}
