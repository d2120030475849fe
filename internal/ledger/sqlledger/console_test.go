package sqlledger

import (
	"context"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/evidence"
	. "github.com/websitebench/mailplane/internal/ledger"
)

// testConsole: the operator's console's reads. Open trials come newest
// first, then kept trails; pages, counts and filters (namespace and
// recipient, without case; a closed trial's recipient from its trail)
// agree; a page's trail counts come whole.
func testConsole(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	for _, ns := range []string{"trial-a", "trial-b", "trial-c"} {
		trial(t, l, ns) // in one millisecond or not: the later opened comes first
	}
	if _, _, err := l.Accept(ctx, offer("trial-a", 5, "", "", 0, 0)); err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		ns string
		ev evidence.Event
	}{
		{"trial-b", evidence.Event{Door: evidence.DoorWriterHTTP, Action: "send", Outcome: evidence.Refused, Code: "unauthorized"}},
		{"trial-c", evidence.Event{Door: evidence.DoorWriterHTTP, Action: "send", Outcome: evidence.Accepted, To: []string{"carol@example.com"}}},
	} {
		if err := l.AppendEvent(ctx, e.ns, e.ev); err != nil {
			t.Fatal(err)
		}
	}
	c, err := l.Namespace(ctx, "trial-c")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.CloseTrial(ctx, c.TrialID, evidence.ActionClose, false); err != nil {
		t.Fatal(err)
	}

	names := func(f ConsoleFilter, offset, limit int) string {
		t.Helper()
		rows, err := l.ConsolePage(ctx, f, offset, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, strings.TrimPrefix(r.Namespace, "trial-")+"/"+r.State)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		f             ConsoleFilter
		offset, limit int
		want          string
		open, closed  int
	}{
		{ConsoleFilter{}, 0, 0, "b/active a/active c/closed", 2, 1},
		{ConsoleFilter{}, 1, 2, "a/active c/closed", 2, 1},
		{ConsoleFilter{}, 2, 5, "c/closed", 2, 1},
		{ConsoleFilter{}, 3, 5, "", 2, 1},
		{ConsoleFilter{Namespace: "L-B"}, 0, 0, "b/active", 1, 0},
		{ConsoleFilter{Namespace: "%"}, 0, 0, "", 0, 0},
		{ConsoleFilter{Recipient: "b@EXAMPLE.com"}, 0, 0, "a/active", 1, 0},
		{ConsoleFilter{Recipient: "Carol@example.com"}, 0, 0, "c/closed", 0, 1},
	} {
		if got := names(c.f, c.offset, c.limit); got != c.want {
			t.Errorf("page %+v from %d, %d: %q, want %q", c.f, c.offset, c.limit, got, c.want)
		}
		if open, closed, err := l.ConsoleCount(ctx, c.f); err != nil || open != c.open || closed != c.closed {
			t.Errorf("count %+v: %d open, %d closed, %v", c.f, open, closed, err)
		}
	}

	stats, err := l.ConsoleTrails(ctx, []string{"trial-a", "trial-b", "trial-c", "trial-none"})
	if err != nil {
		t.Fatal(err)
	}
	if s := stats["trial-b"]; s.Events != 2 || s.Refused != 1 || !strings.Contains(s.First, `"action":"open"`) || !strings.Contains(s.Last, `"refused"`) {
		t.Errorf("b's trail: %+v", s)
	}
	if s := stats["trial-c"]; s.Refused != 0 || !strings.Contains(s.Last, `"action":"close"`) {
		t.Errorf("c's trail: %+v", s)
	}
	if _, ok := stats["trial-none"]; ok {
		t.Error("a namespace with no trail has counts")
	}
	if at, kept, err := l.ClosedAt(ctx, "trial-c"); err != nil || !kept || at.IsZero() {
		t.Errorf("c closed at %v %v %v", at, kept, err)
	}
	if _, kept, err := l.ClosedAt(ctx, "trial-a"); err != nil || kept {
		t.Errorf("a, open, is a kept trail: %v %v", kept, err)
	}
	if n, err := l.OpenTrials(ctx); err != nil || n != 2 {
		t.Errorf("open trials: %d %v", n, err)
	}
}
