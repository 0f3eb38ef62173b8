package apitypes

import "time"

// WebhookRequest adds an outbound webhook (POST /webhooks): where the hub
// POSTs the events named, of the caller's own jobs or, with Project, of
// the jobs on it the caller may see.
type WebhookRequest struct {
	URL     string   `json:"url"`
	Events  []string `json:"events"`
	Project string   `json:"project,omitempty"`
	Format  string   `json:"format,omitempty"` // json (the default), slack or matrix
}

// WebhookView is a webhook. Secret, which signs its bodies, is set only
// in the answer to its adding: the hub never shows it again.
type WebhookView struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	Project   string    `json:"project,omitempty"`
	Format    string    `json:"format"`
	CreatedAt time.Time `json:"created_at"`
	Secret    string    `json:"secret,omitempty"`
}

// WebhookList is the caller's webhooks (an admin's: everyone's).
type WebhookList struct {
	Webhooks []WebhookView `json:"webhooks"`
}

// WebhookDeliveryView is one event of one job sent to a hook: its state
// (pending, delivered, failed: given up), the tries so far and the last
// one's outcome.
type WebhookDeliveryView struct {
	ID        string    `json:"id"`
	Event     string    `json:"event"`
	JobID     string    `json:"job_id"`
	State     string    `json:"state"`
	Attempts  int       `json:"attempts"`
	Status    int       `json:"status,omitempty"`
	Error     string    `json:"error,omitempty"`
	NextAt    time.Time `json:"next_at"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// WebhookDeliveryList is a hook's delivery log, newest first.
type WebhookDeliveryList struct {
	Deliveries []WebhookDeliveryView `json:"deliveries"`
}
