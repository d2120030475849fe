package smtpd

import (
	"net"
	"slices"
	"testing"
)

func TestFinalReplies(t *testing.T) {
	for in, want := range map[string]int{
		"250 2.0.0 OK\r\n": 1,
		"250-Hello x\r\n":  0,
		"250-Hello x\r\n250-PIPELINING\r\n250 SIZE 1\r\n": 1,
		"220 websitebench.local ESMTP\r\n":                0,
		"354 Go ahead\r\n":                                0,
		"550 5.7.1 no\r\n452 4.5.3 too many\r\n":          2,
		"":                                                0,
		"25":                                              0,
		"abc def\r\n":                                     0,
	} {
		if got := finalReplies([]byte(in)); got != want {
			t.Errorf("%q: %d, want %d", in, got, want)
		}
	}
}

// writes records each write a commandConn makes.
type writes struct {
	net.Conn
	got []string
}

func (w *writes) Write(b []byte) (int, error) { w.got = append(w.got, string(b)); return len(b), nil }

// TestRepliesCoalesced: in clear, a multi-line reply written a line at a
// time (as go-smtp flushes it) leaves in one write with its last line;
// one-line replies leave as they come; after STARTTLS nothing is held.
func TestRepliesCoalesced(t *testing.T) {
	w := &writes{}
	c := &commandConn{Conn: w, max: DefaultMaxCommands}
	for _, line := range []string{"220 greeting\r\n", "250-Hello x\r\n", "250-PIPELINING\r\n", "250 SIZE 1\r\n", "250 2.0.0 OK\r\n"} {
		if n, err := c.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("%q: %d, %v", line, n, err)
		}
	}
	want := []string{"220 greeting\r\n", "250-Hello x\r\n250-PIPELINING\r\n250 SIZE 1\r\n", "250 2.0.0 OK\r\n"}
	if !slices.Equal(w.got, want) {
		t.Errorf("writes %q, want %q", w.got, want)
	}
	if c.replies != 2 {
		t.Errorf("%d replies counted, want 2", c.replies)
	}
	w.got, c.encrypted = nil, true
	c.Write([]byte("250-x\r\n"))
	if len(w.got) != 1 {
		t.Errorf("after STARTTLS, a write was held: %q", w.got)
	}
}
