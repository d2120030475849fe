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
	DoorGateway    = "gateway"
	DoorPlane      = "plane"
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
	// ActionBudget marks the trail's budget as full: from here on, events
	// that are not sends or lifecycle are only counted.
	ActionBudget = "budget"
	// ActionSummary counts, by action/outcome, the events left out since
	// the budget filled.
	ActionSummary = "summary"
)

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
	// inbox_token, read_capability), never its value.
	Credential string   `json:"credential,omitempty"`
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
	Prev   string `json:"prev"`
	Hash   string `json:"hash,omitempty"`
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

func canonical(e *Event) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Break is where a trail stops verifying: the first bad line (from 1).
type Break struct {
	Line   int
	Reason string
}

func (b *Break) Error() string { return fmt.Sprintf("line %d: %s", b.Line, b.Reason) }

// ErrEmpty means a trail with no line at all.
var ErrEmpty = errors.New("evidence: empty trail")

// Verify reads a trail and checks each line in turn: canonical JSON of one
// event, its hash, its seq one more than the line before (1 first), its
// prev the hash of the line before, one namespace throughout. It returns
// the number of events and, at the first bad line, a *Break.
func Verify(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	var (
		n        int
		prevSeq  int64
		prevHash = Genesis
		ns       string
	)
	for sc.Scan() {
		n++
		e, err := Parse(sc.Bytes())
		if err != nil {
			return n - 1, &Break{Line: n, Reason: err.Error()}
		}
		switch {
		case e.Seq != prevSeq+1:
			return n - 1, &Break{Line: n, Reason: fmt.Sprintf("seq %d follows seq %d", e.Seq, prevSeq)}
		case e.Prev != prevHash:
			return n - 1, &Break{Line: n, Reason: "prev is not the hash of the line before"}
		case n > 1 && e.Namespace != ns:
			return n - 1, &Break{Line: n, Reason: "another namespace"}
		}
		ns, prevSeq, prevHash = e.Namespace, e.Seq, e.Hash
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return n, &Break{Line: n + 1, Reason: fmt.Sprintf("longer than %d bytes", MaxLine)}
		}
		return n, err
	}
	if n == 0 {
		return 0, ErrEmpty
	}
	return n, nil
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
