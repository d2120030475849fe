package webhooks

import (
	"slices"
	"testing"

	"github.com/websitebench/mailplane/internal/evidence"
)

func kinds(fs []Fact) []string {
	var out []string
	for _, f := range fs {
		k := f.Kind
		if f.Recipient != "" {
			k += ":" + f.Recipient
		}
		out = append(out, k)
	}
	return out
}

// TestFacts: each trail event causes exactly what happened to the mail.
func TestFacts(t *testing.T) {
	link := 2
	send := func(to []string, code string, fault string) evidence.Event {
		e := evidence.Event{Seq: 7, Namespace: "ns", Action: "send", Outcome: evidence.Accepted, EmailID: "id1", To: to, Code: code}
		if fault != "" {
			e.Fault = &evidence.Fault{Do: fault}
		}
		return e
	}
	for _, c := range []struct {
		name string
		e    evidence.Event
		want []string
	}{
		{"send", send([]string{"a@x.example"}, "", ""), []string{Sent, Delivered}},
		{"simulated bounce", send([]string{"bounced+x@resend.dev"}, evidence.CodeSimulatedBounce, ""), []string{Sent, "bounced:bounced+x@resend.dev"}},
		{"some bounce", send([]string{"a@x.example", "bounce@simulator.amazonses.com"}, "", ""), []string{Sent, Delivered, "bounced:bounce@simulator.amazonses.com"}},
		{"complaint", send([]string{"complained@resend.dev"}, "", ""), []string{Sent, Delivered, "complained:complained@resend.dev"}},
		{"bounce fault", send([]string{"a@x.example"}, "", "bounce"), []string{Sent, "bounced:a@x.example"}},
		{"complain fault", send([]string{"a@x.example"}, "", "complain"), []string{Sent, Delivered, "complained:a@x.example"}},
		{"drop fault", send([]string{"a@x.example"}, "", "drop"), []string{Sent}},
		{"delay fault", send([]string{"a@x.example"}, "", "delay"), []string{Sent}},
		{"duplicate fault", send([]string{"a@x.example"}, "", "duplicate"), []string{Sent, Delivered}},
		{"refused send", evidence.Event{Action: "send", Outcome: evidence.Refused, To: []string{"a@x.example"}}, nil},
		{"replayed send", evidence.Event{Action: "send", Outcome: evidence.Accepted, EmailID: "id1", Replayed: true}, nil},
		{"delayed shown", evidence.Event{Action: evidence.ActionDeliver, Outcome: evidence.Accepted, EmailID: "id1", MessageIDs: []int64{3}}, []string{Delivered}},
		{"agent open", evidence.Event{Door: evidence.DoorInbox, Action: evidence.ActionOpen, Outcome: evidence.Accepted, MessageIDs: []int64{3}}, []string{Opened}},
		{"agent open over MCP", evidence.Event{Door: evidence.DoorInboxMCP, Action: evidence.ActionOpen, Outcome: evidence.Accepted, MessageIDs: []int64{3}}, []string{Opened}},
		{"open of planted mail", evidence.Event{Door: evidence.DoorInbox, Action: evidence.ActionOpen, Outcome: evidence.Accepted, MessageIDs: []int64{3}, Label: "l"}, nil},
		{"open of no message", evidence.Event{Door: evidence.DoorInbox, Action: evidence.ActionOpen, Outcome: evidence.Accepted, MessageIDs: []int64{3}, Code: "not_found"}, nil},
		{"trial open", evidence.Event{Door: evidence.DoorPlane, Action: evidence.ActionOpen, Outcome: evidence.Accepted}, nil},
		{"click", evidence.Event{Door: evidence.DoorInbox, Action: evidence.ActionClick, Outcome: evidence.Accepted, MessageIDs: []int64{3}, Link: &link}, []string{Clicked}},
		{"refused click", evidence.Event{Door: evidence.DoorInbox, Action: evidence.ActionClick, Outcome: evidence.Refused, MessageIDs: []int64{3}, Link: &link}, nil},
		{"gateway read", evidence.Event{Door: evidence.DoorGateway, Action: "get", Outcome: evidence.Accepted, MessageIDs: []int64{3}}, nil},
		{"a webhook attempt", evidence.Event{Door: evidence.DoorWebhook, Action: evidence.ActionWebhook, Outcome: evidence.Accepted}, nil},
	} {
		got := Facts(c.e)
		if !slices.Equal(kinds(got), c.want) {
			t.Errorf("%s: %v, want %v", c.name, kinds(got), c.want)
		}
		for _, f := range got {
			if (f.Kind == Opened || f.Kind == Clicked) && f.MessageSeq != 3 {
				t.Errorf("%s: message %d, want 3", c.name, f.MessageSeq)
			}
			if f.Kind == Clicked && f.Link != 2 {
				t.Errorf("%s: link %d, want 2", c.name, f.Link)
			}
		}
	}
	// An event's id is the same however often the trail is read, and
	// differs between webhooks, kinds and recipients.
	fs := Facts(send([]string{"bounced@resend.dev", "complained@resend.dev"}, "", ""))
	ids := map[string]bool{}
	for _, f := range fs {
		for hook := range 2 {
			if EventID(f, hook) != EventID(f, hook) {
				t.Fatal("EventID is not stable")
			}
			ids[EventID(f, hook)] = true
		}
	}
	if len(ids) != 2*len(fs) {
		t.Errorf("%d distinct ids for %d events", len(ids), 2*len(fs))
	}
}

func TestSimulated(t *testing.T) {
	for addr, want := range map[string]string{
		"bounced@resend.dev": SimBounce, "Bounced+signup@Resend.dev": SimBounce, "complained+x@resend.dev": SimComplain,
		"delivered@resend.dev": SimDelivered, "bounce@simulator.amazonses.com": SimBounce, "complaint@simulator.amazonses.com": SimComplain,
		"success@simulator.amazonses.com": SimDelivered, "bounced@example.com": "", "agent@resend.dev": "", "no-at": "",
	} {
		if got := Simulated(addr); got != want {
			t.Errorf("Simulated(%q) = %q, want %q", addr, got, want)
		}
	}
	if AllBounce(nil) || AllBounce([]string{"bounced@resend.dev", "a@x.example"}) || !AllBounce([]string{"bounced@resend.dev", "bounce@simulator.amazonses.com"}) {
		t.Error("AllBounce")
	}
}
