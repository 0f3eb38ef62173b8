package rules

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// The one label rule, for job and runner labels alike: the CLI checks it
// before it sends, the runner before it connects and the hub at every
// submit, hello and registration, so that a label one of them takes is
// never refused by another (a runner refused at its hello would otherwise
// only learn it by being disconnected).

// labelKeyPattern is what a label key looks like; its length is checked
// apart, so that the error can say which limit was crossed.
var labelKeyPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`)

// CheckLabel refuses a label whose key is not 1-MaxLabelLen letters,
// digits or ._/- starting with a letter or digit, or whose value is over
// MaxLabelLen bytes or not single-line plain text (CheckPlainText). The
// error names the label and why.
func CheckLabel(k, v string) error {
	switch {
	case len(k) > MaxLabelLen || !labelKeyPattern.MatchString(k):
		return fmt.Errorf("label key %q: want 1-%d letters, digits or ._/-, starting with a letter or digit", k, MaxLabelLen)
	case len(v) > MaxLabelLen:
		return fmt.Errorf("label %s: the value is %d bytes; at most %d", k, len(v), MaxLabelLen)
	}
	return CheckPlainText("the value of label "+k, v, false)
}

// CheckLabels checks each label (CheckLabel, in key order, so the same map
// gets the same error) and that there are at most MaxLabels.
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%d labels; at most %d", len(labels), MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if err := CheckLabel(k, labels[k]); err != nil {
			return err
		}
	}
	return nil
}

// ParseLabels reads k=v items (spaces around an item ignored) into a map,
// nil for none, refusing a key given twice and any label CheckLabels
// refuses.
func ParseLabels(items []string) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if len(items) > MaxLabels {
		return nil, fmt.Errorf("%d labels; at most %d", len(items), MaxLabels)
	}
	m := make(map[string]string, len(items))
	for _, it := range items {
		k, v, ok := strings.Cut(strings.TrimSpace(it), "=")
		if !ok {
			return nil, fmt.Errorf("label %q: want k=v", it)
		}
		if err := CheckLabel(k, v); err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("label %s is given twice", k)
		}
		m[k] = v
	}
	return m, nil
}

// ParseLabelList reads labels written as FormatLabels writes them,
// k=v,k2=v2 ("" for none): a value holding a comma cannot be listed.
func ParseLabelList(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	return ParseLabels(strings.Split(s, ","))
}

// FormatLabels renders labels as k=v,k=v sorted by key, as the CLI takes
// them.
func FormatLabels(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}
