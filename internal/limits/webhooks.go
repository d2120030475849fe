package limits

import "time"

// Provider webhooks (package webhooks, docs/webhooks.md): what a trial may
// configure, and what its deliveries may hold of the process that makes
// them, so that a slow or hostile endpoint holds only its own trial's
// share.
const (
	// Webhooks bounds the webhooks one trial has configured.
	Webhooks = 8
	// WebhookURLBytes bounds one webhook's URL.
	WebhookURLBytes = 2048
	// WebhookRetries bounds one webhook's retry schedule (retry_seconds),
	// and WebhookRetryMax each wait in it.
	WebhookRetries  = 16
	WebhookRetryMax = 24 * time.Hour

	// WebhookTimeout bounds one delivery attempt, from connecting to the
	// endpoint's answer; a slower endpoint's attempt fails and is retried.
	WebhookTimeout = 5 * time.Second
	// WebhookAnswerBytes bounds how much of an endpoint's answer is read,
	// and WebhookAnswerHeaderBytes its header block (a larger one fails
	// the attempt): without it, Go's client would read 10 MB of headers
	// per attempt.
	WebhookAnswerBytes       = 4 << 10
	WebhookAnswerHeaderBytes = 16 << 10
	// TrialWebhookDeliveries bounds the deliveries one trial has in flight
	// at once in the hooks process.
	TrialWebhookDeliveries = 4
	// TrialWebhookPending bounds the events one trial's outbox holds
	// pending (to be delivered or retried): many sends to an endpoint that
	// never takes them would otherwise grow it, and the plane's passes
	// over it, without end. An event derived beyond it is recorded failed
	// at once, with no attempt.
	TrialWebhookPending = 1024
)
