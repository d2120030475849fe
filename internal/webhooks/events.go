package webhooks

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
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
}

// Facts are what a trail event caused, in order. Opens and clicks come
// with MessageSeq (and Link) only: the plane fills in the message's id,
// recipients and the link's URL from the stored message.
func Facts(e evidence.Event) []Fact {
	t, _ := time.Parse(evidence.TimeFormat, e.Time)
	base := Fact{EmailID: e.EmailID, API: e.API, From: e.From, To: e.To, Time: t, Namespace: e.Namespace, TrailSeq: e.Seq}
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
		out := delivered(base, with, false)
		if len(e.MessageIDs) > 0 {
			out[0].MessageSeq = e.MessageIDs[0] // its recipients, from the message
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

// delivered is a shown send's delivery, then a bounce for each of its
// bounce simulators (a send to some only is shown to the others) and a
// complaint for each complaint simulator, or for every recipient when a
// complain fault made it.
func delivered(base Fact, with func(kind, recipient string) Fact, complainAll bool) []Fact {
	out := []Fact{with(Delivered, "")}
	for _, r := range base.To {
		switch {
		case Simulated(r) == SimBounce:
			out = append(out, with(Bounced, r))
		case complainAll || Simulated(r) == SimComplain:
			out = append(out, with(Complained, r))
		}
	}
	return out
}

// EventID is a fact's event id for webhook hook: the same on every
// attempt, and the same however often the trail is read again.
func EventID(f Fact, hook int) string {
	h := sha256.Sum256([]byte(f.Namespace + "\x00" + strconv.FormatInt(f.TrailSeq, 10) + "\x00" + f.Kind + "\x00" + f.Recipient + "\x00" + strconv.Itoa(hook)))
	return hex.EncodeToString(h[:16])
}
