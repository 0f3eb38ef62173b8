package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"drover/internal/apitypes"
)

// AddWebhook adds an outbound webhook of the caller; the answer carries
// its signing secret, which the hub never shows again.
func (c *Client) AddWebhook(ctx context.Context, req apitypes.WebhookRequest) (apitypes.WebhookView, error) {
	return decode[apitypes.WebhookView](ctx, c, call{method: http.MethodPost, path: "/webhooks", body: req}, "add webhook")
}

// Webhooks lists the caller's webhooks (an admin's: everyone's), never a
// secret.
func (c *Client) Webhooks(ctx context.Context) (apitypes.WebhookList, error) {
	return decode[apitypes.WebhookList](ctx, c, call{method: http.MethodGet, path: "/webhooks"}, "list webhooks")
}

// RemoveWebhook removes a webhook and its delivery log.
func (c *Client) RemoveWebhook(ctx context.Context, id string) (apitypes.WebhookView, error) {
	return decode[apitypes.WebhookView](ctx, c, call{method: http.MethodDelete, path: "/webhooks/" + seg(id)},
		"remove webhook "+id)
}

// WebhookDeliveries is a webhook's delivery log, newest first; limit 0 is
// the hub's default.
func (c *Client) WebhookDeliveries(ctx context.Context, id string, limit int) (apitypes.WebhookDeliveryList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return decode[apitypes.WebhookDeliveryList](ctx, c, call{method: http.MethodGet, path: "/webhooks/" + seg(id) + "/deliveries", query: q},
		"list the deliveries of webhook "+id)
}
