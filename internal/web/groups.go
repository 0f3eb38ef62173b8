package web

import (
	"net/http"

	"drover/internal/apitypes"
)

// groupData is a group's page: its attempts, each diff rendered escaped.
type groupData struct {
	G     apitypes.GroupView
	Diffs []diffView // by attempt, in order
}

// group is GET /groups/{id}: the attempts side by side.
func (s *Server) group(w http.ResponseWriter, r *http.Request, ss *session) error {
	g, err := s.b.Group(r.Context(), ss.User, r.PathValue("id"))
	if err != nil {
		return err
	}
	d := groupData{G: g}
	for _, a := range g.Attempts {
		d.Diffs = append(d.Diffs, renderDiff([]byte(a.Diff), a.DiffTruncated))
	}
	s.render(w, r, http.StatusOK, "group", ss, d)
	return nil
}
