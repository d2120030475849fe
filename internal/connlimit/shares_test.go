package connlimit

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
)

// TestSharesWait: Wait takes a share where Take would; at the share it
// waits, counting nothing, until a holder releases (then it holds the
// freed share) or its bound passes (then false); another key is served
// meanwhile, and nothing of a key is kept once its holders are gone.
func TestSharesWait(t *testing.T) {
	s := NewShares(2)
	r1, ok1 := s.Take("a")
	r2, ok2 := s.Wait("a", itest.Bound)
	if !ok1 || !ok2 {
		t.Fatal("a key under its share was refused")
	}
	if _, ok := s.Wait("a", 50*time.Millisecond); ok {
		t.Fatal("Wait at the share took one with no release")
	}
	if rb, ok := s.Take("b"); !ok {
		t.Fatal("another key refused while the first is at its share")
	} else {
		rb()
	}
	got := make(chan func())
	go func() {
		r, ok := s.Wait("a", itest.Bound)
		if !ok {
			r = nil
		}
		got <- r
	}()
	r1()
	r1() // a release counts once
	var r3 func()
	select {
	case r3 = <-got:
	case <-time.After(itest.Bound):
		t.Fatal("a waiter was not given the share a holder released")
	}
	if r3 == nil {
		t.Fatal("the waiter was refused")
	}
	if _, ok := s.Take("a"); ok {
		t.Fatal("the freed share was counted twice")
	}
	r2()
	r3()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.n) != 0 || len(s.waiting) != 0 {
		t.Fatalf("kept after every release: %d counts, %d waits", len(s.n), len(s.waiting))
	}
}

// TestSharesWaitHandsOne: a release hands its share to the oldest waiter
// alone; the others stay queued, not woken to find the share gone (a
// trial's thousands of waiting sessions would otherwise all wake on each
// of its sends).
func TestSharesWaitHandsOne(t *testing.T) {
	s := NewShares(1)
	release, _ := s.Take("a")
	k := sha256.Sum256([]byte("a"))
	queued := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		if q := s.waiting[k]; q != nil {
			return q.Len()
		}
		return 0
	}
	got := make(chan func(), 3)
	for range 3 {
		go func() {
			if r, ok := s.Wait("a", itest.Bound); ok {
				got <- r
			}
		}()
	}
	itest.Eventually(t, "3 waiters queued", itest.Bound, func() bool { return queued() == 3 })
	release()
	next := <-got
	if n := queued(); n != 2 {
		t.Fatalf("after one release %d waiters queued, want 2", n)
	}
	next()
	(<-got)()
	(<-got)()
	if n := queued(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
}
