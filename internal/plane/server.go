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
	"io"
	stdlog "log"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/peercred"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Timeouts of the RPC server. A call's own deadline (from the caller) is
// honoured up to callLimit; a waiting call gets its row's wait on top.
const (
	DefaultReadTimeout = 10 * time.Second
	callLimit          = 15 * time.Second
	maxHeaderBytes     = 16 << 10
)

// Server serves the plane's RPC.
type Server struct {
	broker      *Broker
	ledger      ledger.Ledger
	peers       peercred.Policy
	log         zerolog.Logger
	readTimeout time.Duration

	// grants caches valid grants by digest, in the ledger's policy
	// generation (policyCache, bind.go): a revocation ends it.
	grants policyCache[string, ledger.Grant]
}

// NewServer returns a server for broker. peers may be empty: then the
// socket's file mode alone decides who may connect.
func NewServer(b *Broker, peers peercred.Policy, readTimeout time.Duration, log zerolog.Logger) *Server {
	if readTimeout <= 0 {
		readTimeout = DefaultReadTimeout
	}
	return &Server{broker: b, ledger: b.ledger, peers: peers, log: log, readTimeout: readTimeout}
}

type credKey struct{}

// HTTPServer returns the http.Server for ln; the caller runs Serve and
// Shutdown.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.readTimeout,
		ReadTimeout:       s.readTimeout,
		WriteTimeout:      rpc.MaxWait + callLimit + 5*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          stdlog.New(s.log.With().Str("source", "net/http").Logger(), "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			cred, err := peercred.Of(c)
			if err != nil {
				s.log.Error().Err(err).Msg("cannot read peer credentials; refusing the connection's calls")
				return ctx
			}
			return context.WithValue(ctx, credKey{}, cred)
		},
	}
}

// ServeHTTP authenticates, authorizes and dispatches one call.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	method, code := s.serve(w, r)
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
		if r.Context().Err() == nil {
			ev = s.log.Info()
		}
	default:
		ev = s.log.Info()
	}
	cred, _ := r.Context().Value(credKey{}).(peercred.Cred)
	ev.Str("method", method).Str("code", code).Uint32("uid", cred.UID).Uint32("gid", cred.GID).
		Dur("took", time.Since(start)).Msg("rpc")
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) (method, code string) {
	fail := func(status int, e *rpc.Error) (string, string) {
		return method, writeJSON(w, status, e, e.Code)
	}
	version, method, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	// The kernel's word first, as at ttrpc's handshake: a peer that no
	// role admits is refused before anything it sent is looked at.
	cred, ok := r.Context().Value(credKey{}).(peercred.Cred)
	if !ok || !s.peers.AdmitsAny(cred, rpc.RoleNames) {
		return fail(http.StatusUnauthorized, rpc.Errorf(rpc.CodeUnauthenticated, "this peer may not call the plane"))
	}
	if version != rpc.Version {
		return fail(http.StatusNotFound, rpc.Errorf(rpc.CodeUnsupportedVersion, "this plane speaks protocol %s", rpc.Version))
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return fail(http.StatusMethodNotAllowed, rpc.Errorf(rpc.CodeBadRequest, "calls are POST"))
	}
	m, ok := byMethod[method]
	if !ok {
		return fail(http.StatusNotFound, rpc.Errorf(rpc.CodeUnknownMethod, "no such method"))
	}
	if r.ContentLength > rpc.MaxRequestBytes {
		return fail(http.StatusRequestEntityTooLarge, rpc.Errorf(rpc.CodeFrameTooLarge, "request exceeds %d bytes", rpc.MaxRequestBytes))
	}
	grant, ok, err := s.grant(r)
	if err != nil {
		// The ledger did not answer: an outage (or a bug), not a refusal.
		e := s.broker.storeErr("grant", err)
		return fail(statusOf(e), e)
	}
	if !ok {
		return fail(http.StatusUnauthorized, rpc.Errorf(rpc.CodeUnauthenticated, "no valid grant"))
	}
	if rule, ok := s.peers[grant.Role]; ok && !rule.Admits(cred) {
		return fail(http.StatusUnauthorized, rpc.Errorf(rpc.CodeUnauthenticated, "this peer may not use a %s grant", grant.Role))
	}
	p := principalOf(grant)
	a, ok := m.who[p]
	if !ok {
		return fail(http.StatusForbidden, rpc.Errorf(rpc.CodePermissionDenied, "a %s grant may not call %s", p, method))
	}
	ctx, cancel := s.callContext(r, m.waits)
	defer cancel()
	body, err := readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fail(http.StatusRequestEntityTooLarge, rpc.Errorf(rpc.CodeFrameTooLarge, "request exceeds %d bytes", rpc.MaxRequestBytes))
		}
		return fail(http.StatusBadRequest, rpc.Errorf(rpc.CodeBadRequest, "incomplete request"))
	}
	result, e := s.call(m, ctx, caller{role: p.role, trial: grant.TrialID, access: a, accepts: m.accepts}, body)
	if e != nil {
		return fail(statusOf(e), e)
	}
	return method, writeJSON(w, http.StatusOK, result, "")
}

// readBody reads a call's body, at most rpc.MaxRequestBytes (a longer
// declared length was refused before). A body of declared length is read
// into a buffer of its size at once: io.ReadAll would grow one and copy
// the body as it went, several times for a message of 100 KiB. Its
// caller has shown its grant by then, and may send that much anyway.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength < 0 {
		return io.ReadAll(http.MaxBytesReader(w, r.Body, rpc.MaxRequestBytes))
	}
	body := make([]byte, r.ContentLength)
	_, err := io.ReadFull(r.Body, body)
	return body, err
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
			// A runtime error's text is the code's (an index, a nil map),
			// never the request's; any other panic value is named by type.
			what := fmt.Sprintf("%T", v)
			if re, ok := v.(runtime.Error); ok {
				what = re.Error()
			}
			s.log.Error().Str("method", method).Str("panic", what).Bytes("stack", debug.Stack()).Msg("handler panicked")
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

// callContext bounds a call by the caller's deadline header, and by
// callLimit plus its row's wait bound (docs/rpc.md). A call runs to its
// end even if its caller half-closes the connection (HTTP/1.0 clients do,
// after a whole request); only a waiting call (its row waits: a read, the
// supervisor's ports.sync) stops when its caller goes away.
func (s *Server) callContext(r *http.Request, waits time.Duration) (context.Context, context.CancelFunc) {
	parent := context.WithoutCancel(r.Context())
	if waits > 0 {
		parent = r.Context()
	}
	return context.WithDeadline(parent, callDeadline(time.Now(), r.Header.Get(rpc.DeadlineHeader), waits))
}

// callDeadline is the deadline of a call that starts at now, whose caller
// asked for header's (RFC 3339; "" or unreadable: none) and whose row
// waits up to waits.
func callDeadline(now time.Time, header string, waits time.Duration) time.Time {
	deadline := now.Add(callLimit + waits)
	if header != "" {
		if t, err := time.Parse(time.RFC3339Nano, header); err == nil && t.Before(deadline) {
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

// writeJSON answers v, and returns code, the answer's error code, or
// rpc.CodeInternal if v does not encode (a bug: ServeHTTP logs it). HTML
// is not escaped: the surfaces decode the answer as JSON, never embed it
// in a page, and escaping <, > and & in a message body made it six times
// larger on the wire.
func writeJSON(w http.ResponseWriter, status int, v any, code string) string {
	buf := answerBufs.Get().(*bytes.Buffer)
	defer putAnswerBuf(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status, code = http.StatusInternalServerError, rpc.CodeInternal
		buf.Reset()
		enc.Encode(rpc.Error{Code: code, Class: rpc.Bug, Message: "the plane could not encode its answer"})
	}
	// Set as canonical keys already are: Header.Set would canonicalize
	// each on every answer.
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(buf.Len())}
	w.WriteHeader(status)
	w.Write(buf.Bytes())
	return code
}

// answerBufs are writeJSON's buffers, kept between answers; one grown
// past keptAnswerBytes (a long list) is left to the collector.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const keptAnswerBytes = 64 << 10

func putAnswerBuf(b *bytes.Buffer) {
	if b.Cap() <= keptAnswerBytes {
		b.Reset()
		answerBufs.Put(b)
	}
}
