package plane

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestPumpReadsEachLineOnce: the pump's full pass reads a trail only when
// it has lines the pump has not read, even lines that derive no event
// and so leave the cursor where it is; and a send after such lines still
// becomes its events, the cursor moving past them all.
func TestPumpReadsEachLineOnce(t *testing.T) {
	bg := context.Background()
	counted := &countingLedger{Ledger: openLedger(t)}
	br := NewBroker(counted, nil, Quotas{}, zerolog.Nop())
	socket := serveBroker(t, br)
	hooks := []rpc.Webhook{{Provider: "resend", URL: "http://127.0.0.1:9/"}}
	hooked, err := br.CreateTrial(bg, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate, Webhooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := br.CreateTrial(bg, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate}); err != nil {
		t.Fatal(err)
	}
	// pass runs a full pass and counts its trail, trial and namespace reads.
	pass := func() [3]int64 {
		tr, n, ns := counted.trails.Load(), counted.trials.Load(), counted.namespaces.Load()
		br.pumpWebhooks(bg)
		return [3]int64{counted.trails.Load() - tr, counted.trials.Load() - n, counted.namespaces.Load() - ns}
	}
	pass()
	// A line that derives no event: the agent's read.
	if _, err := client(t, socket, hooked.InboxGrant).List(bg, &rpc.ReadRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := pass(); got[0] != 1 {
		t.Fatalf("a pass after a read: %d trail reads, want 1", got[0])
	}
	if got := pass(); got != [3]int64{} {
		t.Fatalf("an idle pass read trails, trials, namespaces: %v; want none", got)
	}
	raw := []byte("Subject: hi\r\n\r\nthere")
	if _, err := client(t, socket, hooked.WriterGrant).Send(bg, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"u@example.com"}, Raw: raw}); err != nil {
		t.Fatal(err)
	}
	pass()
	ns, err := counted.Namespace(bg, hooked.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := counted.WebhookEvents(bg, ns.TrialID)
	if err != nil || len(evs) != 2 || evs[0].Kind != "sent" || evs[1].Kind != "delivered" {
		t.Fatalf("the send's webhook events: %+v, %v; want its sent and delivered", evs, err)
	}
	nss, err := counted.WebhookNamespaces(bg)
	if err != nil || len(nss) != 1 || nss[0].Cursor != nss[0].Head {
		t.Fatalf("after the send: %+v, %v; want the cursor at the trail's head", nss, err)
	}
	if got := pass(); got != [3]int64{} {
		t.Fatalf("an idle pass after the send: %v; want none", got)
	}
}
