package spec

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"drover/internal/agent/facts"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// namePattern is what pipeline names, step ids and param names look like:
// they appear in template variables, branch names and commands.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// template finds the variables of a prompt, a command or an item.
var template = regexp.MustCompile(`\{\{(.*?)\}\}`)

// Outputs a step makes that later steps may read.
var outputs = []string{"commit", "verdict", "feedback"}

// Validate checks the whole pipeline: names, each step for its kind, the
// graph (known steps, no cycle, publish last) and that every template
// variable names a param or an output of a step upstream. The error names
// the file and the line of the step (or param) at fault.
func (pl *Pipeline) Validate() error {
	v := validator{pl: pl, byID: map[string]*Step{}}
	return v.run()
}

type validator struct {
	pl       *Pipeline
	byID     map[string]*Step
	upstream map[string]map[string]bool
}

func (v *validator) at(line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", v.pl.File, line, fmt.Sprintf(format, args...))
}

func (v *validator) stepErr(s *Step, format string, args ...any) error {
	return v.at(s.Line, "step %q: %s", s.ID, fmt.Sprintf(format, args...))
}

func (v *validator) run() error {
	pl := v.pl
	if !namePattern.MatchString(pl.Name) {
		return v.at(1, "pipeline name %q must match %s", pl.Name, namePattern)
	}
	if len(pl.Params) > MaxParams {
		return v.at(1, "%d params; the limit is %d", len(pl.Params), MaxParams)
	}
	seen := map[string]bool{}
	for _, p := range pl.Params {
		switch {
		case !namePattern.MatchString(p.Name):
			return v.at(p.Line, "param name %q must match %s", p.Name, namePattern)
		case seen[p.Name]:
			return v.at(p.Line, "param %q given twice", p.Name)
		case p.Default != nil && rules.CheckPlainText("param "+p.Name, *p.Default, true) != nil:
			return v.at(p.Line, "%v", rules.CheckPlainText("param "+p.Name+" default", *p.Default, true))
		}
		seen[p.Name] = true
	}
	switch {
	case len(pl.Steps) == 0:
		return v.at(1, "a pipeline needs steps")
	case len(pl.Steps) > MaxSteps:
		return v.at(1, "%d steps; the limit is %d", len(pl.Steps), MaxSteps)
	}
	for i := range pl.Steps {
		s := &pl.Steps[i]
		if !namePattern.MatchString(s.ID) {
			return v.at(s.Line, "step id %q must match %s", s.ID, namePattern)
		}
		if v.byID[s.ID] != nil {
			return v.stepErr(s, "id given twice (first at line %d)", v.byID[s.ID].Line)
		}
		v.byID[s.ID] = s
	}
	for i := range pl.Steps {
		if err := v.step(&pl.Steps[i]); err != nil {
			return err
		}
	}
	if err := v.acyclic(); err != nil {
		return err
	}
	v.upstream = map[string]map[string]bool{}
	for i := range pl.Steps {
		if err := v.inputs(&pl.Steps[i], i == len(pl.Steps)-1); err != nil {
			return err
		}
	}
	return nil
}

// step checks what one step says on its own, and that the steps it names
// exist.
func (v *validator) step(s *Step) error {
	if slices.Contains(s.DependsOn, s.ID) {
		return v.stepErr(s, "depends on itself")
	}
	if err := v.known(s, "depends_on", s.DependsOn); err != nil {
		return err
	}
	if err := v.reads(s); err != nil {
		return err
	}
	// Which fields each kind takes; any other set is refused, so nothing
	// written in the file is silently ignored.
	set := map[string]bool{
		"agent": s.Agent != "", "model": s.Model != "", "mode": s.Mode != "", "tools": s.Tools,
		"prompt": s.Prompt != "", "prompt_file": s.PromptFile != "", "command": len(s.Command) > 0,
		"steps": len(s.Steps) > 0, "loop": s.Loop != nil, "for_each": s.ForEach != nil,
		"limits": s.Limits != Limits{}, "account": s.Account != "",
		"optional": s.Optional, "fresh": s.Fresh, "reads": len(s.Reads) > 0,
	}
	var takes []string
	switch s.Kind {
	case KindAgent:
		takes = []string{"agent", "model", "mode", "tools", "prompt", "prompt_file", "loop", "for_each", "limits", "account", "optional", "fresh", "reads"}
		if err := v.agent(s); err != nil {
			return err
		}
	case KindExec:
		takes = []string{"command", "loop", "for_each", "limits", "optional", "fresh", "reads"}
		if len(s.Command) == 0 {
			return v.stepErr(s, "an exec step needs a command")
		}
		if len(s.Command) > rules.MaxArgs {
			return v.stepErr(s, "command has %d arguments; the limit is %d", len(s.Command), rules.MaxArgs)
		}
		total := 0
		for _, a := range s.Command {
			if err := rules.CheckPlainText("command", a, true); err != nil {
				return v.stepErr(s, "%v", err)
			}
			total += len(a)
		}
		if total > rules.MaxArgsBytes {
			return v.stepErr(s, "command is %d bytes; the limit is %d", total, rules.MaxArgsBytes)
		}
	case KindIntegrate:
		takes = []string{"steps"}
		if len(s.Steps) == 0 {
			return v.stepErr(s, "an integrate step needs the steps it merges")
		}
		if err := v.known(s, "steps", s.Steps); err != nil {
			return err
		}
	case KindGate:
		takes = []string{"prompt"}
		if err := rules.CheckQuestion(s.Prompt, nil); err != nil {
			return v.stepErr(s, "a gate step's prompt is its question: %v", err)
		}
	case KindPublish:
		if len(s.DependsOn) == 0 {
			return v.stepErr(s, "a publish step needs the step whose result it publishes (depends_on)")
		}
	default:
		return v.stepErr(s, "kind %q is not one of %s, %s, %s, %s, %s", s.Kind, KindAgent, KindExec, KindIntegrate, KindGate, KindPublish)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if set[k] && !slices.Contains(takes, k) {
			return v.stepErr(s, "a %s step takes no %s", s.Kind, k)
		}
	}
	if (s.Optional || s.Fresh) && (s.Loop != nil || s.ForEach != nil) {
		return v.stepErr(s, "optional and fresh are for a plain step, not a loop or a for_each")
	}
	if err := v.loop(s); err != nil {
		return err
	}
	return v.forEach(s)
}

// reads checks what a step reads: known steps, at most MaxReads, each
// once, not itself, and only by a plain step.
func (v *validator) reads(s *Step) error {
	switch {
	case len(s.Reads) == 0:
		return nil
	case len(s.Reads) > MaxReads:
		return v.stepErr(s, "reads %d steps; the limit is %d", len(s.Reads), MaxReads)
	case slices.Contains(s.Reads, s.ID):
		return v.stepErr(s, "reads itself")
	case s.Loop != nil || s.ForEach != nil:
		return v.stepErr(s, "reads is for a plain step, not a loop or a for_each")
	}
	return v.known(s, "reads", s.Reads)
}

// after is what s waits for: the steps it depends on, then those it reads.
func (s *Step) After() []string {
	if len(s.Reads) == 0 {
		return s.DependsOn
	}
	return append(slices.Clone(s.DependsOn), s.Reads...)
}

func (v *validator) agent(s *Step) error {
	a, ok := facts.Lookup(s.Agent)
	switch {
	case s.Agent == "":
		return v.stepErr(s, "an agent step needs an agent")
	case !ok || !a.Prompt():
		return v.stepErr(s, "agent %q is not one that takes a prompt (%s)", s.Agent, strings.Join(promptAgents(), ", "))
	case s.Mode != "" && s.Mode != protocol.ModeObserve && s.Mode != protocol.ModeFix:
		return v.stepErr(s, "mode %q is not %s or %s", s.Mode, protocol.ModeObserve, protocol.ModeFix)
	case s.Model != "" && rules.CheckPlainText("model", s.Model, false) != nil:
		return v.stepErr(s, "%v", rules.CheckPlainText("model", s.Model, false))
	case s.Account != "" && rules.CheckPlainText("account", s.Account, false) != nil:
		return v.stepErr(s, "%v", rules.CheckPlainText("account", s.Account, false))
	case strings.TrimSpace(s.Prompt) == "":
		return v.stepErr(s, "an agent step needs a prompt or a prompt_file")
	}
	if err := rules.CheckText("prompt", s.Prompt, rules.MaxArgsBytes); err != nil {
		return v.stepErr(s, "%v", err)
	}
	return nil
}

func promptAgents() []string {
	var names []string
	for _, a := range facts.All() {
		if a.Prompt() {
			names = append(names, a.Name)
		}
	}
	return names
}

func (v *validator) loop(s *Step) error {
	l := s.Loop
	switch {
	case l == nil:
		return nil
	case l.MaxRounds == 0:
		return v.stepErr(s, "loop needs max_rounds")
	case l.MaxRounds < 1 || l.MaxRounds > MaxRoundsCap:
		return v.stepErr(s, "loop max_rounds %d is not between 1 and %d", l.MaxRounds, MaxRoundsCap)
	case l.Until != UntilApproved:
		return v.stepErr(s, "loop until %q: the one condition known is %s", l.Until, UntilApproved)
	case l.MaxCost < 0 || l.MaxWall < 0:
		return v.stepErr(s, "loop max_cost and max_wall must not be negative")
	}
	return v.known(s, "loop repeat", l.Repeat)
}

func (v *validator) forEach(s *Step) error {
	switch {
	case s.Limits.MaxTurns < 0 || s.Limits.MaxCost < 0 || s.Limits.MaxWall < 0:
		return v.stepErr(s, "limits must not be negative")
	case s.Limits.MaxTurns != 0 || s.Limits.MaxCost != 0:
		// Only the hub's engine could bound them, and it sees a job's
		// spend only once an attempt ends: refused rather than ignored.
		return v.stepErr(s, "limits max_turns and max_cost are not enforced per step (a loop's max_cost is); give max_wall, or set the agent account's limits")
	case s.Loop != nil && s.ForEach != nil:
		return v.stepErr(s, "a step either loops or fans out, not both")
	}
	f := s.ForEach
	if f == nil {
		return nil
	}
	switch {
	case (len(f.Items) > 0) == (f.From != ""):
		return v.stepErr(s, "for_each needs either items or from, not both")
	case len(f.Items) > MaxItems:
		return v.stepErr(s, "for_each has %d items; the limit is %d", len(f.Items), MaxItems)
	case f.From != "" && v.byID[f.From] == nil:
		return v.stepErr(s, "for_each from: unknown step %q", f.From)
	case f.MaxParallel < 1 || f.MaxParallel > MaxParallel:
		return v.stepErr(s, "for_each max_parallel %d is not between 1 and %d", f.MaxParallel, MaxParallel)
	case len(f.Touches) > MaxTouches:
		return v.stepErr(s, "for_each has %d touches; the limit is %d", len(f.Touches), MaxTouches)
	}
	for _, it := range f.Items {
		if err := rules.CheckText("for_each item", it, rules.MaxArgsBytes); err != nil {
			return v.stepErr(s, "%v", err)
		}
	}
	for _, g := range f.Touches {
		if err := CheckGlob(g); err != nil {
			return v.stepErr(s, "touches %q: %v", g, err)
		}
	}
	return nil
}

// CheckGlob refuses a touches glob that could name a file outside the
// repository or that path.Match cannot read. A glob with {{item}} is
// checked again once the item is known.
func CheckGlob(g string) error {
	switch {
	case g == "":
		return fmt.Errorf("empty")
	case strings.HasPrefix(g, "/"):
		return fmt.Errorf("absolute; globs are relative to the repository's root")
	case strings.Contains(g, `\`):
		return fmt.Errorf("has a backslash; use / between folders")
	case slices.Contains(strings.Split(g, "/"), ".."):
		return fmt.Errorf("climbs out of the repository (..)")
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("not a valid pattern: %v", err)
	}
	return rules.CheckPlainText("glob", g, false)
}

// acyclic refuses a cycle through depends_on, naming it.
func (v *validator) acyclic() error {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(id string) error
	visit = func(id string) error {
		switch state[id] {
		case done:
			return nil
		case open:
			i := slices.Index(stack, id)
			cycle := append(slices.Clone(stack[i:]), id)
			return v.stepErr(v.byID[id], "depends_on makes a cycle: %s", strings.Join(cycle, " -> "))
		}
		state[id] = open
		stack = append(stack, id)
		for _, d := range v.byID[id].After() {
			if err := visit(d); err != nil {
				return err
			}
		}
		stack = stack[:len(stack)-1]
		state[id] = done
		return nil
	}
	for _, s := range v.pl.Steps {
		if err := visit(s.ID); err != nil {
			return err
		}
	}
	return nil
}

// up is the set of steps id depends on, transitively (the graph is
// acyclic).
func (v *validator) up(id string) map[string]bool {
	if u, ok := v.upstream[id]; ok {
		return u
	}
	u := map[string]bool{}
	for _, d := range v.byID[id].After() {
		u[d] = true
		for x := range v.up(d) {
			u[x] = true
		}
	}
	v.upstream[id] = u
	return u
}

// inputs checks that a step reads only what is upstream of it, and that
// publish comes last.
func (v *validator) inputs(s *Step, last bool) error {
	up := v.up(s.ID)
	for _, list := range []struct {
		what string
		ids  []string
	}{{"steps", s.Steps}, {"loop repeat", loopRepeat(s)}} {
		for _, id := range list.ids {
			if !up[id] {
				return v.stepErr(s, "%s: %q is not a step this one depends on", list.what, id)
			}
		}
	}
	if s.ForEach != nil && s.ForEach.From != "" && !up[s.ForEach.From] {
		return v.stepErr(s, "for_each from: %q is not a step this one depends on", s.ForEach.From)
	}
	if s.Kind == KindPublish && !last {
		return v.stepErr(s, "a publish step must be the last step")
	}
	for _, o := range v.pl.Steps {
		if o.Kind == KindPublish && o.ID != s.ID && slices.Contains(s.After(), o.ID) {
			return v.stepErr(s, "depends on publish step %q; nothing runs after a publish", o.ID)
		}
	}
	texts := append([]string{s.Prompt}, s.Command...)
	if s.ForEach != nil {
		texts = append(texts, s.ForEach.Items...)
		texts = append(texts, s.ForEach.Touches...)
	}
	for _, t := range texts {
		if err := v.variables(s, t, up); err != nil {
			return err
		}
	}
	return nil
}

func loopRepeat(s *Step) []string {
	if s.Loop == nil {
		return nil
	}
	return s.Loop.Repeat
}

// Expand replaces the template variables of text (of a valid pipeline, so
// every one is known) by lookup's values: "params.NAME", "steps.ID.commit",
// "item". What a value holds is not expanded again.
func Expand(text string, lookup func(name string) string) string {
	return template.ReplaceAllStringFunc(text, func(m string) string {
		return lookup(strings.TrimSpace(m[2 : len(m)-2]))
	})
}

// variables checks the template variables of text.
func (v *validator) variables(s *Step, text string, up map[string]bool) error {
	rest := template.ReplaceAllString(text, "")
	if strings.Contains(rest, "{{") || strings.Contains(rest, "}}") {
		return v.stepErr(s, "a {{ or }} that does not make a template variable")
	}
	for _, m := range template.FindAllStringSubmatch(text, -1) {
		name := strings.TrimSpace(m[1])
		parts := strings.Split(name, ".")
		switch {
		case name == "item" && s.ForEach != nil:
		case len(parts) == 2 && parts[0] == "params":
			if !slices.ContainsFunc(v.pl.Params, func(p Param) bool { return p.Name == parts[1] }) {
				return v.stepErr(s, "template variable %q: no param %q", m[0], parts[1])
			}
		case len(parts) == 3 && parts[0] == "steps":
			switch {
			case v.byID[parts[1]] == nil:
				return v.stepErr(s, "template variable %q: no step %q", m[0], parts[1])
			case !up[parts[1]]:
				return v.stepErr(s, "template variable %q: step %q is not one this step depends on", m[0], parts[1])
			case !slices.Contains(outputs, parts[2]):
				return v.stepErr(s, "template variable %q: a step's outputs are %s", m[0], strings.Join(outputs, ", "))
			}
		default:
			return v.stepErr(s, "unknown template variable %q (params.NAME, steps.ID.%s, or item in a for_each step)", m[0], strings.Join(outputs, "|"))
		}
	}
	return nil
}

// known refuses a step s names in its field what that does not exist or
// that it names twice.
func (v *validator) known(s *Step, what string, ids []string) error {
	seen := map[string]bool{}
	for _, id := range ids {
		switch {
		case v.byID[id] == nil:
			return v.stepErr(s, "%s: unknown step %q", what, id)
		case seen[id]:
			return v.stepErr(s, "%s: %q given twice", what, id)
		}
		seen[id] = true
	}
	return nil
}
