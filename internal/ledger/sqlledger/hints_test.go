package sqlledger

import (
	"context"
	"errors"
	"testing"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// TestPrecheckHints: Precheck answers as the database would, from the
// hints the committer leaves, and a hint never outlives a change of
// policy: a seal, and a close after which a namespace of the same name
// starts empty.
func TestPrecheckHints(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	tr, _ := trial(t, l, "a")
	for range 2 {
		if _, _, err := l.Accept(ctx, offer("a", 10, "", "", 2, 100)); err != nil {
			t.Fatal(err)
		}
	}
	h, ok := l.hints.get(l.PolicyGen(), "a")
	if !ok || !h.active || h.count != 2 || h.bytes != 20 {
		t.Fatalf("hint after two accepted: %+v, %v", h, ok)
	}
	if _, _, err := l.Precheck(ctx, offer("a", 10, "", "", 2, 100)); !errors.Is(err, ErrCapacity) {
		t.Fatalf("precheck at the message quota: %v", err)
	}
	if _, _, err := l.Precheck(ctx, offer("a", 81, "", "", 3, 100)); !errors.Is(err, ErrCapacity) {
		t.Fatalf("precheck over the byte quota: %v", err)
	}
	if _, _, err := l.Precheck(ctx, offer("a", 80, "", "", 3, 100)); err != nil {
		t.Fatalf("precheck with room: %v", err)
	}
	// A refusal is recorded too, and a failed commit records nothing.
	if _, _, err := l.Accept(ctx, offer("a", 10, "", "", 2, 100)); !errors.Is(err, ErrCapacity) {
		t.Fatalf("accept at the quota: %v", err)
	}
	failing := offer("a", 10, "", "", 0, 0)
	failing.Ref = "" // and no body: the write fails, as a store that is down
	if _, _, err := l.Accept(ctx, failing); err == nil {
		t.Fatal("a failing put was accepted")
	}
	if h, _ := l.hints.get(l.PolicyGen(), "a"); h.count != 2 {
		t.Fatalf("hint after a failed put: %+v", h)
	}

	if err := l.Seal(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.hints.get(l.PolicyGen(), "a"); ok {
		t.Fatal("a hint outlived a seal")
	}
	if _, _, err := l.Precheck(ctx, offer("a", 10, "", "", 0, 0)); !errors.Is(err, ErrNotActive) {
		t.Fatalf("precheck after the seal: %v", err)
	}
	if h, ok := l.hints.get(l.PolicyGen(), "a"); !ok || h.active {
		t.Fatalf("hint after the seal: %+v, %v", h, ok)
	}

	if _, _, err := l.CloseTrial(ctx, tr.ID, "close", false); err != nil {
		t.Fatal(err)
	}
	trial(t, l, "a")
	if _, _, err := l.Precheck(ctx, offer("a", 10, "", "", 2, 100)); err != nil {
		t.Fatalf("precheck into a new namespace of the same name: %v", err)
	}
}
