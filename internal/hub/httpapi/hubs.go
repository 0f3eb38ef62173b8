package httpapi

import (
	"net/http"

	"drover/internal/hub/call"
)

// hubs serves GET /hubs over Hubs.
func (a *API) hubs(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.HubList(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}
