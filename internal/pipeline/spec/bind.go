package spec

import (
	"fmt"
	"sort"
	"strings"

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
	for _, s := range pl.Steps {
		f := s.ForEach
		if f == nil || f.From != "" {
			continue
		}
		for _, it := range f.Items {
			item := Expand(it, func(name string) string { return paramValue(values, name) })
			if _, err := Touches(f.Touches, item, values); err != nil {
				return nil, fmt.Errorf("%s:%d: step %q: item %q: %v", pl.File, s.Line, s.ID, item, err)
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

// Touches are a for_each item's touches globs with the item and the params
// put in, each checked (CheckGlob): the hub keeps apart the items whose
// globs overlap.
func Touches(globs []string, item string, params map[string]string) ([]string, error) {
	out := make([]string, 0, len(globs))
	for _, g := range globs {
		g = Expand(g, func(name string) string {
			if name == "item" {
				return item
			}
			return paramValue(params, name)
		})
		if err := CheckGlob(g); err != nil {
			return nil, fmt.Errorf("touches %q: %w", g, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// paramValue is the value of template variable name when it is a
// param's, "" otherwise.
func paramValue(params map[string]string, name string) string {
	if rest, ok := strings.CutPrefix(name, "params."); ok {
		return params[rest]
	}
	return ""
}
