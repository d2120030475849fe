package webhooks

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/mailgun/mailgun-go/v4"
	"github.com/mailgun/mailgun-go/v4/events"

	"github.com/websitebench/mailplane/internal/evidence"
)

// body builds f for provider p and decodes what it would POST.
func body(t *testing.T, p string, f Fact, out any) {
	t.Helper()
	r, err := Build(Hook{Provider: p, URL: "http://127.0.0.1:1/h"}, testKeys, "00112233445566778899aabbccddeeff", f, time.Now())
	if err != nil {
		t.Fatalf("%s %s: %v", p, f.Kind, err)
	}
	if err := json.Unmarshal(r.Body, out); err != nil {
		t.Fatalf("%s %s: %v", p, f.Kind, err)
	}
}

// TestSubjectAndTags: each event carries the send's subject and its
// provider's tags in the provider's own fields, as filled from the
// stored message.
func TestSubjectAndTags(t *testing.T) {
	f := fact(Delivered)
	f.Subject = "Confirm your address"
	f.Tags = []Tag{{"X-Resend-Tag", "category=confirm_email"}, {"x-resend-tag", "plan=free"},
		{"X-PM-Tag", "welcome"}, {"X-PM-Metadata-user_id", "43"},
		{"X-Mailgun-Tag", "signup"}, {"X-Mailgun-Tag", "eu"}, {"X-Mailgun-Variables", `{"user_id":"43"}`}}

	var rs struct {
		Data struct {
			Subject string            `json:"subject"`
			Tags    map[string]string `json:"tags"`
		} `json:"data"`
	}
	body(t, Resend, f, &rs)
	if rs.Data.Subject != f.Subject || !maps.Equal(rs.Data.Tags, map[string]string{"category": "confirm_email", "plan": "free"}) {
		t.Errorf("resend data: %+v", rs.Data)
	}

	var mg struct {
		EventData struct {
			Tags      []string          `json:"tags"`
			Variables map[string]string `json:"user-variables"`
			Message   struct {
				Headers map[string]string `json:"headers"`
			} `json:"message"`
		} `json:"event-data"`
	}
	body(t, Mailgun, f, &mg)
	if mg.EventData.Message.Headers["subject"] != f.Subject || !slices.Equal(mg.EventData.Tags, []string{"signup", "eu"}) || mg.EventData.Variables["user_id"] != "43" {
		t.Errorf("mailgun event-data: %+v", mg.EventData)
	}

	for _, kind := range []string{Delivered, Bounced, Complained} {
		g := f
		g.Kind, g.Recipient = kind, "agent@example.com"
		var pm map[string]any
		body(t, Postmark, g, &pm)
		if pm["Tag"] != "welcome" || !maps.Equal(pm["Metadata"].(map[string]any), map[string]any{"user_id": "43"}) {
			t.Errorf("postmark %s: %v", kind, pm)
		}
		if kind != Delivered && (pm["Subject"] != f.Subject || pm["From"] != f.From || pm["Email"] != "agent@example.com") {
			t.Errorf("postmark %s: %v", kind, pm)
		}
	}

	// Without tags: the providers' empty shapes, never null.
	var bare map[string]any
	body(t, Resend, fact(Sent), &bare)
	if tags, ok := bare["data"].(map[string]any)["tags"].(map[string]any); !ok || len(tags) != 0 {
		t.Errorf("resend without tags: %v", bare)
	}
	body(t, Mailgun, fact(Sent), &bare)
	if tags, ok := bare["event-data"].(map[string]any)["tags"].([]any); !ok || len(tags) != 0 {
		t.Errorf("mailgun without tags: %v", bare)
	}
}

// TestTagHeader: only the headers the send APIs keep tags in.
func TestTagHeader(t *testing.T) {
	for name, want := range map[string]bool{"X-Resend-Tag": true, "x-pm-tag": true, "X-PM-Metadata-k": true, "X-PM-Metadata-": false,
		"X-Mailgun-Tag": true, "X-Mailgun-Variables": true, "Subject": false, "X-Tags": false, "Authorization": false} {
		if TagHeader(name) != want {
			t.Errorf("TagHeader(%q) = %v", name, !want)
		}
	}
}

// TestOneEventPerRecipient: SendGrid lists, and Mailgun and Postmark
// post, one event per recipient of a send and of its delivery; an open
// or a click (the agent's, one reader) is one event.
func TestOneEventPerRecipient(t *testing.T) {
	to := []string{"a@x.example", "b@x.example", "c@x.example"}
	for _, kind := range []string{Sent, Delivered, Opened, Clicked} {
		f := fact(kind)
		f.To = to
		want := to
		if kind == Opened || kind == Clicked {
			want = to[:1]
		}
		for _, p := range []string{Mailgun, Postmark} {
			if p == Postmark && kind == Sent {
				continue
			}
			var got []string
			ids := map[string]bool{}
			for _, g := range PerPost(Hook{Provider: p}, f) {
				var one map[string]any
				body(t, p, g, &one)
				if p == Mailgun {
					got = append(got, one["event-data"].(map[string]any)["recipient"].(string))
				} else {
					got = append(got, one["Recipient"].(string))
				}
				ids[EventID(g, 0)] = true
			}
			if !slices.Equal(got, want) || len(ids) != len(want) {
				t.Errorf("%s %s: recipients %v (%d ids), want %v", p, kind, got, len(ids), want)
			}
		}
		for _, p := range []string{Resend, SendGrid} {
			if n := len(PerPost(Hook{Provider: p}, f)); n != 1 {
				t.Errorf("%s %s: %d posts, want 1", p, kind, n)
			}
		}
		var sg []map[string]any
		body(t, SendGrid, f, &sg)
		var got []string
		for _, e := range sg {
			got = append(got, e["email"].(string))
		}
		if !slices.Equal(got, want) {
			t.Errorf("sendgrid %s: %v, want %v", kind, got, want)
		}
	}
}

// TestSendFactsNameTheirMessage: a stored send's facts name its message,
// so the plane fills their subject and tags from it.
func TestSendFactsNameTheirMessage(t *testing.T) {
	e := evidence.Event{Seq: 7, Namespace: "ns", Action: "send", Outcome: evidence.Accepted, EmailID: "id1",
		To: []string{"a@x.example", "bounced@resend.dev"}, MessageIDs: []int64{5}}
	fs := Facts(e)
	if len(fs) != 3 {
		t.Fatalf("facts %v", kinds(fs))
	}
	for _, f := range fs {
		if f.MessageSeq != 5 {
			t.Errorf("%s: message %d, want 5", f.Kind, f.MessageSeq)
		}
	}
}

// TestAfterDelayedDelivery: a delayed send's delivery names no
// recipients in its trail event; once the plane fills them from the
// message, its simulators bounce and complain as an undelayed send's do.
func TestAfterDelayedDelivery(t *testing.T) {
	fs := Facts(evidence.Event{Seq: 9, Action: evidence.ActionDeliver, Outcome: evidence.Accepted, EmailID: "id1", MessageIDs: []int64{4}})
	if !slices.Equal(kinds(fs), []string{Delivered}) || fs[0].MessageSeq != 4 {
		t.Fatalf("facts %v", kinds(fs))
	}
	d := fs[0]
	d.To = []string{"a@x.example", "complained@resend.dev", "bounce+x@simulator.amazonses.com"}
	got := AfterDelivery(d)
	if want := []string{"complained:complained@resend.dev", "bounced:bounce+x@simulator.amazonses.com"}; !slices.Equal(kinds(got), want) {
		t.Errorf("after delivery %v, want %v", kinds(got), want)
	}
	for _, f := range got {
		if f.EmailID != "id1" || f.TrailSeq != 9 || EventID(f, 0) == EventID(d, 0) {
			t.Errorf("%+v", f)
		}
	}
}

// TestMailgunGoParsesOurEvents: mailgun-go's own event types read each
// event-data we post, with the fields a site reads.
func TestMailgunGoParsesOurEvents(t *testing.T) {
	for _, kind := range []string{Sent, Delivered, Opened, Clicked, Bounced, Complained} {
		f := fact(kind)
		f.Subject, f.Tags = "Hello", []Tag{{"X-Mailgun-Tag", "signup"}}
		var body struct {
			EventData json.RawMessage `json:"event-data"`
		}
		r, err := Build(Hook{Provider: Mailgun, URL: "http://127.0.0.1:1/mg"}, testKeys, "00112233445566778899aabbccddeeff", f, time.Now())
		if err != nil || json.Unmarshal(r.Body, &body) != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		ev, err := mailgun.ParseEvent(body.EventData)
		if err != nil {
			t.Fatalf("%s: mailgun-go: %v", kind, err)
		}
		ok := ev.GetName() == mailgunEvents[kind] && ev.GetID() == "00112233445566778899aabbccddeeff"
		switch e := ev.(type) {
		case *events.Accepted:
			ok = ok && e.Recipient == "agent@example.com" && e.RecipientDomain == "example.com" && e.Envelope.Targets == e.Recipient &&
				e.Message.Headers.Subject == "Hello" && slices.Equal(e.Tags, []string{"signup"})
		case *events.Delivered:
			ok = ok && e.DeliveryStatus.Code == 250 && e.Message.Headers.MessageID == f.EmailID+"@site.example" && e.Envelope.Sender == f.From
		case *events.Opened:
			ok = ok && e.IP == readerIP && e.ClientInfo.UserAgent == readerAgent
		case *events.Clicked:
			ok = ok && e.Url == f.URL && e.ClientInfo.UserAgent == readerAgent
		case *events.Failed:
			ok = ok && e.Severity == "permanent" && e.DeliveryStatus.Code == 550 && e.Reason == "bounce"
		case *events.Complained:
			ok = ok && e.Recipient == "agent@example.com"
		default:
			ok = false
		}
		if !ok {
			t.Errorf("%s: %+v", kind, ev)
		}
	}
}
