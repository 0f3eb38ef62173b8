package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Parse reads the pipeline file name (data) and checks it (Validate).
// Unknown fields, YAML aliases and a field given twice are refused. A
// step's prompt_file is read through read, with a path relative to the
// repository's root: absolute paths and paths that climb out (..) are
// refused here; read must refuse symlinks that lead out of the repository.
func Parse(name string, data []byte, read func(path string) ([]byte, error)) (*Pipeline, error) {
	p := &parser{file: name, read: read}
	root, err := p.document(name, data)
	if err != nil {
		return nil, err
	}
	pl := &Pipeline{File: name}
	f, err := p.mapping(root, "pipeline", "name", "params", "steps")
	if err != nil {
		return nil, err
	}
	if err := p.decode(f["name"], "name", &pl.Name); err != nil {
		return nil, err
	}
	if n := f["params"]; n != nil {
		if err := p.params(n, pl); err != nil {
			return nil, err
		}
	}
	steps := f["steps"]
	if steps == nil {
		return nil, p.errAt(root, "a pipeline needs steps")
	}
	if steps.Kind != yaml.SequenceNode {
		return nil, p.errAt(steps, "steps must be a list")
	}
	if len(steps.Content) > MaxSteps {
		return nil, p.errAt(steps, "%d steps; the limit is %d", len(steps.Content), MaxSteps)
	}
	for _, n := range steps.Content {
		s, err := p.step(n)
		if err != nil {
			return nil, err
		}
		pl.Steps = append(pl.Steps, s)
	}
	if err := pl.Validate(); err != nil {
		return nil, err
	}
	return pl, nil
}

type parser struct {
	file string
	read func(path string) ([]byte, error)
}

func (p *parser) errAt(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.file, n.Line, fmt.Sprintf(format, args...))
}

// yamlLine is how yaml.v3 starts the messages of the errors it places.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// document parses data into its one top-level node, refusing aliases
// (their expansion is how small YAML grows large).
func (p *parser) document(name string, data []byte) (*yaml.Node, error) {
	if len(data) > MaxFile {
		return nil, fmt.Errorf("%s: %d bytes; the limit is %d", name, len(data), MaxFile)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty", name)
		}
		msg := err.Error()
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			return nil, fmt.Errorf("%s:%s: %s", name, m[1], msg[len(m[0]):])
		}
		return nil, fmt.Errorf("%s: %s", name, msg)
	}
	var more yaml.Node
	if dec.Decode(&more) == nil {
		return nil, fmt.Errorf("%s:%d: more than one YAML document", name, more.Line)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fmt.Errorf("%s: no YAML document", name)
	}
	if a := findAlias(&doc); a != nil {
		return nil, p.errAt(a, "YAML aliases and anchors are not allowed")
	}
	return doc.Content[0], nil
}

func findAlias(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return n
	}
	for _, c := range n.Content {
		if a := findAlias(c); a != nil {
			return a
		}
	}
	return nil
}

// mapping returns n's fields by key, refusing a key not in allowed or given
// twice.
func (p *parser) mapping(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errAt(n, "%s must be a mapping", what)
	}
	m := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode || !slices.Contains(allowed, k.Value):
			return nil, p.errAt(k, "%s: unknown field %q", what, k.Value)
		case m[k.Value] != nil:
			return nil, p.errAt(k, "%s: %s given twice", what, k.Value)
		}
		m[k.Value] = v
	}
	return m, nil
}

// decode fills dst from n (none: dst stays as it is).
func (p *parser) decode(n *yaml.Node, what string, dst any) error {
	if n == nil {
		return nil
	}
	if err := n.Decode(dst); err != nil {
		msg := err.Error()
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			msg = msg[len(m[0]):]
		}
		return p.errAt(n, "%s: %s", what, msg)
	}
	return nil
}

func (p *parser) params(n *yaml.Node, pl *Pipeline) error {
	if n.Kind != yaml.SequenceNode {
		return p.errAt(n, "params must be a list")
	}
	if len(n.Content) > MaxParams {
		return p.errAt(n, "%d params; the limit is %d", len(n.Content), MaxParams)
	}
	for _, c := range n.Content {
		f, err := p.mapping(c, "param", "name", "description", "default")
		if err != nil {
			return err
		}
		var par Param
		if err := p.decode(f["name"], "param name", &par.Name); err != nil {
			return err
		}
		if err := p.decode(f["description"], "param description", &par.Description); err != nil {
			return err
		}
		if d := f["default"]; d != nil {
			var v string
			if err := p.decode(d, "param default", &v); err != nil {
				return err
			}
			par.Default = &v
		}
		par.Line = c.Line
		pl.Params = append(pl.Params, par)
	}
	return nil
}

// The fields of a step, and those a step file's header may set.
var (
	stepFields   = []string{"id", "kind", "depends_on", "agent", "model", "mode", "tools", "prompt", "prompt_file", "command", "steps", "loop", "for_each", "limits", "account", "optional", "fresh", "reads"}
	headerFields = []string{"agent", "model", "mode", "tools", "limits"}
)

func (p *parser) step(n *yaml.Node) (Step, error) {
	s := Step{Line: n.Line}
	f, err := p.mapping(n, "step", stepFields...)
	if err != nil {
		return s, err
	}
	what := "step"
	if id := f["id"]; id != nil && id.Kind == yaml.ScalarNode {
		what = "step " + strconv.Quote(id.Value)
	}
	for _, fd := range []struct {
		key string
		dst any
	}{
		{"id", &s.ID}, {"kind", &s.Kind}, {"depends_on", &s.DependsOn}, {"prompt", &s.Prompt},
		{"prompt_file", &s.PromptFile}, {"command", &s.Command}, {"steps", &s.Steps},
		{"account", &s.Account}, {"optional", &s.Optional}, {"fresh", &s.Fresh}, {"reads", &s.Reads},
	} {
		if err := p.decode(f[fd.key], what+": "+fd.key, fd.dst); err != nil {
			return s, err
		}
	}
	if err := p.agentFields(f, what, &s); err != nil {
		return s, err
	}
	if n := f["loop"]; n != nil {
		lf, err := p.mapping(n, what+": loop", "until", "max_rounds", "max_cost", "max_wall", "repeat")
		if err != nil {
			return s, err
		}
		s.Loop = &Loop{}
		for _, fd := range []struct {
			key string
			dst any
		}{{"until", &s.Loop.Until}, {"max_rounds", &s.Loop.MaxRounds}, {"max_cost", &s.Loop.MaxCost}, {"max_wall", &s.Loop.MaxWall}, {"repeat", &s.Loop.Repeat}} {
			if err := p.decode(lf[fd.key], what+": loop "+fd.key, fd.dst); err != nil {
				return s, err
			}
		}
	}
	if n := f["for_each"]; n != nil {
		ff, err := p.mapping(n, what+": for_each", "items", "from", "max_parallel", "touches")
		if err != nil {
			return s, err
		}
		s.ForEach = &ForEach{}
		for _, fd := range []struct {
			key string
			dst any
		}{{"items", &s.ForEach.Items}, {"from", &s.ForEach.From}, {"max_parallel", &s.ForEach.MaxParallel}, {"touches", &s.ForEach.Touches}} {
			if err := p.decode(ff[fd.key], what+": for_each "+fd.key, fd.dst); err != nil {
				return s, err
			}
		}
	}
	if s.PromptFile != "" {
		if err := p.promptFile(f["prompt_file"], what, f, &s); err != nil {
			return s, err
		}
	}
	return s, nil
}

// agentFields reads what both a step and a step file's header may set.
func (p *parser) agentFields(f map[string]*yaml.Node, what string, s *Step) error {
	for _, fd := range []struct {
		key string
		dst any
	}{{"agent", &s.Agent}, {"model", &s.Model}, {"mode", &s.Mode}, {"tools", &s.Tools}} {
		if err := p.decode(f[fd.key], what+": "+fd.key, fd.dst); err != nil {
			return err
		}
	}
	if n := f["limits"]; n != nil {
		lf, err := p.mapping(n, what+": limits", "max_turns", "max_cost", "max_wall")
		if err != nil {
			return err
		}
		for _, fd := range []struct {
			key string
			dst any
		}{{"max_turns", &s.Limits.MaxTurns}, {"max_cost", &s.Limits.MaxCost}, {"max_wall", &s.Limits.MaxWall}} {
			if err := p.decode(lf[fd.key], what+": limits "+fd.key, fd.dst); err != nil {
				return err
			}
		}
	}
	return nil
}

// promptFile reads a step file: YAML front matter between "---" lines,
// then the prompt. The header's fields fill those the step left unset.
func (p *parser) promptFile(at *yaml.Node, what string, stepFields map[string]*yaml.Node, s *Step) error {
	if s.Prompt != "" {
		return p.errAt(at, "%s: prompt and prompt_file are exclusive", what)
	}
	if !filepath.IsLocal(s.PromptFile) || filepath.ToSlash(s.PromptFile) != s.PromptFile {
		return p.errAt(at, "%s: prompt_file %q must be a relative path inside the repository", what, s.PromptFile)
	}
	if p.read == nil {
		return p.errAt(at, "%s: prompt_file: no repository to read it from", what)
	}
	data, err := p.read(s.PromptFile)
	if err != nil {
		return p.errAt(at, "%s: reading prompt_file: %v", what, err)
	}
	header, body, err := frontMatter(data)
	if err != nil {
		return p.errAt(at, "%s: prompt_file %s: %v", what, s.PromptFile, err)
	}
	sub := &parser{file: s.PromptFile}
	root, err := sub.document(s.PromptFile, header)
	if err != nil {
		return err
	}
	hf, err := sub.mapping(root, "header", headerFields...)
	if err != nil {
		return err
	}
	for k := range hf {
		if stepFields[k] != nil {
			delete(hf, k) // the step's own value wins
		}
	}
	if err := sub.agentFields(hf, "header", s); err != nil {
		return err
	}
	s.Prompt = string(body)
	return nil
}

// frontMatter splits a step file into its YAML header and its body.
func frontMatter(data []byte) (header, body []byte, err error) {
	if len(data) > MaxFile {
		return nil, nil, fmt.Errorf("%d bytes; the limit is %d", len(data), MaxFile)
	}
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(data, []byte("---\n"))
	if !ok {
		return nil, nil, fmt.Errorf("no YAML header (a first line of ---)")
	}
	if h, ok := bytes.CutPrefix(rest, []byte("---\n")); ok {
		return []byte("{}"), h, nil
	}
	header, body, ok = bytes.Cut(rest, []byte("\n---\n"))
	if !ok {
		return nil, nil, fmt.Errorf("the YAML header has no closing ---")
	}
	// The newline keeps the header's line numbers those of the file.
	return append([]byte("\n"), header...), body, nil
}
