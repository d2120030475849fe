package sqlledger

import (
	"context"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/faults"
	. "github.com/websitebench/mailplane/internal/ledger"
)

// testFaults: each rule of a schedule does what it says in the send's own
// transaction, on the send it names; a delayed message is indexed only
// when its time comes, even across a restart, with the namespace's next
// id; the trail holds one event per injected fault; and another trial's
// sends are untouched.
func testFaults(t *testing.T) {
	ctx := context.Background()
	where := target(t)
	l := openAt(t, where)
	defer func() { l.Close() }()
	s, err := faults.Parse([]byte(`[
		{"door": "http", "sends": [1], "do": "refuse", "status": 429, "retry_after": 2},
		{"door": "http", "sends": [2], "do": "drop"},
		{"door": "http", "sends": [3], "do": "duplicate", "copies": 3},
		{"door": "smtp", "sends": [1], "do": "delay", "seconds": 1}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	a := &Trial{Profile: "candidate", MailAPIToken: digest("api a"), BootstrapToken: digest("boot a"), InboxToken: digest("inbox a"), Faults: s.JSON()}
	if err := l.CreateTrial(ctx, a, &Namespace{Name: "a", Tag: "wb-a"}, nil); err != nil {
		t.Fatal(err)
	}
	trial(t, l, "b")
	send := func(ns string, door faults.Door, key string) Entry {
		t.Helper()
		o := offer(ns, 10, key, "fp", 0, 0)
		o.UUID = "id-" + ns + "-" + string(door) + key + time.Now().Format("150405.000000000")
		o.Event = &evidence.Event{Door: "writer-" + string(door), Action: "send", Outcome: evidence.Accepted}
		if ns == "a" {
			o.Faults = &FaultCheck{Trial: a.ID, Door: door}
		}
		e, _, err := l.Accept(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if e := send("a", faults.HTTP, ""); e.Injected == nil || e.Injected.Rule.Do != faults.Refuse || e.UUID != "" {
		t.Fatalf("send 1: %+v", e)
	}
	if e := send("a", faults.HTTP, ""); e.Injected == nil || e.Injected.Rule.Do != faults.Drop || e.UUID == "" {
		t.Fatalf("send 2: %+v", e)
	}
	if e := send("a", faults.HTTP, ""); e.Injected == nil || e.Injected.Copies != 3 || e.Seq != 1 || e.Fault != faults.Duplicate {
		t.Fatalf("send 3: %+v", e)
	}
	if e := send("a", faults.HTTP, ""); e.Injected != nil || e.Seq != 4 {
		t.Fatalf("send 4 matches no rule: %+v", e)
	}
	if e := send("b", faults.HTTP, ""); e.Injected != nil || e.Seq != 1 {
		t.Fatalf("trial b: %+v", e)
	}
	delayed := send("a", faults.SMTP, "k")
	if delayed.Injected == nil || delayed.Injected.VisibleAt.IsZero() || delayed.UUID == "" {
		t.Fatalf("smtp send 1: %+v", delayed)
	}
	entries := func() []Entry {
		es, err := l.Entries(ctx, "a", 0)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	es := entries()
	if len(es) != 4 || es[0].UUID == es[1].UUID || es[1].UUID == es[2].UUID || es[2].Fault != faults.Duplicate || es[3].Fault != "" {
		t.Fatalf("entries before the delay: %+v", es)
	}
	// A repeat of the delayed send's key answers its id while it waits.
	o := offer("a", 10, "k", "fp", 0, 0)
	if e, replayed, err := l.Accept(ctx, o); err != nil || !replayed || e.UUID != delayed.UUID {
		t.Fatalf("replay while delayed: %+v %v %v", e, replayed, err)
	}
	if shown, err := l.DeliverDue(ctx, time.Now()); err != nil || len(shown) != 0 {
		t.Fatalf("delivered early: %v %v", shown, err)
	}
	// Restart: the delay is durable.
	l.Close()
	l = openAt(t, where)
	next, err := l.NextDelayed(ctx)
	if err != nil || !next.Equal(delayed.Injected.VisibleAt.Truncate(time.Millisecond)) {
		t.Fatalf("next delayed %v, want %v (%v)", next, delayed.Injected.VisibleAt, err)
	}
	if shown, err := l.DeliverDue(ctx, next); err != nil || len(shown) != 1 || shown[0] != "a" {
		t.Fatalf("deliver: %v %v", shown, err)
	}
	es = entries()
	if len(es) != 5 || es[4].Seq != 5 || es[4].UUID != delayed.UUID || es[4].Fault != faults.Delay {
		t.Fatalf("entries after the delay: %+v", es)
	}
	if e, replayed, err := l.Accept(ctx, offer("a", 10, "k", "fp", 0, 0)); err != nil || !replayed || e.Seq != 5 {
		t.Fatalf("replay once shown: %+v %v %v", e, replayed, err)
	}
	if next, err := l.NextDelayed(ctx); err != nil || !next.IsZero() {
		t.Fatalf("still delayed: %v %v", next, err)
	}
	var injected []string
	for _, e := range trailOf(t, l, "a") {
		if e.Fault != nil {
			injected = append(injected, e.Fault.Do)
		}
	}
	if len(injected) != 4 {
		t.Fatalf("fault events %v, want one per injected fault", injected)
	}
	if n, err := l.FaultsInjected(ctx, a.ID); err != nil || n != 4 {
		t.Fatalf("injected %d %v", n, err)
	}
	for _, e := range trailOf(t, l, "b") {
		if e.Fault != nil {
			t.Fatalf("trial b's trail has a fault: %+v", e)
		}
	}
	// A new schedule counts from the next send; an empty one clears.
	again, _ := faults.Parse([]byte(`[{"door": "http", "sends": [1], "do": "drop"}]`))
	if err := l.SetFaults(ctx, a.ID, "a", again.JSON()); err != nil {
		t.Fatal(err)
	}
	if e := send("a", faults.HTTP, ""); e.Injected == nil || e.Injected.Rule.Do != faults.Drop {
		t.Fatalf("the new schedule's send 1: %+v", e)
	}
	if err := l.SetFaults(ctx, a.ID, "a", ""); err != nil {
		t.Fatal(err)
	}
	if tr, err := l.Trial(ctx, a.ID); err != nil || tr.Faults != "" {
		t.Fatalf("cleared: %+v %v", tr, err)
	}
	if e := send("a", faults.HTTP, ""); e.Injected != nil {
		t.Fatalf("a cleared schedule injected: %+v", e)
	}
	if _, _, err := l.CloseTrial(ctx, a.ID, "close", false); err != nil {
		t.Fatal(err)
	}
	if err := l.SetFaults(ctx, a.ID, "a", ""); err != ErrNotFound {
		t.Fatalf("a closed trial's schedule: %v", err)
	}
}

// testFaultsPlanes: on one PostgreSQL database, sends through two planes
// are counted on one trial's counters, and a message one plane delayed is
// shown by whichever plane looks first, once: the other finds nothing.
func testFaultsPlanes(t *testing.T) {
	ctx := context.Background()
	dsn := target(t)
	a, b := openAt(t, dsn), openAt(t, dsn)
	defer a.Close()
	defer b.Close()
	s, _ := faults.Parse([]byte(`[{"sends": [2], "do": "delay", "seconds": 1}]`))
	tr := &Trial{Profile: "candidate", MailAPIToken: digest("api p"), BootstrapToken: digest("boot p"), InboxToken: digest("inbox p"), Faults: s.JSON()}
	if err := a.CreateTrial(ctx, tr, &Namespace{Name: "p", Tag: "wb-p"}, nil); err != nil {
		t.Fatal(err)
	}
	var delayed Entry
	for i, l := range []*DB{a, b} {
		o := offer("p", 10, "", "", 0, 0)
		o.UUID = "id-" + string(rune('a'+i))
		o.Event = &evidence.Event{Door: evidence.DoorWriterHTTP, Action: "send", Outcome: evidence.Accepted}
		o.Faults = &FaultCheck{Trial: tr.ID, Door: faults.HTTP}
		e, _, err := l.Accept(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			delayed = e
		}
	}
	if delayed.Injected == nil || delayed.Injected.Rule.Do != faults.Delay {
		t.Fatalf("the second send, through the other plane: %+v", delayed)
	}
	at := delayed.Injected.VisibleAt.Add(time.Millisecond)
	shownA, errA := a.DeliverDue(ctx, at)
	shownB, errB := b.DeliverDue(ctx, at)
	if errA != nil || errB != nil || len(shownA)+len(shownB) != 1 {
		t.Fatalf("shown by a %v (%v), by b %v (%v): want once", shownA, errA, shownB, errB)
	}
	es, err := b.Entries(ctx, "p", 0)
	if err != nil || len(es) != 2 || es[1].UUID != "id-b" || es[1].Seq != 2 || es[1].Fault != faults.Delay {
		t.Fatalf("entries: %+v %v", es, err)
	}
}
