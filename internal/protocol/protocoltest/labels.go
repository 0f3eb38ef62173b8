package protocoltest

import (
	"strings"

	"drover/internal/rules"
)

// LabelCase is one label and whether the label rule (protocol.CheckLabel)
// takes it. The CLI's, the runner's and the hub's tests all run LabelCases,
// so that what one of them takes none of the others refuses. Every case
// also reads back as the item Key=Value: no key holds "=" and no item
// starts or ends with a space.
type LabelCase struct {
	Name       string
	Key, Value string
	OK         bool
	Why        string // in the refusal's message
}

// LabelCases is the shared table of the label rule.
var LabelCases = []LabelCase{
	{Name: "plain", Key: "gpu", Value: "a100", OK: true},
	{Name: "empty value", Key: "gpu", Value: "", OK: true},
	{Name: "key with ._/-", Key: "example.com/zone_a-1", Value: "lab", OK: true},
	{Name: "key starting with a digit", Key: "9lives", Value: "x", OK: true},
	{Name: "value with spaces, commas and =", Key: "note", Value: "a b=c", OK: true},
	{Name: "value of unicode", Key: "city", Value: "Zürich", OK: true},
	{Name: "longest key and value", Key: strings.Repeat("k", rules.MaxLabelLen), Value: strings.Repeat("v", rules.MaxLabelLen), OK: true},

	{Name: "colon in the key", Key: "gpu:x", Value: "1", Why: `label key "gpu:x"`},
	{Name: "empty key", Key: "", Value: "v", Why: `label key ""`},
	{Name: "key starting with a dot", Key: ".hidden", Value: "v", Why: "starting with a letter or digit"},
	{Name: "key starting with a dash", Key: "-x", Value: "v", Why: "starting with a letter or digit"},
	{Name: "space in the key", Key: "a b", Value: "v", Why: `label key "a b"`},
	{Name: "comma in the key", Key: "a,b", Value: "v", Why: `label key "a,b"`},
	{Name: "non-ASCII key", Key: "zürich", Value: "v", Why: "label key"},
	{Name: "control character in the key", Key: "g\x00", Value: "v", Why: "label key"},
	{Name: "key too long", Key: strings.Repeat("k", rules.MaxLabelLen+1), Value: "v", Why: "label key"},
	{Name: "value too long", Key: "big", Value: strings.Repeat("v", rules.MaxLabelLen+1), Why: "label big: the value is"},
	{Name: "escape in the value", Key: "zone", Value: "lab\x1b[0m", Why: "the value of label zone has a control character"},
	{Name: "C1 control in the value", Key: "zone", Value: "lab\u009b", Why: "the value of label zone has a control character"},
	{Name: "tab in the value", Key: "zone", Value: "a\tb", Why: "control character"},
	{Name: "value not UTF-8", Key: "zone", Value: "\xff", Why: "not valid UTF-8"},
}

// TooManyLabels is one label more than a runner or job may have.
func TooManyLabels() map[string]string {
	m := make(map[string]string, rules.MaxLabels+1)
	for i := range rules.MaxLabels + 1 {
		m["k"+strings.Repeat("x", i)] = "v"
	}
	return m
}
