package connlimit

import (
	"crypto/sha256"
	"sync"
)

// Shares bounds what each trial has in flight on a surface that serves
// many: requests (or messages) counted by a key that names the trial (the
// namespace the plane resolved from the caller's credential, with the
// door where doors share a process; never a string the caller chose and
// nobody checked), so that one trial over its share is refused while the
// others are served. Keys are kept as their SHA-256, never as given.
type Shares struct {
	max int
	mu  sync.Mutex
	n   map[[sha256.Size]byte]int
}

// NewShares returns shares of max in flight per key.
func NewShares(max int) *Shares {
	return &Shares{max: max, n: make(map[[sha256.Size]byte]int)}
}

// Take counts one more in flight for key and returns its release, or
// false (and counts nothing) when key already has its share.
func (s *Shares) Take(key string) (release func(), ok bool) {
	k := sha256.Sum256([]byte(key))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[k] >= s.max {
		return nil, false
	}
	s.n[k]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.n[k]--; s.n[k] <= 0 {
				delete(s.n, k)
			}
		})
	}, true
}
