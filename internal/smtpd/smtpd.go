// Package smtpd is the writer's SMTP listener: a go-smtp backend whose one
// action is to offer each message to the plane (rpc.MethodSend) and turn
// the plane's verdict into an SMTP reply.
//
// It holds no credential of its own beyond the plane client it is given.
// On a fixed listener every message goes to the writer's trial, or on a
// shared writer to the trial that owns the listener's port (rpc.ViaSMTP
// with the port); on a selecting listener the message names its namespace
// and capability in X-WebsiteBench-Namespace / X-WebsiteBench-Capability
// headers (folded or not), which are passed to the plane unchecked: the
// plane decides, and scrubs those headers before storing.
//
// With a TLS configuration the listener offers STARTTLS (or speaks TLS
// from the first byte, Config.ImplicitTLS), and AUTH PLAIN/LOGIN with the
// trial's mail-API token as the password (auth.go); an authenticated
// session's messages go to the plane as rpc.ViaSMTPAuth with that
// password, whatever the listener's mode. A Resend-Idempotency-Key header
// makes a repeated message answer as the first (idempotency.go).
//
// Command sequencing, address syntax, dot-unstuffing and the envelope
// reset after DATA are go-smtp's (RFC 5321). The reply codes of a delivery
// are the reference's (docs/reference.md §7.2). A refusal by policy is a 5xx or
// a 452; an outage of the plane or its store is always 451, never a 5xx.
package smtpd

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Limits of one SMTP listener, with the reference's values as defaults
// (docs/reference.md §7, §11). Connection count, idle time and lifetime are
// bounded by the listener (package connlimit).
const (
	DefaultMaxCommands = 256
	// MaxLineBytes bounds one command line or one DATA line.
	MaxLineBytes = 64 << 10
	// Domain is the name the listener greets with.
	Domain = "websitebench.local"
	// planeTimeout bounds one plane call; a slower plane is an outage.
	planeTimeout = 10 * time.Second
	// writeTimeout bounds one reply written to a client that stopped
	// reading.
	writeTimeout = 10 * time.Second
)

// Mode says how a listener picks the namespace of a message.
type Mode string

const (
	Fixed  Mode = "fixed"  // always the writer's trial
	Select Mode = "select" // named by the message's X-WebsiteBench-* headers
)

// Headers a selecting listener reads.
const (
	NamespaceHeader  = "X-WebsiteBench-Namespace"
	CapabilityHeader = "X-WebsiteBench-Capability"
)

// Sender is the plane calls the listener makes (a message, an AUTH's
// credential); *rpc.Client is one.
type Sender interface {
	Send(ctx context.Context, req *rpc.SendRequest) (rpc.SendResponse, error)
	CheckCredential(ctx context.Context, req *rpc.CredentialRequest) error
}

// Config of one listener. Zero limits take the defaults.
type Config struct {
	Mode            Mode
	MaxMessageBytes int64
	MaxRecipients   int
	MaxCommands     int
	// TLS, when set, is offered by STARTTLS; with ImplicitTLS the listener
	// speaks TLS from its first byte instead (the 465 convention).
	TLS         *tls.Config
	ImplicitTLS bool
	// PlainAuthNets are the local addresses at which AUTH is offered
	// without TLS (auth.go); empty means only over TLS.
	PlainAuthNets []netip.Prefix
	// RequireAuth refuses MAIL before AUTH with 530: the shared listener
	// of a writer whose trials have ports of their own, where nothing but
	// AUTH can say which trial a message is for.
	RequireAuth bool
	// TrialPort marks a trial's own port on a shared writer: an AUTH
	// password must open the trial that owns the port (the plane checks
	// rpc.SendRequest.Port with rpc.ViaSMTPAuth), so another trial's
	// token is refused there like a wrong one.
	TrialPort bool
	// AuthFailureDelay bounds how long a refused AUTH waits as failures
	// on the listener mount (authfail.go): 0 is limits.AuthFailureMaxDelay,
	// negative is no wait (the lockout after MaxAuthFailures stays).
	AuthFailureDelay time.Duration
	// Shares bound the messages each trial has being received or in
	// flight to the plane (limits.TrialSends), shared by every listener
	// of a writer; nil: a listener's own.
	Shares *connlimit.Shares
	// ShareWait bounds how long a DATA waits for its trial's share; 0 is
	// limits.TrialSendWait.
	ShareWait time.Duration
	// Door is the key of the trial's doors inside its network namespace
	// that this listener is one of (rpc.NetnsDoor): its plain messages
	// name the door, not the port, which other namespaces repeat.
	Door string
}

// authFailureDelay is AuthFailureDelay with its default.
func (c *Config) authFailureDelay() time.Duration {
	switch {
	case c.AuthFailureDelay < 0:
		return 0
	case c.AuthFailureDelay == 0:
		return limits.AuthFailureMaxDelay
	}
	return min(c.AuthFailureDelay, limits.AuthFailureMaxDelay)
}

// Server is one SMTP listener.
type Server struct {
	cfg   Config
	plane Sender
	log   zerolog.Logger
	smtp  *smtp.Server
	// failures are the listener's recent failed AUTHs (authfail.go).
	failures authFailures
	// closing ends the holds of faults (faults.go) when the listener
	// closes or shuts down.
	closing     chan struct{}
	closingOnce sync.Once
}

// New returns a listener that offers messages to plane.
func New(cfg Config, plane Sender, log zerolog.Logger) *Server {
	if cfg.Mode == "" {
		cfg.Mode = Fixed
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = limits.MessageBytes
	}
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = limits.Recipients
	}
	if cfg.MaxCommands <= 0 {
		cfg.MaxCommands = DefaultMaxCommands
	}
	if cfg.Shares == nil {
		cfg.Shares = connlimit.NewShares(limits.TrialSends)
	}
	if cfg.ShareWait <= 0 {
		cfg.ShareWait = limits.TrialSendWait
	}
	s := &Server{cfg: cfg, plane: plane, log: log, closing: make(chan struct{})}
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = Domain
	// go-smtp counts this limit exclusively: a body of exactly
	// MaxMessageBytes is refused, one byte less is accepted.
	srv.MaxMessageBytes = cfg.MaxMessageBytes
	srv.MaxLineLength = MaxLineBytes
	// Recipients are counted by the session, to answer with the
	// reference's text; idle time is the listener's (connlimit), which
	// also covers a DATA body that stops arriving.
	srv.MaxRecipients = 0
	srv.ReadTimeout = 0
	srv.WriteTimeout = writeTimeout
	srv.ErrorLog = errorLog{log}
	// Whether a connection may authenticate is the session's to say
	// (auth.go): go-smtp alone knows only TLS or not.
	srv.AllowInsecureAuth = true
	if !cfg.ImplicitTLS {
		srv.TLSConfig = cfg.TLS
	}
	s.smtp = srv
	return s
}

// Serve answers connections from ln until Close or Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.ImplicitTLS {
		// Under the command count, which then reads the replies in the
		// clear.
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	err := s.smtp.Serve(commandLimit{Listener: ln, max: s.cfg.MaxCommands})
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting and waits for open sessions, until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closingOnce.Do(func() { close(s.closing) })
	return s.smtp.Shutdown(ctx)
}

// Close closes the listener and every open session at once.
func (s *Server) Close() error {
	s.closingOnce.Do(func() { close(s.closing) })
	return s.smtp.Close()
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	cc, _ := innerConn(c.Conn()).(*commandConn)
	port := 0
	if a, ok := c.Conn().LocalAddr().(*net.TCPAddr); ok {
		port = a.Port
	}
	return &session{srv: s, c: c, conn: cc, port: port}, nil
}

// Replies. Texts are the reference's (docs/reference.md §7); enhanced codes are
// RFC 3463's.
var (
	errInvalidCapability = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Invalid namespace capability"}
	errNotAllowed        = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Mail sender or recipient is not allowed"}
	errTooManyRecipients = &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 5, 3}, Message: "Too many recipients"}
	errCapacity          = &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 2, 2}, Message: "Mailbox capacity exceeded"}
	errTooLarge          = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: "Message exceeds fixed local limit"}
	errUnavailable       = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Mailpit delivery unavailable"}
	errLocal             = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Local error in processing"}
	errIncomplete        = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Message incomplete; nothing delivered"}
	errCommandLimit      = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Command limit exceeded"}
	errTrialBusy         = &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "Too many messages of this trial in flight; try again later"}
)

// reply is the SMTP door's answer to a plane error: data is the reply
// to a DATA that was not accepted; refusesPassword, on a credential
// check at AUTH, means the password is refused (535, a counted failure).
type reply struct {
	data            *smtp.SMTPError
	refusesPassword bool
}

// planeReplies is the SMTP door's answer to each class of plane error.
// Policy gets 5xx or 452; an outage always 451 (and 454 at AUTH), a bug
// 451 "Local error in processing". A refusal not named here is the
// writer's bug.
var planeReplies = rpc.Answers[reply]{
	Refused: map[string]reply{
		rpc.CodeInvalidCapability: {data: errInvalidCapability},
		rpc.CodeInvalidEnvelope:   {data: errNotAllowed},
		rpc.CodeSealed:            {data: errNotAllowed},
		// A shared listener whose port no trial owns: the client must say
		// which trial it writes to, by AUTH.
		rpc.CodeUnauthorized: {data: errAuthRequired, refusesPassword: true},
		// The plane no longer honours this writer's grant: its trial was
		// destroyed (or the grant is wrong). Policy, not an outage.
		rpc.CodeUnauthenticated:     {data: errNotAllowed, refusesPassword: true},
		rpc.CodePermissionDenied:    {data: errNotAllowed, refusesPassword: true},
		rpc.CodeTooManyRecipients:   {data: errTooManyRecipients},
		rpc.CodeMailboxCapacity:     {data: errCapacity},
		rpc.CodeMessageTooLarge:     {data: errTooLarge},
		rpc.CodeIdempotencyConflict: {data: errIdemConflict},
	},
	Outage: reply{data: errUnavailable},
	Bug:    reply{data: errLocal},
}

// refusal turns a plane error into the reply for a DATA that was not
// accepted, from planeReplies.
func (s *Server) refusal(err error) *smtp.SMTPError {
	r, class := planeReplies.For(err)
	s.logPlaneError("smtp", err, class)
	return r.data
}

// logPlaneError logs a plane error of class at what: an outage as a
// warning; a bug, and the plane refusing the writer's own grant, as an
// error.
func (s *Server) logPlaneError(what string, err error, class rpc.Class) {
	switch code := rpc.CodeOf(err); {
	case class == rpc.Outage:
		s.log.Warn().Str("code", code).Msg(what + ": plane unavailable")
	case class == rpc.Bug:
		s.log.Error().Err(err).Msg(what + ": the plane failed, or answered what the writer does not know")
	case code == rpc.CodeUnauthenticated || code == rpc.CodePermissionDenied:
		s.log.Error().Str("code", code).Msg("the plane refused the writer's grant")
	}
}

// session is one SMTP connection's envelope. go-smtp calls it from the
// connection's goroutine only.
type session struct {
	srv  *Server
	c    *smtp.Conn
	conn *commandConn
	port int // the listener's: on a shared writer it selects the trial
	from string
	to   []string
	// password is the AUTH password the plane accepted, if any;
	// authFailed is set by a refused one (auth.go).
	password   string
	authFailed bool
	failures   int // refused AUTHs in this session
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.conn.exhausted() {
		return errCommandLimit
	}
	if err := s.checkAuthState(); err != nil {
		return err
	}
	s.from, s.to = from, nil
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.conn.exhausted() {
		return errCommandLimit
	}
	if len(s.to) >= s.srv.cfg.MaxRecipients {
		return errTooManyRecipients
	}
	s.to = append(s.to, to)
	return nil
}

// Data reads the whole message, offers it to the plane, and answers with
// the verdict. A body that ended early (connection lost inside DATA) is
// never offered.
//
// The trial's share (limits.TrialSends) is taken before the body is read
// and held until the plane has answered: a trial's sessions can make the
// writer hold at most that many bodies at once. One more DATA waits for a
// share, its body unread (in the sockets' buffers, not the writer's), up
// to ShareWait, or until the server shuts down: a burst of a trial's
// sends queues behind its earlier ones as at a provider. go-smtp has sent 354 before Data is called, so a DATA
// that waited in vain is refused at its end: go-smtp reads its body and
// drops it, holding none of it.
func (s *session) Data(r io.Reader) error {
	release, ok := s.srv.cfg.Shares.Wait(s.shareKey(), s.srv.cfg.ShareWait, s.srv.closing)
	if !ok {
		return errTrialBusy
	}
	defer release()
	// Grown as the body arrives: a body that stops short costs what it sent.
	raw, err := connlimit.ReadBody(r, s.srv.cfg.MaxMessageBytes)
	switch {
	case errors.Is(err, smtp.ErrDataTooLarge) || errors.Is(err, smtp.ErrTooLongLine) || errors.Is(err, connlimit.ErrBodyTooLarge):
		return errTooLarge
	case err != nil:
		return errIncomplete
	}
	if s.conn.exhausted() {
		// Pipelined commands after the 421 are still in go-smtp's buffer;
		// none of them may deliver.
		return errCommandLimit
	}
	req := &rpc.SendRequest{Via: rpc.ViaSMTP, Port: s.port, Door: s.srv.cfg.Door, From: s.from, To: s.to, Raw: raw}
	switch {
	case s.password != "":
		req.Via, req.Credential, req.Port = rpc.ViaSMTPAuth, s.password, s.authPort()
	case s.srv.cfg.Mode == Select:
		req.Via = rpc.ViaSMTPSelect
		req.Namespace, _ = mailmsg.HeaderValue(raw, NamespaceHeader)
		req.Credential, _ = mailmsg.HeaderValue(raw, CapabilityHeader)
	}
	if fail := idempotency(req); fail != nil {
		return fail
	}
	// A send in flight is never closed to make room under a
	// connlimit.Pool; a session waiting for its client may be.
	connlimit.MarkBusy(s.conn.Conn, true)
	defer connlimit.MarkBusy(s.conn.Conn, false)
	ctx, cancel := context.WithTimeout(context.Background(), planeTimeout)
	defer cancel()
	resp, err := s.srv.plane.Send(ctx, req)
	if err != nil {
		return s.srv.refusal(err)
	}
	if reply := s.fault(resp.Fault); reply != nil { // faults.go
		return reply
	}
	s.srv.log.Debug().Str("namespace", resp.Namespace).Int64("seq", resp.Seq).Int("bytes", len(raw)).Msg("smtp: accepted")
	// go-smtp writes any *SMTPError Data returns as the reply; a 250 is
	// the only way to name the id, as Postfix's "queued as" does.
	return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: "OK: queued as " + resp.ID}
}

// shareKey names the trial a message is for, as far as the writer can
// tell before its body is read: the AUTH password the plane accepted
// (it opens one trial, on whichever listener), or else the door it came
// in by (a netns door's key: port numbers repeat across namespaces; else
// its port, which on a shared writer is one trial's). A selecting
// listener's messages name their namespace only in their body: its door
// is the drop-in sidecar's, one trial's.
func (s *session) shareKey() string {
	switch {
	case s.password != "":
		return "credential:" + s.password
	case s.srv.cfg.Door != "":
		return "door:" + s.srv.cfg.Door
	}
	return "port:" + strconv.Itoa(s.port)
}

// errorLog sends go-smtp's internal error lines (a client that vanished,
// a connection past its lifetime) to the debug log.
type errorLog struct{ log zerolog.Logger }

func (e errorLog) Printf(format string, v ...any) { e.log.Debug().Msgf("smtp: "+format, v...) }
func (e errorLog) Println(v ...any)               { e.log.Debug().Msgf("smtp: %v", v) }
