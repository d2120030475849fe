package rpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The client speaks HTTP/1.1 to the plane itself, over connections it
// keeps alive: the one shape of request the plane takes (POST, a
// Content-Length body, a Bearer grant) and of answer it gives (a status,
// a JSON body of known length). net/http's Transport costs each call two
// goroutine hand-offs (its write and read loops), a header map each way
// and a parsed URL; on the send path they were about a third of the
// writer's cost of a call. The wire is unchanged: HTTP/1.1, which the
// plane reads with its own bounded reader (internal/plane/wire.go), and
// any HTTP/1.1 client may still call it.

// Connection pool bounds, as the Transport this replaced had them.
const (
	maxIdleConns    = 64
	idleConnTimeout = 30 * time.Second
	// maxAnswerHead bounds an answer's status line and headers.
	maxAnswerHead = 64 << 10
	// keptBodyBytes is the largest answer buffer a connection keeps for
	// its next call: a send's or a check's answer fits many times over,
	// a list of messages is allocated for its call.
	keptBodyBytes = 16 << 10
)

// planeConn is one connection to the plane, with its buffers.
type planeConn struct {
	nc     net.Conn
	br     *bufio.Reader
	head   []byte // the request's head, rebuilt each call
	body   []byte // the last answer's body, kept if small
	idle   time.Time
	reused bool
}

// pool holds the client's idle connections, newest last, and bounds how
// many calls hold one at once (slots; nil: no bound).
type pool struct {
	socket string
	slots  chan struct{}
	mu     sync.Mutex
	idle   []*planeConn
}

func newPool(socket string, maxConns int) *pool {
	p := &pool{socket: socket}
	if maxConns > 0 {
		p.slots = make(chan struct{}, maxConns)
	}
	return p
}

// errWait is a call that ran out of time waiting for a connection slot.
var errWait = errors.New("waiting for a connection to the plane")

// acquire takes a slot for one call (a connection is held by a call, or
// idle: at most maxConns are ever open, since one is dialed only when
// none is idle).
func (p *pool) acquire(ctx context.Context) error {
	if p.slots == nil {
		return nil
	}
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errWait
	}
}

func (p *pool) release() {
	if p.slots != nil {
		<-p.slots
	}
}

// get is an idle connection, the newest, or a new one.
func (p *pool) get(ctx context.Context) (*planeConn, error) {
	now := time.Now()
	p.mu.Lock()
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if now.Sub(c.idle) < idleConnTimeout {
			p.mu.Unlock()
			c.reused = true
			return c, nil
		}
		c.nc.Close()
	}
	p.mu.Unlock()
	return p.dial(ctx)
}

func (p *pool) dial(ctx context.Context) (*planeConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", p.socket)
	if err != nil {
		return nil, err
	}
	return &planeConn{nc: nc, br: bufio.NewReader(nc)}, nil
}

// put keeps c for a later call; the oldest idle ones past the bounds are
// closed.
func (p *pool) put(c *planeConn) {
	c.idle = time.Now()
	if cap(c.body) > keptBodyBytes {
		c.body = nil
	}
	p.mu.Lock()
	p.idle = append(p.idle, c)
	drop := 0
	for drop < len(p.idle) && (len(p.idle)-drop > maxIdleConns || c.idle.Sub(p.idle[drop].idle) >= idleConnTimeout) {
		p.idle[drop].nc.Close()
		drop++
	}
	if drop > 0 {
		p.idle = append(p.idle[:0], p.idle[drop:]...)
	}
	p.mu.Unlock()
}

// closeIdle closes every idle connection.
func (p *pool) closeIdle() {
	p.mu.Lock()
	for _, c := range p.idle {
		c.nc.Close()
	}
	p.idle = nil
	p.mu.Unlock()
}

// answer is the plane's answer to one call. body is the connection's
// buffer: valid until the connection's next call.
type answer struct {
	status int
	body   []byte
}

// Answers the client does not take: one over MaxResponseBytes
// (CodeFrameTooLarge), and one that is not HTTP/1.x (an outage, as
// net/http's client had it).
var (
	errTooLarge = errors.New("answer too large")
	errHead     = errors.New("malformed answer from the plane")
)

// errGrant refuses a grant that would break the request's head (net/http
// refused such a header value; the grant itself is never in the error).
var errGrant = errors.New("the grant holds a line break")

// exchangeError is a call's failure, and whether it came before the
// answer's head (the call may have timed out) or while reading its body
// (the answer broke off).
type exchangeError struct {
	err    error
	inBody bool
}

func (e *exchangeError) Error() string { return e.err.Error() }
func (e *exchangeError) Unwrap() error { return e.err }

// writeRequest writes the call's head and body to c, in one system
// call.
func (c *planeConn) writeRequest(method, grant, ctype string, deadline time.Time, body [][]byte) (int64, error) {
	n := 0
	for _, b := range body {
		n += len(b)
	}
	h := append(c.head[:0], "POST /"+Version+"/"...)
	h = append(h, method...)
	h = append(h, " HTTP/1.1\r\nHost: plane\r\nContent-Type: "...)
	h = append(h, ctype...)
	h = append(h, "\r\nAuthorization: Bearer "...)
	h = append(h, grant...)
	h = append(h, "\r\n"+DeadlineHeader+": "...)
	h = deadline.UTC().AppendFormat(h, time.RFC3339Nano)
	h = append(h, "\r\nContent-Length: "...)
	h = strconv.AppendInt(h, int64(n), 10)
	h = append(h, "\r\n\r\n"...)
	c.head = h
	bufs := make(net.Buffers, 0, 1+len(body))
	bufs = append(append(bufs, h), body...)
	return bufs.WriteTo(c.nc)
}

// readAnswer reads one answer: its status, and its body of at most
// MaxResponseBytes. keep is false when the connection cannot carry
// another call (the plane said close, or the body ran to the end of the
// connection).
func (c *planeConn) readAnswer() (a answer, keep bool, err error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return a, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return a, false, errHead
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil || status < 100 {
		return a, false, errHead
	}
	length, chunked, keep := int64(-1), false, line[7] == '1'
	for seen := len(line); ; {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return a, false, err
		}
		if seen += len(line); seen > maxAnswerHead {
			return a, false, errHead
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return a, false, errHead
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return a, false, errHead
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			}
		}
	}
	a.status = status
	switch {
	case status < 200 || status == 204 || status == 304:
		// No body (RFC 9112 §6.3); the plane never answers so.
		return a, false, nil
	case length > MaxResponseBytes:
		return a, false, errTooLarge
	case chunked:
		// The plane answers with a length; a chunked answer is read, and
		// its connection not used again.
		a.body, err = readBounded(httputil.NewChunkedReader(c.br), c.body[:0])
		return a, false, bodyErr(err)
	case length < 0:
		a.body, err = readBounded(c.br, c.body[:0])
		return a, false, bodyErr(err)
	}
	if int64(cap(c.body)) < length {
		c.body = make([]byte, length)
	}
	a.body = c.body[:length]
	if _, err := io.ReadFull(c.br, a.body); err != nil {
		return a, false, &exchangeError{err: err, inBody: true}
	}
	c.body = a.body
	return a, keep, nil
}

// readBounded reads r to its end into buf, refusing more than
// MaxResponseBytes.
func readBounded(r io.Reader, buf []byte) ([]byte, error) {
	b := bytes.NewBuffer(buf)
	n, err := b.ReadFrom(io.LimitReader(r, MaxResponseBytes+1))
	if err == nil && n > MaxResponseBytes {
		err = errTooLarge
	}
	return b.Bytes(), err
}

func bodyErr(err error) error {
	if err == nil || errors.Is(err, errTooLarge) {
		return err
	}
	return &exchangeError{err: err, inBody: true}
}

// exchange sends one call to the plane over a kept connection (or a new
// one) and reads its answer, within ctx. A connection found closed by
// the plane since its last call (nothing of the request written) is
// replaced, once, by a new one.
func (p *pool) exchange(ctx context.Context, method, grant, ctype string, deadline time.Time, body [][]byte) (answer, func(), error) {
	if strings.ContainsAny(grant, "\r\n") {
		return answer{}, nil, errGrant
	}
	if err := p.acquire(ctx); err != nil {
		return answer{}, nil, err
	}
	for {
		c, err := p.get(ctx)
		if err != nil {
			p.release()
			return answer{}, nil, err
		}
		// A cancelled call ends its reads and writes at once: the
		// connection is then closed, which tells a waiting call's plane
		// side that its caller went away.
		stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
		n, err := c.writeRequest(method, grant, ctype, deadline, body)
		if err != nil && n == 0 && c.reused && ctx.Err() == nil {
			stop()
			c.nc.Close()
			continue
		}
		// After a write cut short, the plane may still have answered
		// (a refusal before it read the body): read it.
		a, keep, rerr := c.readAnswer()
		if !stop() || err != nil {
			keep = false
		}
		if rerr != nil {
			c.nc.Close()
			p.release()
			if err == nil || errors.Is(rerr, errTooLarge) {
				err = rerr
			}
			return answer{}, nil, err
		}
		done := func() {
			if keep {
				p.put(c)
			} else {
				c.nc.Close()
			}
			p.release()
		}
		return a, done, nil
	}
}
