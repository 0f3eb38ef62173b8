package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"drover/internal/fsutil"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// EventKind says what an Event carries.
type EventKind string

const (
	EventText       EventKind = "text"        // model text (Text)
	EventToolUse    EventKind = "tool_use"    // a tool call (Tool, ToolID, Input)
	EventToolResult EventKind = "tool_result" // a tool's answer (ToolID, Text, IsError)
	EventUsage      EventKind = "usage"       // tokens and cost (Usage)
	EventSession    EventKind = "session"     // the CLI's session id, for a resume (Session)
	EventLimit      EventKind = "limit"       // the account hit a usage or rate limit (Limit)
	EventOutcome    EventKind = "outcome"     // how the CLI says its run ended (Outcome)
	// EventTurn: the agent took a model turn (Turn names it when the CLI
	// reports one turn in several lines: count each name once).
	EventTurn EventKind = "turn"
	// EventRaw is a line the parser did not understand, kept verbatim in
	// Text so that nothing a CLI prints is lost (or crashes the adapter).
	EventRaw EventKind = "raw"
)

// Event is one typed thing an adapter read from its CLI's output. Only the
// fields of its Kind are set.
type Event struct {
	Kind    EventKind       `json:"kind"`
	Text    string          `json:"text,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	ToolID  string          `json:"tool_id,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	IsError bool            `json:"is_error,omitempty"`
	Session string          `json:"session,omitempty"`
	Usage   *Usage          `json:"usage,omitempty"`
	Limit   *Limit          `json:"limit,omitempty"`
	Outcome *Outcome        `json:"outcome,omitempty"`
	Turn    string          `json:"turn,omitempty"`
}

// Usage is what a run (or one step of it) consumed: the same record the
// runner reports with the attempt's finish.
type Usage = protocol.Usage

// Limit is a usage or rate limit the account ran into. ResetsAt is zero
// when the CLI did not say; see Limit.Until.
type Limit struct {
	ResetsAt time.Time `json:"resets_at,omitzero"`
	Message  string    `json:"message,omitempty"`
	// Account is the account it is of when that is not the attempt's
	// (a native job's fallback); "" for the attempt's.
	Account string `json:"account,omitempty"`
}

// DefaultLimitWait is how long a limited account sits out when its CLI
// named no reset time.
const DefaultLimitWait = time.Hour

// Until is when the account may run again: the stated reset time, or
// DefaultLimitWait from now when none is stated (or it is already past, which
// would otherwise let a limited account spin on immediate retries).
func (l Limit) Until(now time.Time) time.Time {
	if l.ResetsAt.After(now) {
		return l.ResetsAt
	}
	return now.Add(DefaultLimitWait)
}

// Outcome is the CLI's own verdict on its run, from its final line.
type Outcome struct {
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
	// Refused: the CLI said its provider refused the account's key or
	// login (HTTP 401/403), the evidence for an account whose calls the
	// egress proxy cannot read (a vendor login, through a tunnel).
	Refused bool `json:"refused,omitempty"`
}

// Events receives an attempt's events. A nil Events drops them, so adapters
// call Emit without checking.
type Events func(Event)

// Emit passes e to the sink, if there is one.
func (f Events) Emit(e Event) {
	if f != nil {
		f(e)
	}
}

// MaxLine is the longest output line a parser accepts: tool results and
// init lines (every tool and slash command) can run to megabytes.
const MaxLine = 16 << 20

// ParseFunc maps one output line of a CLI to events. It must not fail: a
// line it cannot read becomes an EventRaw (see Raw).
type ParseFunc func(line []byte) []Event

// Raw keeps a line the parser did not understand.
func Raw(line []byte) []Event {
	return []Event{{Kind: EventRaw, Text: string(line)}}
}

// Scan reads r line by line, emits what parse makes of each non-empty line
// and returns the events' summary once r ends. A line longer than MaxLine (a
// flooding CLI) stops the parsing and is an error; the rest of r is drained.
func Scan(r io.Reader, parse ParseFunc, emit Events) (Summary, error) {
	var s Summary
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		for _, e := range parse(line) {
			s.add(e)
			emit.Emit(e)
		}
	}
	if err := sc.Err(); err != nil {
		// Keep reading (unparsed) so that the CLI never blocks on a full
		// pipe: the caller ends the attempt on the error, not on a hang.
		_, _ = io.Copy(io.Discard, r)
		return s, fmt.Errorf("read output: %w", err)
	}
	return s, nil
}

// Summary is what an attempt's events add up to: the facts the runner
// needs once the CLI has exited.
type Summary struct {
	Session string
	Usage   Usage
	Limit   *Limit   // the last limit seen, if any
	Outcome *Outcome // the last outcome seen; nil: the CLI ended without one
}

func (s *Summary) add(e Event) {
	switch e.Kind {
	case EventSession:
		// Only a session id the hub takes (single-line plain text): one
		// with a control character made the hub refuse the finish that
		// carried it, and the attempt's result was lost (found by
		// FuzzParse; the CLI's output is untrusted).
		if rules.CheckPlainText("session", e.Session, false) == nil {
			s.Session = e.Session
		}
	case EventUsage:
		// A usage the hub would refuse (negative counts, a cost out of
		// bounds, or a total that overflows) is not counted: the finish
		// carrying it would be refused and the attempt's result lost
		// (found by FuzzParse; the CLI's output is untrusted).
		if e.Usage != nil {
			if sum := s.Usage.Add(*e.Usage); e.Usage.Check() == nil && sum.Check() == nil {
				s.Usage = sum
			}
		}
	case EventLimit:
		s.Limit = e.Limit
	case EventOutcome:
		s.Outcome = e.Outcome
	}
}

// File is a file an adapter needs written before its CLI starts, such as a
// generated config that may hold the tool server's token; WriteFiles
// writes it 0600.
type File struct {
	Path string
	Data []byte
}

// WriteFiles writes c's files, creating their directories (0700: the
// account and home directories hold logins). Each file is replaced
// atomically, so a CLI never reads half a config.
func (c Command) WriteFiles() error {
	for _, f := range c.Files {
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		if err := fsutil.WriteFileAtomic(f.Path, f.Data); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	return nil
}

// Command is everything needed to start a CLI: built by pure functions so
// that tests can check the exact argv, environment and files.
type Command struct {
	Argv  []string
	Env   []string // added to the attempt's environment; later entries win
	Files []File
}

// MentionsLimit says whether an error message from a CLI or its API says
// the account is out of quota or rate-limited (rather than, say, broken
// credentials), in the wordings the four vendors use.
func MentionsLimit(msg string) bool {
	lower := strings.ToLower(msg)
	for _, p := range []string{"429", "rate limit", "usage limit", "limit reached", "quota", "resource_exhausted",
		"credit balance is too low", "out of extra usage"} {
		if strings.Contains(lower, p) {
			return true
		}
	}
	return false
}

// MentionsAuthRefusal says whether an error message from a CLI or its API
// says the provider refused the account's credentials: HTTP 401 or 403
// with words about authentication, or the vendors' own wordings.
func MentionsAuthRefusal(msg string) bool {
	lower := strings.ToLower(msg)
	for _, p := range []string{"authentication_error", "failed to authenticate", "invalid_api_key", "invalid api key",
		"invalid x-api-key", "permission_error", "api_key_invalid"} {
		if strings.Contains(lower, p) {
			return true
		}
	}
	if !strings.Contains(lower, "401") && !strings.Contains(lower, "403") {
		return false
	}
	for _, p := range []string{"unauthorized", "forbidden", "authenticat", "permission", "api key", "credential"} {
		if strings.Contains(lower, p) {
			return true
		}
	}
	return false
}

// Failed is the events of a run that the CLI says failed with msg: an
// error outcome naming the CLI, after a limit event when msg is about one;
// a refusal of the account's credentials that is no limit is Refused.
func Failed(cli, msg string) []Event {
	var evs []Event
	limit := MentionsLimit(msg)
	if limit {
		evs = append(evs, Event{Kind: EventLimit, Limit: &Limit{Message: msg}})
	}
	return append(evs, Event{Kind: EventOutcome, Outcome: &Outcome{Message: cli + ": " + msg, Refused: !limit && MentionsAuthRefusal(msg)}})
}

// Fill copies what the events said into r once the CLI has exited: the
// session (kept from r when the CLI printed none), usage, the CLI's error
// message when r has none, and a limit with its reset time settled by
// Limit.Until, so the runner can sit the account out until Limit.ResetsAt.
func (s Summary) Fill(r *Result, now time.Time) {
	if s.Session != "" {
		r.Session = s.Session
	}
	r.Usage = s.Usage
	if s.Outcome != nil && !s.Outcome.OK && r.Message == "" {
		r.Message = s.Outcome.Message
	}
	if s.Limit != nil {
		l := *s.Limit
		l.ResetsAt = l.Until(now)
		r.Limit = &l
	}
}
