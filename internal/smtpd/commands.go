package smtpd

import (
	"bytes"
	"net"
	"sync/atomic"
)

// commandLimit wraps each accepted connection in a commandConn.
type commandLimit struct {
	net.Listener
	max int
}

func (l commandLimit) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &commandConn{Conn: c, max: l.max}, nil
}

// commandConn ends a session after max commands (docs/reference.md §7.1:
// the 256th reply is followed by 421 Command limit exceeded). go-smtp has no
// hook before each command, but it writes every reply line with its own
// flush, so commands are counted as final replies written: a multi-line
// reply counts once, and DATA with its body counts once because its 354
// is intermediate.
//
// After STARTTLS the replies pass through here encrypted, and where one
// ends cannot be seen: from then on every write counts as one reply (a
// multi-line reply once per line, the TLS handshake and DATA's 354 once
// each), so a TLS session meets the limit a little sooner, and at the
// limit it is closed without the 421, which could not be read in clear.
// An implicit-TLS listener puts this wrapper above TLS and counts exactly.
//
// In clear, the continuation lines of a multi-line reply (EHLO's) are held
// and written with its last line, in one system call: go-smtp flushes
// each line, which cost a write here and a read at the client per line.
type commandConn struct {
	net.Conn
	max       int
	replies   int  // only the session's goroutine writes
	encrypted bool // STARTTLS succeeded
	closing   bool // close once the next reply is written
	over      atomic.Bool
	held      []byte // continuation lines not yet written (in clear only)
}

var (
	limitReply    = []byte("421 4.7.0 Command limit exceeded\r\n")
	startTLSReply = []byte("220 2.0.0 Ready to start TLS")
)

func (c *commandConn) Write(b []byte) (int, error) {
	if c.over.Load() {
		return 0, net.ErrClosed
	}
	if !c.encrypted && !c.closing && isContinuation(b) {
		c.held = append(c.held, b...)
		return len(b), nil
	}
	n, err := c.writeHeld(b)
	if c.closing {
		// The reply that ends the session (a 421) is out, in clear or
		// as one TLS record.
		c.over.Store(true)
		c.Conn.Close()
		return n, err
	}
	if err != nil || c.max <= 0 {
		return n, err
	}
	switch {
	case c.encrypted:
		c.replies++
	case bytes.HasPrefix(b[:n], startTLSReply):
		c.encrypted = true
	default:
		c.replies += finalReplies(b[:n])
	}
	if c.replies >= c.max {
		c.over.Store(true)
		if !c.encrypted {
			c.Conn.Write(limitReply)
		}
		c.Conn.Close()
	}
	return n, err
}

// writeHeld writes the held continuation lines, if any, then b, in one
// write; n counts b's bytes written.
func (c *commandConn) writeHeld(b []byte) (int, error) {
	if len(c.held) == 0 {
		return c.Conn.Write(b)
	}
	held := len(c.held)
	c.held = append(c.held, b...)
	n, err := c.Conn.Write(c.held)
	c.held = c.held[:0]
	return max(n-held, 0), err
}

// isContinuation reports whether b is one whole line of a reply that more
// lines follow ("250-…\r\n"), as go-smtp writes them, one a flush.
func isContinuation(b []byte) bool {
	return len(b) >= 4 && isDigit(b[0]) && isDigit(b[1]) && isDigit(b[2]) && b[3] == '-' &&
		bytes.IndexByte(b, '\n') == len(b)-1
}

// closeAfterReply ends the session once the reply being prepared is
// written. Only the session's goroutine calls it.
func (c *commandConn) closeAfterReply() {
	if c != nil {
		c.closing = true
	}
}

// exhausted reports whether the session is past its command limit.
func (c *commandConn) exhausted() bool { return c != nil && c.over.Load() }

// finalReplies counts the lines of b that end a reply to a command: a
// three-digit code followed by a space, other than the greeting (220) and
// DATA's go-ahead (354).
func finalReplies(b []byte) int {
	n := 0
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i+1], b[i+1:]
		} else {
			b = nil
		}
		if len(line) >= 4 && isDigit(line[0]) && isDigit(line[1]) && isDigit(line[2]) && line[3] == ' ' {
			if code := string(line[:3]); code != "220" && code != "354" {
				n++
			}
		}
	}
	return n
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
