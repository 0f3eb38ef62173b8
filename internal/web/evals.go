package web

import (
	"net/http"

	"drover/internal/apitypes"
)

// evals is GET /evals: the evaluations the user may see, newest first.
func (s *Server) evals(w http.ResponseWriter, r *http.Request, ss *session) error {
	evs, err := s.b.Evals(r.Context(), ss.User)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "evals", ss, evs)
	return nil
}

// evalData is an evaluation's page: its report (items included, the
// predictions left out) and the version of its live part as rendered.
type evalData struct {
	R apitypes.EvalReport
	// Share is Resolved of Total, 0 before any sample was graded.
	Share   float64
	Version string
}

func (s *Server) evalData(r *http.Request, ss *session) (evalData, error) {
	rep, err := s.b.EvalReport(r.Context(), ss.User, r.PathValue("id"))
	if err != nil {
		return evalData{}, err
	}
	rep.Predictions = nil // the patches are the API's to give (drover eval report --predictions)
	d := evalData{R: rep}
	if rep.Total > 0 {
		d.Share = float64(rep.Resolved) / float64(rep.Total)
	}
	return d, nil
}

// eval is GET /evals/{id}: an evaluation's numbers and its items.
func (s *Server) eval(w http.ResponseWriter, r *http.Request, ss *session) error {
	d, err := s.evalData(r, ss)
	if err != nil {
		return err
	}
	if _, d.Version, err = s.fragment("eval", "eval-live", ss, d); err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "eval", ss, d)
	return nil
}

// liveEval is GET /evals/{id}/live?version=V: the page's live part as an
// "eval" event of HTML whenever it changed. Its items are jobs, so it is
// rendered again after any job's change, as a pipeline's page is.
func (s *Server) liveEval(w http.ResponseWriter, r *http.Request, ss *session) error {
	return s.liveFragment(w, r, ss, "eval", "eval-live", "eval", func() (any, error) { return s.evalData(r, ss) })
}
