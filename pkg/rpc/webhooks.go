package rpc

import (
	"context"
	"encoding/json"
)

// Provider webhooks: a trial's endpoints, set only by the admin at
// trial.open (TrialOpenRequest.Webhooks) or replaced by
// MethodTrialWebhooks; docs/webhooks.md.
const (
	// MethodTrialWebhooks replaces an open trial's webhooks (an empty
	// list clears them).
	MethodTrialWebhooks = "trial.webhooks"
	// CodeInvalidWebhooks refuses a list that is not valid, whole; the
	// message names the first bad entry and never quotes a URL.
	CodeInvalidWebhooks = "invalid_webhooks"
)

// Webhook is one endpoint: a provider (resend, sendgrid, mailgun,
// postmark), the URL events are POSTed to, and the waits in seconds
// before each retry of a failed delivery (nil: the provider's own).
type Webhook struct {
	Provider     string `json:"provider"`
	URL          string `json:"url"`
	RetrySeconds []int  `json:"retry_seconds,omitempty"`
}

// TrialWebhooksRequest names a trial by any of its namespaces and gives
// its webhooks.
type TrialWebhooksRequest struct {
	Namespace string    `json:"namespace"`
	Webhooks  []Webhook `json:"webhooks"`
}

// ResendWebhook is the verification material of a trial's Resend
// webhooks: its Svix signing secret (whsec_…).
type ResendWebhook struct {
	WebhookSecret string `json:"webhook_secret"`
}

// TrialWebhooks replaces the webhooks of the trial namespace belongs to.
func (c *Client) TrialWebhooks(ctx context.Context, namespace string, hooks []Webhook) error {
	if hooks == nil {
		hooks = []Webhook{}
	}
	return c.Call(ctx, MethodTrialWebhooks, &TrialWebhooksRequest{Namespace: namespace, Webhooks: hooks}, &Empty{})
}

// RoleHooks is the hooks process's role: it takes webhook events to
// deliver (each request whole, already signed) and reports each attempt;
// it reads no mail and holds no key.
const RoleHooks Role = "hooks"

// The hooks process's methods.
const (
	// MethodWebhooksTake waits (up to WaitMillis) for webhook events due
	// for delivery, and leases them to the caller.
	MethodWebhooksTake = "webhooks.take"
	// MethodWebhooksReport records one delivery attempt.
	MethodWebhooksReport = "webhooks.report"
)

// WebhooksTakeRequest asks for up to Limit due events.
type WebhooksTakeRequest struct {
	WaitMillis int64 `json:"wait_ms,omitempty"`
	Limit      int   `json:"limit,omitempty"`
}

// WebhookDelivery is one attempt to make: the event (its trial and
// number, for the report; its id and provider, for the log) and its
// request, signed for this attempt.
type WebhookDelivery struct {
	Trial    int64             `json:"trial"`
	Seq      int64             `json:"seq"`
	EventID  string            `json:"event_id"`
	Provider string            `json:"provider"`
	URL      string            `json:"url"`
	Header   map[string]string `json:"header"`
	Body     []byte            `json:"body"`
	// Door is a netns trial's door key: the delivery is made inside its
	// network namespace, where the candidate's site listens.
	Door string `json:"door,omitempty"`
}

// WebhooksTakeResponse are the events leased to the caller.
type WebhooksTakeResponse struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
}

// WebhookReport is one attempt's outcome: the endpoint's HTTP status (0:
// none came), how long the attempt took, and, when it failed without a
// status, a fixed error code (timeout, connect, answer).
type WebhookReport struct {
	Trial         int64  `json:"trial"`
	Seq           int64  `json:"seq"`
	Status        int    `json:"status,omitempty"`
	LatencyMillis int64  `json:"latency_ms"`
	Error         string `json:"error,omitempty"`
}

// WebhooksTake waits for due webhook events.
func (c *Client) WebhooksTake(ctx context.Context, req *WebhooksTakeRequest) (WebhooksTakeResponse, error) {
	var r WebhooksTakeResponse
	return r, c.Call(ctx, MethodWebhooksTake, req, &r)
}

// WebhooksReport records one delivery attempt.
func (c *Client) WebhooksReport(ctx context.Context, r *WebhookReport) error {
	return c.Call(ctx, MethodWebhooksReport, r, &Empty{})
}

// MethodWebhooksList lists a trial's webhook events with their attempts,
// for the evaluator (the gateway's GET /api/namespaces/{ns}/webhooks),
// bound by the namespace's read capability.
const MethodWebhooksList = "webhooks.list"

// WebhooksListRequest names a namespace (any of its trial's) and
// presents its read capability.
type WebhooksListRequest struct {
	Namespace  string `json:"namespace"`
	Capability string `json:"capability"`
}

// WebhookEvent is one event of a trial's outbox for one of its webhooks:
// its id (the same on every attempt; a duplicate fault's copies share
// it), the webhook's provider and URL (without credentials), what it
// reports, its state (pending, delivered, failed, dropped) and each
// attempt so far.
type WebhookEvent struct {
	EventID   string            `json:"event_id"`
	Provider  string            `json:"provider"`
	URL       string            `json:"url"`
	Kind      string            `json:"kind"`
	EmailID   string            `json:"email_id,omitempty"`
	Namespace string            `json:"namespace"`
	State     string            `json:"state"`
	Attempts  []json.RawMessage `json:"attempts"`
}

// WebhooksListResponse is a trial's webhook events, in order.
type WebhooksListResponse struct {
	Webhooks []WebhookEvent `json:"webhooks"`
}

// WebhooksList lists the webhook events of the trial namespace belongs to.
func (c *Client) WebhooksList(ctx context.Context, req *WebhooksListRequest) (WebhooksListResponse, error) {
	var r WebhooksListResponse
	return r, c.Call(ctx, MethodWebhooksList, req, &r)
}
