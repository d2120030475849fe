package console

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/websitebench/mailplane/internal/evidence"
)

// event is one step of the timeline: when, a sentence a person reads,
// and the event's members for whoever needs them exactly.
type event struct {
	Seq                          int64
	Time, Door, Outcome, Summary string
	Details                      string
}

// line is a trail's canonical line as the timeline reads it: package
// evidence's Event, decoded from its JSON, so that a renamed or retyped
// member of the trail breaks the console's build rather than leaving its
// timeline reading nothing.
type line evidence.Event

// standard are the members every event has, read into their own places
// (or, for the chain, not shown).
var standard = map[string]bool{"seq": true, "time": true, "namespace": true, "door": true, "action": true,
	"outcome": true, "code": true, "prev": true, "hash": true}

// timeline turns a trail's lines into steps, newest first.
func timeline(lines []json.RawMessage) []event {
	out := make([]event, 0, len(lines))
	for _, raw := range lines {
		var l line
		var m map[string]any
		if json.Unmarshal(raw, &l) != nil || json.Unmarshal(raw, &m) != nil {
			continue
		}
		out = append(out, event{Seq: l.Seq, Time: l.Time, Door: l.Door, Outcome: l.Outcome, Summary: l.sentence(), Details: details(m)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq > out[j].Seq })
	return out
}

// details are the members beyond the standard ones (the credential kind,
// message ids, addresses, a fault, a link clicked), whatever they are.
func details(m map[string]any) string {
	var keys []string
	for k := range m {
		if !standard[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v, _ := json.Marshal(m[k])
		if b.Len() > 0 {
			b.WriteString("  ")
		}
		b.WriteString(k + "=" + strings.Trim(string(v), `"`))
	}
	return b.String()
}

// sentence says what happened, as a person would: who did what, and how
// it ended ("The agent tried to open message 7: not found").
func (l line) sentence() string {
	who, did, tried := l.who(), "", ""
	msgs := l.messages()
	switch l.Action {
	case "send":
		did, tried = "sent "+orWord(msgs, "a message"), "send a message"
		if len(l.To) > 0 {
			did += " to " + strings.Join(l.To, ", ")
		}
		if l.Replayed {
			did += " (a retry: the first answer was replayed)"
		}
	case "bootstrap":
		did, tried = "fetched its write capability (bootstrap)", "fetch its write capability (bootstrap)"
	case "list":
		did, tried = "listed the mail"+l.recipient(), "list the mail"+l.recipient()
		if msgs != "" {
			did += ": " + msgs
		}
	case "latest":
		did = "read the latest message" + l.recipient()
		tried = did
		if msgs != "" {
			did += ", " + msgs
		}
	case "get":
		did = "read " + orWord(msgs, "a message")
		tried = did
	case "open":
		if l.Door == "plane" {
			if l.Detail != "" {
				return "The trial moved here from " + l.Detail + "."
			}
			return "The trial was opened."
		}
		did, tried = "opened "+orWord(msgs, "a message"), "open "+orWord(msgs, "a message")
	case "wait":
		did, tried = "waited for mail"+l.recipient(), "wait for mail"+l.recipient()
		if msgs != "" {
			did += " and got " + msgs
		}
	case "click":
		what := "a link of " + orWord(msgs, "a message")
		if l.Link != nil {
			what = "link " + strconv.Itoa(*l.Link+1) + " of " + orWord(msgs, "a message")
		}
		did, tried = "clicked "+what, "click "+what
		if l.Host != "" {
			did += " (" + l.Host + ")"
		}
	case "connect":
		did, tried = "connected over SMTP", "connect over SMTP"
	case "plant":
		did = "planted " + orWord(msgs, "a message")
		if len(l.To) > 0 {
			did += " for " + strings.Join(l.To, ", ")
		}
		tried = "plant a message"
	case "rotate":
		return "The trial moved to a new namespace, " + l.Detail + "; this one is sealed."
	case "seal":
		return "The trial was sealed" + because(l.Code) + ": it takes no more mail."
	case "close":
		return "The trial was closed."
	case "expire":
		return "The trial expired (its TTL ran out) and was closed."
	case "port_moved":
		return fmt.Sprintf("The trial's SMTP port was taken while the stack was stopped; it moved from %d to %d.", l.OldPort, l.NewPort)
	case "budget":
		return "The trail's event budget is full: from here on, events other than sends and the trial's life are only counted."
	case "summary":
		return "Counted, not recorded one by one: " + counts(l.Counts) + "."
	case "faults":
		if l.Count == 0 {
			return "The trial's fault schedule was cleared."
		}
		return "A fault schedule of " + plural(l.Count, "rule") + " was set."
	case "deliver":
		return "Delayed " + orWord(msgs, "message") + " became visible."
	case "webhooks":
		if l.Count == 0 {
			return "The trial's webhooks were cleared."
		}
		return plural(l.Count, "webhook") + " set for the trial."
	case "webhook":
		if l.Outcome == "failed" {
			return "A webhook delivery failed" + because(l.Code) + "."
		}
		return "A webhook event was delivered."
	default:
		did, tried = "did "+l.Action, l.Action
	}
	s := who + " " + did
	switch {
	case l.Outcome == "refused":
		s = who + " tried to " + tried + ": refused" + because(l.Code)
	case l.Outcome == "failed":
		s = who + " tried to " + tried + ": it failed, the plane or its store did not answer" + because(l.Code)
	case l.Code == "not_found" && l.Action == "wait":
		s += ": none came"
	case l.Code == "not_found":
		s = who + " tried to " + tried + ": not found"
	case l.Code != "":
		s += because(l.Code)
	}
	if l.Count > 1 {
		s += " (" + plural(l.Count, "time") + ")"
	}
	if l.Label != "" {
		s += " — planted mail labelled " + strconv.Quote(l.Label)
	}
	if f := l.Fault; f != nil {
		s += " — fault injected by rule " + strconv.Itoa(f.Rule) + ": " + f.Do
		switch {
		case f.Status != 0:
			s += " " + strconv.Itoa(f.Status)
		case f.SMTPCode != 0:
			s += " " + strconv.Itoa(f.SMTPCode)
		case f.Seconds != 0:
			s += " " + strconv.Itoa(f.Seconds) + "s"
		}
	}
	return s + "."
}

// who is the party that came in by the event's door.
func (l line) who() string {
	switch l.Door {
	case "writer-http":
		if l.API != "" {
			return "The candidate's site (" + apiName(l.API) + " API)"
		}
		return "The candidate's site"
	case "writer-smtp":
		if l.Action == "connect" {
			return "An SMTP client"
		}
		return "The candidate's site, over SMTP,"
	case "inbox":
		return "The agent"
	case "inbox-mcp":
		return "The agent (MCP)"
	case "gateway":
		return "The evaluator"
	case "plane":
		if l.Action == "plant" {
			return "The evaluator"
		}
		return "The plane"
	}
	return "Someone at " + orWord(l.Door, "an unnamed door")
}

func apiName(api string) string {
	switch api {
	case "sendgrid":
		return "SendGrid"
	case "postmark":
		return "Postmark"
	case "mailgun":
		return "Mailgun"
	case "ses":
		return "SES"
	}
	return api
}

// messages names the event's messages: "message 7", "messages 1, 2".
func (l line) messages() string {
	if len(l.MessageIDs) == 0 {
		return ""
	}
	ids := make([]string, len(l.MessageIDs))
	for i, id := range l.MessageIDs {
		ids[i] = strconv.FormatInt(id, 10)
	}
	if len(ids) == 1 {
		return "message " + ids[0]
	}
	return "messages " + strings.Join(ids, ", ")
}

func (l line) recipient() string {
	if l.Recipient == "" {
		return ""
	}
	return " for " + l.Recipient
}

// because words a stable code: "invalid_envelope" is " (invalid
// envelope)".
func because(code string) string {
	if code == "" {
		return ""
	}
	return " (" + strings.ReplaceAll(code, "_", " ") + ")"
}

// counts words a summary's counts, "list/accepted" and all, in order.
func counts(c map[string]int64) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		action, outcome, _ := strings.Cut(k, "/")
		parts[i] = plural(c[k], action) + " " + outcome
	}
	return strings.Join(parts, ", ")
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.FormatInt(n, 10) + " " + word + "s"
}

func orWord(s, word string) string {
	if s == "" {
		return word
	}
	return s
}
