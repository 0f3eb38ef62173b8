package cli

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
)

func TestSafe(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "make test", "make test"},
		{"unicode kept", "héllo → 世界 🚀 ﬁ\u00a0end", "héllo → 世界 🚀 ﬁ\u00a0end"},
		{"replacement character kept", "a\ufffdb", "a\ufffdb"},
		{"backslash kept", `C:\x1b\path`, `C:\x1b\path`},
		{"ESC", "\x1b[2J", `\x1b[2J`},
		{"OSC title", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"CSI as one character", "\u009b31m", `\u009b31m`},
		{"C1 ends", "\u0080\u009f", `\u0080\u009f`},
		{"BEL", "a\ab", `a\x07b`},
		{"NUL", "a\x00b", `a\x00b`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"CR", "100%\rdone", `100%\rdone`},
		{"tab and newline", "a\tb\nc", `a\tb\nc`},
		{"backspace", "ab\bc", `ab\x08c`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"encoded C1 bytes alone", "\xc2", `\xc2`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"bidi isolate", "\u2066x\u2069", `\u2066x\u2069`},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := safe(tt.in)
			if got != tt.want {
				t.Errorf("safe(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if !utf8.ValidString(got) || strings.ContainsFunc(got, escaped) {
				t.Errorf("safe(%q) = %q still holds what a terminal acts on", tt.in, got)
			}
		})
	}
}

func TestSafeArgs(t *testing.T) {
	var buf bytes.Buffer
	fprintf(&buf, "%s|%v|%s|%d|%s|%v|%s\n", "a\x1b", job.State("x\x1b"), []string{"b\u009b"}, 7,
		os.ErrInvalid, true, time.Duration(0))
	if want := `a\x1b|x\x1b|[b\u009b]|7|invalid argument|true|0s` + "\n"; buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
	buf.Reset()
	var nilErr *os.PathError
	fprintf(&buf, "%v %v %s\n", nil, error(nilErr), any(nil))
	if want := "<nil> <nil> %!s(<nil>)\n"; buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}

func TestJSONSafe(t *testing.T) {
	in := map[string]string{"s": "a\x1b[2J\x7f\u009b\u202e\u0085b\u00e9", "bad": "\xff"}
	var buf bytes.Buffer
	if err := printJSON(&buf, in); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !utf8.ValidString(out) || strings.ContainsFunc(out, func(r rune) bool { return escaped(r) && r != '\n' }) {
		t.Errorf("JSON holds what a terminal acts on: %q", out)
	}
	if !strings.Contains(out, `\u009b`) || !strings.Contains(out, "é") {
		t.Errorf("JSON %q", out)
	}
	var back map[string]string
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back["s"] != in["s"] {
		t.Errorf("JSON %q reads back as %q, %v", out, back, err)
	}
}

// TestUntrustedTextEscaped: what other users wrote reaches the terminal
// escaped in every text output, raw only in the log.
func TestUntrustedTextEscaped(t *testing.T) {
	h := newFakeHub(t)
	now := time.Now()
	code := 1
	q := protocol.QuestionView{ID: "q-1", Job: "j-1", Attempt: 1, AskedAt: now,
		Question: "Pick one\x1b[2J\nsecond line \u009b31m", Choices: []string{"red\x1b[31m", "blue\u009b"},
		Answer: &protocol.Answer{Text: "ans\x1b[0m\nmore\u009b", By: "mal\u009blory"}}
	h.mu.Lock()
	h.jobs = []apitypes.JobView{{ID: "j-1", State: job.Waiting, Agent: "exec\x1b[2J", Requester: "ev\u009bil",
		Args: []string{"echo", "\x1b[2J", "\u009b31m", "bell\a"}, Labels: map[string]string{"k": "v\x1b"},
		Runner: "r\x1b]0;title\x07", CreatedAt: now, Key: "k\u202e", Project: "web\x7f",
		Attempts: []apitypes.AttemptView{{Number: 1, State: job.AttemptFailed, Runner: "r\x1b", OfferedAt: now,
			ExitCode: &code, Message: "boom\x1b[31m\u009b"}},
		Summary: "done\x1b[2J\nline two\u009b", Questions: []protocol.QuestionView{q},
		Publication: &apitypes.PublicationView{State: "failed", URL: "https://x/\x1b]8;;https://evil\x07pr", Branch: "br\u009b",
			Code: "forge\x1b[31m", Reason: "moved\x1b[2J\nagain"}}}
	h.questions = []protocol.QuestionView{q}
	h.logs["j-1"] = "raw \x1b[31mred\x1b[0m\n"
	h.mu.Unlock()
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}

	for _, tt := range []struct {
		args []string
		want []string // visible escapes the output must hold
	}{
		{[]string{"jobs"}, []string{`exec\x1b[2J`, `ev\u009bil`, `r\x1b]0;title\x07`}},
		{[]string{"show", "j-1"}, []string{`'\x1b[2J' '\u009b31m' 'bell\x07'`, `k=v\x1b`, `k\u202e`, `web\x7f`,
			`boom\x1b[31m\u009b`, `done\x1b[2J`, `line two\u009b`, `Pick one\x1b[2J`, `red\x1b[31m`, `ans\x1b[0m`,
			`https://x/\x1b]8;;https://evil\x07pr`, `br\u009b`, `forge\x1b[31m: moved\x1b[2J\nagain`}},
		{[]string{"questions"}, []string{`Pick one\x1b[2J`, `second line \u009b31m`, `1) red\x1b[31m`, `2) blue\u009b`,
			`answer by mal\u009blory`, `ans\x1b[0m`, `more\u009b`}},
	} {
		r := runCLI(t, env, "", tt.args...)
		if r.code != 0 {
			t.Fatalf("%q: code %d, stderr %q", tt.args, r.code, r.stderr)
		}
		if strings.ContainsFunc(r.stdout, func(r rune) bool { return escaped(r) && r != '\n' }) {
			t.Errorf("%q printed control characters:\n%q", tt.args, r.stdout)
		}
		for _, w := range tt.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%q: no %q in\n%s", tt.args, w, r.stdout)
			}
		}
	}

	// The hub's error messages too, on one line.
	r := runCLI(t, env, "", "show", "j-\x1b[2J")
	if r.code != 1 || strings.ContainsFunc(r.stderr, func(r rune) bool { return escaped(r) && r != '\n' }) ||
		!strings.Contains(r.stderr, `no job j-\x1b[2J`) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("error: code %d, stderr %q", r.code, r.stderr)
	}

	// The log is the agent's own output, passed on as it is.
	r = runCLI(t, env, "", "logs", "j-1")
	if r.code != 0 || r.stdout != "raw \x1b[31mred\x1b[0m\n" {
		t.Errorf("logs: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestErrorLines: a message over several lines (git's stderr, say) keeps
// its lines, indented after the first, each made safe.
func TestErrorLines(t *testing.T) {
	var errb bytes.Buffer
	a := newApp(Env{Stderr: &errb})
	if code := a.exit(nil, errorString("git push: exit 1: remote: no\x1b[2J\nhint: drover: fake\u009b\n")); code != 1 {
		t.Errorf("code %d", code)
	}
	if want := "drover: git push: exit 1: remote: no\\x1b[2J\n  hint: drover: fake\\u009b\n"; errb.String() != want {
		t.Errorf("stderr %q, want %q", errb.String(), want)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// TestPrintsGoThroughSafe keeps the one rule: the package prints with
// fprintf, so every string argument is made safe. Only raw data goes out
// through fmt directly: JSON (made safe by jsonSafe), a checked token, a
// child process's output copied to its log file, a tool's answer for the
// script inside a job that asked for it, and safe's own builder.
func TestPrintsGoThroughSafe(t *testing.T) {
	allowed := map[string]bool{"safe": true, "fprintf": true, "printJSON": true, "write": true, "startChild": true, "toolData": true}
	prints := map[string]bool{"Print": true, "Printf": true, "Println": true, "Fprint": true, "Fprintf": true, "Fprintln": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || allowed[fd.Name.Name] {
				continue
			}
			ast.Inspect(fd, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "fmt" && prints[sel.Sel.Name] {
					t.Errorf("%s: %s prints with fmt.%s; use fprintf", fset.Position(sel.Pos()), fd.Name.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}
