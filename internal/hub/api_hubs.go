package hub

import (
	"net/http"

	"drover/internal/hub/call"
)

// hubs serves GET /hubs over hubList (state_hubs.go).
func (a httpAPI) hubs(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.HubList(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}
