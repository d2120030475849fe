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
	r2, ok2 := s.Wait("a", itest.Bound, nil)
	if !ok1 || !ok2 {
		t.Fatal("a key under its share was refused")
	}
	if _, ok := s.Wait("a", 50*time.Millisecond, nil); ok {
		t.Fatal("Wait at the share took one with no release")
	}
	if rb, ok := s.Take("b"); !ok {
		t.Fatal("another key refused while the first is at its share")
	} else {
		rb()
	}
	got := make(chan func())
	go func() {
		r, ok := s.Wait("a", itest.Bound, nil)
		if !ok {
			r = nil
		}
		got <- r
	}()
	itest.Eventually(t, "the waiter queued", itest.Bound, func() bool { return waiters(s, "a") == 1 })
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
	queued := func() int { return waiters(s, "a") }
	got := make(chan func(), 3)
	for range 3 {
		go func() {
			if r, ok := s.Wait("a", itest.Bound, nil); ok {
				got <- r
			}
		}()
	}
	itest.Eventually(t, "3 waiters queued", itest.Bound, func() bool { return queued() == 3 })
	handed := func() func() {
		select {
		case r := <-got:
			return r
		case <-time.After(itest.Bound):
			t.Fatal("a queued waiter was not handed a released share")
			return nil
		}
	}
	release()
	next := handed()
	if n := queued(); n != 2 {
		t.Fatalf("after one release %d waiters queued, want 2", n)
	}
	next()
	handed()()
	handed()()
	if n := queued(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
}

// TestSharesWaitStops: a waiter ends, refused and counting nothing, when
// its stop closes (its server shutting down), well before its bound.
func TestSharesWaitStops(t *testing.T) {
	s := NewShares(1)
	release, _ := s.Take("a")
	defer release()
	stop := make(chan struct{})
	ended := make(chan bool)
	go func() {
		_, ok := s.Wait("a", time.Hour, stop)
		ended <- ok
	}()
	itest.Eventually(t, "the waiter queued", itest.Bound, func() bool { return waiters(s, "a") == 1 })
	close(stop)
	select {
	case ok := <-ended:
		if ok {
			t.Fatal("a stopped waiter took the share")
		}
	case <-time.After(itest.Bound):
		t.Fatal("a waiter went on waiting after its stop closed")
	}
	if n := waiters(s, "a"); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
}

// waiters is how many wait for key's share.
func waiters(s *Shares, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.waiting[sha256.Sum256([]byte(key))]; q != nil {
		return q.Len()
	}
	return 0
}
