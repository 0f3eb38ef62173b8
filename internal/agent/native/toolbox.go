package native

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"drover/internal/agent"
	"drover/internal/model"
	"drover/internal/tools"
)

// maxArgs bounds a tool call's arguments; a bigger call is malformed.
const maxArgs = 2 << 20

// errMalformed marks a call the model got wrong in form (bad JSON, an
// unknown tool, arguments of the wrong shape): it gets a tool error, and
// several in a row end the attempt.
var errMalformed = errors.New("malformed tool call")

// toolbox runs the loop's tools: the file tools and commands here, and
// drover's ask, checkpoint, deliver and context through the tools package.
type toolbox struct {
	files  files
	cmds   commands
	drover agent.ToolCaller // nil: the job has no drover tools
}

// Names of the loop's own tools.
const (
	toolRun    = "run_command"
	toolRead   = "read_file"
	toolWrite  = "write_file"
	toolEdit   = "edit_file"
	toolList   = "list_dir"
	toolSearch = "search"
)

func obj(props map[string]any, required ...string) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func strProp(desc string) map[string]any {
	return map[string]any{"type": "string", "description": desc}
}
func intProp(desc string) map[string]any {
	return map[string]any{"type": "integer", "description": desc}
}

// definitions are the tools offered to the model, in a fixed order (a
// stable prefix caches).
func (t *toolbox) definitions() []model.Tool {
	defs := []model.Tool{
		{Name: toolRun, Description: "Run a shell command (/bin/sh -c) in the worktree, as a fresh process: no state (cd, variables) carries over. " +
			"Returns its combined output (long output keeps its head and tail) and exit code.",
			Schema: obj(map[string]any{"command": strProp("The command line."),
				"timeout_seconds": intProp("Stop it after this many seconds (default 600, at most 1800).")}, "command")},
		{Name: toolRead, Description: "Read a text file of the worktree, with line numbers; offset and limit select lines.",
			Schema: obj(map[string]any{"path": strProp("Path relative to the worktree."),
				"offset": intProp("First line to show (1-based)."), "limit": intProp("How many lines (default 400).")}, "path")},
		{Name: toolWrite, Description: "Create or overwrite a file of the worktree with content.",
			Schema: obj(map[string]any{"path": strProp("Path relative to the worktree."), "content": strProp("The whole new content.")}, "path", "content")},
		{Name: toolEdit, Description: "Replace old_text, which must occur exactly once in the file, with new_text.",
			Schema: obj(map[string]any{"path": strProp("Path relative to the worktree."), "old_text": strProp("Text to replace, exactly as in the file."),
				"new_text": strProp("Its replacement.")}, "path", "old_text", "new_text")},
		{Name: toolList, Description: "List a directory of the worktree (directories end in /, symlinks in @).",
			Schema: obj(map[string]any{"path": strProp("Directory relative to the worktree (default: its root).")})},
		{Name: toolSearch, Description: "Search the worktree's text files for a regular expression (RE2); answers path:line:text.",
			Schema: obj(map[string]any{"pattern": strProp("The regular expression."), "path": strProp("Directory or file to search (default: all).")}, "pattern")},
	}
	if t.drover != nil {
		for _, d := range tools.Definitions() {
			var schema map[string]any
			if err := json.Unmarshal(d.InputSchema, &schema); err != nil {
				continue // the tools package's own literals: cannot fail
			}
			defs = append(defs, model.Tool{Name: d.Name, Description: d.Description, Schema: schema})
		}
	}
	return defs
}

// call runs one tool call. A returned error is a tool error to show the
// model; errMalformed-wrapped ones count towards the malformed limit.
//
// Once ctx ends (a cancel, the wall-time limit) call returns within the
// attempt's grace whatever the tool does: a tool stuck in a system call
// that ignores ctx must not hold the runner's slot. A result that comes
// later is dropped.
func (t *toolbox) call(ctx context.Context, c model.Call) (string, error) {
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := t.dispatch(ctx, c)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
	}
	grace := time.NewTimer(t.cmds.grace)
	defer grace.Stop()
	select {
	case r := <-done:
		return r.out, r.err
	case <-grace.C:
		return "", fmt.Errorf("%s was abandoned: it had not ended %s after the attempt was stopped (%v)", c.Name, t.cmds.grace, context.Cause(ctx))
	}
}

// dispatch runs one tool call to its end.
func (t *toolbox) dispatch(ctx context.Context, c model.Call) (string, error) {
	if len(c.Args) > maxArgs {
		return "", fmt.Errorf("%w: arguments of %d bytes; the limit is %d", errMalformed, len(c.Args), maxArgs)
	}
	args := []byte(c.Args)
	if len(bytes.TrimSpace(args)) == 0 {
		args = []byte("{}")
	}
	if !json.Valid(args) {
		return "", fmt.Errorf("%w: the arguments are not valid JSON", errMalformed)
	}
	switch c.Name {
	case badBlock:
		var in struct{ Problem string }
		_ = json.Unmarshal(args, &in)
		return "", fmt.Errorf("%w: %s", errMalformed, in.Problem)
	case toolRun:
		var in struct {
			Command string `json:"command"`
			Timeout int    `json:"timeout_seconds"`
		}
		if err := decode(args, &in); err != nil {
			return "", err
		}
		return t.cmds.run(ctx, in.Command, time.Duration(in.Timeout)*time.Second)
	case toolRead:
		var in struct {
			Path          string `json:"path"`
			Offset, Limit int
		}
		if err := decode(args, &in); err != nil {
			return "", err
		}
		return t.files.read(in.Path, in.Offset, in.Limit)
	case toolWrite:
		var in struct{ Path, Content string }
		if err := decode(args, &in); err != nil {
			return "", err
		}
		return t.files.write(in.Path, in.Content)
	case toolEdit:
		var in struct {
			Path string `json:"path"`
			Old  string `json:"old_text"`
			New  string `json:"new_text"`
		}
		if err := decode(args, &in); err != nil {
			return "", err
		}
		return t.files.edit(in.Path, in.Old, in.New)
	case toolList:
		var in struct{ Path string }
		if err := decode(args, &in); err != nil {
			return "", err
		}
		return t.files.list(in.Path)
	case toolSearch:
		var in struct{ Pattern, Path string }
		if err := decode(args, &in); err != nil {
			return "", err
		}
		return t.files.search(in.Pattern, in.Path)
	}
	if t.drover != nil && slices.ContainsFunc(tools.Definitions(), func(d tools.Definition) bool { return d.Name == c.Name }) {
		out, err := t.drover.Call(ctx, c.Name, args)
		if err != nil && bytes.Contains([]byte(err.Error()), []byte("invalid arguments")) {
			return "", fmt.Errorf("%w: %v", errMalformed, err)
		}
		return out, err
	}
	return "", fmt.Errorf("%w: there is no tool %q", errMalformed, c.Name)
}

// decode reads a call's arguments strictly, by the tools package's rule
// (no unknown fields, one JSON object); a failure is malformed.
func decode(args []byte, v any) error {
	if err := tools.DecodeArgs(args, v); err != nil {
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
	return nil
}
