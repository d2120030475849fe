package sqlledger

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/websitebench/mailplane/internal/evidence"
	. "github.com/websitebench/mailplane/internal/ledger"
)

func trailOf(t *testing.T, l *DB, ns string) []evidence.Event {
	t.Helper()
	lines, err := l.Events(context.Background(), ns, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evidence.Verify(strings.NewReader(strings.Join(lines, "\n") + "\n")); len(lines) > 0 && err != nil {
		t.Fatalf("the trail does not verify: %v", err)
	}
	var out []evidence.Event
	for _, line := range lines {
		var e evidence.Event
		json.Unmarshal([]byte(line), &e)
		out = append(out, e)
	}
	return out
}

func actions(es []evidence.Event) string {
	var b bytes.Buffer
	for _, e := range es {
		b.WriteString(e.Action + "/" + e.Outcome + " ")
	}
	return strings.TrimSpace(b.String())
}

// testTrailWithTheSend: an accepted send's event is written with it, a
// refused one writes none, and the lifecycle is in the trail.
func testTrailWithTheSend(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	tr, _ := trial(t, l, "a")
	accepted := func(o *Offer) *Offer {
		o.Event = &evidence.Event{Door: evidence.DoorWriterSMTP, Action: "send", Outcome: evidence.Accepted}
		return o
	}
	if _, _, err := l.Accept(ctx, accepted(offer("a", 10, "", "", 1, 0))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Accept(ctx, accepted(offer("a", 10, "", "", 1, 0))); err != ErrCapacity {
		t.Fatalf("over quota: %v", err)
	}
	if err := l.AppendEvent(ctx, "a", evidence.Event{Door: evidence.DoorWriterSMTP, Action: "send", Outcome: evidence.Refused, Code: "mailbox_capacity"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Seal(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.CloseTrial(ctx, tr.ID, evidence.ActionClose, false); err != nil {
		t.Fatal(err)
	}
	es := trailOf(t, l, "a")
	if got := actions(es); got != "open/accepted send/accepted send/refused seal/accepted close/accepted" {
		t.Fatalf("trail: %s", got)
	}
	if es[1].MessageIDs[0] != 1 || es[1].Size != 10 || es[1].EmailID != "u" {
		t.Fatalf("the accepted event: %+v", es[1])
	}
	// Closed: kept, ends there, and goes with the retention period.
	if exists, closed, err := l.TrailOf(ctx, "a"); !exists || !closed || err != nil {
		t.Fatalf("TrailOf: %v %v %v", exists, closed, err)
	}
	l.AppendEvent(ctx, "a", evidence.Event{Door: evidence.DoorGateway, Action: "list", Outcome: evidence.Accepted})
	if len(trailOf(t, l, "a")) != 5 {
		t.Fatal("an event after the close")
	}
	if n, err := l.DeleteTrails(ctx, time.Now().Add(-time.Hour), 10); n != 0 || err != nil {
		t.Fatalf("deleted a trail within retention: %d %v", n, err)
	}
	if n, err := l.DeleteTrails(ctx, time.Now().Add(time.Second), 10); n != 1 || err != nil {
		t.Fatalf("retention over: %d %v", n, err)
	}
	if exists, _, _ := l.TrailOf(ctx, "a"); exists || len(trailOf(t, l, "a")) != 0 {
		t.Fatal("the trail outlived its retention")
	}
}

// testTrailBudget: past the budget, events are counted and written as one
// summary before the next essential event.
func testTrailBudget(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	l.SetEventBudget(4)
	trial(t, l, "a")
	for range 10 {
		if err := l.AppendEvent(ctx, "a", evidence.Event{Door: evidence.DoorGateway, Action: "list", Outcome: evidence.Refused, Code: "forbidden"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := actions(trailOf(t, l, "a")); got != "open/accepted list/refused list/refused budget/refused" {
		t.Fatalf("trail: %s", got)
	}
	if err := l.FlushTrail(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	es := trailOf(t, l, "a")
	if s := es[len(es)-1]; s.Action != evidence.ActionSummary || s.Counts["list/refused"] != 8 || s.Count != 8 {
		t.Fatalf("summary: %+v", s)
	}
	o := offer("a", 1, "", "", 0, 0)
	o.Event = &evidence.Event{Door: evidence.DoorWriterHTTP, Action: "send", Outcome: evidence.Accepted}
	if _, _, err := l.Accept(ctx, o); err != nil {
		t.Fatal(err)
	}
	if got := actions(trailOf(t, l, "a")); !strings.HasSuffix(got, "summary/refused send/accepted") {
		t.Fatalf("trail: %s", got)
	}
}

// testAgentBudget: refusals that fill the budget push none of the agent's
// opens and clicks out; these have a budget of their own, as large, past
// which they too are only counted.
func testAgentBudget(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	l.SetEventBudget(4)
	trial(t, l, "a")
	appendAll := func(e evidence.Event, n int) {
		t.Helper()
		for range n {
			if err := l.AppendEvent(ctx, "a", e); err != nil {
				t.Fatal(err)
			}
		}
	}
	link := 0
	appendAll(evidence.Event{Door: evidence.DoorInbox, Action: evidence.ActionClick, Outcome: evidence.Refused, Code: "not_found"}, 10)
	appendAll(evidence.Event{Door: evidence.DoorInbox, Action: evidence.ActionOpen, Outcome: evidence.Accepted, MessageIDs: []int64{1}}, 1)
	appendAll(evidence.Event{Door: evidence.DoorInboxMCP, Action: evidence.ActionOpen, Outcome: evidence.Accepted, MessageIDs: []int64{1}}, 1)
	appendAll(evidence.Event{Door: evidence.DoorInbox, Action: evidence.ActionClick, Outcome: evidence.Accepted, MessageIDs: []int64{1}, Link: &link}, 1)
	want := "open/accepted click/refused click/refused budget/refused open/accepted open/accepted click/accepted"
	if got := actions(trailOf(t, l, "a")); got != want {
		t.Fatalf("trail: %s\nwant:  %s", got, want)
	}
	// The agent's own budget (4 more) fills too: its last slot says so.
	appendAll(evidence.Event{Door: evidence.DoorInbox, Action: evidence.ActionOpen, Outcome: evidence.Accepted, MessageIDs: []int64{1}}, 5)
	es := trailOf(t, l, "a")
	if len(es) != 8 || es[7].Action != evidence.ActionBudget {
		t.Fatalf("past the agent's budget: %s", actions(es))
	}
	// Past both budgets, the first open of another message is still an
	// event with its id: opening a decoy again and again hides nothing.
	appendAll(evidence.Event{Door: evidence.DoorInbox, Action: evidence.ActionOpen, Outcome: evidence.Accepted, MessageIDs: []int64{2}}, 1)
	es = trailOf(t, l, "a")
	if last := es[len(es)-1]; last.Action != evidence.ActionOpen || len(last.MessageIDs) != 1 || last.MessageIDs[0] != 2 {
		t.Fatalf("a first open past the budgets: %s", actions(es))
	}
}

// TestUnsyncedEvents: the evaluator's events (door gateway) commit without
// their fsync, batched, each visible once AppendEvent returns and in the
// trail's chain with the durable ones; a send after them flushes the log
// once, for them and itself.
func TestUnsyncedEvents(t *testing.T) {
	ctx := context.Background()
	l := openSQLite(t, t.TempDir())
	trial(t, l, "a")
	var syncs atomic.Int32
	l.wal.setFdatasync(func(fd int) error {
		syncs.Add(1)
		return unix.Fdatasync(fd)
	})
	read := evidence.Event{Door: evidence.DoorGateway, Action: "list", Outcome: evidence.Accepted}
	if !unsynced(&read) || unsynced(&evidence.Event{Door: evidence.DoorInbox, Action: "list", Outcome: evidence.Accepted}) {
		t.Fatal("unsynced: only the gateway's events")
	}
	if err := l.AppendEvent(ctx, "a", read); err != nil {
		t.Fatal(err)
	}
	if got := actions(trailOf(t, l, "a")); got != "open/accepted list/accepted" {
		t.Fatalf("trail right after the append: %s", got)
	}
	const readers = 16
	errs := make(chan error, readers)
	for range readers {
		go func() { errs <- l.AppendEvent(ctx, "a", read) }()
	}
	for range readers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	o := offer("a", 1, "", "", 0, 0)
	o.Event = &evidence.Event{Door: evidence.DoorWriterHTTP, Action: "send", Outcome: evidence.Accepted}
	if _, _, err := l.Accept(ctx, o); err != nil {
		t.Fatal(err)
	}
	es := trailOf(t, l, "a") // verifies the chain
	if len(es) != readers+3 || es[len(es)-1].Action != "send" {
		t.Fatalf("trail: %s", actions(es))
	}
	if got := syncs.Load(); got != 1 {
		t.Fatalf("%d flushes of the log for %d unsynced events and a send, want the send's alone", got, readers+1)
	}
}
