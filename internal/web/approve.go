package web

import (
	"net/http"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/rules"
)

// approveData is what the approval page shows: the form for a well-formed
// login, an error, or the approved runner.
type approveData struct {
	Name, Key string
	Form      bool // the name and key are well-formed: offer to approve them
	Replace   bool
	Error     string
	Approved  *apitypes.ApproveResponse
}

// approveFields reads a login's name and key and says whether they can be
// approved; the error describes what is wrong otherwise.
func approveFields(name, key string) (approveData, string) {
	d := approveData{Name: name, Key: strings.ToLower(key)}
	switch {
	case !rules.ValidName(d.Name):
		return d, "This link is not a runner login: the runner name must be 1-64 letters, digits or ._- starting with a letter or digit."
	case !auth.ValidHash(d.Key):
		return d, "This link is not a runner login: the key must be the 64 hex digits `drover runner login` printed."
	}
	d.Form = true
	return d, ""
}

// getApprove is GET /approve?name=&key=, the link `drover runner login`
// prints. Signed in or not: without a session the form takes a user token.
func (s *Server) getApprove(w http.ResponseWriter, r *http.Request) {
	ss, _ := s.current(r)
	q := r.URL.Query()
	d, bad := approveFields(q.Get("name"), q.Get("key"))
	if bad != "" {
		d.Error = bad
		s.log.Info("web request refused", "method", r.Method, "path", r.URL.Path, "why", bad)
		s.render(w, r, http.StatusBadRequest, "approve", ss, d)
		return
	}
	s.render(w, r, http.StatusOK, "approve", ss, d)
}

// postApprove is the form's POST: same origin only; then the session (with
// its CSRF token) or the pasted user token, checked as the API checks it;
// then the API's approval.
func (s *Server) postApprove(w http.ResponseWriter, r *http.Request) {
	ss, _ := s.current(r)
	fail := func(d approveData, status int, why string) {
		s.log.Info("web request refused", "method", r.Method, "path", r.URL.Path, "why", why)
		d.Error = why
		s.render(w, r, status, "approve", ss, d)
	}
	if !s.readForm(w, r) {
		return
	}
	f := r.PostForm // never the URL's query
	d, bad := approveFields(f.Get("name"), f.Get("key"))
	d.Replace = f.Get("replace") != ""
	if bad != "" {
		fail(d, http.StatusBadRequest, bad)
		return
	}
	var u User
	if tok := strings.TrimSpace(f.Get("token")); tok != "" || ss == nil {
		if tok == "" {
			fail(d, http.StatusUnauthorized, "enter your drover user token to approve")
			return
		}
		var err error
		if u, err = s.b.UserOf(r.Context(), tok); err != nil {
			fail(d, status(err), s.why(err))
			return
		}
	} else {
		if !ss.validCSRF(f.Get("csrf")) {
			fail(d, http.StatusForbidden, "Refused: the form's CSRF token is missing or stale; reload the page and try again.")
			return
		}
		u = ss.User
	}
	out, err := s.b.ApproveRunner(r.Context(), u, apitypes.ApproveRequest{Name: d.Name, Key: d.Key, Replace: d.Replace})
	if err != nil {
		fail(d, status(err), s.why(err))
		return
	}
	s.render(w, r, http.StatusOK, "approve", ss, approveData{Approved: &out})
}
