// Package evidence is a trial's trail: one event per allow, refuse or
// failure of a call on the trial, and per step of its life, numbered per
// namespace (seq 1, 2, 3…) and hash-chained, so that a kept JSONL file of
// them shows whether a line was edited, dropped or moved.
//
// An event's canonical line is its JSON with the fields in the order of
// Event and without insignificant white space or HTML escaping. Its hash
// is the SHA-256 of its canonical line without the "hash" member, and its
// prev is the hash of the event before it (zeros for seq 1): editing a
// line breaks its own hash, dropping or moving one breaks its seq and
// prev. An event holds addresses, message ids, sizes and stable codes;
// never a credential, capability, token or message content.
package evidence

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Doors an event can come in by.
const (
	DoorWriterHTTP = "writer-http"
	DoorWriterSMTP = "writer-smtp"
	DoorInbox      = "inbox"
	DoorInboxMCP   = "inbox-mcp" // the agent's mailbox over MCP
	DoorIMAP       = "imap"      // the agent's mailbox over IMAP
	DoorGateway    = "gateway"
	DoorPlane      = "plane"
	DoorWebhook    = "webhook" // a delivery to the candidate's webhook endpoint
)

// Outcomes.
const (
	Accepted = "accepted"
	Refused  = "refused"
	Failed   = "failed" // an outage: neither allowed nor refused
)

// Actions besides the RPC methods' names (send, bootstrap, list, get,
// latest) and wait (a list or latest that waited).
const (
	ActionWait    = "wait"
	ActionConnect = "connect" // an SMTP session, refused before any message
	ActionOpen    = "open"
	ActionRotate  = "rotate"
	ActionSeal    = "seal"
	ActionClose   = "close"
	ActionExpire  = "expire"
	// ActionPortMoved: the trial's SMTP port could not be bound again when
	// its plane's supervisor restarted (another process held it), so the
	// trial moved to a new one (OldPort, NewPort).
	ActionPortMoved = "port_moved"
	// ActionBudget marks the trail's budget as full: from here on, events
	// that are not sends or lifecycle are only counted.
	ActionBudget = "budget"
	// ActionSummary counts, by action/outcome, the events left out since
	// the budget filled.
	ActionSummary = "summary"
	// ActionClick is the agent following link Link of a message (the
	// browser's ping); an agent opening a message is ActionOpen at door
	// inbox or inbox-mcp.
	ActionClick = "click"
	// ActionFlag is the agent setting (Flag "+\Seen") or clearing
	// ("-\Flagged") a flag of messages over IMAP.
	ActionFlag = "flag"
	// ActionPlant is the evaluator planting a labelled message.
	ActionPlant = "plant"
	// ActionFaults: the trial's fault schedule was set (Count rules; 0
	// cleared it). ActionDeliver: a delayed message became visible
	// (MessageIDs, EmailID).
	ActionFaults  = "faults"
	ActionDeliver = "deliver"
	// ActionWebhooks: the trial's webhooks were set (Count endpoints; 0
	// cleared them). ActionWebhook: one delivery attempt of a webhook
	// event (Webhook).
	ActionWebhooks = "webhooks"
	ActionWebhook  = "webhook"
)

// CodeSimulatedBounce is the code of an accepted send whose recipients
// are all a provider's bounce simulator: nothing was stored.
const CodeSimulatedBounce = "simulated_bounce"

// CodeBudgetFull is the code of the budget event.
const CodeBudgetFull = "event_budget_full"

// Event is one line of a trail. The field order is the canonical order.
type Event struct {
	Seq       int64  `json:"seq"`
	Time      string `json:"time"`
	Namespace string `json:"namespace"`
	Door      string `json:"door"`
	Action    string `json:"action"`
	Outcome   string `json:"outcome"`
	Code      string `json:"code,omitempty"`
	// Credential is the kind of credential presented (mail_api_token,
	// write_capability, bootstrap_token, capability_header, smtp_port,
	// netns (plain SMTP on a door inside the trial's network namespace),
	// inbox_token, read_capability), never its value.
	Credential string `json:"credential,omitempty"`
	// API is the provider API a send came through on the writer's HTTP
	// door (sendgrid, postmark, mailgun, ses); empty for POST /emails.
	API        string   `json:"api,omitempty"`
	From       string   `json:"from,omitempty"`
	To         []string `json:"to,omitempty"`
	Recipient  string   `json:"recipient,omitempty"` // a read's recipient filter
	MessageIDs []int64  `json:"message_ids,omitempty"`
	EmailID    string   `json:"email_id,omitempty"` // the id POST /emails and SMTP's 250 answered
	Size       int      `json:"size,omitempty"`
	Replayed   bool     `json:"replayed,omitempty"`
	Count      int64    `json:"count,omitempty"` // a report of several refusals at once
	// Counts are a summary's: events left out, by "action/outcome".
	Counts map[string]int64 `json:"counts,omitempty"`
	// Detail names a related namespace (rotate: the new one; open after a
	// rotation: the previous one).
	Detail string `json:"detail,omitempty"`
	// OldPort and NewPort are a port_moved event's SMTP ports.
	OldPort int `json:"old_port,omitempty"`
	NewPort int `json:"new_port,omitempty"`
	// Link is a click's link, its index (from 0) among the message's
	// links, and Host that link's host, read from the stored message.
	Link *int   `json:"link,omitempty"`
	Host string `json:"host,omitempty"`
	// Label is the evaluator's label of a planted message the event is
	// about (its planting, an open, a click).
	Label string `json:"label,omitempty"`
	// Flag is a flag event's change: + or - and the flag.
	Flag string `json:"flag,omitempty"`
	// Fault is set on the event of a send a rule of the trial's fault
	// schedule made go wrong: one event per injected fault.
	Fault *Fault `json:"fault,omitempty"`
	// Webhook is a webhook delivery attempt's (ActionWebhook).
	Webhook *Webhook `json:"webhook,omitempty"`
	Prev    string   `json:"prev"`
	Hash    string   `json:"hash,omitempty"`
}

// Fault is what a fault rule did to a send: the rule's index in the
// schedule and its do, the send's number (counted as the rule counts),
// and what the do names: the refusal's status or SMTP code, how long a
// timeout held, when a delayed message becomes visible, how many copies
// a duplicate stored.
type Fault struct {
	Rule       int    `json:"rule"`
	Do         string `json:"do"`
	Send       int64  `json:"send"`
	Status     int    `json:"status,omitempty"`
	RetryAfter int    `json:"retry_after,omitempty"`
	SMTPCode   int    `json:"smtp_code,omitempty"`
	Seconds    int    `json:"seconds,omitempty"`
	Copies     int    `json:"copies,omitempty"`
	VisibleAt  string `json:"visible_at,omitempty"`
}

// Webhook is one delivery attempt of a webhook event: its provider, id
// (the same on every attempt), kind and message, the attempt's number
// (from 1), the endpoint's status (0: none came), how long it took, its
// error code when no status came (timeout, connect, answer), and the
// event's state after it (delivered, pending, failed).
type Webhook struct {
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

// HashPrefix begins every hash: "sha256_" and 64 hex digits. The prefix
// keeps a hash from looking like one of the 64-hex secrets the redaction
// point removes (package redact), so a trail passes redaction unchanged
// and still verifies.
const HashPrefix = "sha256_"

// Genesis is the prev of seq 1.
var Genesis = HashPrefix + strings.Repeat("0", 64)

// TimeFormat is an event's time: UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Stamp formats t as an event's time.
func Stamp(t time.Time) string { return t.UTC().Format(TimeFormat) }

// MaxLine bounds one line of a trail (an event with 16 recipients and a
// page of message ids is a few KiB).
const MaxLine = 256 << 10

// Chain sets e's seq, prev and hash to follow an event with seq prevSeq
// and hash prevHash, and returns its canonical line.
func Chain(e *Event, prevSeq int64, prevHash string) ([]byte, error) {
	e.Seq, e.Prev, e.Hash = prevSeq+1, prevHash, ""
	body, err := canonical(e)
	if err != nil {
		return nil, err
	}
	e.Hash = hashOf(body)
	// hash is the last member: the line is the body with it appended.
	line := make([]byte, 0, len(body)+len(e.Hash)+10)
	line = append(line, body[:len(body)-1]...)
	line = append(line, `,"hash":"`...)
	line = append(line, e.Hash...)
	return append(line, `"}`...), nil
}

func hashOf(body []byte) string {
	sum := sha256.Sum256(body)
	return HashPrefix + hex.EncodeToString(sum[:])
}

func canonical(e *Event) ([]byte, error) { return canonicalJSON(e) }

// Break is where a trail stops verifying: the first bad line (from 1).
type Break struct {
	Line   int
	Reason string
}

func (b *Break) Error() string { return fmt.Sprintf("line %d: %s", b.Line, b.Reason) }

// ErrEmpty means a trail with no line at all.
var ErrEmpty = errors.New("evidence: empty trail")

// Verify reads a trail and checks its chain (Check without a key),
// returning the number of events.
func Verify(r io.Reader) (int, error) {
	res, err := Check(r, nil)
	return res.Events, err
}

// Result is what Check read of a trail.
type Result struct {
	Events    int
	Namespace string
	// LastSeq and LastAction are the last event's: how far the trail
	// goes, and whether it ends with the trial's close or expiry.
	LastSeq    int64
	LastAction string
	Head       *Head // the signed head the trail ends with, if any
}

// Ended reports whether the trail ends with its trial's close or expiry.
func (r Result) Ended() bool { return r.LastAction == ActionClose || r.LastAction == ActionExpire }

// Check reads a trail and checks each line in turn: canonical JSON of one
// event, its hash, its seq one more than the line before (1 first), its
// prev the hash of the line before, one namespace throughout; then the
// head, if the trail ends with one: its namespace, seq and hash those of
// the last event, nothing after it, and for a closed trial a close or
// expiry as the last event. With pub, the trail must end with a head
// signed by pub. At the first bad line it returns a *Break.
func Check(r io.Reader, pub ed25519.PublicKey) (Result, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	v := verifier{prevHash: Genesis, pub: pub}
	for sc.Scan() {
		v.line++
		if err := v.next(sc.Bytes()); err != nil {
			return v.res, &Break{Line: v.line, Reason: err.Error()}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return v.res, &Break{Line: v.line + 1, Reason: fmt.Sprintf("longer than %d bytes", MaxLine)}
		}
		return v.res, err
	}
	if v.line == 0 {
		return v.res, ErrEmpty
	}
	if pub != nil && v.res.Head == nil {
		return v.res, &Break{Line: v.line + 1, Reason: "no signed head: the trail may have been cut short"}
	}
	return v.res, nil
}

// verifier is Check's state: the line before.
type verifier struct {
	line       int
	prevSeq    int64
	prevHash   string
	lastAction string
	pub        ed25519.PublicKey
	res        Result
}

func (v *verifier) next(line []byte) error {
	if v.res.Head != nil {
		return errors.New("a line after the signed head")
	}
	if IsHead(line) {
		return v.head(line)
	}
	e, err := Parse(line)
	switch {
	case err != nil:
		return err
	case e.Seq != v.prevSeq+1:
		return fmt.Errorf("seq %d follows seq %d", e.Seq, v.prevSeq)
	case e.Prev != v.prevHash:
		return errors.New("prev is not the hash of the line before")
	case v.res.Events > 0 && e.Namespace != v.res.Namespace:
		return errors.New("another namespace")
	}
	v.res.Events++
	v.res.Namespace, v.prevSeq, v.prevHash, v.lastAction = e.Namespace, e.Seq, e.Hash, e.Action
	v.res.LastSeq, v.res.LastAction = e.Seq, e.Action
	return nil
}

func (v *verifier) head(line []byte) error {
	h, err := ParseHead(line)
	switch {
	case err != nil:
		return err
	case v.res.Events == 0:
		return errors.New("a head with no event before it")
	case h.Namespace != v.res.Namespace:
		return errors.New("the head names another namespace")
	case h.Seq != v.prevSeq || h.Hash != v.prevHash:
		return fmt.Errorf("the head was signed at seq %d, but the trail ends at seq %d or with another hash: cut short or rewritten", h.Seq, v.prevSeq)
	case v.pub != nil && !h.CheckSignature(v.pub):
		return errors.New("the head's signature does not verify with this key")
	case h.Closed && v.lastAction != ActionClose && v.lastAction != ActionExpire:
		return errors.New("the trial was closed, but its trail does not end with its close or expiry")
	}
	v.res.Head = &h
	return nil
}

// Parse reads one canonical line and checks its own hash; it does not
// know the line before.
func Parse(line []byte) (Event, error) {
	var e Event
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, errors.New("not an event")
	}
	if dec.More() {
		return e, errors.New("more than one value")
	}
	again, err := canonical(&e)
	if err != nil || !bytes.Equal(again, line) {
		return e, errors.New("not in canonical form")
	}
	want := e.Hash
	e.Hash = ""
	body, _ := canonical(&e)
	e.Hash = want
	if want == "" || hashOf(body) != want {
		return e, errors.New("hash does not match the line")
	}
	return e, nil
}
