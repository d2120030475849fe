// Package faults is a trial's fault schedule: rules that make chosen
// sends go wrong on purpose (refused, held until the connection drops,
// delivered late, duplicated, lost), on a script rather than a
// probability, so that every run of a trial meets the same faults.
//
// A schedule is a JSON list of rules. Sends are counted per trial from 1,
// in the order the plane decides them, once per door a rule can name: a
// rule for "http" counts only HTTP sends, one for "smtp" only SMTP sends,
// one for "any" both. The first rule that matches a send applies.
//
// Parse is the only way in: a schedule that is not valid is refused
// whole, naming the index of the first bad rule, so nothing is ever half
// applied.
package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/websitebench/mailplane/internal/limits"
)

// Door is the door a send came in by, or that a rule names.
type Door string

const (
	HTTP Door = "http"
	SMTP Door = "smtp"
	Any  Door = "any"
	// Webhook rules count a trial's webhook events (package webhooks)
	// instead of its sends, and only delay, duplicate or drop them; "any"
	// does not count them.
	Webhook Door = "webhook"
)

// What a rule does to the sends it matches.
const (
	Refuse    = "refuse"    // answer with a refusal: nothing stored, no quota used
	Timeout   = "timeout"   // hold the answer for Seconds, then close without one
	Delay     = "delay"     // accept now, show the message after Seconds
	Duplicate = "duplicate" // store Copies copies, each with its own id
	Drop      = "drop"      // accept and store nothing
	// Bounce accepts and stores nothing, and the trial's webhooks report
	// a bounce; Complain stores the message, and its webhooks report a
	// complaint after its delivery (docs/webhooks.md).
	Bounce   = "bounce"
	Complain = "complain"
)

var actions = []string{Refuse, Timeout, Delay, Duplicate, Drop, Bounce, Complain}

// webhookActions are what a webhook rule may do to an event.
var webhookActions = []string{Delay, Duplicate, Drop}

// HTTPStatuses and SMTPCodes are the refusals a rule may name.
var (
	HTTPStatuses = []int{429, 500, 502, 503}
	SMTPCodes    = []int{421, 450, 451, 452, 550, 554}
)

// Rule is one valid rule, as it is stored and shown: exactly one of
// Sends, First and Every is set.
type Rule struct {
	Door       Door    `json:"door"`
	Sends      []int64 `json:"sends,omitempty"`
	First      int64   `json:"first,omitempty"`
	Every      int64   `json:"every,omitempty"`
	Do         string  `json:"do"`
	Status     int     `json:"status,omitempty"`
	RetryAfter int     `json:"retry_after,omitempty"`
	SMTPCode   int     `json:"smtp_code,omitempty"`
	Seconds    int     `json:"seconds,omitempty"`
	Copies     int     `json:"copies,omitempty"`
}

// Schedule is a trial's rules, in order.
type Schedule []Rule

// Error is a schedule refused: Index is the rule at fault (-1: the
// schedule as a whole).
type Error struct {
	Index  int
	Reason string
}

func (e *Error) Error() string {
	if e.Index < 0 {
		return "faults: " + e.Reason
	}
	return fmt.Sprintf("faults: rule %d: %s", e.Index, e.Reason)
}

// input is a rule as written: a pointer tells a field left out from a
// zero.
type input struct {
	Door       *Door    `json:"door"`
	Sends      *[]int64 `json:"sends"`
	First      *int64   `json:"first"`
	Every      *int64   `json:"every"`
	Do         *string  `json:"do"`
	Status     *int     `json:"status"`
	RetryAfter *int     `json:"retry_after"`
	SMTPCode   *int     `json:"smtp_code"`
	Seconds    *int     `json:"seconds"`
	Copies     *int     `json:"copies"`
}

// Parse reads a schedule: a JSON list of rules (null or empty: none).
func Parse(data []byte) (Schedule, error) {
	if len(data) > limits.FaultScheduleBytes {
		return nil, &Error{-1, fmt.Sprintf("longer than %d bytes", limits.FaultScheduleBytes)}
	}
	var items []json.RawMessage
	if err := strict(data, &items); err != nil {
		return nil, &Error{-1, "not a JSON list of rules"}
	}
	if len(items) > limits.FaultRules {
		return nil, &Error{-1, fmt.Sprintf("more than %d rules", limits.FaultRules)}
	}
	s := make(Schedule, 0, len(items))
	for i, item := range items {
		r, reason := parseRule(item)
		if reason != "" {
			return nil, &Error{i, reason}
		}
		s = append(s, r)
	}
	return s, nil
}

// strict decodes one JSON value into v, refusing unknown keys and
// anything after the value.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// parseRule reads and checks one rule; a reason says why it is refused.
func parseRule(item json.RawMessage) (Rule, string) {
	var in input
	if err := strict(item, &in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Rule{}, fmt.Sprintf("%s has the wrong type", te.Field)
		}
		return Rule{}, "not a rule: an object of door, sends|first|every, do, status, retry_after, smtp_code, seconds, copies"
	}
	r := Rule{Door: Any}
	if in.Door != nil {
		r.Door = *in.Door
	}
	if r.Door != HTTP && r.Door != SMTP && r.Door != Any && r.Door != Webhook {
		return r, `door must be "http", "smtp", "any" or "webhook"`
	}
	if reason := which(&r, in); reason != "" {
		return r, reason
	}
	if in.Do == nil || !slices.Contains(actions, *in.Do) {
		return r, "do must be refuse, timeout, delay, duplicate, drop, bounce or complain"
	}
	if r.Door == Webhook && !slices.Contains(webhookActions, *in.Do) {
		return r, "a webhook rule's do must be delay, duplicate or drop"
	}
	r.Do = *in.Do
	return r, fields(&r, in)
}

// which reads the rule's choice of sends: exactly one of sends, first
// and every.
func which(r *Rule, in input) string {
	n := 0
	for _, set := range []bool{in.Sends != nil, in.First != nil, in.Every != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return "give exactly one of sends, first and every"
	}
	switch {
	case in.Sends != nil:
		if len(*in.Sends) == 0 || len(*in.Sends) > limits.FaultSends {
			return fmt.Sprintf("sends must list 1 to %d send numbers", limits.FaultSends)
		}
		for _, n := range *in.Sends {
			if n < 1 {
				return "a send number is 1 or more"
			}
		}
		r.Sends = *in.Sends
	case in.First != nil:
		if *in.First < 1 {
			return "first must be 1 or more"
		}
		r.First = *in.First
	default:
		if *in.Every < 1 {
			return "every must be 1 or more"
		}
		r.Every = *in.Every
	}
	return ""
}

// fields checks the fields of r's action: those it needs are there and
// valid, and no other is given.
func fields(r *Rule, in input) string {
	allowed := map[string]bool{}
	switch r.Do {
	case Refuse:
		allowed = map[string]bool{"status": r.Door != SMTP, "retry_after": r.Door != SMTP, "smtp_code": r.Door != HTTP}
		if r.Door != SMTP {
			if in.Status == nil || !slices.Contains(HTTPStatuses, *in.Status) {
				return "a refusal over HTTP needs status 429, 500, 502 or 503"
			}
			r.Status = *in.Status
		}
		if r.Door != HTTP {
			if in.SMTPCode == nil || !slices.Contains(SMTPCodes, *in.SMTPCode) {
				return "a refusal over SMTP needs smtp_code 421, 450, 451, 452, 550 or 554"
			}
			r.SMTPCode = *in.SMTPCode
		}
		if in.RetryAfter != nil {
			if *in.RetryAfter < 1 || *in.RetryAfter > limits.FaultRetryAfter {
				return fmt.Sprintf("retry_after must be 1 to %d seconds", limits.FaultRetryAfter)
			}
			r.RetryAfter = *in.RetryAfter
		}
	case Timeout, Delay:
		allowed = map[string]bool{"seconds": true}
		most := limits.FaultTimeout
		if r.Do == Delay {
			most = limits.FaultDelay
		}
		if r.Door == Webhook {
			most = limits.WebhookRetryMax
		}
		if in.Seconds == nil || *in.Seconds < 1 || time.Duration(*in.Seconds)*time.Second > most {
			return fmt.Sprintf("%s needs seconds, 1 to %d", r.Do, int(most.Seconds()))
		}
		r.Seconds = *in.Seconds
	case Duplicate:
		allowed = map[string]bool{"copies": true}
		r.Copies = 2
		if in.Copies != nil {
			if *in.Copies < 2 || *in.Copies > limits.FaultCopies {
				return fmt.Sprintf("copies must be 2 to %d", limits.FaultCopies)
			}
			r.Copies = *in.Copies
		}
	}
	given := map[string]bool{"status": in.Status != nil, "retry_after": in.RetryAfter != nil,
		"smtp_code": in.SMTPCode != nil, "seconds": in.Seconds != nil, "copies": in.Copies != nil}
	for _, name := range []string{"status", "retry_after", "smtp_code", "seconds", "copies"} {
		if given[name] && !allowed[name] {
			return fmt.Sprintf("%s does not apply to %s on door %s", name, r.Do, r.Door)
		}
	}
	return ""
}

// JSON is the schedule as it is stored and shown: "" for none.
func (s Schedule) JSON() string {
	if len(s) == 0 {
		return ""
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// Counts are the sends of a trial counted so far through each door, the
// one being decided included.
type Counts struct {
	HTTP, SMTP int64
	// Webhook counts a trial's webhook events, for Match(Webhook, …).
	Webhook int64
}

// Match returns the first rule that matches a send through door, with
// its index, or -1.
func (s Schedule) Match(door Door, c Counts) (int, Rule) {
	for i, r := range s {
		var n int64
		switch r.Door {
		case Any:
			if door == Webhook {
				continue
			}
			n = c.HTTP + c.SMTP
		case door:
			n = c.HTTP
			if door == SMTP {
				n = c.SMTP
			} else if door == Webhook {
				n = c.Webhook
			}
		default:
			continue
		}
		if r.matches(n) {
			return i, r
		}
	}
	return -1, Rule{}
}

func (r Rule) matches(n int64) bool {
	switch {
	case r.Sends != nil:
		return slices.Contains(r.Sends, n)
	case r.First > 0:
		return n <= r.First
	case r.Every > 0:
		return n%r.Every == 0
	}
	return false
}
