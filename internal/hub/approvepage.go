package hub

import (
	_ "embed"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"drover/internal/auth"
	"drover/internal/protocol"
	"drover/internal/store"
)

// approvePath is where `drover runner login`'s link points: a page that
// shows the login and approves it with the same code as the API.
const approvePath = "/approve"

// maxApproveForm bounds the approval form's body (name, key, token, box).
const maxApproveForm = 16 << 10

//go:embed approvepage.html
var approvePageHTML string

// approvePage is parsed once and only executed (safe for concurrent use).
var approvePage = template.Must(template.New("approve").Parse(approvePageHTML))

// approvePageData is what the page shows: the form for a well-formed login,
// an error, or the approved runner.
type approvePageData struct {
	Name, Key string
	Form      bool // the name and key are well-formed: offer to approve them
	Replace   bool
	Error     string
	Approved  *protocol.ApproveResponse
}

// pageHeaders keep the page to itself: no scripts or loads (only its inline
// style), no framing, not cached. Referrer-Policy is same-origin, not
// no-referrer: the key in the URL still never leaves the hub, and with
// no-referrer browsers send "Origin: null" on the form's POST, which the
// origin check has to refuse.
func pageHeaders(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
}

func (h *Hub) renderApprovePage(w http.ResponseWriter, status int, d approvePageData) {
	pageHeaders(w)
	w.WriteHeader(status)
	if err := approvePage.Execute(w, d); err != nil {
		h.log.Error("render the approval page", "err", err)
	}
}

// approveFields reads a login's name and key and says whether they can be
// approved; the error describes what is wrong otherwise.
func approveFields(name, key string) (approvePageData, string) {
	d := approvePageData{Name: name, Key: strings.ToLower(key)}
	switch {
	case !nameRE.MatchString(d.Name):
		return d, "This link is not a runner login: the runner name must be 1-64 letters, digits or ._- starting with a letter or digit."
	case !auth.ValidHash(d.Key):
		return d, "This link is not a runner login: the key must be the 64 hex digits `drover runner login` printed."
	}
	d.Form = true
	return d, ""
}

// serveApprovePage is GET /approve?name=&key=, the link a runner login prints.
func (h *Hub) serveApprovePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d, bad := approveFields(q.Get("name"), q.Get("key"))
	if bad != "" {
		d.Error = bad
		h.refusal(r, badRequest("approval page: %s", bad))
		h.renderApprovePage(w, http.StatusBadRequest, d)
		return
	}
	h.renderApprovePage(w, http.StatusOK, d)
}

// postApprovePage is the form's POST: same origin only, the user's token
// checked as the API checks it, then the API's approval.
func (h *Hub) postApprovePage(w http.ResponseWriter, r *http.Request) {
	if why := h.crossOrigin(r); why != "" {
		ae := h.refusal(r, forbidden("approval form: %s", why))
		h.renderApprovePage(w, ae.status, approvePageData{Error: "Refused: " + why + "."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxApproveForm)
	if err := r.ParseForm(); err != nil {
		ae := h.refusal(r, badRequest("approval form: %v", err))
		h.renderApprovePage(w, ae.status, approvePageData{Error: "The form could not be read."})
		return
	}
	f := r.PostForm // never the URL's query
	d, bad := approveFields(f.Get("name"), f.Get("key"))
	d.Replace = f.Get("replace") != ""
	fail := func(err error) {
		ae := h.refusal(r, err)
		d.Error = ae.msg
		h.renderApprovePage(w, ae.status, d)
	}
	if bad != "" {
		fail(badRequest("%s", bad))
		return
	}
	tok := strings.TrimSpace(f.Get("token"))
	if tok == "" {
		fail(errf(http.StatusUnauthorized, protocol.ErrUnauthorized, "enter your drover user token to approve"))
		return
	}
	p, err := h.authenticateAs(r.Context(), "Bearer "+tok, store.TokenUser)
	if err != nil {
		fail(err)
		return
	}
	out, err := h.approve(r.Context(), p, protocol.ApproveRequest{Name: d.Name, Key: d.Key, Replace: d.Replace})
	if err != nil {
		fail(err)
		return
	}
	h.renderApprovePage(w, http.StatusOK, approvePageData{Approved: &out})
}

// crossOrigin says why a POST did not come from the hub's own page, or "".
// Browsers send Origin with every form POST; a request without one is not
// the page's. The hub is whatever the request reached (through a proxy's
// X-Forwarded-* headers, which a cross-site form cannot set) or PublicURL.
func (h *Hub) crossOrigin(r *http.Request) string {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return "the request carries no origin; approve from the hub's own page"
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return "the request came from another site (" + s + ")"
	}
	got := origin(o)
	for _, want := range []string{requestBaseURL(r), h.cfg.PublicURL} {
		if want != "" && got != "" && origin(want) == got {
			return ""
		}
	}
	return "the request came from " + o + ", not from this hub"
}

// origin is a URL's scheme://host[:port], lower-cased, without its default
// port; "" if it has none.
func origin(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return ""
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host
}
