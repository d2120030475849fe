package connlimit

import (
	"errors"
	"testing"
	"time"
)

// TestCallers: an accepted credential is remembered for CallerTTL from
// when the plane accepted it, under its own key only, and forgotten
// after, however often it was presented in between (a closed trial's
// busy client must not keep its credential known).
func TestCallers(t *testing.T) {
	var c Callers
	now := time.Unix(1_000_000, 0)
	if _, ok := c.Get("token-a", now); ok {
		t.Fatal("an empty memory knows a credential")
	}
	c.Put("token-a", "ns-a", now)
	for _, at := range []time.Duration{0, CallerTTL / 2, CallerTTL - time.Millisecond} {
		if ns, ok := c.Get("token-a", now.Add(at)); !ok || ns != "ns-a" {
			t.Fatalf("at %v: %q %v, want ns-a", at, ns, ok)
		}
	}
	if _, ok := c.Get("token-a", now.Add(CallerTTL+time.Millisecond)); ok {
		t.Fatal("a credential presented all along is still known CallerTTL after the plane accepted it")
	}
	c.Put("token-a", "ns-a", now)
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

// TestCallersResolve: the plane is asked once for a credential it
// accepts, and every time for one it refuses, whose refusal is returned.
func TestCallersResolve(t *testing.T) {
	var c Callers
	now := time.Unix(1_000_000, 0)
	asked := 0
	accept := func() (string, error) { asked++; return "ns-a", nil }
	refuse := func() (string, error) { asked++; return "", errors.New("unauthorized") }
	for range 3 {
		if ns, err := c.Resolve("good", now, accept); ns != "ns-a" || err != nil {
			t.Fatalf("good: %q %v", ns, err)
		}
	}
	if asked != 1 {
		t.Fatalf("an accepted credential asked the plane %d times, want 1", asked)
	}
	for range 3 {
		if ns, err := c.Resolve("bad", now, refuse); ns != "" || err == nil {
			t.Fatalf("bad: %q %v, want the refusal", ns, err)
		}
	}
	if asked != 4 {
		t.Fatalf("a refused credential asked the plane %d times in 3 tries, want 3", asked-1)
	}
}
