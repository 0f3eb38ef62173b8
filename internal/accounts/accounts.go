// Package accounts keeps a runner's agent accounts: which vendor login or
// API key each agent CLI runs under, and which of them a provider has
// rate-limited until when. They live under the runner home:
//
//	accounts/             0700
//	accounts/.lock        flock held by every read-modify-write
//	accounts/accounts.json 0600, the index (no secrets)
//	accounts/<id>/key     0600, an api-key account's key
//	accounts/<id>/config/ 0700, the CLI's config directory (its login, sessions)
//
// Several processes may share a runner home (`drover runner account add`
// while a runner runs, or two runners), so every change takes an flock on
// accounts/.lock and rewrites the index atomically; reads need no lock.
package accounts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"drover/internal/agent/facts"
	"drover/internal/fsutil"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// Kinds of account.
const (
	// KindLogin is an account logged in with the vendor CLI's own login,
	// kept in its config directory.
	KindLogin = "login"
	// KindAPIKey is an account with an API key, stored apart from the index.
	KindAPIKey = "api-key"
	// KindNoKey is a native account whose model server takes no key (a
	// local Ollama, vLLM or llama.cpp next to the runner).
	KindNoKey = "no-key"
)

// Limits on what an account may hold.
const (
	MaxLabelLen   = 64
	MaxKeyLen     = 16 << 10
	MaxMessageLen = 512
)

// ErrNoAccount is returned (wrapped, as a *NoAccountError) by Pick when no
// account of an agent can run now.
var ErrNoAccount = errors.New("no usable account")

// Agents are the agents accounts can be for: those of the catalogue that
// run under one.
func Agents() []string { return facts.AccountAgents() }

// Account is one login or API key of an agent CLI. It holds no secret.
type Account struct {
	ID      string `json:"id"` // "acct_" + 16 random hex; never reused, stable across restarts
	Agent   string `json:"agent"`
	Label   string `json:"label,omitempty"`
	Kind    string `json:"kind"`
	BaseURL string `json:"base_url,omitempty"` // api-key accounts: the provider's API root; "" = the vendor's default
	// Provider and Model are a native account's model API (package
	// model's provider kinds); other agents' accounts have neither.
	Provider string    `json:"provider,omitempty"`
	Model    string    `json:"model,omitempty"`
	Created  time.Time `json:"created"`
	// LimitedUntil is when a provider's rate limit on the account ends; it
	// sits out until then.
	LimitedUntil time.Time `json:"limited_until,omitzero"`
	LimitMessage string    `json:"limit_message,omitempty"`
	// Attention is why the provider refused the account; while it is set
	// the account runs nothing, until its owner fixes it and resets it
	// (Reset) or, for a native account, a probe passes (SetCapabilities).
	Attention string `json:"attention,omitempty"`
	// Refused is the job reason the refusal ended an attempt with:
	// auth_failed (the key or login), model_not_found or endpoint_refused
	// (a native account's model or endpoint); "" reads as auth_failed.
	Refused string `json:"refused,omitempty"`
	// Limits are the account's own spend limits, which its runner
	// enforces alongside its own (limits.go).
	Limits Limits `json:"limits,omitzero"`
	// Capabilities are what the last probe (at 'account add', by the
	// doctor, or learned by an attempt) found a native account's model
	// does; nil: never probed (it is taken to do all).
	Capabilities *Capabilities `json:"capabilities,omitempty"`
}

// Capabilities are what a probe (model.Probe) found of a native account's
// model endpoint; the native agent talks to it accordingly.
type Capabilities struct {
	Probed            time.Time `json:"probed"`
	ToolCalls         bool      `json:"tool_calls"`
	StreamedToolCalls bool      `json:"streamed_tool_calls"`
	ContextLength     int64     `json:"context_length,omitempty"` // tokens the server serves; 0: it said none
}

// NeedsAttention says whether the provider refused the account and its
// owner has not reset it since.
func (a Account) NeedsAttention() bool { return a.Attention != "" }

// Limited says whether the account sits out at now.
func (a Account) Limited(now time.Time) bool {
	return !a.LimitedUntil.IsZero() && now.Before(a.LimitedUntil)
}

// String names the account for logs: id, agent, label and kind.
func (a Account) String() string {
	s := a.ID + " (" + a.Agent
	if a.Label != "" {
		s += " " + a.Label
	}
	s += ", " + a.Kind
	if a.Provider != "" {
		s += ", " + a.Provider
		if a.Model != "" {
			s += " " + a.Model
		}
	}
	return s + ")"
}

// NoAccountError says why Pick found no account: the agent has none, or
// all of them are limited, the first until Until.
type NoAccountError struct {
	Agent   string
	Limited int       // how many accounts of Agent are limited
	Until   time.Time // the earliest end of their limits; zero when Limited is 0
	Message string    // that account's limit message
	// Unusable counts the accounts of Agent that need a login or their
	// owner's attention.
	Unusable int
}

func (e *NoAccountError) Error() string {
	if e.Limited == 0 && e.Unusable > 0 {
		return fmt.Sprintf("%s: %d %s account(s) need a login or attention: 'drover runner account list' says how to fix each", ErrNoAccount, e.Unusable, e.Agent)
	}
	if e.Limited == 0 {
		return fmt.Sprintf("%s: no %s account: add one with 'drover runner account add --agent %s'", ErrNoAccount, e.Agent, e.Agent)
	}
	s := fmt.Sprintf("%s: all %d %s account(s) are rate-limited, the first until %s", ErrNoAccount, e.Limited, e.Agent, e.Until.UTC().Format(time.RFC3339))
	if e.Message != "" {
		s += " (" + e.Message + ")"
	}
	return s
}

func (e *NoAccountError) Unwrap() error { return ErrNoAccount }

// Store is the accounts of one runner home. Its methods are safe for
// concurrent use, also by several processes sharing the home.
type Store struct {
	dir   string        // home/accounts
	locks fsutil.Locker // changes take turns, within this process and across processes
}

const (
	indexName = "accounts.json"
	lockName  = ".lock"
	keyName   = "key"
	cfgName   = "config"
	idPrefix  = "acct_"
)

// index is accounts.json.
type index struct {
	Accounts []Account `json:"accounts"`
}

// Open opens (creating it) the accounts directory of the runner home.
func Open(home string) (*Store, error) {
	if home == "" {
		return nil, errors.New("open accounts: no runner home")
	}
	dir := filepath.Join(home, "accounts")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open accounts: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open accounts: %w", err)
	}
	s := &Store{dir: dir}
	if _, err := s.read(); err != nil {
		return nil, fmt.Errorf("open accounts: %w", err)
	}
	return s, nil
}

// List is every account, oldest first. It reads the index each time, so
// accounts another process added or removed are seen.
func (s *Store) List() ([]Account, error) {
	ix, err := s.read()
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	return ix.Accounts, nil
}

// Get is the account with id.
func (s *Store) Get(id string) (Account, error) {
	ix, err := s.read()
	if err != nil {
		return Account{}, fmt.Errorf("get account %s: %w", id, err)
	}
	for _, a := range ix.Accounts {
		if a.ID == id {
			return a, nil
		}
	}
	return Account{}, fmt.Errorf("get account: no account %q", id)
}

// Add stores a new account and, for an api-key account, its key. It
// assigns ID and Created (and clears any limit); a.Agent, a.Kind, a.Label
// and a.BaseURL are checked, and nothing changes when one is wrong.
func (s *Store) Add(a Account, key string) (Account, error) {
	a.Label = strings.TrimSpace(a.Label)
	if err := validate(&a, key); err != nil {
		return Account{}, fmt.Errorf("add account: %w", err)
	}
	a.LimitedUntil, a.LimitMessage = time.Time{}, ""
	err := s.update(func(ix *index) error {
		if a.Label != "" {
			for _, o := range ix.Accounts {
				if o.Agent == a.Agent && o.Label == a.Label {
					return fmt.Errorf("%s already has an account labelled %q (%s)", a.Agent, a.Label, o.ID)
				}
			}
		}
		id, err := s.newID(ix)
		if err != nil {
			return err
		}
		a.ID = id
		a.Created = time.Now().UTC()
		// Created orders the accounts (Pick takes the first); a clock set
		// back must not put a new account before older ones.
		for _, o := range ix.Accounts {
			if !a.Created.After(o.Created) {
				a.Created = o.Created.Add(time.Microsecond)
			}
		}
		if err := os.Mkdir(filepath.Join(s.dir, id), 0o700); err != nil {
			return fmt.Errorf("create the account directory: %w", err)
		}
		ok := false
		defer func() {
			if !ok {
				os.RemoveAll(filepath.Join(s.dir, id))
			}
		}()
		if err := os.Mkdir(s.Dir(id), 0o700); err != nil {
			return fmt.Errorf("create the account's config directory: %w", err)
		}
		if key != "" {
			if err := fsutil.WriteFileAtomic(filepath.Join(s.dir, id, keyName), []byte(key)); err != nil {
				return fmt.Errorf("store the key: %w", err)
			}
		}
		ix.Accounts = append(ix.Accounts, a)
		ok = true
		return nil
	}, func() { os.RemoveAll(filepath.Join(s.dir, a.ID)) })
	if err != nil {
		return Account{}, fmt.Errorf("add %s account: %w", a.Agent, err)
	}
	return a, nil
}

// Find is the account ref names: its id, or a label only one account has.
func (s *Store) Find(ref string) (Account, error) {
	ix, err := s.read()
	if err != nil {
		return Account{}, fmt.Errorf("find account %q: %w", ref, err)
	}
	i, err := find(ix.Accounts, strings.TrimSpace(ref))
	if err != nil {
		return Account{}, fmt.Errorf("find account %q: %w", ref, err)
	}
	return ix.Accounts[i], nil
}

// Remove deletes the account ref names (its id, or a label only one
// account has) with its key and config directory, and returns it.
func (s *Store) Remove(ref string) (Account, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Account{}, errors.New("remove account: no id or label given")
	}
	var gone Account
	err := s.update(func(ix *index) error {
		i, err := find(ix.Accounts, ref)
		if err != nil {
			return err
		}
		gone = ix.Accounts[i]
		ix.Accounts = slices.Delete(ix.Accounts, i, i+1)
		return nil
	}, nil)
	if err != nil {
		return Account{}, fmt.Errorf("remove account %q: %w", ref, err)
	}
	// After the index no longer names it: a crash in between leaves an
	// orphan directory, never an account without its directory.
	if err := os.RemoveAll(filepath.Join(s.dir, gone.ID)); err != nil {
		return gone, fmt.Errorf("remove account %s: its directory: %w", gone.ID, err)
	}
	return gone, nil
}

// find is the index of the account ref names: an id, else a label.
func find(as []Account, ref string) (int, error) {
	if i := slices.IndexFunc(as, func(a Account) bool { return a.ID == ref }); i >= 0 {
		return i, nil
	}
	var hits []int
	for i, a := range as {
		if a.Label == ref {
			hits = append(hits, i)
		}
	}
	switch len(hits) {
	case 0:
		return -1, errors.New("no account has that id or label")
	case 1:
		return hits[0], nil
	}
	names := make([]string, len(hits))
	for j, i := range hits {
		names[j] = as[i].ID + " (" + as[i].Agent + ")"
	}
	return -1, fmt.Errorf("the label names %d accounts: %s; give the id", len(hits), strings.Join(names, ", "))
}

// Dir is the account's config directory, which the agent CLI uses as its
// own (CLAUDE_CONFIG_DIR, CODEX_HOME, ...): its login and sessions.
func (s *Store) Dir(id string) string { return filepath.Join(s.dir, id, cfgName) }

// Key is an api-key account's key.
func (s *Store) Key(id string) (string, error) {
	if !validID(id) {
		return "", fmt.Errorf("read key: %q is not an account id", id)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, id, keyName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read key of account %s: it has none (a removed or login account?)", id)
	}
	if err != nil {
		return "", fmt.Errorf("read key of account %s: %w", id, err)
	}
	return string(b), nil
}

// SetLimited records that the account sits out until until (zero clears
// it), with the provider's message.
func (s *Store) SetLimited(id string, until time.Time, msg string) error {
	msg = cleanMessage(msg)
	if until.IsZero() {
		msg = ""
	}
	return s.change(id, "set the limit", func(a *Account) { a.LimitedUntil, a.LimitMessage = until.UTC(), msg })
}

// change applies f to the account id names; what says what it was doing,
// for the error.
func (s *Store) change(id, what string, f func(*Account)) error {
	err := s.update(func(ix *index) error {
		for i := range ix.Accounts {
			if ix.Accounts[i].ID == id {
				f(&ix.Accounts[i])
				return nil
			}
		}
		return errors.New("no such account")
	}, nil)
	if err != nil {
		return fmt.Errorf("%s: account %q: %w", what, id, err)
	}
	return nil
}

// SetCapabilities records what a probe found of the account's model. A
// probe is a model call that went through: it clears the account's need
// of attention.
func (s *Store) SetCapabilities(id string, c Capabilities) error {
	c.Probed = c.Probed.UTC()
	return s.change(id, "record the capabilities", func(a *Account) { a.Capabilities, a.Attention, a.Refused = &c, "", "" })
}

// SetAttention marks the account as refused by its provider, with the job
// reason it was refused with and why; it runs nothing until Reset (or,
// for a native account, a probe that passes).
func (s *Store) SetAttention(id, reason, why string) error {
	why = cleanMessage(why)
	if why == "" {
		why = "the provider refused the account"
	}
	return s.change(id, "mark as needing attention", func(a *Account) { a.Attention, a.Refused = why, reason })
}

// Reset clears the account ref names (an id, or a label only one account
// has) of its limit and its need of attention, and with a non-empty key
// replaces an api-key account's key. It returns the account.
func (s *Store) Reset(ref, key string) (Account, error) {
	var got Account
	err := s.update(func(ix *index) error {
		i, err := find(ix.Accounts, strings.TrimSpace(ref))
		if err != nil {
			return err
		}
		a := &ix.Accounts[i]
		if key != "" {
			if a.Kind != KindAPIKey {
				return errors.New("a login account takes no key: log in again with its CLI")
			}
			if err := checkKey(key); err != nil {
				return err
			}
			if err := fsutil.WriteFileAtomic(filepath.Join(s.dir, a.ID, keyName), []byte(key)); err != nil {
				return fmt.Errorf("store the key: %w", err)
			}
		}
		a.Attention, a.Refused, a.LimitedUntil, a.LimitMessage = "", "", time.Time{}, ""
		got = *a
		return nil
	}, nil)
	if err != nil {
		return Account{}, fmt.Errorf("reset account %q: %w", ref, err)
	}
	return got, nil
}

// Pick is the first (oldest) account of agent that is not limited at now,
// needs no attention and, with usable, is usable (logged in). With none it returns a *NoAccountError, which wraps ErrNoAccount.
func (s *Store) Pick(agent string, now time.Time, usable func(Account) bool) (Account, error) {
	if !slices.Contains(Agents(), agent) {
		return Account{}, fmt.Errorf("pick an account: unknown agent %q: want one of %s", agent, strings.Join(Agents(), ", "))
	}
	as, err := s.List()
	if err != nil {
		return Account{}, fmt.Errorf("pick a %s account: %w", agent, err)
	}
	e := &NoAccountError{Agent: agent}
	for _, a := range as {
		if a.Agent != agent {
			continue
		}
		if a.NeedsAttention() || (usable != nil && !usable(a)) {
			e.Unusable++
			continue
		}
		if !a.Limited(now) {
			return a, nil
		}
		e.Limited++
		if e.Until.IsZero() || a.LimitedUntil.Before(e.Until) {
			e.Until, e.Message = a.LimitedUntil, a.LimitMessage
		}
	}
	return Account{}, e
}

// read loads the index; a missing one is empty. Accounts come oldest first.
func (s *Store) read() (index, error) {
	var ix index
	b, err := os.ReadFile(filepath.Join(s.dir, indexName))
	if errors.Is(err, fs.ErrNotExist) {
		return ix, nil
	}
	if err != nil {
		return ix, fmt.Errorf("read the account index: %w", err)
	}
	if err := json.Unmarshal(b, &ix); err != nil {
		return ix, fmt.Errorf("read the account index %s: %w", filepath.Join(s.dir, indexName), err)
	}
	slices.SortStableFunc(ix.Accounts, func(a, b Account) int { return a.Created.Compare(b.Created) })
	return ix, nil
}

// update runs change on the index under both locks and writes the result.
// When change fails nothing is written; when the write fails, undo (if
// any) runs before the locks are released.
func (s *Store) update(change func(*index) error, undo func()) error {
	// A change holds the lock for a few file operations: nothing to cancel.
	unlock, err := s.locks.Lock(context.Background(), filepath.Join(s.dir, lockName))
	if err != nil {
		return err
	}
	defer unlock()
	ix, err := s.read()
	if err != nil {
		return err
	}
	if err := change(&ix); err != nil {
		return err
	}
	b, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the account index: %w", err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(s.dir, indexName), append(b, '\n')); err != nil {
		if undo != nil {
			undo()
		}
		return err
	}
	return nil
}

// newID is an id neither in the index nor on disk.
func (s *Store) newID(ix *index) (string, error) {
	for range 10 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("make an account id: %w", err)
		}
		id := idPrefix + hex.EncodeToString(b[:])
		_, err := os.Lstat(filepath.Join(s.dir, id))
		if !slices.ContainsFunc(ix.Accounts, func(a Account) bool { return a.ID == id }) && errors.Is(err, fs.ErrNotExist) {
			return id, nil
		}
	}
	return "", errors.New("make an account id: every candidate was taken")
}

func validID(id string) bool {
	h, ok := strings.CutPrefix(id, idPrefix)
	if !ok || len(h) != 16 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// Validate checks an account to add as Add would, normalizing its base
// URL, without storing it: for a caller that checks the account's
// endpoint before adding it. Errors never quote the key.
func Validate(a *Account, key string) error {
	a.Label = strings.TrimSpace(a.Label)
	return validate(a, key)
}

// validate checks an account to add. Errors never quote the key.
func validate(a *Account, key string) error {
	if !slices.Contains(Agents(), a.Agent) {
		return fmt.Errorf("agent %q: want one of %s", a.Agent, strings.Join(Agents(), ", "))
	}
	if err := ValidLabel(a.Label); err != nil {
		return err
	}
	if err := validModel(a); err != nil {
		return err
	}
	switch a.Kind {
	case KindLogin:
		if key != "" {
			return errors.New("a login account takes no key: its CLI logs in itself")
		}
		if a.BaseURL != "" {
			return errors.New("a login account takes no base URL: only api-key accounts can use another endpoint")
		}
	case KindAPIKey:
		if err := checkKey(key); err != nil {
			return err
		}
		u, err := rules.CheckBaseURL(a.BaseURL)
		if err != nil {
			return err
		}
		a.BaseURL = u
	case KindNoKey:
		if key != "" {
			return errors.New("a no-key account takes no key")
		}
		u, err := rules.CheckBaseURL(a.BaseURL)
		if err != nil {
			return err
		}
		a.BaseURL = u
	default:
		return fmt.Errorf("kind %q: want %s, %s or %s", a.Kind, KindLogin, KindAPIKey, KindNoKey)
	}
	return nil
}

// validModel checks a native account's provider and model, and that other
// accounts name neither.
func validModel(a *Account) error {
	if facts.Of(a.Agent).Kind != facts.KindNative {
		if a.Provider != "" || a.Model != "" {
			return fmt.Errorf("a %s account takes no provider or model: only native accounts do", a.Agent)
		}
		if a.Kind == KindNoKey {
			return fmt.Errorf("a %s account needs a key or a login; only native accounts can do without", a.Agent)
		}
		return nil
	}
	switch {
	case !slices.Contains(facts.Providers(), a.Provider):
		return fmt.Errorf("a native account needs a provider: one of %s", strings.Join(facts.Providers(), ", "))
	case a.Kind == KindLogin:
		return errors.New("a native account has an API key or none (--api-key-stdin or --no-key), not a login")
	case a.Provider == facts.OpenAICompatible && a.BaseURL == "":
		return errors.New("an openai-compatible account needs its server's base URL (--base-url)")
	case a.Model == "" && facts.DefaultModel(a.Provider) == "":
		return fmt.Errorf("a %s account needs a model (--model)", a.Provider)
	case len(a.Model) > protocol.MaxModel || rules.CheckPlainText("model", a.Model, false) != nil:
		return fmt.Errorf("model: at most %d plain characters", protocol.MaxModel)
	}
	return nil
}

// checkKey checks an API key; errors never quote it.
func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("an api-key account needs its key")
	case len(key) > MaxKeyLen:
		return fmt.Errorf("the key is longer than %d bytes", MaxKeyLen)
	case strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0:
		return errors.New("the key holds spaces or control characters")
	}
	return nil
}

// ValidLabel checks a label: up to 64 letters, digits, '.', '_' or '-',
// not shaped like an account id; empty is allowed.
func ValidLabel(l string) error {
	if l == "" {
		return nil
	}
	if len(l) > MaxLabelLen {
		return fmt.Errorf("label is longer than %d characters", MaxLabelLen)
	}
	for _, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("label %q: want only letters, digits, '.', '_' and '-'", l)
		}
	}
	if strings.HasPrefix(l, idPrefix) {
		return fmt.Errorf("label %q: must not start with %q, which account ids do", l, idPrefix)
	}
	return nil
}

// cleanMessage makes a provider's message one short line.
func cleanMessage(m string) string {
	m = strings.Join(strings.FieldsFunc(m, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if len(m) > MaxMessageLen {
		m = strings.ToValidUTF8(m[:MaxMessageLen], "") + "…"
	}
	return m
}
