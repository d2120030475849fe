package console

import (
	"crypto/sha256"
	"testing"
	"time"
)

// Sessions are bounded: the 257th sign-in pushes out the oldest, and the
// others stay. A session past its 12 hours opens nothing, and is
// forgotten.
func TestSessionsBounded(t *testing.T) {
	s := newSessions()
	caps := make([]string, maxSessions+1)
	for i := range caps {
		caps[i] = s.open("grant")
		s.m[sha256.Sum256([]byte(caps[i]))].expires = time.Now().Add(sessionTTL + time.Duration(i)*time.Second)
	}
	if len(s.m) != maxSessions {
		t.Fatalf("%d sessions held, want at most %d", len(s.m), maxSessions)
	}
	if _, ok := s.lookup(sha256.Sum256([]byte(caps[0]))); ok {
		t.Fatal("the oldest session outlived the bound")
	}
	for _, c := range caps[1:] {
		if _, ok := s.lookup(sha256.Sum256([]byte(c))); !ok {
			t.Fatal("a newer session was pushed out")
		}
	}
	key := sha256.Sum256([]byte(caps[1]))
	s.m[key].expires = time.Now().Add(-time.Second)
	if _, ok := s.lookup(key); ok {
		t.Fatal("an expired session opens")
	}
	if _, held := s.m[key]; held {
		t.Fatal("an expired session is still held")
	}
}
