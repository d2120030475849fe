package smtpd

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// SMTP AUTH (RFC 4954), PLAIN and LOGIN, as Resend's SMTP service takes it:
// any user name, and the password is the trial's mail-API token (whatever
// POST /emails takes as a Bearer). The writer does not judge the password:
// it asks the plane (rpc.MethodCredentialCheck, rpc.ViaSMTPAuth), so a wrong
// one is 535 at AUTH and nothing the client sends afterwards is stored
// under it. Each message of an authenticated session is then offered with
// rpc.ViaSMTPAuth and that password. A client that never authenticates
// keeps the listener's behaviour (fixed or select), unless the listener
// requires AUTH (Config.RequireAuth): then MAIL is 530, the same reply
// on every such listener. On a trial's own port (Config.TrialPort) the
// password must open that port's trial. A session gets MaxAuthFailures
// attempts, and failures slow down the listener's refusals (authfail.go).
//
// AUTH is offered on a TLS connection (after STARTTLS, or on the implicit
// TLS listener), and on a plain one only when the client reached the
// listener at one of Config.PlainAuthNets (loopback by default): there the
// password never crosses a network. Elsewhere AUTH is not advertised and
// is answered 530, as RFC 3207 says.

// Auth replies.
var (
	errTLSRequired       = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Must issue a STARTTLS command first"}
	errAuthInTransaction = &smtp.SMTPError{Code: 503, EnhancedCode: smtp.EnhancedCode{5, 5, 1}, Message: "AUTH not permitted during a mail transaction"}
	errAuthUnavailable   = &smtp.SMTPError{Code: 454, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Temporary authentication failure"}
	errAuthSyntax        = &smtp.SMTPError{Code: 501, EnhancedCode: smtp.EnhancedCode{5, 5, 2}, Message: "Cannot decode AUTH response"}
	errAuthRequired      = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}
)

// DefaultPlainAuthNets are where AUTH is offered without TLS: loopback.
var DefaultPlainAuthNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// secure reports whether the session runs over TLS.
func (s *session) secure() bool {
	if s.srv.cfg.ImplicitTLS {
		return true
	}
	if s.c == nil {
		return false
	}
	_, ok := s.c.TLSConnectionState()
	return ok
}

// authAllowed reports whether this connection may authenticate: over TLS,
// or reached at an address of PlainAuthNets.
func (s *session) authAllowed() bool {
	if s.secure() {
		return true
	}
	if s.c == nil || len(s.srv.cfg.PlainAuthNets) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(s.c.Conn().LocalAddr().String())
	if err != nil {
		return false
	}
	addr := ap.Addr().Unmap()
	for _, p := range s.srv.cfg.PlainAuthNets {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// AuthMechanisms is what EHLO advertises: nothing where AUTH is not
// allowed.
func (s *session) AuthMechanisms() []string {
	if !s.authAllowed() {
		return nil
	}
	return []string{sasl.Plain, sasl.Login}
}

// Auth starts one AUTH exchange.
func (s *session) Auth(mech string) (sasl.Server, error) {
	if s.conn.exhausted() {
		return nil, errCommandLimit
	}
	if !s.authAllowed() {
		return nil, errTLSRequired
	}
	if s.from != "" {
		return nil, errAuthInTransaction
	}
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(_, _, password string) error { return s.authenticate(password) }), nil
	case sasl.Login:
		return &loginServer{check: s.authenticate}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

// checkAuthState refuses a transaction after a refused AUTH until an AUTH
// succeeds: a client that ignores its 535 would otherwise have its mail
// stored as if it had never tried, under a credential it does not hold.
func (s *session) checkAuthState() error {
	if s.password == "" && (s.authFailed || s.srv.cfg.RequireAuth) {
		return errAuthRequired
	}
	return nil
}

// authenticate asks the plane whether password opens the trial's mail
// API; only then does the session keep it.
func (s *session) authenticate(password string) error {
	ctx, cancel := context.WithTimeout(context.Background(), planeTimeout)
	defer cancel()
	err := s.srv.plane.CheckCredential(ctx, &rpc.CredentialRequest{Via: rpc.ViaSMTPAuth, Credential: password, Port: s.authPort()})
	if err == nil {
		s.password, s.authFailed = password, false
		return nil
	}
	r, class := planeReplies.For(err)
	s.srv.logPlaneError("smtp auth", err, class)
	if class == rpc.Refused && r.refusesPassword {
		return s.authFailure()
	}
	if class == rpc.Refused {
		// A refusal of a message, to a credential check: the writer's bug.
		s.srv.log.Error().Str("code", rpc.CodeOf(err)).Msg("smtp auth: unexpected answer from the plane")
	}
	// Whether the password is good cannot be known now.
	return errAuthUnavailable
}

// authFailure answers a refused AUTH, after the listener's delay
// (authfail.go): 535, or 421 and the end of the session at its last
// allowed failure. Past the refusal, MAIL is refused until an AUTH
// succeeds.
func (s *session) authFailure() error {
	s.authFailed = true
	s.failures++
	time.Sleep(min(s.srv.failures.fail(time.Now()), s.srv.cfg.authFailureDelay()))
	if s.failures >= MaxAuthFailures {
		s.conn.closeAfterReply()
		return errAuthLockout
	}
	return smtp.ErrAuthFailed
}

// authPort is the port an AUTH password must open on a trial's own
// listener (Config.TrialPort): the plane refuses another trial's token
// there as it refuses a wrong one. Elsewhere it is 0: the token alone
// selects the trial.
func (s *session) authPort() int {
	if s.srv.cfg.TrialPort {
		return s.port
	}
	return 0
}

// loginServer is the LOGIN mechanism (draft-murchison-sasl-login), which
// go-sasl offers only as a client: a user name, then a password, each
// asked for. Outlook, older Java and PHP mailers still use it.
type loginServer struct {
	check func(password string) error
	step  int
}

func (l *loginServer) Next(response []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step = 1
		if response != nil {
			// An initial response is the user name (RFC 4954 clients
			// that send one with AUTH LOGIN).
			l.step = 2
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 1:
		l.step = 2
		return []byte("Password:"), false, nil
	case 2:
		l.step = 3
		return nil, true, l.check(string(response))
	}
	return nil, true, errAuthSyntax
}

// innerConn returns the connection under a TLS connection, so that the
// command count of a session survives STARTTLS.
func innerConn(c net.Conn) net.Conn {
	if t, ok := c.(*tls.Conn); ok {
		return t.NetConn()
	}
	return c
}
