package call

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"drover/internal/rules"
)

// DecodeJSON is the one decoder of what callers send the hub, request
// bodies and runner frames: one JSON value, UTF-8, no key twice
// (protocol.CheckJSON), and with knownOnly no field v does not have.
func DecodeJSON(data []byte, v any, knownOnly bool) error {
	if err := rules.CheckJSON(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if knownOnly {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// Truncate cuts s to at most n bytes without splitting a character: close
// reasons must be UTF-8.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
