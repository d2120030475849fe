package rpc

import "context"

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
