package connlimit

import (
	"testing"
	"time"
)

// TestCallers: an accepted credential is remembered for CallerTTL from
// when it was last presented, under its own key only, and forgotten after.
func TestCallers(t *testing.T) {
	var c Callers
	now := time.Unix(1_000_000, 0)
	if _, ok := c.Get("token-a", now); ok {
		t.Fatal("an empty memory knows a credential")
	}
	c.Put("token-a", "ns-a", now)
	for _, at := range []time.Duration{CallerTTL - time.Millisecond, 2*CallerTTL - 2*time.Millisecond} {
		// Each presentation within CallerTTL of the last keeps it.
		if ns, ok := c.Get("token-a", now.Add(at)); !ok || ns != "ns-a" {
			t.Fatalf("at %v: %q %v, want ns-a", at, ns, ok)
		}
	}
	if _, ok := c.Get("token-b", now); ok {
		t.Fatal("another credential is known")
	}
	if _, ok := c.Get("token-a", now.Add(3*CallerTTL)); ok {
		t.Fatal("a credential not presented for longer than CallerTTL is still known")
	}
	for i := range callerCacheMax + 1 {
		c.Put(string(rune(i)), "ns", now)
	}
	if len(c.m) > callerCacheMax {
		t.Fatalf("%d credentials remembered, bound %d", len(c.m), callerCacheMax)
	}
}
