package rules

import (
	"maps"
	"slices"
	"strings"
)

// ContextUpload is one context file sent with a submission.
type ContextUpload struct {
	Name string `json:"name"` // relative, clean, no ".."
	Data []byte `json:"data"` // base64 in JSON
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
