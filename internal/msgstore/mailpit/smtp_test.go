package mailpit

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

func TestReadReply(t *testing.T) {
	for _, tc := range []struct {
		in   string
		code int
		ok   bool
	}{
		{"250 2.0.0 Ok: queued as abc\r\n", 250, true},
		{"250-a\r\n250-SIZE 10\r\n250 b\r\n", 250, true},
		{"354 go ahead\n", 354, true},
		{"250\r\n", 250, true},
		{"25\r\n", 0, false},
		{"abc def\r\n", 0, false},
		{"250-a\r\n251 b\r\n", 0, false}, // codes differ within one reply
		{"250x\r\n", 0, false},
		{"250-a\r\n", 0, false}, // cut short
		{"250 " + strings.Repeat("x", maxReplyLine) + "\r\n", 0, false},
		{strings.Repeat("250-x\r\n", maxReplyLines+1) + "250 y\r\n", 0, false},
	} {
		c := &smtpConn{br: bufio.NewReaderSize(strings.NewReader(tc.in), maxReplyLine)}
		r, err := c.read()
		if (err == nil) != tc.ok || (tc.ok && r.code != tc.code) {
			t.Errorf("read(%.40q) = %d, %v", tc.in, r.code, err)
		}
	}
}

// FuzzReadReply: whatever Mailpit's SMTP socket says, reading a reply
// never panics, never holds more than the limits allow, and yields a valid
// code when it succeeds.
func FuzzReadReply(f *testing.F) {
	f.Add([]byte("250-vm greets x\r\n250-SIZE 2097152\r\n250 SMTPUTF8\r\n"))
	f.Add([]byte("250 2.0.0 Ok: queued as 0UkBLApjmo3AmeSLjXZ00w\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := &smtpConn{br: bufio.NewReaderSize(bytes.NewReader(in), maxReplyLine)}
		r, err := c.read()
		if err == nil && (r.code < 100 || r.code > 599 || len(r.lines) > maxReplyLines) {
			t.Fatalf("reply %+v", r)
		}
		_ = r.text()
	})
}
