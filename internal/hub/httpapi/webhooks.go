package httpapi

import (
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
)

// The webhooks API's HTTP transport over Webhooks: /webhooks[/{id}] and
// a hook's delivery log.

func (a *API) addWebhook(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.WebhookRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.AddWebhook(r.Context(), p, req)
	return reply(w, http.StatusCreated, out, err)
}

func (a *API) listWebhooks(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.ListWebhooks(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) removeWebhook(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.RemoveWebhook(r.Context(), p, r.PathValue("id"))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) webhookDeliveries(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	limit, err := queryInt(r.URL.Query(), "limit", 1, 1000)
	if err != nil {
		return err
	}
	out, err := a.core.WebhookDeliveries(r.Context(), p, r.PathValue("id"), int(limit))
	return reply(w, http.StatusOK, out, err)
}
