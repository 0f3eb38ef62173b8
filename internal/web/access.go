package web

import (
	"net/http"
	"net/url"

	"drover/internal/apitypes"
)

// The runners and projects pages' access controls. Each posts the same
// request the CLI sends to the API and the hub decides; the pages only
// leave out the controls it would refuse.

// shareChange reads a share control's {change}: true to share.
func shareChange(r *http.Request) (bool, error) {
	switch r.PathValue("change") {
	case "share":
		return true, nil
	case "unshare":
		return false, nil
	}
	return false, &Error{Status: http.StatusNotFound, Msg: "no such change: " + r.PathValue("change")}
}

// shareWith reads whom a share control names: the form's kind (user,
// project or hub) and, for the first two, its subject.
func shareWith(f url.Values) (user, project string, hub bool, err error) {
	subject := f.Get("subject")
	switch f.Get("kind") {
	case "user":
		user = subject
	case "project":
		project = subject
	case "hub":
		return "", "", true, nil
	default:
		return "", "", false, &Error{Status: http.StatusBadRequest, Msg: "share with a user, a project or the hub"}
	}
	if subject == "" {
		return "", "", false, &Error{Status: http.StatusBadRequest, Msg: "name the " + f.Get("kind") + " to share with"}
	}
	return user, project, false, nil
}

// backToRunner answers a runner control with the runners page at its row.
func backToRunner(w http.ResponseWriter, r *http.Request, name string) {
	http.Redirect(w, r, "/runners#runner-"+url.PathEscape(name), http.StatusSeeOther)
}

func (s *Server) revokeRunner(w http.ResponseWriter, r *http.Request, ss *session) error {
	name := r.PathValue("name")
	if err := s.b.RevokeRunner(r.Context(), ss.User, name); err != nil {
		return err
	}
	backToRunner(w, r, name)
	return nil
}

func (s *Server) shareRunner(w http.ResponseWriter, r *http.Request, ss *session) error {
	share, err := shareChange(r)
	if err != nil {
		return err
	}
	var req apitypes.ShareRequest
	if req.User, req.Project, req.Hub, err = shareWith(r.PostForm); err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := s.b.ShareRunner(r.Context(), ss.User, name, req, share); err != nil {
		return err
	}
	backToRunner(w, r, name)
	return nil
}

func (s *Server) shareAccount(w http.ResponseWriter, r *http.Request, ss *session) error {
	share, err := shareChange(r)
	if err != nil {
		return err
	}
	req := apitypes.AccountShareRequest{Runner: r.PostForm.Get("runner"), Account: r.PostForm.Get("account")}
	var hub bool
	if req.User, req.Project, hub, err = shareWith(r.PostForm); err != nil {
		return err
	}
	if hub {
		return &Error{Status: http.StatusBadRequest, Msg: "an account is shared with a user or a project, not the hub"}
	}
	if err := s.b.ShareAccount(r.Context(), ss.User, req, share); err != nil {
		return err
	}
	http.Redirect(w, r, "/runners?moved="+url.QueryEscape(req.Runner+"/"+req.Account)+"#account-order", http.StatusSeeOther)
	return nil
}

func (s *Server) changeMember(w http.ResponseWriter, r *http.Request, ss *session) error {
	var add bool
	switch r.PathValue("change") {
	case "add":
		add = true
	case "remove":
	default:
		return &Error{Status: http.StatusNotFound, Msg: "no such change: " + r.PathValue("change")}
	}
	project := r.PathValue("name")
	if err := s.b.ChangeMember(r.Context(), ss.User, project, r.PostForm.Get("user"), add); err != nil {
		return err
	}
	http.Redirect(w, r, "/projects#project-"+url.PathEscape(project), http.StatusSeeOther)
	return nil
}
