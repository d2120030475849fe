package sqlledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/itest"
	. "github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/limits"
)

// testWebhooks: a trial's webhooks and its outbox. Setting webhooks starts
// each of the trial's trails from its present end; events are added only
// while the cursor is where they were read from (another plane's
// derivation wins, nothing is added twice); one send's events to one
// webhook are leased in order, one at a time, different sends' at once;
// an attempt updates its event and is a trail event in one transaction;
// a send to bounce simulators stores nothing; and closing the trial
// deletes its outbox.
func testWebhooks(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	tr, _ := trial(t, l, "a")
	other, _ := trial(t, l, "b")
	if err := l.SetWebhooks(ctx, tr.ID, "a", `[{"provider":"resend","url":"http://127.0.0.1:9/","retry_seconds":[1]}]`); err != nil {
		t.Fatal(err)
	}
	if err := l.SetWebhooks(ctx, 1<<40, "a", `[]`); !errors.Is(err, ErrNotFound) {
		t.Errorf("webhooks of no trial: %v, want ErrNotFound", err)
	}
	nss, err := l.WebhookNamespaces(ctx)
	if err != nil || len(nss) != 1 || nss[0] != (WebhookNamespace{Name: "a", TrialID: tr.ID, Head: 2, Cursor: 2}) {
		t.Fatalf("WebhookNamespaces = %+v, %v; want trial a's namespace only, its trail and cursor at 2", nss, err)
	}
	from, err := l.WebhookCursor(ctx, "a")
	if err != nil || from != 2 { // the trail's open and webhooks events
		t.Fatalf("cursor %d, %v; want 2", from, err)
	}
	now := time.Now()
	evs := []WebhookEvent{
		{ID: "e1", Hook: 0, EmailID: "m1", Kind: "sent", Data: `{}`, Due: now},
		{ID: "e2", Hook: 0, EmailID: "m1", Kind: "delivered", Data: `{}`, Due: now},
		{ID: "e3", Hook: 0, EmailID: "m2", Kind: "sent", Data: `{}`, Due: now},
		{ID: "e4", Hook: 0, EmailID: "m3", Kind: "sent", Data: `{}`, Due: now, State: WebhookDropped},
	}
	if err := l.AddWebhookEvents(ctx, tr.ID, "a", from, from+3, evs); err != nil {
		t.Fatal(err)
	}
	if err := l.AddWebhookEvents(ctx, tr.ID, "a", from, from+3, evs); !errors.Is(err, ErrExists) {
		t.Errorf("a second derivation from the same cursor: %v, want ErrExists", err)
	}
	due, err := l.DueWebhookEvents(ctx, now, time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if ids := idsOf(due); len(ids) != 2 || ids[0] != "e1" || ids[1] != "e3" {
		t.Fatalf("due %v, want e1 and e3 (m1's first, m2's; not m1's second, not the dropped)", ids)
	}
	if again, _ := l.DueWebhookEvents(ctx, now, time.Minute, 10); len(again) != 0 {
		t.Errorf("leased events handed out again: %v", idsOf(again))
	}
	if later, _ := l.DueWebhookEvents(ctx, now.Add(2*time.Minute), time.Minute, 10); len(later) != 2 {
		t.Errorf("after the lease: %v, want e1 and e3 again", idsOf(later))
	}
	e1 := due[0]
	attempt := evidence.Event{Namespace: "a", Door: evidence.DoorWebhook, Action: evidence.ActionWebhook, Outcome: evidence.Accepted,
		Webhook: &evidence.Webhook{Provider: "resend", EventID: "e1", Kind: "sent", Attempt: 1, Status: 200, State: WebhookDelivered}}
	if err := l.WebhookAttempted(ctx, WebhookAttempt{TrialID: tr.ID, Seq: e1.Seq, State: WebhookDelivered, Due: now, Entry: `{"status":200}`, Event: attempt}); err != nil {
		t.Fatal(err)
	}
	if err := l.WebhookAttempted(ctx, WebhookAttempt{TrialID: tr.ID, Seq: 999, State: WebhookDelivered, Due: now, Entry: `{}`, Event: attempt}); !errors.Is(err, ErrNotFound) {
		t.Errorf("an attempt at no event: %v, want ErrNotFound", err)
	}
	next, _ := l.DueWebhookEvents(ctx, now.Add(3*time.Minute), time.Minute, 10)
	if ids := idsOf(next); len(ids) != 2 || ids[0] != "e2" {
		t.Errorf("after e1 was delivered: %v, want e2 (and e3)", ids)
	}
	if one, err := l.WebhookEvent(ctx, tr.ID, e1.Seq); err != nil || one.ID != "e1" || one.State != WebhookDelivered {
		t.Errorf("WebhookEvent = %+v, %v", one, err)
	}
	if _, err := l.WebhookEvent(ctx, other.ID, e1.Seq); !errors.Is(err, ErrNotFound) {
		t.Errorf("another trial's event: %v, want ErrNotFound", err)
	}
	all, err := l.WebhookEvents(ctx, tr.ID)
	if err != nil || len(all) != 4 || all[0].State != WebhookDelivered || all[0].Attempts != 1 || all[0].Log != `[{"status":200}]` || all[3].State != WebhookDropped {
		t.Fatalf("outbox %+v, %v", all, err)
	}
	lines, _ := l.Events(ctx, "a", 0, 100)
	var last evidence.Event
	json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if last.Action != evidence.ActionWebhook || last.Webhook == nil || last.Webhook.EventID != "e1" {
		t.Errorf("the trail's last event %s, want the attempt", lines[len(lines)-1])
	}
	if n, err := l.PendingWebhookEvents(ctx, tr.ID); err != nil || n != 2 {
		t.Errorf("pending %d, %v; want 2 (e2, e3: not the delivered, not the dropped)", n, err)
	}
	if n, _ := l.PendingWebhookEvents(ctx, other.ID); n != 0 {
		t.Errorf("trial b's pending: %d", n)
	}
	if o, _ := l.WebhookEvents(ctx, other.ID); len(o) != 0 {
		t.Errorf("trial b's outbox: %v", idsOf(o))
	}

	// A send to bounce simulators: accepted, its event says so, nothing stored.
	o := offer("b", 10, "", "", 0, 0)
	o.UUID, o.Bounce = "bounced-1", true
	o.Event = &evidence.Event{Door: evidence.DoorWriterHTTP, Action: "send", Outcome: evidence.Accepted}
	e, _, err := l.Accept(ctx, o)
	if err != nil || e.UUID != "bounced-1" || e.Seq != 0 {
		t.Fatalf("bounce: %+v, %v", e, err)
	}
	if es, _ := l.Entries(ctx, "b", 0); len(es) != 0 {
		t.Errorf("a bounced send was stored: %v", es)
	}
	blines, _ := l.Events(ctx, "b", 0, 100)
	var be evidence.Event
	json.Unmarshal([]byte(blines[len(blines)-1]), &be)
	if be.Code != evidence.CodeSimulatedBounce || be.EmailID != "bounced-1" {
		t.Errorf("the bounce's event %s", blines[len(blines)-1])
	}

	if _, _, err := l.CloseTrial(ctx, tr.ID, evidence.ActionClose, false); err != nil {
		t.Fatal(err)
	}
	if left, _ := l.WebhookEvents(ctx, tr.ID); len(left) != 0 {
		t.Errorf("a closed trial's outbox kept %v", idsOf(left))
	}
	if c, _ := l.WebhookCursor(ctx, "a"); c != 0 {
		t.Errorf("a closed trial's cursor kept at %d", c)
	}
}

func idsOf(evs []WebhookEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// testWebhookShares: a trial has at most limits.TrialWebhookDeliveries
// events leased at once, whatever it has due, so a trial whose endpoint
// holds its attempts never fills a take ahead of another trial's event;
// an attempt reported frees its place.
func testWebhookShares(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	a, _ := trial(t, l, "a")
	b, _ := trial(t, l, "b")
	now := time.Now()
	for _, tr := range []struct {
		id    int64
		ns    string
		sends int
	}{{a.ID, "a", 3 * limits.TrialWebhookDeliveries}, {b.ID, "b", 1}} {
		if err := l.SetWebhooks(ctx, tr.id, tr.ns, `[{"provider":"resend","url":"http://127.0.0.1:9/"}]`); err != nil {
			t.Fatal(err)
		}
		from, _ := l.WebhookCursor(ctx, tr.ns)
		var evs []WebhookEvent
		for i := range tr.sends {
			// a's are due before b's: only the share keeps b's from waiting behind them
			due := now.Add(-time.Duration(tr.sends-i) * time.Minute)
			evs = append(evs, WebhookEvent{ID: fmt.Sprintf("%s%d", tr.ns, i), EmailID: fmt.Sprintf("m%d", i), Kind: "sent", Data: `{}`, Due: due})
		}
		if err := l.AddWebhookEvents(ctx, tr.id, tr.ns, from, from+1, evs); err != nil {
			t.Fatal(err)
		}
	}
	perTrial := func(evs []WebhookEvent) map[int64]int {
		n := map[int64]int{}
		for _, e := range evs {
			n[e.TrialID]++
		}
		return n
	}
	first, err := l.DueWebhookEvents(ctx, now, time.Minute, limits.TrialWebhookDeliveries+1)
	if err != nil {
		t.Fatal(err)
	}
	if n := perTrial(first); n[a.ID] != limits.TrialWebhookDeliveries || n[b.ID] != 1 {
		t.Fatalf("a take of %d: %v, want a's share and b's one", limits.TrialWebhookDeliveries+1, idsOf(first))
	}
	if none, _ := l.DueWebhookEvents(ctx, now, time.Minute, 64); len(none) != 0 {
		t.Fatalf("a's share is leased, yet %v", idsOf(none))
	}
	// a's other events are due already but wait for its share: the next
	// time anything changes unreported is when the leases end.
	if next, err := l.NextWebhookDue(ctx, now); err != nil || next.UnixMilli() != now.Add(time.Minute).UnixMilli() {
		t.Errorf("next due %v, %v; want the leases' end %v", next, err, now.Add(time.Minute))
	}
	e := first[0]
	attempt := evidence.Event{Namespace: "a", Door: evidence.DoorWebhook, Action: evidence.ActionWebhook, Outcome: evidence.Failed,
		Webhook: &evidence.Webhook{Provider: "resend", EventID: e.ID, Kind: "sent", Attempt: 1, Error: "timeout", State: WebhookPending}}
	if err := l.WebhookAttempted(ctx, WebhookAttempt{TrialID: a.ID, Seq: e.Seq, State: WebhookPending, Due: now.Add(time.Hour), Entry: `{"error":"timeout"}`, Event: attempt}); err != nil {
		t.Fatal(err)
	}
	if freed, _ := l.DueWebhookEvents(ctx, now, time.Minute, 64); len(freed) != 1 || freed[0].TrialID != a.ID {
		t.Fatalf("after one of a's attempts: %v, want one more of a's", idsOf(freed))
	}
	// Takers at once, each choosing from what it read before the others
	// leased: none is handed an event another holds, nor a's events past
	// its share. Later, with every lease ended, a's share is free again.
	later := now.Add(2 * time.Hour)
	var mu sync.Mutex
	held := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := l.DueWebhookEvents(ctx, later, time.Minute, 64)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, e := range got {
				held[e.ID]++
			}
		}()
	}
	wg.Wait()
	fromA := 0
	for id, n := range held {
		if n > 1 {
			t.Errorf("%s handed to %d takers at once", id, n)
		}
		if strings.HasPrefix(id, "a") {
			fromA++
		}
	}
	if fromA != limits.TrialWebhookDeliveries {
		t.Errorf("takers at once hold %d of a's events, want its share %d", fromA, limits.TrialWebhookDeliveries)
	}
}

// BenchmarkDueWebhookEvents: a take over trials whose outboxes are full
// (fullOutboxes). Its leases end at once, so every take does the same
// work.
func BenchmarkDueWebhookEvents(b *testing.B) {
	ctx := context.Background()
	l := openSQLite(b, b.TempDir())
	now := time.Now()
	fullOutboxes(b, l, now)
	for b.Loop() {
		got, err := l.DueWebhookEvents(ctx, now, 0, 64)
		if err != nil || len(got) != 4*limits.TrialWebhookDeliveries {
			b.Fatalf("%d events, %v; want each trial's share", len(got), err)
		}
	}
}

// BenchmarkSendBesideTakes is BenchmarkCommitSend's sends while a
// deliverer takes, again and again, from four other trials whose
// outboxes are full (fullOutboxes): its p99-us is what one trial's sends
// pay for the others' webhooks.
func BenchmarkSendBesideTakes(b *testing.B) {
	ctx := context.Background()
	l, body, index := openProfileLedger(b)
	now := time.Now()
	fullOutboxes(b, l, now)
	stop := make(chan struct{})
	taking := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				taking <- nil
				return
			default:
			}
			if _, err := l.DueWebhookEvents(ctx, now, 0, 64); err != nil {
				taking <- err
				return
			}
		}
	}()
	b.ResetTimer()
	lat := sendProfile(b, l, body, index)
	b.StopTimer()
	close(stop)
	if err := <-taking; err != nil {
		b.Fatal(err)
	}
	lat.report(b)
}

// fullOutboxes makes four trials with webhooks whose outboxes are full:
// limits.TrialWebhookPending events each, due at now, every one its
// send's first (their endpoints are down).
func fullOutboxes(b *testing.B, l *DB, now time.Time) {
	ctx := context.Background()
	for i := range 4 {
		ns := fmt.Sprintf("full%d", i)
		tr := &Trial{Profile: "candidate", MailAPIToken: digest("api " + ns), BootstrapToken: digest("boot " + ns), InboxToken: digest("inbox " + ns)}
		if err := l.CreateTrial(ctx, tr, &Namespace{Name: ns, Tag: "wb-" + ns}, nil); err != nil {
			b.Fatal(err)
		}
		if err := l.SetWebhooks(ctx, tr.ID, ns, `[{"provider":"resend","url":"http://127.0.0.1:9/"}]`); err != nil {
			b.Fatal(err)
		}
		from, _ := l.WebhookCursor(ctx, ns)
		evs := make([]WebhookEvent, limits.TrialWebhookPending)
		for j := range evs {
			evs[j] = WebhookEvent{ID: fmt.Sprintf("%s-%d", ns, j), EmailID: fmt.Sprintf("m%d", j), Kind: "sent", Data: `{}`, Due: now.Add(-time.Minute)}
		}
		if err := l.AddWebhookEvents(ctx, tr.ID, ns, from, from+1, evs); err != nil {
			b.Fatal(err)
		}
	}
}

// testConcurrentTakes: two takes at once, with more events due and free
// than both ask for: each is handed what it asked for, the second what
// the first's leases left (its first choice, made beside the first's,
// goes stale and is made again).
func testConcurrentTakes(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	now := time.Now()
	for i := range 8 {
		ns := fmt.Sprintf("t%d", i)
		tr, _ := trial(t, l, ns)
		if err := l.SetWebhooks(ctx, tr.ID, ns, `[{"provider":"resend","url":"http://127.0.0.1:9/"}]`); err != nil {
			t.Fatal(err)
		}
		from, _ := l.WebhookCursor(ctx, ns)
		evs := make([]WebhookEvent, 64)
		for j := range evs {
			evs[j] = WebhookEvent{ID: fmt.Sprintf("%s-%d", ns, j), EmailID: fmt.Sprintf("m%d", j), Kind: "sent", Data: `{}`, Due: now.Add(-time.Hour)}
		}
		if err := l.AddWebhookEvents(ctx, tr.ID, ns, from, from+1, evs); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 10 {
		at := now.Add(time.Duration(round) * 2 * time.Minute) // the last round's leases have ended
		var got [2][]WebhookEvent
		var wg sync.WaitGroup
		for k := range got {
			wg.Go(func() {
				var err error
				if got[k], err = l.DueWebhookEvents(ctx, at, time.Minute, 8); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if len(got[0]) != 8 || len(got[1]) != 8 {
			t.Fatalf("round %d: two takes of 8 at once handed %d and %d, with 32 events free", round, len(got[0]), len(got[1]))
		}
	}
}

// testWebhookSharePlanes: two planes on one PostgreSQL database count
// each other's leases against a trial's share. Plane b chooses c1, the
// share's last place, and its lease waits (an outside lock on c1's row
// stands in for any delay before its commit); meanwhile a new send's
// event n, due before c1, is derived and plane a chooses it. Whichever
// leases second finds the share full.
func testWebhookSharePlanes(t *testing.T) {
	ctx := context.Background()
	dsn := target(t)
	a, b, locker := openAt(t, dsn), openAt(t, dsn), openAt(t, dsn)
	for _, l := range []*DB{a, b, locker} {
		t.Cleanup(func() { l.Close() })
	}
	tr, _ := trial(t, a, "a")
	if err := a.SetWebhooks(ctx, tr.ID, "a", `[{"provider":"resend","url":"http://127.0.0.1:9/"}]`); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cur, _ := a.WebhookCursor(ctx, "a")
	var evs []WebhookEvent
	for i, id := range []string{"L1", "L2", "L3", "c1"} {
		evs = append(evs, WebhookEvent{ID: id, EmailID: id, Kind: "sent", Data: `{}`, Due: now.Add(-time.Duration(10-i) * time.Minute)})
	}
	if err := a.AddWebhookEvents(ctx, tr.ID, "a", cur, cur+1, evs); err != nil {
		t.Fatal(err)
	}
	cur++
	if got, err := a.DueWebhookEvents(ctx, now, time.Hour, 3); err != nil || len(got) != 3 {
		t.Fatalf("the first three: %v, %v", idsOf(got), err)
	}
	lt, err := locker.write.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lt.Rollback()
	if _, err := lt.ExecContext(ctx, locker.d.text(`SELECT 1 FROM webhook_events WHERE trial_id = ? AND seq = 4 FOR UPDATE`), tr.ID); err != nil {
		t.Fatal(err)
	}
	// waiters is how many lock waits there are.
	waiters := func() int {
		var n int
		if err := a.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_locks WHERE NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	take := func(l *DB) <-chan []WebhookEvent {
		ch := make(chan []WebhookEvent, 1)
		go func() {
			got, err := l.DueWebhookEvents(ctx, now, time.Hour, 64)
			if err != nil {
				t.Error(err)
			}
			ch <- got
		}()
		return ch
	}
	bGot := take(b)
	for deadline := time.Now().Add(itest.Bound); waiters() < 1; {
		if time.Now().After(deadline) {
			t.Fatal("plane b's lease never waited on c1")
		}
		time.Sleep(time.Millisecond)
	}
	if err := a.AddWebhookEvents(ctx, tr.ID, "a", cur, cur+1, []WebhookEvent{{ID: "n", EmailID: "n", Kind: "sent", Data: `{}`, Due: now.Add(-20 * time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	aGot := take(a)
	// a's lease waits for b's, on the trial; without that lock a leases
	// n at once.
	var aIDs []string
	for deadline := time.Now().Add(itest.Bound); aIDs == nil && waiters() < 2; {
		select {
		case got := <-aGot:
			aIDs, aGot = append(idsOf(got), ""), nil
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("plane a's take neither ended nor waited")
		}
		time.Sleep(time.Millisecond)
	}
	lt.Commit()
	if aGot != nil {
		aIDs = idsOf(<-aGot)
	}
	bIDs := idsOf(<-bGot)
	var leased int
	if err := a.read.QueryRowContext(ctx, a.d.text(`SELECT COUNT(*) FROM webhook_events WHERE trial_id = ? AND state = 'pending' AND leased_until > ?`), tr.ID, now.UnixMilli()).Scan(&leased); err != nil {
		t.Fatal(err)
	}
	if leased != limits.TrialWebhookDeliveries {
		t.Errorf("plane a took %v, plane b %v: the trial holds %d leased, want its share %d", aIDs, bIDs, leased, limits.TrialWebhookDeliveries)
	}
}
