package spec

import (
	"fmt"
	"sort"

	"drover/internal/rules"
)

// Bind checks the values given for a run of the pipeline and returns every
// param's value, defaults filled in: a param the file does not declare, a
// value that is not plain text and a missing param without a default are
// refused, and so is a static for_each item whose touches, the item put
// in, would leave the repository. The CLI binds before it pushes anything,
// the hub again before it queues anything.
func (pl *Pipeline) Bind(given map[string]string) (map[string]string, error) {
	names := make([]string, 0, len(given))
	for name := range given {
		names = append(names, name)
	}
	sort.Strings(names)
	values := map[string]string{}
	for _, name := range names {
		if !pl.hasParam(name) {
			return nil, fmt.Errorf("param %s: %s declares no such param", name, pl.File)
		}
		if err := rules.CheckPlainText("param "+name, given[name], true); err != nil {
			return nil, err
		}
		values[name] = given[name]
	}
	for _, p := range pl.Params {
		if _, ok := values[p.Name]; ok {
			continue
		}
		if p.Default == nil {
			return nil, fmt.Errorf("%s:%d: param %s has no default: give it (--param %s=VALUE)", pl.File, p.Line, p.Name, p.Name)
		}
		values[p.Name] = *p.Default
	}
	lookup := func(item string) func(string) string {
		return func(name string) string {
			if name == "item" {
				return item
			}
			if len(name) > len("params.") && name[:len("params.")] == "params." {
				return values[name[len("params."):]]
			}
			return ""
		}
	}
	for _, s := range pl.Steps {
		f := s.ForEach
		if f == nil || f.From != "" {
			continue
		}
		for _, it := range f.Items {
			item := Expand(it, lookup(""))
			for _, g := range f.Touches {
				if err := CheckGlob(Expand(g, lookup(item))); err != nil {
					return nil, fmt.Errorf("%s:%d: step %q: item %q: touches %q: %v", pl.File, s.Line, s.ID, item, g, err)
				}
			}
		}
	}
	return values, nil
}

func (pl *Pipeline) hasParam(name string) bool {
	for _, p := range pl.Params {
		if p.Name == name {
			return true
		}
	}
	return false
}
