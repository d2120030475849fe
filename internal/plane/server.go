// Package plane is mail-plane's broker: an HTTP/1.1 + JSON server on one
// Unix socket that authenticates every connection by SO_PEERCRED and every
// call by a grant, authorizes it from one table (policy.go), and answers it
// from the ledger and the message store (broker.go, trials.go).
package plane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/peercred"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// A call's own deadline (from the caller) is honoured up to callLimit; a
// waiting call gets its row's wait on top.
const (
	DefaultReadTimeout = 10 * time.Second
	callLimit          = 15 * time.Second
)

// Server serves the plane's RPC (conn.go, wire.go).
type Server struct {
	broker      *Broker
	ledger      ledger.Ledger
	peers       peercred.Policy
	log         zerolog.Logger
	readTimeout time.Duration

	// grants caches valid grants by digest, in the ledger's policy
	// generation (policyCache, bind.go): a revocation ends it.
	grants policyCache[string, ledger.Grant]

	mu    sync.Mutex
	ln    net.Listener
	conns map[*wireConn]struct{}
	down  bool // Shutdown or Close was called
	wg    sync.WaitGroup
}

// NewServer returns a server for broker. peers may be empty: then the
// socket's file mode alone decides who may connect.
func NewServer(b *Broker, peers peercred.Policy, readTimeout time.Duration, log zerolog.Logger) *Server {
	if readTimeout <= 0 {
		readTimeout = DefaultReadTimeout
	}
	return &Server{broker: b, ledger: b.ledger, peers: peers, log: log, readTimeout: readTimeout, conns: map[*wireConn]struct{}{}}
}

// serveCall authenticates, authorizes, dispatches and answers the call
// whose head c holds, and logs it before the answer leaves.
func (s *Server) serveCall(c *wireConn) {
	start := time.Now()
	method, code, gone := s.serve(c)
	s.logCall(c, method, code, gone, start)
	c.flush()
}

// logCall logs a call's outcome: a refusal of the caller's right to call
// louder than a policy answer, a failure loudest.
func (s *Server) logCall(c *wireConn, method, code string, gone bool, start time.Time) {
	ev := s.log.Debug()
	switch code {
	case "":
	case rpc.CodeUnauthenticated, rpc.CodePermissionDenied, rpc.CodeUnknownMethod:
		ev = s.log.Warn()
	case rpc.CodeInternal, rpc.CodeStoreUnavailable:
		ev = s.log.Error()
	case rpc.CodeDeadlineExceeded:
		// A wait whose caller went away (a closed page's long-poll) ended
		// as waits do: nothing to tell.
		if !gone {
			ev = s.log.Info()
		}
	default:
		ev = s.log.Info()
	}
	if !ev.Enabled() {
		return
	}
	ev.Str("method", method).Str("code", code).Uint32("uid", c.cred.UID).Uint32("gid", c.cred.GID).
		Dur("took", time.Since(start)).Msg("rpc")
}

func (s *Server) serve(c *wireConn) (method, code string, gone bool) {
	h := &c.h
	bodyRead := false
	fail := func(status int, e *rpc.Error) (string, string, bool) {
		if h.length > 0 && !bodyRead {
			if h.length <= discardBodyBytes && !h.expect && !c.closing {
				// Dropped after the answer, as net/http's server does: a
				// caller that writes its body after its head (Python's
				// http.client) would otherwise meet a closed socket.
				c.discard = int(h.length)
			} else {
				c.closing = true // its body is still to come: nothing after it can be framed
			}
		}
		return method, c.answer(status, e, status == http.StatusMethodNotAllowed), gone
	}
	version, name, _ := bytes.Cut(h.path[1:], []byte("/"))
	// A peer no role admits was refused before its head was read (loop).
	if string(version) != rpc.Version {
		method = string(name)
		return fail(http.StatusNotFound, rpc.Errorf(rpc.CodeUnsupportedVersion, "this plane speaks protocol %s", rpc.Version))
	}
	if !h.post {
		method = string(name)
		c.closing = true // a HEAD's client would read this answer's body as the next head
		return fail(http.StatusMethodNotAllowed, rpc.Errorf(rpc.CodeBadRequest, "calls are POST"))
	}
	m, ok := byMethod[string(name)]
	if !ok {
		method = string(name)
		return fail(http.StatusNotFound, rpc.Errorf(rpc.CodeUnknownMethod, "no such method"))
	}
	method = m.method
	if h.length > rpc.MaxRequestBytes {
		return fail(http.StatusRequestEntityTooLarge, rpc.Errorf(rpc.CodeFrameTooLarge, "request exceeds %d bytes", rpc.MaxRequestBytes))
	}
	ctx, cancel := callContext(h.deadline, m.waits)
	defer cancel()
	grant, ok, err := s.grant(ctx, h.grant)
	if err != nil {
		// The ledger did not answer: an outage (or a bug), not a refusal.
		e := s.broker.storeErr("grant", err)
		return fail(statusOf(e), e)
	}
	if !ok {
		return fail(http.StatusUnauthorized, rpc.Errorf(rpc.CodeUnauthenticated, "no valid grant"))
	}
	if rule, ok := s.peers[grant.Role]; ok && !rule.Admits(c.cred) {
		return fail(http.StatusUnauthorized, rpc.Errorf(rpc.CodeUnauthenticated, "this peer may not use a %s grant", grant.Role))
	}
	p := principalOf(grant)
	a, ok := m.who[p]
	if !ok {
		return fail(http.StatusForbidden, rpc.Errorf(rpc.CodePermissionDenied, "a %s grant may not call %s", p, method))
	}
	body, err := c.readBody()
	bodyRead = err == nil
	if err != nil {
		c.closing = true
		return fail(http.StatusBadRequest, rpc.Errorf(rpc.CodeBadRequest, "incomplete request"))
	}
	var stop func() bool
	if m.waits > 0 {
		stop = c.watch(cancel)
	}
	result, e := s.call(m, ctx, caller{role: p.role, trial: grant.TrialID, access: a, accepts: m.accepts}, body)
	if stop != nil {
		gone = stop()
	}
	if e != nil {
		return fail(statusOf(e), e)
	}
	return method, c.answer(http.StatusOK, result, false), gone
}

// byMethod is the table (policy.go) by method: the dispatcher's index,
// kept beside the dispatcher that reads it.
var byMethod = map[string]*row{}

func init() {
	for i := range table {
		byMethod[table[i].method] = &table[i]
	}
}

// caller is who is calling, as the server established it from the peer's
// credentials and the grant.
type caller struct {
	role  rpc.Role
	trial int64 // the grant's trial, for bindTrial
	access
	accepts []*credential // the kinds of credential its method's row accepts
}

// principalOf is who holds g: a writer's or inbox's grant with no trial
// is a shared surface's.
func principalOf(g ledger.Grant) principal {
	role := rpc.Role(g.Role)
	return principal{role: role, shared: g.TrialID == 0 && (role == rpc.RoleWriter || role == rpc.RoleInbox)}
}

// failHandler, when set, runs before every handler and may panic or fail
// it: a test's way to put a handler bug behind the real binary. Only a
// plane built with -tags planebughook sets it (failhandler.go); make
// build never does.
var failHandler func(method string) error

// errInternal is the answer to a handler's bug: fixed, naming nothing of
// the call; what went wrong goes to the log.
var errInternal = rpc.Errorf(rpc.CodeInternal, "the plane failed to answer this call")

// call runs m's handler. Its refusals and outages are *rpc.Error already
// (the broker turns every store failure into one, by storeErr); any other
// error, and a panic, is a bug in the plane: answered 500, never as an
// outage nor as a refusal, and logged without the call's body.
func (s *Server) call(m *row, ctx context.Context, c caller, body []byte) (result any, rerr *rpc.Error) {
	method := m.method
	defer func() {
		if v := recover(); v != nil {
			s.log.Error().Str("method", method).Str("panic", panicText(v)).Bytes("stack", debug.Stack()).Msg("handler panicked")
			result, rerr = nil, errInternal
		}
	}()
	if failHandler != nil {
		if err := failHandler(method); err != nil {
			s.log.Error().Str("method", method).Err(err).Msg("handler failed")
			return nil, errInternal
		}
	}
	result, err := m.call.run(s.broker, ctx, c, m.framing, body)
	if err == nil {
		return result, nil
	}
	var e *rpc.Error
	if errors.As(err, &e) {
		return nil, e
	}
	s.log.Error().Str("method", method).Err(err).Msg("handler failed")
	return nil, errInternal
}

// panicText names a panic for the log: a runtime error's text is the
// code's (an index, a nil map), never the request's; any other panic value
// is named by its type.
func panicText(v any) string {
	if re, ok := v.(runtime.Error); ok {
		return re.Error()
	}
	return fmt.Sprintf("%T", v)
}

// callContext bounds a call by the caller's deadline header, and by
// callLimit plus its row's wait bound (docs/rpc.md). A call runs to its
// end even if its caller half-closes the connection (HTTP/1.0 clients do,
// after a whole request); only a waiting call (its row waits: a read, the
// supervisor's ports.sync) stops when its caller goes away (wireConn.watch
// cancels it).
func callContext(header []byte, waits time.Duration) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), callDeadline(time.Now(), header, waits))
}

// callDeadline is the deadline of a call that starts at now, whose caller
// asked for header's (RFC 3339; "" or unreadable: none) and whose row
// waits up to waits.
func callDeadline(now time.Time, header []byte, waits time.Duration) time.Time {
	deadline := now.Add(callLimit + waits)
	if len(header) > 0 {
		if t, err := time.Parse(time.RFC3339Nano, string(header)); err == nil && t.Before(deadline) {
			deadline = t
		}
	}
	return deadline
}

// statusOf is the HTTP status of e, by its class first: every outage is
// 503 (504 when the call ran out of time), every bug 500, never a 4xx.
func statusOf(e *rpc.Error) int {
	switch rpc.ClassOf(e) {
	case rpc.Outage:
		if e.Code == rpc.CodeDeadlineExceeded {
			return http.StatusGatewayTimeout
		}
		return http.StatusServiceUnavailable
	case rpc.Bug:
		return http.StatusInternalServerError
	}
	switch e.Code {
	case rpc.CodeUnauthenticated:
		return http.StatusUnauthorized
	case rpc.CodePermissionDenied:
		return http.StatusForbidden
	case rpc.CodeFrameTooLarge:
		return http.StatusRequestEntityTooLarge
	case rpc.CodeBadRequest:
		return http.StatusBadRequest
	}
	// Policy answers are successful calls with a refusal in them.
	return http.StatusUnprocessableEntity
}

// encodeAnswer encodes v into buf and returns the answer's status and
// code, rpc.CodeInternal if v does not encode (a bug: the call's log line
// says so). HTML is not escaped: the surfaces decode the answer as JSON,
// never embed it in a page, and escaping <, > and & in a message body
// made it six times larger on the wire.
func encodeAnswer(buf *bytes.Buffer, status int, v any, code string) (int, string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status, code = http.StatusInternalServerError, rpc.CodeInternal
		buf.Reset()
		enc.Encode(rpc.Error{Code: code, Class: rpc.Bug, Message: "the plane could not encode its answer"})
	}
	return status, code
}

// answerBufs are the answers' buffers, kept between answers; one grown
// past keptAnswerBytes (a long list) is left to the collector.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const keptAnswerBytes = 64 << 10

func putAnswerBuf(b *bytes.Buffer) {
	if b.Cap() <= keptAnswerBytes {
		b.Reset()
		answerBufs.Put(b)
	}
}
