package plane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/websitebench/mailplane/internal/peercred"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Timeouts of a connection, beside the read timeout (--rpc-read-timeout:
// a request's head and body, from its first byte, or from the accept for
// a connection's first request): how long a kept-alive connection may
// wait for its next request, and how long an answer may take to be taken.
const (
	idleTimeout  = 2 * time.Minute
	writeTimeout = rpc.MaxWait + callLimit + 5*time.Second
	// inlineAnswerBytes is the largest answer written in one piece with
	// its head (a send's, a check's); a longer one (a list) is written
	// after it, rather than copied.
	inlineAnswerBytes = 2 << 10
	// keptHeadBytes is the largest head buffer a connection keeps between
	// requests (a grant and a deadline fit many times).
	keptHeadBytes = 1 << 10
)

// wireConn is one caller's connection.
type wireConn struct {
	nc   net.Conn
	br   *bufio.Reader
	cred peercred.Cred
	// admitted: the kernel told who the peer is, and some role admits it
	// (decided once, at the accept).
	admitted bool
	h        head
	out      []byte        // the answer's head, kept between answers
	body     *bytes.Buffer // the answer's body, from answer to flush
	idle     bool          // waiting for a request (Shutdown closes it)
	// Per request: the connection closes after the answer (the caller
	// asked, its body was not read, or a write failed).
	closing bool
	// discard is the length of a refused call's body, to read and drop
	// after its answer (at most discardBodyBytes).
	discard int
}

// discardBodyBytes bounds the body of a refused call the connection reads
// and drops to stay open, as net/http's server does (256 KiB); a larger
// one closes it. A peer no role admits is never read further.
const discardBodyBytes = 256 << 10

// Serve accepts connections on ln, and serves each on a goroutine of its
// own, until Shutdown or Close (then it returns http.ErrServerClosed).
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	s.ln = ln
	s.mu.Unlock()
	var pause time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			down := s.down
			s.mu.Unlock()
			if down {
				return http.ErrServerClosed
			}
			if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) && !errors.Is(err, syscall.ENOBUFS) && !errors.Is(err, syscall.ENOMEM) {
				return err // closed, or broken: Serve's caller decides
			}
			// Out of descriptors or memory: the listener is fine, and
			// accepting again at once would spin. As net/http's server.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.log.Warn().Err(err).Dur("retry_in", pause).Msg("accept failed")
			time.Sleep(pause)
			continue
		}
		pause = 0
		cred, err := peercred.Of(nc)
		if err != nil {
			s.log.Error().Err(err).Msg("cannot read peer credentials; refusing the connection's calls")
		}
		s.serveConn(nc, cred, err == nil)
	}
}

// serveConn serves nc on a goroutine, unless the server is shutting down.
func (s *Server) serveConn(nc net.Conn, cred peercred.Cred, credOK bool) {
	c := &wireConn{nc: nc, cred: cred, admitted: credOK && s.peers.AdmitsAny(cred, rpc.RoleNames), idle: true}
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			nc.Close()
		}()
		// A bug in reading the wire ends its connection, not the plane (a
		// handler's panic is answered 500 by call). Logged as call logs
		// one: never with what the caller sent.
		defer func() {
			if v := recover(); v != nil {
				s.log.Error().Str("panic", panicText(v)).Bytes("stack", debug.Stack()).Msg("connection panicked")
			}
		}()
		c.br = bufio.NewReaderSize(nc, headLineBytes)
		s.loop(c)
	}()
}

// loop reads c's requests one after the other, answering each before
// the next is read (a caller that sends the next one early has it read
// after the answer).
func (s *Server) loop(c *wireConn) {
	wait := time.Now().Add(s.readTimeout) // the first request's, from the accept
	first := true
	for {
		c.nc.SetReadDeadline(wait)
		if _, err := c.br.Peek(1); err != nil {
			return
		}
		if !s.setIdle(c, false) {
			return
		}
		if !first {
			c.nc.SetReadDeadline(time.Now().Add(s.readTimeout))
		}
		first = false
		c.closing = false
		if !c.admitted {
			// The kernel's word first, as at ttrpc's handshake: a peer that
			// no role admits is refused before anything it sent is read,
			// and nothing after is answered.
			c.closing = true
			c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
			e := rpc.Errorf(rpc.CodeUnauthenticated, "this peer may not call the plane")
			c.answer(http.StatusUnauthorized, e, false)
			s.logCall(c, "", e.Code, false, time.Now())
			c.flush()
			return
		}
		if err := readHead(c.br, &c.h); err != nil {
			var he *headError
			if errors.As(err, &he) {
				c.closing = true
				c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
				c.answer(he.status, he.err, false)
				s.logCall(c, "", he.err.Code, false, time.Now())
				c.flush()
			}
			return
		}
		c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		s.serveCall(c)
		if c.closing || c.h.close {
			return
		}
		if n := c.discard; n > 0 {
			c.discard = 0
			if _, err := c.br.Discard(n); err != nil {
				return
			}
		}
		if cap(c.h.buf) > keptHeadBytes {
			c.h.buf = nil
		}
		if !s.setIdle(c, true) {
			return
		}
		wait = time.Now().Add(idleTimeout)
	}
}

// setIdle marks c waiting for a request, or not; false: the server is
// shutting down, and c is to close.
func (s *Server) setIdle(c *wireConn, idle bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.idle = idle
	return !s.down
}

// Shutdown stops accepting, closes the connections waiting for a request,
// and waits for those in a call to answer it, or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.down = true
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		if c.idle {
			c.nc.Close()
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops accepting and closes every connection, in a call or not.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = true
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	return nil
}

// readBody reads the call's body, of the length its head declared (at
// most rpc.MaxRequestBytes, checked before), into a buffer of its size
// at once: its caller has shown its grant by then.
func (c *wireConn) readBody() ([]byte, error) {
	if c.h.length <= 0 { // none declared: an empty body
		return []byte{}, nil
	}
	if c.h.expect && !c.h.http10 { // an HTTP/1.0 client takes no interim answer (RFC 9110, 10.1.1)
		if _, err := io.WriteString(c.nc, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return nil, err
		}
	}
	body := make([]byte, c.h.length)
	_, err := io.ReadFull(c.br, body)
	return body, err
}

// watch cancels a waiting call when its caller goes away (its
// connection ends, or it half-closes it) while the call waits; stop ends
// the watch and says whether the caller went away. A byte the caller
// sent early stays in the reader, for the next request.
func (c *wireConn) watch(cancel context.CancelFunc) (stop func() (gone bool)) {
	c.nc.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := c.br.Peek(1)
		if err != nil && !isTimeout(err) {
			cancel()
		}
		done <- err
	}()
	return func() bool {
		c.nc.SetReadDeadline(aLongTimeAgo)
		err := <-done
		return err != nil && !isTimeout(err)
	}
}

// aLongTimeAgo is a deadline in the past: it ends a pending read at once.
var aLongTimeAgo = time.Unix(1, 0)

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// answer prepares an answer of status, v as JSON, for flush, and returns
// code, the answer's error code, or rpc.CodeInternal if v does not
// encode. The call is logged between the two, so that its log line is
// there when its caller has the answer.
func (c *wireConn) answer(status int, v any, allow bool) (code string) {
	if e, ok := v.(*rpc.Error); ok {
		code = e.Code
	}
	c.body = answerBufs.Get().(*bytes.Buffer)
	status, code = encodeAnswer(c.body, status, v, code)
	// An HTTP/1.0 caller that asked to keep the connection is told it
	// stays (RFC 9112, C.2.2); to an HTTP/1.1 caller that is the default.
	c.out = appendAnswerHead(c.out[:0], status, c.body.Len(), c.closing || c.h.close, c.h.http10, allow)
	return code
}

// flush writes the answer answer prepared.
func (c *wireConn) flush() {
	var err error
	if c.body.Len() <= inlineAnswerBytes {
		c.out = append(c.out, c.body.Bytes()...)
		_, err = c.nc.Write(c.out)
	} else {
		bufs := net.Buffers{c.out, c.body.Bytes()}
		_, err = bufs.WriteTo(c.nc)
	}
	if err != nil {
		c.closing = true
	}
	putAnswerBuf(c.body)
	c.body = nil
	if cap(c.out) > 2*inlineAnswerBytes {
		c.out = nil
	}
}
