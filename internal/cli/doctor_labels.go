package cli

import (
	"fmt"
	"strings"

	"drover/internal/rules"
	"drover/internal/sandbox"
)

// labelFix says what every label must look like: the hub's rule
// (protocol.CheckLabel), which the runner checks before it connects.
var labelFix = fmt.Sprintf("give --labels k=v,k2=v2 with keys of 1-%d letters, digits or ._/- starting with a letter or digit, values of at most %d bytes of plain text, at most %d labels",
	rules.MaxLabelLen, rules.MaxLabelLen, rules.MaxLabels)

// labelCheck is the doctor's check of a runner's --labels, by the rule the
// hub holds its hello to: it names every label that breaks it, and why.
func labelCheck(list string) sandbox.Check {
	c := sandbox.Check{Kind: "labels", Fix: labelFix}
	var bad []string
	if list != "" { // none
		for it := range strings.SplitSeq(list, ",") {
			if _, err := rules.ParseLabels([]string{it}); err != nil {
				bad = append(bad, err.Error())
			}
		}
	}
	m, err := rules.ParseLabelList(list) // the count, a key given twice
	switch {
	case len(bad) > 0:
		c.Detail = strings.Join(bad, "; ")
	case err != nil:
		c.Detail = err.Error()
	default:
		c.OK, c.Fix = true, ""
		c.Detail = fmt.Sprintf("%d labels: %s", len(m), rules.FormatLabels(m))
	}
	return c
}
