package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// Fuzz targets for what a peer sends: the gateway's frames and every
// message they carry, durations, text, context files and answers. Each
// checks that a parser never panics, that a refusal is an error (nothing
// half-decoded is trusted) and, where a format has one, that it round-trips.

// maxFuzzInput bounds what a target looks at: a frame is at most MaxFrame,
// and larger inputs only slow the fuzzer down.
const maxFuzzInput = 64 << 10

// frameSeeds are frames a runner sends, well formed and not.
var frameSeeds = []string{
	`{"type":"hello","body":{"protocol":1,"runner_version":"dev","slots":2,"labels":{"gpu":"a100"},"attempts":[{"job":"j-1","attempt":"a-1","epoch":1,"phase":"running"}],"agents":["exec","claude"],"accounts":[{"id":"acc-1","agent":"claude","kind":"login","state":"ready","limited_until":"2026-01-01T00:00:00Z"}]}}`,
	`{"type":"status","body":{"slots":0,"attempts":[]}}`,
	`{"type":"heartbeat"}`,
	`{"type":"accept","id":"rq-1","body":{"job":"j-1","attempt":"a-1","epoch":3}}`,
	`{"type":"decline","id":"rq-2","body":{"job":"j-1","attempt":"a-1","epoch":3,"reason":"busy"}}`,
	`{"type":"log","id":"rq-3","body":{"job":"j-1","attempt":"a-1","epoch":3,"offset":0,"data":"aGVsbG8K"}}`,
	`{"type":"log","id":"rq-4","body":{"job":"j","attempt":"a","epoch":1,"offset":9223372036854775807,"data":"eA=="}}`,
	`{"type":"finish","id":"rq-5","body":{"job":"j-1","attempt":"a-1","epoch":3,"outcome":{"state":"completed","reason":"","exit_code":0},"log_size":6,"log_sha256":"ab","usage":{"input_tokens":1,"output_tokens":2,"cost_usd":0.5}}}`,
	`{"type":"ask","id":"rq-6","body":{"job":"j-1","attempt":"a-1","epoch":3,"question":"which?","choices":["a","b"],"expires_in_ms":60000}}`,
	`{"type":"ask","id":"rq-7","body":{"job":"j","attempt":"a","epoch":1,"question":"q","expires_in_ms":9223372036854775807}}`,
	`{"type":"deliver","id":"rq-8","body":{"job":"j-1","attempt":"a-1","epoch":3,"summary":"done"}}`,
	`{"type":"context","id":"rq-9","body":{"job":"j-1","attempt":"a-1","epoch":3}}`,
	`{"type":"offer","body":{"job":"j","attempt":"a","epoch":1,"spec":{"agent":"exec","args":["true"],"requester":"u","log_cap":10,"timeout":1000,"repo":{"project":"p","base":"b","head":"h","url":"u"},"context":[{"name":"a.txt","size":1}],"resume":{"attempt":1,"history":[]}}}}`,
	`{"type":"reply","reply_to":"rq-1","body":{"ok":false,"error":{"code":"offset_mismatch","message":"m","size":3}}}`,
	`{"type":"welcome","body":{"protocol":1,"heartbeat_interval":-1,"lease":1e3}}`,
	`{"type":"accept","id":"x","body":null}`,
	`{"type":"log","id":"x","body":{"data":"!!"}}`,
	`{"type":1}`,
	`{"type":"status","body":{"slots":1,"slots":2}}`,
	`[]`,
	`{"type":"hello","body":"\u0000"}`,
}

func FuzzFrame(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		var fr Frame
		if err := json.Unmarshal(data, &fr); err != nil {
			return
		}
		// The envelope round-trips: encoding what was decoded and decoding
		// it again gives the same frame (json.RawMessage is compacted once).
		enc, err := json.Marshal(fr)
		if err != nil {
			// A body that is not one JSON value cannot come out of Unmarshal.
			t.Fatalf("a decoded frame does not encode: %v", err)
		}
		var again Frame
		if err := json.Unmarshal(enc, &again); err != nil {
			t.Fatalf("an encoded frame does not decode: %v\n%s", err, enc)
		}
		enc2, _ := json.Marshal(again)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("frame does not round-trip:\n%s\n%s", enc, enc2)
		}
		_ = IsRequest(fr.Type)
		// Every message type decodes, validates and round-trips, whatever
		// the frame's type says (a runner may lie about it).
		for _, m := range fuzzMessages() {
			decodeMessage(t, fr, m)
		}
	})
}

// fuzzMessage is one message type with its checks.
type fuzzMessage struct {
	new   func() any
	check func(v any) error
}

func fuzzMessages() []fuzzMessage {
	ref := func(v any) error {
		switch m := v.(type) {
		case *Accept:
			return m.Validate()
		case *Decline:
			return m.Validate()
		case *Log:
			return m.Validate()
		case *Finish:
			if err := m.Validate(); err != nil {
				return err
			}
			if m.Usage != nil {
				if err := m.Usage.Check(); err != nil {
					return err
				}
			}
			return m.Outcome.Validate()
		case *Ask:
			if err := m.AttemptRef.Validate(); err != nil {
				return err
			}
			return m.Validate()
		case *Deliver:
			return m.Validate()
		case *GetContext:
			return m.Validate()
		case *Hello:
			for _, a := range m.Attempts {
				if err := a.Validate(); err != nil {
					return err
				}
			}
			return nil
		case *Status:
			for _, a := range m.Attempts {
				if err := a.Validate(); err != nil {
					return err
				}
			}
			return nil
		case *Offer:
			return m.Validate()
		}
		return nil
	}
	mk := func(n func() any) fuzzMessage { return fuzzMessage{new: n, check: ref} }
	return []fuzzMessage{
		mk(func() any { return new(Hello) }),
		mk(func() any { return new(Status) }),
		mk(func() any { return new(Accept) }),
		mk(func() any { return new(Decline) }),
		mk(func() any { return new(Log) }),
		mk(func() any { return new(Finish) }),
		mk(func() any { return new(Ask) }),
		mk(func() any { return new(Deliver) }),
		mk(func() any { return new(GetContext) }),
		mk(func() any { return new(Offer) }),
		mk(func() any { return new(Welcome) }),
		mk(func() any { return new(Reply) }),
		mk(func() any { return new(CancelOrder) }),
		mk(func() any { return new(DropOrder) }),
	}
}

// decodeMessage decodes the frame's body as one message type: an error
// leaves nothing to use; a success validates without panicking and
// re-encodes to a fixed point.
func decodeMessage(t *testing.T, fr Frame, m fuzzMessage) {
	v := m.new()
	if err := fr.Decode(v); err != nil {
		return
	}
	_ = m.check(v)
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%T decoded but does not encode: %v", v, err)
	}
	v2 := m.new()
	if err := json.Unmarshal(enc, v2); err != nil {
		t.Fatalf("%T encoded as %s does not decode: %v", v, enc, err)
	}
	enc2, err := json.Marshal(v2)
	if err != nil || !bytes.Equal(enc, enc2) {
		t.Fatalf("%T does not round-trip:\n%s\n%s", v, enc, enc2)
	}
	if (m.check(v) == nil) != (m.check(v2) == nil) {
		t.Fatalf("%T: validation differs after a round trip: %v / %v", v, m.check(v), m.check(v2))
	}
}

// FuzzDuration: a duration travels as integer milliseconds; what decodes is
// exactly the number sent, never a wrapped-around other duration.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{"0", "1000", "-1", "9223372036854", "9223372036855", "9223372036854775807", "-9223372036854775808", "18446744073710", "1e3", "1.5", `"1"`, "null", "18446744073709551616"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 256 {
			return
		}
		var d Duration
		if err := d.UnmarshalJSON(data); err != nil {
			return
		}
		var ms int64
		if err := json.Unmarshal(data, &ms); err != nil {
			if string(bytes.TrimSpace(data)) == "null" {
				return
			}
			t.Fatalf("Duration took %q, which is not an integer", data)
		}
		if got := d.D().Milliseconds(); got != ms {
			t.Fatalf("Duration %q decoded as %d ms", data, got)
		}
		enc, err := d.MarshalJSON()
		if err != nil || string(enc) != strconv.FormatInt(ms, 10) {
			t.Fatalf("Duration %q re-encodes as %s (%v)", data, enc, err)
		}
	})
}
