// Package fakemodel is FAKE code for tests only: scripted stand-ins for the
// model APIs that the vendor agent CLIs (Claude Code, Codex, opencode,
// Gemini CLI) call, so that the real, unmodified CLIs can be run end to end
// with no network. Nothing here is a model or talks to one.
//
// Each server speaks one wire protocol (Anthropic Messages, OpenAI
// Responses, OpenAI Chat Completions, Gemini generateContent), listens on
// 127.0.0.1, records every request, and answers the CLI's model turns from
// a script of CLI-neutral turns (write a file, run a command, call a tool,
// answer text). Each server translates a turn into the tool its CLI
// offers, looked up in the tool list the CLI sends with every request.
package fakemodel

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type turnKind int

const (
	kindWrite turnKind = iota
	kindRun
	kindCall
	kindText
	kindTruncated
)

// Turn is one thing the fake model does: a tool call or a final answer.
type Turn struct {
	kind    turnKind
	path    string
	content string
	command string
	tool    string
	args    map[string]any
	text    string
	cut     bool // CutCall
}

// WriteFile makes the model write content to path with its CLI's file tool
// (Codex has none: there it is a shell command). A relative path is joined
// to the working directory the CLI states in its request, because Claude
// Code's and opencode's write tools only take absolute paths.
func WriteFile(path, content string) Turn { return Turn{kind: kindWrite, path: path, content: content} }

// RunCommand makes the model run cmd with its CLI's shell tool.
func RunCommand(cmd string) Turn { return Turn{kind: kindRun, command: cmd} }

// CallTool makes the model call the tool name with args as they are. An
// MCP tool may be named the Claude Code way, "mcp__SERVER__TOOL": when the
// CLI offers no tool of that name, the call goes to the tool it offers
// under its own naming of the same MCP tool (see MCPToolName).
func CallTool(name string, args map[string]any) Turn {
	return Turn{kind: kindCall, tool: name, args: args}
}

// Text is the model's final answer; it ends the CLI's run.
func Text(s string) Turn { return Turn{kind: kindText, text: s} }

// Truncated is text cut off at the answer's token limit (finish_reason
// "length", stop_reason "max_tokens", status "incomplete"), on the
// Anthropic, Chat and Responses fakes.
func Truncated(s string) Turn { return Turn{kind: kindTruncated, text: s} }

// CutCall is CallTool cut off at the answer's token limit halfway through
// its arguments (finish_reason "length"), on the Chat fake.
func CutCall(name string, args map[string]any) Turn {
	return Turn{kind: kindCall, tool: name, args: args, cut: true}
}

func (t Turn) isTool() bool { return t.kind != kindText && t.kind != kindTruncated }

func (t Turn) String() string {
	switch t.kind {
	case kindWrite:
		return fmt.Sprintf("WriteFile(%q)", t.path)
	case kindRun:
		return fmt.Sprintf("RunCommand(%q)", t.command)
	case kindCall:
		return fmt.Sprintf("CallTool(%q)", t.tool)
	}
	return fmt.Sprintf("Text(%q)", t.text)
}

// Option configures a fake server.
type Option func(*config)

type config struct {
	key    string
	limits map[int]time.Time
	breaks map[int][]Breakage
	// brokenStreamedTools, servedContext and ollamaContext: see the
	// options of those names.
	brokenStreamedTools bool
	servedContext       int64
	ollamaContext       int64
	textOnly            bool
	// wholeStreams, refuseTools and models: see WholeStreams,
	// RefuseTools and Models.
	wholeStreams bool
	refuseTools  bool
	models       []string
	// holds: see Hold.
	holds map[int]*Gate
}

// Gate is where Hold stops a request: a test waits on Arrived to know the
// request came, and Release lets it be answered. Make one with NewGate.
type Gate struct {
	arrived, release chan struct{}
	arrivedOnce      sync.Once
	releaseOnce      sync.Once
}

// NewGate is a closed gate, not yet reached.
func NewGate() *Gate { return &Gate{arrived: make(chan struct{}), release: make(chan struct{})} }

// Arrived is closed once the held request has come.
func (g *Gate) Arrived() <-chan struct{} { return g.arrived }

// Release lets the held request (and any later one the gate holds) be
// answered.
func (g *Gate) Release() { g.releaseOnce.Do(func() { close(g.release) }) }

// Hold makes the first request that takes turn i wait at g before it is
// answered, with the turn taken: a test can do something while a CLI waits
// for its model (kill the hub that runs it), then release it. A request
// whose client goes away while held is answered nothing but still counts
// as having taken turn i (Request.Turn), and the turn is given again to
// the next request (a retry), which counts too: a test that wants each
// turn asked for once sees the repeat.
func Hold(i int, g *Gate) Option { return func(c *config) { c.holds[i] = g } }

// WholeStreams makes the Chat fake answer a streamed request that carries
// tools with a whole JSON body (application/json, no events), as some
// local servers and gateways do.
func WholeStreams() Option { return func(c *config) { c.wholeStreams = true } }

// RefuseTools makes the Chat fake a model whose server refuses tools the
// way Ollama does for a model whose template has none: HTTP 400 "... does
// not support tools" to every request carrying tools; a request without
// takes a script turn, answered in text (as TextOnly).
func RefuseTools() Option { return func(c *config) { c.refuseTools, c.textOnly = true, true } }

// Models makes the Chat fake serve only the models named: a request for
// another gets Ollama's HTTP 404 "model ... not found".
func Models(names ...string) Option { return func(c *config) { c.models = names } }

// TextOnly makes the Chat fake a model without tool calling: every chat
// request takes a script turn, offered tools or not, and is answered in
// text (script it with Text turns).
func TextOnly() Option { return func(c *config) { c.textOnly = true } }

// BrokenStreamedTools makes the Chat fake stream every tool call broken,
// the way Ollama has: a call with no id, no name and no arguments. Its
// non-streamed answers are whole.
func BrokenStreamedTools() Option { return func(c *config) { c.brokenStreamedTools = true } }

// ServedContext makes the Chat fake report n as its models' context length
// the way vLLM does: max_model_len in GET /v1/models.
func ServedContext(n int64) Option { return func(c *config) { c.servedContext = n } }

// OllamaContext makes the Chat fake report n as its models' context length
// the way Ollama does: num_ctx in POST /api/show's parameters.
func OllamaContext(n int64) Option { return func(c *config) { c.ollamaContext = n } }

// refusal is the Ollama-style error (message and status) a chat request
// gets under Models or RefuseTools; status 0: none.
func (c *config) refusal(p parsed) (string, int) {
	switch {
	case !p.turn:
	case len(c.models) > 0 && !slices.Contains(c.models, p.model):
		return fmt.Sprintf("model %q not found, try pulling it first", p.model), http.StatusNotFound
	case c.refuseTools && len(p.tools) > 0:
		return fmt.Sprintf("registry.ollama.ai/library/%s does not support tools", p.model), http.StatusBadRequest
	}
	return "", 0
}

// Breakage is how a fake answers a request it breaks.
type Breakage int

const (
	// CutStream starts the streamed answer and ends it before it finishes
	// (no finish reason, no message_stop).
	CutStream Breakage = iota
	// Garbage answers 200 with a stream of bytes that are no JSON.
	Garbage
)

// Break answers the next requests that would get turn i with the
// breakages in order (on the Anthropic, Chat and Responses fakes); the turn is not
// used up, so the request after them (a retry) gets it.
func Break(i int, how ...Breakage) Option {
	return func(c *config) { c.breaks[i] = append(c.breaks[i], how...) }
}

// RequireKey makes the server refuse, with its vendor's 401, every model
// request that does not carry key (the header each CLI sends its key in).
// Every request's key is recorded whether or not this is set.
func RequireKey(key string) Option { return func(c *config) { c.key = key } }

// RateLimit answers the first request that would get turn i with the
// vendor's HTTP 429 instead (reset time in the vendor's headers and body;
// a zero reset states none);
// the turn is not used up, so the next request (a retry, or a resumed
// session) gets it.
func RateLimit(i int, reset time.Time) Option {
	return func(c *config) { c.limits[i] = reset }
}

// Request is one HTTP request the server received.
type Request struct {
	Time   time.Time // when it arrived
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   []byte
	// Key is the API key the request carried ("" if none).
	Key string
	// Turn is the script turn the request was answered with (or, held by
	// Hold and given up by its client, took), or -1: a side
	// request (HEAD, a title or routing request, a refused or rate-limited
	// one, one past the end of the script).
	Turn int
	// Tools are the names of the tools the request offered the model.
	Tools []string
	// Results are the tool results the request carried (all of them: a CLI
	// sends the whole conversation each time).
	Results []ToolResult
	// Status is the HTTP status it was answered with.
	Status int
}

// ToolResult is a tool's output as the CLI sent it back to the model.
type ToolResult struct {
	CallID  string
	Output  string
	IsError bool
}

// FakeServer is a fake model API on loopback. Its methods are safe for
// concurrent use.
type FakeServer struct {
	// URL is the server's base URL, http://127.0.0.1:PORT, without a path.
	URL string

	t     testing.TB
	proto protocol
	cfg   config
	turns []Turn

	mu       sync.Mutex
	cur      int               // the turn last answered, -1 before the first
	callIDs  map[int]string    // turn -> the tool call id it was answered with
	results  map[string]string // call id -> output, as first sent back
	isErr    map[string]bool
	seen     map[string]bool // call ids of tool results already counted
	requests []Request
	n        int // ids
}

// protocol is one wire format.
type protocol interface {
	name() string
	// parse reads what the fake needs from a model request. ok is false
	// for a request the protocol does not know (answered 404).
	parse(r *http.Request, body []byte) (parsed, bool)
	key(r *http.Request) string
	// reply answers a model turn: call is the tool call to make (nil for
	// text).
	reply(w http.ResponseWriter, p parsed, call *toolCall, text string)
	// side answers a request that does not take a turn.
	side(w http.ResponseWriter, r *http.Request, p parsed)
	limited(w http.ResponseWriter, reset time.Time)
	unauthorized(w http.ResponseWriter)
	// toolFor is the CLI's tool name and arguments for a tool turn.
	toolFor(t Turn, p parsed) (string, map[string]any)
}

// parsed is what a protocol read from a request.
type parsed struct {
	// turn is true for a request that takes a script turn: one that offers
	// the model tools. Title, routing and HEAD requests do not.
	turn    bool
	tools   []string
	results []ToolResult
	cwd     string
	model   string
	stream  bool
	raw     map[string]any
	// namespaces maps a tool offered inside a namespace (Codex's MCP
	// tools), as "NAMESPACE__TOOL", to its namespace and name.
	namespaces map[string][2]string
	// exec: Codex offered its tools only inside its JavaScript "exec" tool
	// (its default model); a call is then a script calling tools.NAME.
	exec bool
	// truncated: the answer is cut at the token limit (Truncated).
	truncated bool
	cfg       *config
}

type toolCall struct {
	id   string
	name string
	args map[string]any
}

func newServer(t testing.TB, proto protocol, turns []Turn, opts []Option) *FakeServer {
	t.Helper()
	f := &FakeServer{t: t, proto: proto, turns: slices.Clone(turns), cur: -1,
		cfg:     config{limits: map[int]time.Time{}, breaks: map[int][]Breakage{}, holds: map[int]*Gate{}},
		callIDs: map[int]string{}, results: map[string]string{}, isErr: map[string]bool{}, seen: map[string]bool{}}
	for _, o := range opts {
		o(&f.cfg)
	}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = srv.URL
	t.Cleanup(srv.Close)
	return f
}

// Requests returns every request received so far, in order.
func (f *FakeServer) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// Keys returns the distinct API keys requests carried, in order of first
// use ("" for a request without one, such as Claude Code's HEAD /).
func (f *FakeServer) Keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for _, r := range f.requests {
		if !slices.Contains(keys, r.Key) {
			keys = append(keys, r.Key)
		}
	}
	return keys
}

// Result returns the output the CLI sent back for the tool call of turn i,
// and whether it has sent one yet.
func (f *FakeServer) Result(i int) (ToolResult, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.callIDs[i]
	if !ok {
		return ToolResult{}, false
	}
	out, ok := f.results[id]
	return ToolResult{CallID: id, Output: out, IsError: f.isErr[id]}, ok
}

// Done reports whether every turn of the script has been answered and the
// last tool result (if the script ends with a tool call) came back.
func (f *FakeServer) Done() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != len(f.turns)-1 {
		return false
	}
	if f.cur >= 0 && f.turns[f.cur].isTool() {
		_, ok := f.results[f.callIDs[f.cur]]
		return ok
	}
	return true
}

// Dump describes every request, for a failing test's log.
func (f *FakeServer) Dump() string {
	var b strings.Builder
	for i, r := range f.Requests() {
		fmt.Fprintf(&b, "%d: %s %s", i, r.Method, r.Path)
		if r.Query != "" {
			fmt.Fprintf(&b, "?%s", r.Query)
		}
		fmt.Fprintf(&b, " -> %d turn=%d tools=%d results=%d key=%q\n", r.Status, r.Turn, len(r.Tools), len(r.Results), r.Key)
	}
	return b.String()
}

func (f *FakeServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec := Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(),
		Body: body, Key: f.proto.key(r), Turn: -1}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	// The request takes its place on arrival, and its record is completed
	// once answered: a client may read the answer and send its next
	// request before this handler returns, and Requests must still list
	// them in order, none missing.
	f.mu.Lock()
	at := len(f.requests)
	f.requests = append(f.requests, rec)
	f.mu.Unlock()
	defer func() {
		rec.Status = sw.status
		f.mu.Lock()
		f.requests[at] = rec
		f.mu.Unlock()
	}()
	if r.Method == http.MethodHead {
		// Claude Code probes the base URL before its first call.
		return
	}
	p, ok := f.proto.parse(r, body)
	if !ok {
		http.Error(sw, "fakemodel: unknown endpoint for "+f.proto.name(), http.StatusNotFound)
		return
	}
	rec.Tools, rec.Results = p.tools, p.results
	p.cfg = &f.cfg
	if f.cfg.textOnly && r.URL.Path == "/v1/chat/completions" {
		p.turn = true
	}
	if f.cfg.key != "" && rec.Key != f.cfg.key {
		f.proto.unauthorized(sw)
		return
	}
	if msg, status := f.cfg.refusal(p); status != 0 {
		writeJSON(sw, status, map[string]any{"error": map[string]any{"message": msg, "type": "api_error", "param": nil, "code": nil}})
		return
	}
	if !p.turn {
		f.proto.side(sw, r, p)
		return
	}
	i, call, text, reset, limited := f.next(p)
	if limited {
		f.proto.limited(sw, reset)
		return
	}
	if how, ok := f.broken(i, p); ok {
		breakAnswer(sw, how, f.proto.name() == "anthropic")
		return
	}
	rec.Turn = i
	if g := f.hold(i); g != nil {
		g.arrivedOnce.Do(func() { close(g.arrived) })
		select {
		case <-g.release:
		case <-r.Context().Done():
			f.mu.Lock()
			f.giveBack(i, p)
			f.mu.Unlock()
			return
		}
	}
	p.truncated = i >= 0 && (f.turns[i].kind == kindTruncated || f.turns[i].cut)
	f.proto.reply(sw, p, call, text)
}

// next takes the turn for a model request: the current one again when the
// request brings nothing new (a retry), else the following one.
func (f *FakeServer) next(p parsed) (i int, call *toolCall, text string, reset time.Time, limited bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fresh := false
	for _, r := range p.results {
		if !f.seen[r.CallID] {
			f.seen[r.CallID] = true
			fresh = true
		}
		if _, ok := f.results[r.CallID]; !ok {
			f.results[r.CallID] = r.Output
			f.isErr[r.CallID] = r.IsError
		}
	}
	i = f.cur
	if i < 0 || !f.turns[i].isTool() || fresh {
		i++
	}
	if at, ok := f.cfg.limits[i]; ok && i < len(f.turns) {
		delete(f.cfg.limits, i)
		// Results count as seen only once the turn they lead to is given.
		for _, r := range p.results {
			delete(f.seen, r.CallID)
		}
		return -1, nil, "", at, true
	}
	if i >= len(f.turns) {
		return -1, nil, "fakemodel: the script has no more turns", time.Time{}, false
	}
	f.cur = i
	t := f.turns[i]
	if !t.isTool() {
		return i, nil, t.text, time.Time{}, false
	}
	id, ok := f.callIDs[i]
	if !ok {
		f.n++
		id = fmt.Sprintf("call_fake_%d", f.n)
		f.callIDs[i] = id
	}
	name, args := f.proto.toolFor(t, p)
	return i, &toolCall{id: id, name: name, args: args}, "", time.Time{}, false
}

// hold takes the gate set for turn i, if any: only the first request
// given turn i waits at it.
func (f *FakeServer) hold(i int) *Gate {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.cfg.holds[i]
	delete(f.cfg.holds, i)
	return g
}

// broken takes the next breakage scheduled for turn i, if any; the turn is
// given back so that the next request gets it again.
func (f *FakeServer) broken(i int, p parsed) (Breakage, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	bs := f.cfg.breaks[i]
	if i < 0 || len(bs) == 0 {
		return 0, false
	}
	f.cfg.breaks[i] = bs[1:]
	f.giveBack(i, p)
	return bs[0], true
}

// giveBack undoes the taking of turn i by a request that was not
// answered, so that the next request gets it again. f.mu is held.
func (f *FakeServer) giveBack(i int, p parsed) {
	f.cur = i - 1
	for _, r := range p.results {
		delete(f.seen, r.CallID)
	}
}

// breakAnswer answers with a stream that starts like an answer (in
// Anthropic's events or Chat's chunks) and breaks.
func breakAnswer(w http.ResponseWriter, how Breakage, anthropic bool) {
	s := startSSE(w)
	event := ""
	if anthropic {
		event = "message_start"
	}
	switch {
	case how == Garbage:
		s.send(event, "{this is not json")
	case anthropic:
		s.send(event, map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_cut", "type": "message", "role": "assistant", "model": "fake", "content": []any{},
			"usage": map[string]any{"input_tokens": 1, "output_tokens": 0}}})
	default:
		s.send(event, map[string]any{"id": "chatcmpl-cut", "object": "chat.completion.chunk", "model": "fake",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": "I will"}}}})
	}
}

func readBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		rd = z
	}
	return io.ReadAll(rd)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if fl, ok := s.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// sse writes server-sent events; event "" writes a data-only event.
type sse struct{ w http.ResponseWriter }

func startSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w}
}

func (s sse) send(event string, data any) {
	var b bytes.Buffer
	if event != "" {
		fmt.Fprintf(&b, "event: %s\n", event)
	}
	switch d := data.(type) {
	case string:
		fmt.Fprintf(&b, "data: %s\n\n", d)
	default:
		j, _ := json.Marshal(d) // fakes only encode maps of plain values
		fmt.Fprintf(&b, "data: %s\n\n", j)
	}
	s.w.Write(b.Bytes())
	if fl, ok := s.w.(http.Flusher); ok {
		fl.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// cwdPatterns find the working directory the CLIs state in their prompts.
var cwdPatterns = []*regexp.Regexp{
	regexp.MustCompile(`Primary working directory: ([^\s\\"]+)`), // Claude Code
	regexp.MustCompile(`<cwd>([^<]+)</cwd>`),                     // Codex
	regexp.MustCompile(`Working directory: ([^\s\\"]+)`),         // opencode
}

func findCwd(body []byte) string {
	for _, re := range cwdPatterns {
		if m := re.FindSubmatch(body); m != nil {
			return string(m[1])
		}
	}
	return ""
}

func absPath(p parsed, path string) string {
	if strings.HasPrefix(path, "/") || p.cwd == "" {
		return path
	}
	return strings.TrimRight(p.cwd, "/") + "/" + path
}

// MCPToolName is how cli names the MCP tool of server to the model, as
// measured with the pinned versions (TestRealCLIsMCP): Claude Code
// "mcp__SERVER__TOOL"; Codex offers a namespace "mcp__SERVER" holding
// TOOL, which the fake lists as "mcp__SERVER__TOOL" and calls with name
// and namespace; opencode "SERVER_TOOL"; Gemini CLI "mcp_SERVER_TOOL".
func MCPToolName(cli, server, tool string) string {
	switch cli {
	case "opencode":
		return server + "_" + tool
	case "gemini":
		return "mcp_" + server + "_" + tool
	}
	return "mcp__" + server + "__" + tool
}

// resolveTool picks the offered tool a CallTool name means: the name
// itself, or for "mcp__SERVER__TOOL" the same MCP tool under the CLI's own
// naming.
func resolveTool(name string, offered []string) string {
	if slices.Contains(offered, name) {
		return name
	}
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		return name
	}
	server, tool, ok := strings.Cut(rest, "__")
	if !ok {
		return name
	}
	for _, cand := range []string{server + "__" + tool, "mcp_" + server + "_" + tool, server + "_" + tool, tool} {
		if slices.Contains(offered, cand) {
			return cand
		}
	}
	return name
}

// shellWrite is a shell command that writes content to path exactly.
func shellWrite(path, content string) string {
	return fmt.Sprintf("mkdir -p -- \"$(dirname -- %s)\" && printf '%%s' %s > %s", shq(path), shq(content), shq(path))
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// textOf returns v as a string when it is one, or the text parts of a list
// of content blocks ({"type":...,"text":...}), else its JSON.
func textOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		var parts []string
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					parts = append(parts, s)
					continue
				}
			}
			parts = append(parts, textOf(e))
		}
		return strings.Join(parts, "\n")
	}
	j, _ := json.Marshal(v)
	return string(j)
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func list(m map[string]any, k string) []any {
	l, _ := m[k].([]any)
	return l
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func decode(body []byte) (map[string]any, bool) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, false
	}
	return m, true
}

func argsJSON(args map[string]any) string {
	if args == nil {
		return "{}"
	}
	j, _ := json.Marshal(args)
	return string(j)
}
