package sqlledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/websitebench/mailplane/internal/evidence"
	. "github.com/websitebench/mailplane/internal/ledger"
)

func TestMultiRow(t *testing.T) {
	for _, c := range []struct {
		q    string
		n    int
		want string
	}{
		{qInsertEvent, 1, qInsertEvent},
		{qInsertEvent, 3, `INSERT INTO events (namespace, seq, line) VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?)`},
		{qPutBody, 2, `INSERT INTO bodies (namespace, seq, raw) VALUES (?, ?, ?), (?, ?, ?) ON CONFLICT (namespace, seq) DO UPDATE SET raw = excluded.raw`},
	} {
		if got := multiRow(c.q, c.n); got != c.want {
			t.Errorf("multiRow(%q, %d) = %q", c.q, c.n, got)
		}
	}
}

// testDeferredBatches: plain sends (their message, body, index and event
// written once per table per batch, their namespace's row read once and
// written once per batch) from many senders at once into two namespaces,
// one of which runs out of quota mid-way, with exempt sends, sends
// without an event, sends keyed by an idempotency key and gateway events
// between them in the same batches. Every accepted send has its entry,
// its own body and index, and its event in a trail that verifies; every
// refused one has none of them; the counters match.
func testDeferredBatches(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	trial(t, l, "a")
	trial(t, l, "b")
	const n, quotaB = 240, 50
	var wg sync.WaitGroup
	type result struct {
		ns, body      string
		exempt, event bool
		e             Entry
		err           error
	}
	results := make([]result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns, max := "a", int64(0)
			if i%2 == 1 {
				ns, max = "b", quotaB
			}
			body := fmt.Sprintf("body %d", i)
			o := &Offer{Namespace: ns, UUID: fmt.Sprint("u", i), From: "a@example.com", To: []string{"to@example.com", fmt.Sprintf("R%d@example.com", i)},
				Size: len(body), MaxMessages: max, Body: []byte(body), Index: []byte("index " + body),
				Event: &evidence.Event{Door: evidence.DoorWriterHTTP, Action: "send", Outcome: evidence.Accepted}}
			if i%10 == 0 {
				o.IdempotencyKey, o.Fingerprint = fmt.Sprint("k", i), "fp"
			}
			if i%3 == 0 {
				o.Exempt, o.MaxMessages = true, 0 // the evaluator's: counts toward nothing
			}
			if i%4 == 0 {
				o.Event = nil // a send recorded without its event
			}
			if i%7 == 0 {
				l.AppendEvent(ctx, ns, evidence.Event{Door: evidence.DoorGateway, Action: "list", Outcome: evidence.Accepted})
			}
			e, _, err := l.Accept(ctx, o)
			results[i] = result{ns, body, o.Exempt, o.Event != nil, e, err}
		}()
	}
	wg.Wait()
	accepted, counted, size, events := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	for _, r := range results {
		switch {
		case r.err == nil:
			accepted[r.ns]++
			if !r.exempt {
				counted[r.ns]++
				size[r.ns] += len(r.body)
			}
			if r.event {
				events[r.ns]++
			}
			raw, err := l.Body(ctx, r.ns, r.e.Ref)
			if err != nil || string(raw) != r.body {
				t.Fatalf("%s's body: %q %v", r.body, raw, err)
			}
			idx, err := l.Index(ctx, r.ns, r.e.Ref)
			if err != nil || string(idx) != "index "+r.body {
				t.Fatalf("%s's index: %q %v", r.body, idx, err)
			}
			if _, known, err := l.Learned(ctx, r.ns, r.e.To[1]); !known || err != nil {
				t.Fatalf("%s's recipient %s not learned: %v", r.body, r.e.To[1], err)
			}
		case r.ns == "b" && errors.Is(r.err, ErrCapacity):
			if _, known, err := l.Learned(ctx, r.ns, fmt.Sprintf("r%s@example.com", r.body[len("body "):])); known || err != nil {
				t.Fatalf("%s, refused, learned its recipient: %v", r.body, err)
			}
		default:
			t.Fatalf("%s: %v", r.body, r.err)
		}
	}
	if accepted["a"] != n/2 || counted["b"] != quotaB || accepted["b"] == counted["b"] {
		t.Fatalf("accepted %v, counted %v", accepted, counted)
	}
	for _, ns := range []string{"a", "b"} {
		es, err := l.Entries(ctx, ns, 0)
		if err != nil || len(es) != accepted[ns] {
			t.Fatalf("%s: %d entries, %v", ns, len(es), err)
		}
		for i, e := range es {
			if e.Seq != int64(i+1) {
				t.Fatalf("%s: entry %d has seq %d", ns, i, e.Seq)
			}
		}
		sends := 0
		for _, e := range trailOf(t, l, ns) {
			if e.Action == "send" {
				sends++
				raw, err := l.Body(ctx, ns, fmt.Sprint(e.MessageIDs[0]))
				if err != nil || !bytes.HasPrefix(raw, []byte("body ")) || e.Size != len(raw) {
					t.Fatalf("%s: the event of message %d (size %d): %q %v", ns, e.MessageIDs[0], e.Size, raw, err)
				}
			}
		}
		if sends != events[ns] {
			t.Fatalf("%s: %d send events for %d sent with one", ns, sends, events[ns])
		}
		got, _ := l.Namespace(ctx, ns)
		if got.MessageCount != int64(counted[ns]) || got.ByteCount != int64(size[ns]) || got.NextSeq != int64(accepted[ns]+1) {
			t.Fatalf("%s: counters %d messages, %d bytes, next %d after %d accepted (%d counted, %d bytes)",
				ns, got.MessageCount, got.ByteCount, got.NextSeq, accepted[ns], counted[ns], size[ns])
		}
	}
}

// testBouncesInBatches: sends to a bounce simulator, whose event is
// written alone, in the same batches as plain sends of the same
// namespace, whose rows the batch holds: every send's event is in the
// trail once, the chain verifies, and the bounces store nothing.
func testBouncesInBatches(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	trial(t, l, "a")
	const n = 120
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf("body %d", i)
			o := &Offer{Namespace: "a", UUID: fmt.Sprint("u", i), From: "a@example.com", To: []string{"to@example.com"},
				Size: len(body), Body: []byte(body), Index: []byte("index " + body), Bounce: i%3 == 0,
				Event: &evidence.Event{Door: evidence.DoorWriterHTTP, Action: "send", Outcome: evidence.Accepted}}
			_, _, errs[i] = l.Accept(ctx, o)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	bounced, sent := 0, 0
	for _, e := range trailOf(t, l, "a") { // verifies the chain
		switch {
		case e.Action == "send" && e.Code == evidence.CodeSimulatedBounce:
			bounced++
		case e.Action == "send":
			sent++
		}
	}
	if bounced != n/3 || sent != n-n/3 {
		t.Fatalf("the trail holds %d bounces and %d sends, want %d and %d", bounced, sent, n/3, n-n/3)
	}
	if es, err := l.Entries(ctx, "a", 0); err != nil || len(es) != n-n/3 {
		t.Fatalf("%d entries stored, want %d (bounces store nothing): %v", len(es), n-n/3, err)
	}
}
