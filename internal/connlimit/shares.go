package connlimit

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"
)

// Shares bounds what each trial holds at once on a surface that serves
// many, counted by a key that names the trial (the namespace the plane
// resolved from the caller's credential, with the door where doors share
// a process; never a string the caller chose and nobody checked):
// requests or messages in flight (Take, one each), or the bytes of the
// bodies it has the process buffer (TakeN), so that one trial over its
// share is refused while the others are served. Keys are kept as their
// SHA-256, never as given. Wait queues for a share instead of being
// refused.
type Shares struct {
	max int64
	mu  sync.Mutex
	n   map[[sha256.Size]byte]int64
	// waiting are a key's waiters (Wait), oldest first, each a channel a
	// release closes when it hands that waiter the share it freed: one
	// release wakes one waiter, however many there are.
	waiting map[[sha256.Size]byte]*list.List
}

// NewShares returns shares of max per key.
func NewShares(max int64) *Shares {
	return &Shares{max: max, n: make(map[[sha256.Size]byte]int64), waiting: make(map[[sha256.Size]byte]*list.List)}
}

// Wait is Take, waiting up to d, while key has its share, for one of its
// holders to release; false, and nothing counted, when d passes or stop
// closes first (its server shutting down). Waiters are served oldest
// first, each handed the share a release frees. A waiter holds nothing of
// the share: only what its caller already holds. A share free at once
// costs no more than Take.
func (s *Shares) Wait(key string, d time.Duration, stop <-chan struct{}) (release func(), ok bool) {
	k := sha256.Sum256([]byte(key))
	s.mu.Lock()
	if s.n[k]+1 <= s.max && s.waiting[k] == nil {
		s.n[k]++
		s.mu.Unlock()
		return s.releaser(k, 1), true
	}
	q := s.waiting[k]
	if q == nil {
		q = list.New()
		s.waiting[k] = q
	}
	handed := make(chan struct{})
	e := q.PushBack(handed)
	s.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-handed:
		return s.releaser(k, 1), true
	case <-t.C:
	case <-stop:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-handed: // handed the share as the wait ended: it is counted
		return s.releaser(k, 1), true
	default:
	}
	q.Remove(e)
	if q.Len() == 0 {
		delete(s.waiting, k)
	}
	return nil, false
}

// Take counts one more in flight for key and returns its release, or
// false (and counts nothing) when key already has its share.
func (s *Shares) Take(key string) (release func(), ok bool) {
	return s.TakeN(key, 1)
}

// TakeN counts n more for key and returns its release, or false (and
// counts nothing) when that would pass key's share: n more than the
// share itself is always refused.
func (s *Shares) TakeN(key string, n int64) (release func(), ok bool) {
	k := sha256.Sum256([]byte(key))
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 0 || s.n[k]+n > s.max {
		return nil, false
	}
	s.n[k] += n
	return s.releaser(k, n), true
}

// releaser is the release of n counted for k: once, however often it is
// called. It hands what it frees to k's oldest waiters, one share each.
func (s *Shares) releaser(k [sha256.Size]byte, n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.n[k] -= n
			if q := s.waiting[k]; q != nil {
				for q.Len() > 0 && s.n[k]+1 <= s.max {
					s.n[k]++
					close(q.Remove(q.Front()).(chan struct{}))
				}
				if q.Len() == 0 {
					delete(s.waiting, k)
				}
			}
			if s.n[k] <= 0 {
				delete(s.n, k)
			}
		})
	}
}
