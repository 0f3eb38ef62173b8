package web

import (
	"fmt"
	"slices"

	"drover/internal/apitypes"
)

// The pipeline graph's geometry, in SVG user units (CSS pixels).
const (
	nodeW   = 200
	nodeH   = 64
	colGap  = 64
	rowGap  = 20
	margin  = 8
	labelCh = 24 // the characters of a step's id its box shows
)

// graph is a pipeline's steps laid out for the SVG the page draws: a
// column per depth (the longest path from a step without inputs), the
// steps of a column in the file's order, an edge per depends_on.
type graph struct {
	Width, Height int
	NodeW, NodeH  int // every box's size
	Nodes         []graphNode
	Edges         []graphEdge
}

type graphNode struct {
	Step     apitypes.PipelineStepView
	Col, Row int
	X, Y     int    // the box's top left corner
	Label    string // the step's id, cut to fit the box
	Class    string // st-STATE for a state the page knows, else st-other
	Items    int    // the runs with an item (a for_each step's fan-out)
}

// graphEdge is an arrow from the right edge of From's box to the left edge
// of To's, drawn as the path D: a curve between adjacent columns; across
// columns between, a lane under their lowest boxes, so that it crosses
// none.
type graphEdge struct {
	From, To       string
	X1, Y1, X2, Y2 int
	D              string
}

// stepStates are the states a step's box has a colour for.
var stepStates = []string{"pending", "running", "done", "needs_human", "failed", "unknown", "cancelled", "skipped"}

// layout places steps (in the file's order). A dependency on a step that
// is not in the list draws no edge; a cycle (the hub refuses them) is cut
// where it closes, so every step is drawn once.
func layout(steps []apitypes.PipelineStepView) graph {
	index := make(map[string]int, len(steps))
	for i, st := range steps {
		if _, dup := index[st.ID]; !dup {
			index[st.ID] = i
		}
	}
	depth := make([]int, len(steps))
	const (
		unseen = iota
		visiting
		seen
	)
	mark := make([]int, len(steps))
	var visit func(i int) int
	visit = func(i int) int {
		switch mark[i] {
		case seen:
			return depth[i]
		case visiting:
			return -1 // the edge that closes a cycle adds no depth
		}
		mark[i] = visiting
		for _, dep := range after(steps[i]) {
			if j, ok := index[dep]; ok {
				depth[i] = max(depth[i], visit(j)+1)
			}
		}
		mark[i] = seen
		return depth[i]
	}
	g := graph{NodeW: nodeW, NodeH: nodeH}
	rows := map[int]int{} // the next row of each column
	cols, maxRows := 0, 0
	g.Nodes = make([]graphNode, len(steps))
	for i, st := range steps {
		c := visit(i)
		r := rows[c]
		rows[c]++
		cols, maxRows = max(cols, c+1), max(maxRows, r+1)
		n := graphNode{Step: st, Col: c, Row: r, X: margin + c*(nodeW+colGap), Y: margin + r*(nodeH+rowGap),
			Label: cut(st.ID, labelCh), Class: "st-other"}
		if slices.Contains(stepStates, st.State) {
			n.Class = "st-" + st.State
		}
		for _, run := range st.Runs {
			if run.Item != nil {
				n.Items++
			}
		}
		g.Nodes[i] = n
	}
	g.Width = 2*margin + cols*nodeW + max(cols-1, 0)*colGap
	g.Height = 2*margin + maxRows*nodeH + max(maxRows-1, 0)*rowGap
	colRows := make([]int, cols) // the rows of each column
	for c, n := range rows {
		colRows[c] = n
	}
	for i, st := range steps {
		to := g.Nodes[i]
		for _, dep := range after(st) {
			j, ok := index[dep]
			if !ok {
				continue
			}
			from := g.Nodes[j]
			e := graphEdge{From: from.Step.ID, To: st.ID, X1: from.X + nodeW, Y1: from.Y + nodeH/2, X2: to.X, Y2: to.Y + nodeH/2}
			if to.Col-from.Col <= 1 {
				mx := (e.X1 + e.X2) / 2
				e.D = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", e.X1, e.Y1, mx, e.Y1, mx, e.Y2, e.X2, e.Y2)
			} else {
				lowest := slices.Max(colRows[from.Col+1 : to.Col])
				lane := margin + lowest*(nodeH+rowGap) - rowGap/2
				g.Height = max(g.Height, lane+margin)
				a, b := e.X1+colGap/2, e.X2-colGap/2
				e.D = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d L%d,%d C%d,%d %d,%d %d,%d",
					e.X1, e.Y1, a, e.Y1, a, lane, e.X1+colGap, lane, e.X2-colGap, lane, b, lane, b, e.Y2, e.X2, e.Y2)
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return g
}

// cut is s in at most n characters, with an ellipsis when it was longer.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// after are the steps st waits for: those it depends on and those it
// reads.
func after(st apitypes.PipelineStepView) []string {
	return append(slices.Clone(st.DependsOn), st.Reads...)
}
