// Package connlimit bounds what one untrusted client can hold on a TCP
// listener: how many connections are open at once, how long a connection
// may sit idle, and how long it may live at all (docs/reference.md §3, §11).
//
// A connection over the cap is accepted and closed at once, without a
// byte written, so a flood of connections costs the server nothing but the
// accept. Surfaces that serve many trials use a Pool instead (pool.go):
// one cap for all of a process's listeners, sized to the process, under
// which a stranger's or the quietest idle connection makes room for a new
// one; Shares (shares.go) bound what each trial has in flight; Preauth
// (preauth.go) bounds the bodies read before their caller is known. The
// lifetime bound closes a connection even while its client trickles
// bytes, which idle timeouts alone cannot catch.
package connlimit

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults are the reference's, for every listener of the writer.
const (
	DefaultMaxConns = 16
	DefaultIdle     = 10 * time.Second
	DefaultLifetime = 30 * time.Second
)

// Limits for one listener. A zero field means "no limit".
//
// Idle becomes the deadline of every Read and Write, replacing any deadline
// the server set: use it under servers that leave deadlines alone (go-smtp
// with ReadTimeout 0), not under net/http, which manages its own and moves
// them to abort reads.
type Limits struct {
	MaxConns int           // open connections; the next one is closed at once
	Idle     time.Duration // a single Read or Write may wait at most this long
	Lifetime time.Duration // a connection is closed this long after it was accepted
	// OnShed, if set, is called for each connection closed over MaxConns
	// or the Pool's cap (the writer reports them to the plane's trail). It
	// must not block.
	OnShed func()
	// Pool, if set, caps the connections of this listener together with
	// those of every other listener of the pool, in place of MaxConns:
	// over it, the quietest idle connection is closed to make room.
	Pool *Pool
}

// Listener enforces Limits on the connections it accepts.
type Listener struct {
	net.Listener
	limits Limits
	open   atomic.Int64
	shed   atomic.Int64
}

// Listen wraps ln.
func Listen(ln net.Listener, l Limits) *Listener {
	return &Listener{Listener: ln, limits: l}
}

// Accept returns the next connection within the cap. Connections over the
// cap are closed here and never returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if p := l.limits.Pool; p != nil {
			lc := l.wrap(c)
			if !p.admit(lc) {
				l.shed.Add(1)
				lc.Close()
				if l.limits.OnShed != nil {
					l.limits.OnShed()
				}
				continue
			}
			return lc, nil
		}
		if l.limits.MaxConns > 0 && l.open.Add(1) > int64(l.limits.MaxConns) {
			l.open.Add(-1)
			l.shed.Add(1)
			c.Close()
			if l.limits.OnShed != nil {
				l.limits.OnShed()
			}
			continue
		}
		if l.limits.MaxConns <= 0 {
			l.open.Add(1)
		}
		return l.wrap(c), nil
	}
}

// Open is how many accepted connections are still open.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Shed is how many connections were closed at once for being over the cap.
func (l *Listener) Shed() int { return int(l.shed.Load()) }

func (l *Listener) wrap(c net.Conn) *Conn {
	lc := &Conn{Conn: c, idle: l.limits.Idle, born: time.Now(), lifetime: l.limits.Lifetime, onShed: l.limits.OnShed}
	lc.touch()
	lc.release = func() { l.open.Add(-1) }
	if p := l.limits.Pool; p != nil {
		l.open.Add(1)
		lc.release = func() { l.open.Add(-1); p.remove(lc) }
	}
	if l.limits.Lifetime > 0 {
		lc.mu.Lock()
		lc.timer = time.AfterFunc(l.limits.Lifetime, func() {
			lc.expired.Store(true)
			lc.Close()
		})
		lc.mu.Unlock()
	}
	return lc
}

// Conn is an accepted connection under Limits.
type Conn struct {
	net.Conn
	idle     time.Duration
	born     time.Time
	lifetime time.Duration
	mu       sync.Mutex // guards timer, which may fire before it is stored
	timer    *time.Timer
	expired  atomic.Bool
	once     sync.Once
	release  func()
	// For a Pool: when the connection last moved a byte (unix
	// nanoseconds), how many requests it is answering, and whom to tell
	// when it is closed to make room.
	last   atomic.Int64
	busy   atomic.Int32
	onShed func()
	// request is set while an HTTP request on the connection counts in
	// busy (Known).
	request atomic.Bool
	// stranger ranks the connection for closing first under a Pool:
	// strangerReading while its request's caller is unknown and its body
	// is still coming, strangerAnswered once it was answered before its
	// body was read (it is closing).
	stranger atomic.Int32
}

// ErrExpired is returned by Read and Write once the connection outlived
// its lifetime.
var ErrExpired = errors.New("connlimit: connection lifetime exceeded")

// Read reads with the idle bound, if any, as the deadline.
func (c *Conn) Read(b []byte) (int, error) {
	if c.expired.Load() {
		return 0, ErrExpired
	}
	if c.idle > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

// Write writes with the idle bound, if any, as the deadline.
func (c *Conn) Write(b []byte) (int, error) {
	if c.expired.Load() {
		return 0, ErrExpired
	}
	if c.idle > 0 {
		c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	}
	c.touch()
	return c.Conn.Write(b)
}

// Close closes the connection and frees its place under the cap (once).
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.mu.Lock()
		if c.timer != nil {
			c.timer.Stop()
		}
		c.mu.Unlock()
		c.release()
	})
	return err
}

// Remaining is how long the connection has left to live; a very large
// value when there is no lifetime bound.
func (c *Conn) Remaining() time.Duration {
	if c.lifetime <= 0 {
		return 1<<63 - 1
	}
	return c.lifetime - time.Since(c.born)
}
