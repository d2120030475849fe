package webhooks

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/faults"
)

// Kinds of fact, each named by every provider in its own words (sign.go).
const (
	Sent       = "sent"
	Delivered  = "delivered"
	Opened     = "opened"
	Clicked    = "clicked"
	Bounced    = "bounced"
	Complained = "complained"
)

// Fact is one thing that happened to a send, derived from its trial's
// trail: the body of a webhook event, before a provider shapes it.
// Recipient is set on a bounce or complaint (one per recipient it
// concerns); To is the send's recipients.
type Fact struct {
	Kind      string    `json:"kind"`
	EmailID   string    `json:"email_id"`
	API       string    `json:"api,omitempty"`
	From      string    `json:"from,omitempty"`
	To        []string  `json:"to,omitempty"`
	Recipient string    `json:"recipient,omitempty"`
	URL       string    `json:"url,omitempty"`
	Time      time.Time `json:"time"`
	Namespace string    `json:"namespace"`
	TrailSeq  int64     `json:"trail_seq"`
	// MessageSeq is the message's number in its namespace (opens and
	// clicks, before the plane fills EmailID from it).
	MessageSeq int64 `json:"message_seq,omitempty"`
	// Link is a click's link index (before the plane fills URL).
	Link int `json:"-"`
	// Subject and Tags are the stored message's, filled by the plane
	// from its index when the event is derived (the trail keeps no
	// content): Tags are the headers the send APIs keep their tags,
	// metadata and variables in (TagHeader), for each provider's own
	// fields. A send stored nowhere (every recipient bounced) has none.
	Subject string `json:"subject,omitempty"`
	Tags    []Tag  `json:"tags,omitempty"`
}

// Tag is one header of a stored message that carries a send's tags.
type Tag struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// The headers the send APIs keep tags in (internal/writer,
// internal/sendapi): Resend's tags as name=value, Postmark's Tag and
// Metadata, Mailgun's o:tag and v: variables (a JSON object).
const (
	resendTag        = "X-Resend-Tag"
	postmarkTag      = "X-PM-Tag"
	postmarkMetadata = "X-PM-Metadata-"
	mailgunTag       = "X-Mailgun-Tag"
	mailgunVariables = "X-Mailgun-Variables"
)

// TagHeader reports whether a stored message's header carries a send's
// tags (kept in a Fact's Tags).
func TagHeader(name string) bool {
	for _, n := range []string{resendTag, postmarkTag, mailgunTag, mailgunVariables} {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return len(name) > len(postmarkMetadata) && strings.EqualFold(name[:len(postmarkMetadata)], postmarkMetadata)
}

// tagValues are the values of f's tag headers named name.
func tagValues(f Fact, name string) []string {
	var out []string
	for _, t := range f.Tags {
		if strings.EqualFold(t.Name, name) {
			out = append(out, t.Value)
		}
	}
	return out
}

// PerPost is f as h's provider posts it: Mailgun and Postmark post one
// event per recipient, so a send's or its delivery's fact concerning
// several is one fact per recipient (each its own event id). Opens and
// clicks are the agent's, one reader: they stay one event, for the
// first recipient.
func PerPost(h Hook, f Fact) []Fact {
	if (h.Provider != Mailgun && h.Provider != Postmark) || f.Recipient != "" || len(f.To) < 2 || (f.Kind != Sent && f.Kind != Delivered) {
		return []Fact{f}
	}
	out := make([]Fact, len(f.To))
	for i, r := range f.To {
		out[i] = f
		out[i].Recipient = r
	}
	return out
}

// Facts are what a trail event caused, in order. Opens and clicks come
// with MessageSeq (and Link) only: the plane fills in the message's id,
// recipients and the link's URL from the stored message.
func Facts(e evidence.Event) []Fact {
	t, _ := time.Parse(evidence.TimeFormat, e.Time)
	base := Fact{EmailID: e.EmailID, API: e.API, From: e.From, To: e.To, Time: t, Namespace: e.Namespace, TrailSeq: e.Seq}
	if e.Action == "send" && len(e.MessageIDs) > 0 {
		base.MessageSeq = e.MessageIDs[0] // its subject and tags, from the message
	}
	with := func(kind, recipient string) Fact {
		f := base
		f.Kind, f.Recipient = kind, recipient
		return f
	}
	if e.Outcome != evidence.Accepted {
		return nil
	}
	switch e.Action {
	case "send":
		if e.EmailID == "" || e.Replayed {
			return nil
		}
		out := []Fact{with(Sent, "")}
		do := ""
		if e.Fault != nil {
			do = e.Fault.Do
		}
		switch {
		case e.Code == evidence.CodeSimulatedBounce || do == faults.Bounce:
			for _, r := range e.To {
				out = append(out, with(Bounced, r))
			}
			return out
		case do == faults.Drop:
			return out
		case do == faults.Delay:
			return out // delivered when it shows (ActionDeliver)
		}
		return append(out, delivered(base, with, do == faults.Complain)...)
	case evidence.ActionDeliver:
		if e.EmailID == "" {
			return nil
		}
		// Its recipients are the message's: the plane fills them, then
		// adds what they cause (AfterDelivery).
		out := []Fact{with(Delivered, "")}
		if len(e.MessageIDs) > 0 {
			out[0].MessageSeq = e.MessageIDs[0]
		}
		return out
	case evidence.ActionOpen, evidence.ActionClick:
		if (e.Door != evidence.DoorInbox && e.Door != evidence.DoorInboxMCP) || len(e.MessageIDs) != 1 || e.Label != "" || e.Code != "" {
			return nil // not the agent's, or the evaluator's planted mail
		}
		f := with(Opened, "")
		f.MessageSeq = e.MessageIDs[0]
		if e.Action == evidence.ActionClick {
			if e.Link == nil {
				return nil
			}
			f.Kind, f.Link = Clicked, *e.Link
		}
		return []Fact{f}
	}
	return nil
}

// delivered is a shown send's delivery, then what its recipients cause.
func delivered(base Fact, with func(kind, recipient string) Fact, complainAll bool) []Fact {
	return append([]Fact{with(Delivered, "")}, afterDelivery(with(Delivered, ""), complainAll)...)
}

// AfterDelivery is what delivery d's recipients cause after it, for a
// delayed send's delivery, whose recipients only its message names (the
// plane fills them first).
func AfterDelivery(d Fact) []Fact { return afterDelivery(d, false) }

// afterDelivery is a bounce for each bounce simulator among d's
// recipients (a send to some only is shown to the others) and a
// complaint for each complaint simulator, or for every recipient when a
// complain fault made it.
func afterDelivery(d Fact, complainAll bool) []Fact {
	var out []Fact
	for _, r := range d.To {
		f := d
		f.Recipient = r
		switch {
		case Simulated(r) == SimBounce:
			f.Kind = Bounced
		case complainAll || Simulated(r) == SimComplain:
			f.Kind = Complained
		default:
			continue
		}
		out = append(out, f)
	}
	return out
}

// EventID is a fact's event id for webhook hook: the same on every
// attempt, and the same however often the trail is read again.
func EventID(f Fact, hook int) string {
	h := sha256.Sum256([]byte(f.Namespace + "\x00" + strconv.FormatInt(f.TrailSeq, 10) + "\x00" + f.Kind + "\x00" + f.Recipient + "\x00" + strconv.Itoa(hook)))
	return hex.EncodeToString(h[:16])
}
