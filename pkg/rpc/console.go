package rpc

import (
	"encoding/json"
	"time"
)

// RoleConsole is the operator's console (mail-console): it reads every
// trial's description, mail and trail, and the plane's metrics, and
// changes nothing. Each of its calls also carries the admin grant its own
// caller (the operator) presented, which the plane checks: a console
// grant alone reads nothing.
const RoleConsole Role = "console"

// The console's methods: read-only.
const (
	MethodConsoleTrials = "console.trials" // every open trial and every kept trail, a page at a time
	MethodConsoleTrial  = "console.trial"  // one trial's messages and trail
	MethodConsoleWait   = "console.wait"   // holds until the plane's console view changes
	MethodMetrics       = "metrics"        // the plane's Prometheus metrics, in the text format
)

// Operator is what every console call carries: the admin grant the
// console's caller presented. The plane refuses the call unless it is a
// valid admin grant.
type Operator struct {
	AdminGrant string `json:"admin_grant"`
}

// ConsoleTrialsRequest asks for one page of the trials list, newest
// first: open trials, then closed trials whose trails are kept. Filters
// are optional: Namespace is a substring of the namespace, Recipient an
// address delivered to, Subject a substring of a message's subject.
type ConsoleTrialsRequest struct {
	Operator
	Namespace string `json:"namespace,omitempty"`
	Recipient string `json:"recipient,omitempty"`
	Subject   string `json:"subject,omitempty"`
	Offset    int    `json:"offset,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// MaxConsolePage bounds one page of the trials list.
const MaxConsolePage = 500

// ConsoleTrial is one row of the trials list: no secret, only counts.
type ConsoleTrial struct {
	Namespace string `json:"namespace"`
	Profile   string `json:"profile,omitempty"`
	// State is active, sealed (open trials) or closed (a kept trail).
	State     string    `json:"state"`
	Created   time.Time `json:"created"`
	AgeMillis int64     `json:"age_ms"`
	TTLMillis int64     `json:"ttl_ms,omitempty"`
	Messages  int64     `json:"messages"`
	// Refusals and Faults count the trail's refused events and injected
	// faults; Events is the trail's length.
	Refusals     int64     `json:"refusals"`
	Faults       int64     `json:"faults"`
	Events       int64     `json:"events"`
	LastActivity time.Time `json:"last_activity"`
	LastAction   string    `json:"last_action,omitempty"`
}

// ConsoleTrialsResponse is one page: Total rows match the filters, of
// which Rows start at the request's Offset. Open and Closed count every
// trial, filtered or not. SubjectTruncated says the subject filter looked
// at only the newest messages (limits.ConsoleSubjectScan).
type ConsoleTrialsResponse struct {
	Rows             []ConsoleTrial `json:"rows"`
	Total            int            `json:"total"`
	Open             int            `json:"open"`
	Closed           int            `json:"closed"`
	SubjectTruncated bool           `json:"subject_truncated,omitempty"`
}

// ConsoleTrialRequest names one trial by any of its namespaces (or a
// closed trail's). With MessageID, only that message is answered, and no
// event.
type ConsoleTrialRequest struct {
	Operator
	Namespace string `json:"namespace"`
	MessageID int64  `json:"message_id,omitempty"`
}

// ConsoleMessage is a message as the console shows it: the parsed
// message, its header fields in order, and what the evaluator's JSON
// extracts from it.
type ConsoleMessage struct {
	Message
	Headers    []Header `json:"headers"`
	Codes      []string `json:"codes"`
	Links      []string `json:"links"`
	ActionLink string   `json:"action_link,omitempty"`
}

// Header is one header field.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ConsoleTrialResponse is one trial: its row, its messages (a closed
// trial's were deleted with it), and its trail's events (canonical lines
// of package evidence), the newest MaxConsoleEvents of them.
type ConsoleTrialResponse struct {
	Trial    ConsoleTrial      `json:"trial"`
	Messages []ConsoleMessage  `json:"messages"`
	Events   []json.RawMessage `json:"events"`
	// Webhooks are an open trial's webhook events (MethodWebhooksList).
	Webhooks []WebhookEvent `json:"webhooks,omitempty"`
}

// MaxConsoleEvents bounds the events one trial page shows.
const MaxConsoleEvents = 2000

// ConsoleWaitRequest holds until the plane's console view changes after
// Version (a message, an event, a trial opened or closed), at most
// WaitMillis; with Namespace, only a change of that namespace counts.
type ConsoleWaitRequest struct {
	Operator
	Namespace  string `json:"namespace,omitempty"`
	Version    uint64 `json:"version,omitempty"`
	WaitMillis int64  `json:"wait_ms,omitempty"`
}

// ConsoleWaitResponse is the view's version now: different from the
// request's when something changed.
type ConsoleWaitResponse struct {
	Version uint64 `json:"version"`
}

// MetricsRequest asks for the plane's metrics.
type MetricsRequest struct {
	Operator
}

// MetricsResponse is the plane's metrics in the Prometheus text format.
type MetricsResponse struct {
	Text string `json:"text"`
}

// AdminGrantOf is the operator's grant a console call carries.
func (o Operator) AdminGrantOf() string { return o.AdminGrant }
