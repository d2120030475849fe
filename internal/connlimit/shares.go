package connlimit

import (
	"crypto/sha256"
	"sync"
)

// Shares bounds what each trial holds at once on a surface that serves
// many, counted by a key that names the trial (the namespace the plane
// resolved from the caller's credential, with the door where doors share
// a process; never a string the caller chose and nobody checked):
// requests or messages in flight (Take, one each), or the bytes of the
// bodies it has the process buffer (TakeN), so that one trial over its
// share is refused while the others are served. Keys are kept as their
// SHA-256, never as given.
type Shares struct {
	max int64
	mu  sync.Mutex
	n   map[[sha256.Size]byte]int64
}

// NewShares returns shares of max per key.
func NewShares(max int64) *Shares {
	return &Shares{max: max, n: make(map[[sha256.Size]byte]int64)}
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
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.n[k] -= n; s.n[k] <= 0 {
				delete(s.n, k)
			}
		})
	}, true
}
