package connlimit

import (
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
	// freed, for a key at its share that Wait waits on, is closed by the
	// key's next release.
	freed map[[sha256.Size]byte]chan struct{}
}

// NewShares returns shares of max per key.
func NewShares(max int64) *Shares {
	return &Shares{max: max, n: make(map[[sha256.Size]byte]int64), freed: make(map[[sha256.Size]byte]chan struct{})}
}

// Wait is Take, waiting up to d, while key has its share, for one of its
// holders to release (then false, and nothing counted). A waiter holds
// nothing of the share: only what its caller already holds. A share free
// at once costs no more than Take.
func (s *Shares) Wait(key string, d time.Duration) (release func(), ok bool) {
	k := sha256.Sum256([]byte(key))
	var expired <-chan time.Time
	for {
		s.mu.Lock()
		if s.n[k]+1 <= s.max {
			s.n[k]++
			s.mu.Unlock()
			return s.releaser(k, 1), true
		}
		// The key has holders, so a release comes that closes freed (and
		// forgets it), whether or not this waiter is still waiting then.
		freed := s.freed[k]
		if freed == nil {
			freed = make(chan struct{})
			s.freed[k] = freed
		}
		s.mu.Unlock()
		if expired == nil {
			t := time.NewTimer(d)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-freed:
		case <-expired:
			return nil, false
		}
	}
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
// called. It wakes k's waiters.
func (s *Shares) releaser(k [sha256.Size]byte, n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.n[k] -= n; s.n[k] <= 0 {
				delete(s.n, k)
			}
			if freed := s.freed[k]; freed != nil {
				close(freed)
				delete(s.freed, k)
			}
		})
	}
}
