// Package mailclient is the evaluator's client for mail-gateway, the
// Bearer-gated JSON API that reads one trial's mail: list, latest, one
// message, and waiting for the next message to an address, with the
// one-time code, the action link and the links it carries.
//
// It needs nothing beyond the standard library, so a harness can vendor or
// copy it freely. The types here are also the gateway's wire format.
//
//	c := mailclient.New("http://127.0.0.1:8025", namespace, readCapability)
//	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
//	defer cancel()
//	code, links, err := c.WaitCode(ctx, "user@example.com", 0)
//	link, err := c.WaitLink(ctx, "user@example.com", 0) // a magic link, a reset link
package mailclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MaxWait is the longest the gateway holds one request; Wait strings
// requests of at most this length together until its context ends.
const MaxWait = 60 * time.Second

// maxResponseBytes bounds what the client reads of one answer.
const maxResponseBytes = 64 << 20

// Message is one message as the gateway returns it: the reference's keys
// (docs/reference.md §4.2) plus ActionLink, Codes, FromName, HTML, Links
// and ReceivedAt. Fields are in key
// order, which is the order the gateway writes them.
type Message struct {
	// ActionLink is the one link a person is asked to click (verify,
	// confirm, sign in, reset, accept an invitation, a magic link), as
	// written in the message (a tracking link is not followed), or nil when
	// there is none.
	ActionLink  *string      `json:"action_link"`
	Attachments []Attachment `json:"attachments"`
	// Codes are the candidate one-time codes, best first, as a person
	// would type them ("884 213" is "884213"): the ones marked as a code,
	// then numbers that nothing rules out.
	Codes        []string `json:"codes"`
	EnvelopeFrom string   `json:"envelope_from"`
	// Fault is "delay" or "duplicate" for a message a fault of the trial's
	// schedule delivered late or stored more than once; absent otherwise.
	Fault string `json:"fault,omitempty"`
	// FromName is the display name the sender wrote in From ("Acme" of
	// "Acme <no-reply@…>"), "" when it wrote none; EnvelopeFrom is the
	// address.
	FromName string `json:"from_name"`
	// HTML is the message's HTML part as sent, "" when it has none.
	HTML string `json:"html"`
	// ID is the message's stable id in its namespace: 1, 2, 3... in arrival
	// order.
	ID int64 `json:"id"`
	// Label is set on mail the evaluator planted (trial.plant), and only
	// there: no candidate's mail has it.
	Label string `json:"label,omitempty"`
	// Links are the http(s) URLs of the text and of the HTML part's links.
	Links     []string `json:"links"`
	Namespace string   `json:"namespace"`
	// OTP is the code a person would type, or nil when the message has
	// none: a code word, the subject or the HTML layout marks it, and
	// addresses, phone numbers, dates, prices and order or account numbers
	// never count. When set it is Codes[0].
	OTP *string `json:"otp"`
	// ReceivedAt is when the plane stored the message (RFC 3339, UTC).
	ReceivedAt time.Time `json:"received_at"`
	Recipients []string  `json:"recipients"`
	Subject    string    `json:"subject"`
	Text       string    `json:"text"`
}

// Attachment describes one attachment or inline part, with Mailpit's field
// names, as the reference passes them through.
type Attachment struct {
	Checksums   Checksums `json:"Checksums"`
	ContentID   string    `json:"ContentID"`
	ContentType string    `json:"ContentType"`
	FileName    string    `json:"FileName"`
	PartID      string    `json:"PartID"`
	Size        int       `json:"Size"`
}

// Checksums of an attachment's decoded content, lowercase hex.
type Checksums struct {
	MD5    string `json:"MD5"`
	SHA1   string `json:"SHA1"`
	SHA256 string `json:"SHA256"`
}

// List is the answer of the list route.
type List struct {
	Messages []Message `json:"messages"`
}

// Events is the answer of GET /api/namespaces/{ns}/events: a page of the
// trial's trail, each event its canonical line (mail-plane evidence
// verify checks a file of them, one per line).
type Events struct {
	Events []json.RawMessage `json:"events"`
}

// Event is one event of a trial's trail, with the members of the plane's
// (package evidence's Event) in their order; a test in package gateway
// fails when the two differ.
type Event struct {
	Seq        int64            `json:"seq"`
	Time       string           `json:"time"`
	Namespace  string           `json:"namespace"`
	Door       string           `json:"door"`    // writer-http, writer-smtp, inbox, inbox-mcp, imap, gateway, plane
	Action     string           `json:"action"`  // send, bootstrap, list, get, latest, wait, connect, open, click, plant, rotate, seal, close, expire, budget, summary, port_moved, flag, faults, deliver
	Outcome    string           `json:"outcome"` // accepted, refused, failed (an outage)
	Code       string           `json:"code,omitempty"`
	Credential string           `json:"credential,omitempty"` // the kind presented, never its value
	API        string           `json:"api,omitempty"`        // the provider API of a send: sendgrid, postmark, mailgun, ses
	From       string           `json:"from,omitempty"`
	To         []string         `json:"to,omitempty"`
	Recipient  string           `json:"recipient,omitempty"`
	MessageIDs []int64          `json:"message_ids,omitempty"`
	EmailID    string           `json:"email_id,omitempty"`
	Size       int              `json:"size,omitempty"`
	Replayed   bool             `json:"replayed,omitempty"`
	Count      int64            `json:"count,omitempty"`
	Counts     map[string]int64 `json:"counts,omitempty"`
	Detail     string           `json:"detail,omitempty"`
	// OldPort and NewPort are a port_moved event's SMTP ports.
	OldPort int `json:"old_port,omitempty"`
	NewPort int `json:"new_port,omitempty"`
	// Link and Host are a click's link (its index among the message's
	// links) and that link's host; Label is a planted message's label.
	Link  *int   `json:"link,omitempty"`
	Host  string `json:"host,omitempty"`
	Label string `json:"label,omitempty"`
	// Flag is a flag event's change over IMAP: + or - and the flag
	// ("+\Seen").
	Flag string `json:"flag,omitempty"`
	// Fault is set on the event of a send a rule of the trial's fault
	// schedule made go wrong: one event per injected fault.
	Fault *EventFault `json:"fault,omitempty"`
	// Webhook is set on a webhook delivery attempt's event (action
	// webhook): which event, its attempt and how it ended.
	Webhook *EventWebhook `json:"webhook,omitempty"`
	Prev    string        `json:"prev"`
	Hash    string        `json:"hash"`
	// Line is the event's canonical line as the gateway answered it.
	Line json.RawMessage `json:"-"`
}

// EventFault is what a fault rule did to a send: the rule's index and do,
// the send's number as the rule counts, and what the do names.
type EventFault struct {
	Rule       int    `json:"rule"`
	Do         string `json:"do"` // refuse, timeout, delay, duplicate, drop
	Send       int64  `json:"send"`
	Status     int    `json:"status,omitempty"`
	RetryAfter int    `json:"retry_after,omitempty"`
	SMTPCode   int    `json:"smtp_code,omitempty"`
	Seconds    int    `json:"seconds,omitempty"`
	Copies     int    `json:"copies,omitempty"`
	VisibleAt  string `json:"visible_at,omitempty"`
}

// EventWebhook is one delivery attempt of a webhook event: the provider,
// the event's id (the same on every attempt) and kind, the send's id,
// the attempt's number, the endpoint's status, the latency, the error if
// it failed, and the event's state after it (pending, delivered, failed,
// dropped).
type EventWebhook struct {
	Provider      string `json:"provider"`
	EventID       string `json:"event_id"`
	Kind          string `json:"kind"`
	EmailID       string `json:"email_id,omitempty"`
	Attempt       int    `json:"attempt"`
	Status        int    `json:"status,omitempty"`
	LatencyMillis int64  `json:"latency_ms"`
	Error         string `json:"error,omitempty"`
	State         string `json:"state"`
}

// Events returns the trail's events with a seq greater than after, in
// order; with wait > 0 it answers as soon as one commits, or with none
// when the wait is over.
func (c *Client) Events(ctx context.Context, after int64, wait time.Duration) ([]Event, error) {
	q := Query{After: after, Wait: wait}
	var page Events
	if err := c.get(ctx, "events", q.values(), wait, &page); err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(page.Events))
	for _, line := range page.Events {
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("mailclient: undecodable event: %w", err)
		}
		e.Line = line
		out = append(out, e)
	}
	return out, nil
}

// WaitEvent returns the first event after seq after for which match
// returns true (nil matches any), waiting for one until ctx ends.
func (c *Client) WaitEvent(ctx context.Context, after int64, match func(Event) bool) (Event, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Event{}, fmt.Errorf("mailclient: no matching event after seq %d: %w", after, err)
		}
		wait := MaxWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait < time.Millisecond {
			return Event{}, fmt.Errorf("mailclient: no matching event after seq %d: %w", after, context.DeadlineExceeded)
		}
		es, err := c.Events(ctx, after, wait)
		if err != nil {
			return Event{}, err
		}
		for _, e := range es {
			if match == nil || match(e) {
				return e, nil
			}
			after = e.Seq
		}
	}
}

// Error is the gateway's error answer, in Resend's shape with the
// reference's code in Code.
type Error struct {
	Code       string `json:"error"`
	Message    string `json:"message"`
	Name       string `json:"name"`
	StatusCode int    `json:"statusCode"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("mail-gateway: %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// Error codes of the gateway.
const (
	CodeInvalidNamespace   = "invalid_namespace"   // 400: not a namespace name
	CodeInvalidWait        = "invalid_wait"        // 400: wait is not a duration of at most 60 s
	CodeInvalidAfter       = "invalid_after"       // 400: after is not a message id
	CodeForbidden          = "forbidden"           // 403: the capability does not open the namespace
	CodeRecipientForbidden = "recipient_forbidden" // 403: nothing was ever delivered to that address
	CodeMessageNotFound    = "message_not_found"   // 404: no such message (or none arrived while waiting)
	CodeNotFound           = "not_found"           // 404: no such route
	CodeMethodNotAllowed   = "method_not_allowed"  // 405
	CodeInternal           = "internal_error"      // 500: the gateway is misconfigured
	CodeUnavailable        = "mailpit_unavailable" // 503: the plane or its store is down; try again
)

// ErrNoCode is returned by WaitCode when the message that arrived has no
// code in it.
var ErrNoCode = errors.New("mailclient: the message has no one-time code")

// ErrNoLink is returned by WaitLink when the message that arrived asks
// for no click: it has no action link.
var ErrNoLink = errors.New("mailclient: the message has no action link")

// IsNotFound reports whether err is the gateway's "no such message",
// which is also what a wait that saw nothing arrive answers.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeMessageNotFound
}

// Client reads one namespace through the gateway. It is safe for
// concurrent use.
type Client struct {
	base       string
	namespace  string
	capability string
	hc         *http.Client
}

// New returns a client for the gateway at baseURL (for example
// "http://127.0.0.1:8025") that reads namespace with capability.
func New(baseURL, namespace, capability string) *Client {
	return &Client{base: strings.TrimRight(baseURL, "/"), namespace: namespace, capability: capability, hc: &http.Client{}}
}

// WithHTTPClient returns a copy of c that sends its requests with hc.
func (c *Client) WithHTTPClient(hc *http.Client) *Client {
	d := *c
	d.hc = hc
	return &d
}

// String names the client without its capability.
func (c *Client) String() string { return "mailclient(" + c.base + ", " + c.namespace + ")" }

// Query narrows a list or latest read.
type Query struct {
	Recipient string        // only mail to this address (compared without regard to case)
	After     int64         // only messages with a larger id
	Wait      time.Duration // hold the request until a match arrives, at most MaxWait
}

func (q Query) values() url.Values {
	v := url.Values{}
	if q.Recipient != "" {
		v.Set("recipient", q.Recipient)
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Wait > 0 {
		v.Set("wait", strconv.FormatInt(q.Wait.Milliseconds(), 10)+"ms")
	}
	return v
}

// List returns the matching messages, oldest first. With q.Wait it answers
// as soon as at least one matches, or with none when the wait is over.
func (c *Client) List(ctx context.Context, q Query) ([]Message, error) {
	var l List
	err := c.get(ctx, "messages", q.values(), q.Wait, &l)
	return l.Messages, err
}

// Latest returns the newest matching message. With no match (after q.Wait,
// if any) the error satisfies IsNotFound.
func (c *Client) Latest(ctx context.Context, q Query) (Message, error) {
	var m Message
	err := c.get(ctx, "messages/latest", q.values(), q.Wait, &m)
	return m, err
}

// Get returns the message with id.
func (c *Client) Get(ctx context.Context, id int64) (Message, error) {
	var m Message
	err := c.get(ctx, "messages/"+strconv.FormatInt(id, 10), nil, 0, &m)
	return m, err
}

// Wait returns the newest message to recipient with an id greater than
// after ("" means any recipient, 0 any id), waiting for one to arrive until
// ctx ends (then the error wraps ctx's). The gateway holds each request
// until mail arrives (nobody polls); Wait only starts a new request when
// one has held for MaxWait.
func (c *Client) Wait(ctx context.Context, recipient string, after int64) (Message, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Message{}, fmt.Errorf("mailclient: no message to %q after id %d: %w", recipient, after, err)
		}
		wait := MaxWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait < time.Millisecond {
			return Message{}, fmt.Errorf("mailclient: no message to %q after id %d: %w", recipient, after, context.DeadlineExceeded)
		}
		m, err := c.Latest(ctx, Query{Recipient: recipient, After: after, Wait: wait})
		if IsNotFound(err) {
			continue // the wait ran out with nothing new: hold another request
		}
		return m, err
	}
}

// WaitCode waits like Wait and returns the message's one-time code (its
// otp: the code a person would type, as typed) and links; ErrNoCode when
// the message has no code.
func (c *Client) WaitCode(ctx context.Context, recipient string, after int64) (code string, links []string, err error) {
	m, err := c.Wait(ctx, recipient, after)
	if err != nil {
		return "", nil, err
	}
	if m.OTP == nil {
		return "", m.Links, ErrNoCode
	}
	return *m.OTP, m.Links, nil
}

// WaitLink waits like Wait and returns the message's action link: the one
// link a person is asked to click (verify, confirm, sign in, reset, accept
// an invitation, a magic link), as written in the message; ErrNoLink when
// the message has none. The link is not fetched (that could use up a
// one-time link); opening it is the caller's choice.
func (c *Client) WaitLink(ctx context.Context, recipient string, after int64) (string, error) {
	m, err := c.Wait(ctx, recipient, after)
	if err != nil {
		return "", err
	}
	if m.ActionLink == nil {
		return "", ErrNoLink
	}
	return *m.ActionLink, nil
}

// get performs GET /api/namespaces/{ns}/{rel}?{q} and decodes the answer.
func (c *Client) get(ctx context.Context, rel string, q url.Values, wait time.Duration, out any) error {
	// A held request needs its wait on top of an ordinary answer's time.
	ctx, cancel := context.WithTimeout(ctx, wait+30*time.Second)
	defer cancel()
	u := c.base + "/api/namespaces/" + url.PathEscape(c.namespace) + "/" + rel
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("mailclient: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.capability)
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("mailclient: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("mailclient: reading the answer: %w", err)
	}
	if len(body) > maxResponseBytes {
		return fmt.Errorf("mailclient: answer exceeds %d bytes", maxResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{}
		if json.Unmarshal(body, e) != nil || e.Code == "" {
			e = &Error{Code: "unexpected_answer", Message: http.StatusText(resp.StatusCode)}
		}
		e.StatusCode = resp.StatusCode
		return e
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("mailclient: undecodable answer: %w", err)
	}
	return nil
}
