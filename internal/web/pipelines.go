package web

import (
	"net/http"

	"drover/internal/apitypes"
)

// pipelineRow is a row of the pipelines page.
type pipelineRow struct {
	apitypes.PipelineView
	Done, Total int // its steps finished (done, or skipped when staged) and all
}

// pipelines is GET /pipelines: the pipelines the user may see, newest
// first.
func (s *Server) pipelines(w http.ResponseWriter, r *http.Request, ss *session) error {
	ps, err := s.b.Pipelines(r.Context(), ss.User)
	if err != nil {
		return err
	}
	rows := make([]pipelineRow, len(ps))
	for i, p := range ps {
		rows[i] = pipelineRow{PipelineView: p, Total: p.StepsTotal, Done: p.StepsDone}
	}
	s.render(w, r, http.StatusOK, "pipelines", ss, rows)
	return nil
}

// pipelineData is a pipeline's page: its facts, its graph and its steps'
// table (the live part), and the version of that part as rendered.
type pipelineData struct {
	P       apitypes.PipelineView
	Graph   graph
	Version string
}

func (s *Server) pipelineData(r *http.Request, ss *session) (pipelineData, error) {
	p, err := s.b.Pipeline(r.Context(), ss.User, r.PathValue("id"))
	if err != nil {
		return pipelineData{}, err
	}
	return pipelineData{P: p, Graph: layout(p.Steps)}, nil
}

// pipeline is GET /pipelines/{id}.
func (s *Server) pipeline(w http.ResponseWriter, r *http.Request, ss *session) error {
	d, err := s.pipelineData(r, ss)
	if err != nil {
		return err
	}
	if _, d.Version, err = s.fragment("pipeline", "pipeline-live", ss, d); err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "pipeline", ss, d)
	return nil
}

// livePipeline is GET /pipelines/{id}/live?version=V: the page's live
// part as a "pipeline" event of HTML whenever it changed. Its steps are
// jobs, so it is rendered again after any job's change.
func (s *Server) livePipeline(w http.ResponseWriter, r *http.Request, ss *session) error {
	return s.liveFragment(w, r, ss, "pipeline", "pipeline-live", "pipeline", func() (any, error) { return s.pipelineData(r, ss) })
}
