package connlimit

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Preauth bounds the request bodies a process reads before it knows who
// sent them (limits.PreauthBytes, limits.PreauthRequests): bytes and
// requests, taken before a body is read and released once it is judged.
// When a new body does not fit, the oldest bodies still being read make
// room, their connections closed, as the pool closes the quietest idle
// connection: a flood of unknown callers costs its sender its oldest
// requests, never a trial its own (whose body, sent at once, is read long
// before it is the oldest).
type Preauth struct {
	maxBytes int64
	maxN     int
	mu       sync.Mutex
	bytes    int64
	reading  []*preauthBody // oldest first
}

// preauthBody is one body being read: its size, and its connection.
type preauthBody struct {
	size int64
	conn net.Conn // nil when the request carries none (no HTTPConnContext)
}

// NewPreauth returns a budget of maxBytes over at most maxN bodies.
func NewPreauth(maxBytes int64, maxN int) *Preauth {
	return &Preauth{maxBytes: maxBytes, maxN: maxN}
}

// Take reserves size bytes for one body of the request whose context is
// ctx, closing the connections of the oldest bodies being read if it
// must, and returns its release; false (nothing reserved) only when room
// cannot be made.
func (p *Preauth) Take(ctx context.Context, size int64) (release func(), ok bool) {
	b := &preauthBody{size: size}
	b.conn, _ = ctx.Value(connKey{}).(net.Conn)
	p.mu.Lock()
	var evict []net.Conn
	for len(p.reading) > 0 && (len(p.reading) >= p.maxN || p.bytes+size > p.maxBytes) && size <= p.maxBytes {
		oldest := p.reading[0]
		if oldest.conn == nil {
			break
		}
		p.drop(oldest)
		evict = append(evict, oldest.conn)
	}
	ok = len(p.reading) < p.maxN && p.bytes+size <= p.maxBytes
	if ok {
		p.reading = append(p.reading, b)
		p.bytes += size
	}
	p.mu.Unlock()
	for _, c := range evict {
		c.Close()
	}
	if !ok {
		return nil, false
	}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.drop(b)
	}, true
}

// drop removes b, if it is still held.
func (p *Preauth) drop(b *preauthBody) {
	for i, x := range p.reading {
		if x == b {
			p.reading = append(p.reading[:i], p.reading[i+1:]...)
			p.bytes -= b.size
			return
		}
	}
}

// Known marks the connection of a request (its context, under
// HTTPConnContext) busy until the request is answered: its caller is
// known, so it is no longer closed to make room under a Pool. Until then
// a connection reading a request is as evictable as an idle one. A
// request without a body is known from the start (GuardHTTP): nothing of
// the caller's is left to wait for. Known is idempotent per request.
func Known(ctx context.Context) {
	c, ok := ctx.Value(connKey{}).(net.Conn)
	if !ok {
		return
	}
	if lc := under(c); lc != nil && lc.request.CompareAndSwap(false, true) {
		lc.stranger.Store(strangerNone)
		lc.busy.Add(1)
	}
}

// answered undoes Known once the request is answered (HTTPConnState).
func answered(c net.Conn) {
	if lc := under(c); lc != nil {
		lc.stranger.Store(strangerNone)
		if lc.request.CompareAndSwap(true, false) {
			lc.busy.Add(-1)
		}
	}
}

// Ranks of Conn.stranger.
const (
	strangerNone int32 = iota
	strangerReading
	strangerAnswered
)

// markStranger ranks the connection of ctx's request.
func markStranger(ctx context.Context, rank int32) {
	if c, ok := ctx.Value(connKey{}).(net.Conn); ok {
		if lc := under(c); lc != nil {
			lc.stranger.Store(rank)
		}
	}
}

// under is the *Conn beneath c (itself, or beneath a *tls.Conn), or nil.
func under(c net.Conn) *Conn {
	for {
		switch v := c.(type) {
		case *Conn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
}

// GuardHTTP wraps a shared surface's handler: a request without a body is
// Known at once; one with a body is Known when the handler says so (its
// credential, read from the headers, was accepted) or once its body has
// been read to the end. A request answered before its body was read asks
// the client to close the connection (Connection: close): net/http then
// neither reads nor discards the rest, and sends no 100 Continue.
func GuardHTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
			Known(r.Context())
			h.ServeHTTP(w, r)
			return
		}
		markStranger(r.Context(), strangerReading)
		body := &guardedBody{ReadCloser: r.Body, ctx: r.Context()}
		// A copy: net/http judges what is left of the body by the
		// request it read, whose Body must stay its own.
		r = r.WithContext(r.Context())
		r.Body = body
		h.ServeHTTP(&guardedWriter{ResponseWriter: w, body: body}, r)
	})
}

// guardedBody notes that the body was read to its end.
type guardedBody struct {
	io.ReadCloser
	ctx  context.Context
	done atomic.Bool
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done.Swap(true) {
		Known(b.ctx)
	}
	return n, err
}

// unreadGrace is how long a connection answered before its body was read
// may still take bytes of it (discarded) before it is closed: net/http's
// own wait before it closes a connection with a body left unread.
const unreadGrace = 500 * time.Millisecond

// guardedWriter closes the connection after an answer given before the
// body was read.
type guardedWriter struct {
	http.ResponseWriter
	body    *guardedBody
	written bool
}

func (w *guardedWriter) WriteHeader(status int) {
	if !w.written && !w.body.done.Load() && status >= 200 {
		markStranger(w.body.ctx, strangerAnswered)
		w.ResponseWriter.Header().Set("Connection", "close")
		// net/http reads on for a short rest of the body before it
		// closes, so that a client still sending gets the answer rather
		// than a reset; no longer than unreadGrace.
		http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Now().Add(unreadGrace))
	}
	if status >= 200 {
		w.written = true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *guardedWriter) Write(p []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush passes on to the server's writer, for streamed answers.
func (w *guardedWriter) Flush() {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
