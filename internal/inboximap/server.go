// Package inboximap is the agent's mailbox over IMAP (IMAP4rev1 with
// IDLE, emersion's go-imap v1 server): one trial's INBOX, exactly the
// mail the HTML inbox shows, for agents that read mail with a mail client.
//
// The password is the trial's inbox token (the user name is not looked
// at: a mail client's account name, the trial's address or anything). It
// is decided at LOGIN or AUTHENTICATE PLAIN, through the plane's reader
// check as the inbox pages' path token is (rpc.MethodReadCheck, an
// accepted token remembered for seconds by connlimit.Callers), and only
// once the connection is TLS (STARTTLS on one port, implicit TLS on the
// other). Before that, a connection may send IMAPPreauthBytes and take
// IMAPPreauthTimeout (package limits), and at most IMAPPreauthConns wait
// at once, the oldest closed for a new one; its third failed login ends
// it. A
// logged-in connection reads through the plane with that token at door
// imap: its list is the trial's mail (planted mail too, no code, no
// evaluator data), rebuilt as MIME messages (message.go); fetching any
// of a message's content (BODY[], BODY.PEEK[TEXT], RFC822...) is a get,
// which the trail records as an open, as the inbox page's is. \Seen and
// \Flagged may be set and cleared (the plane keeps them: rpc.MethodFlag),
// and a message read is \Seen; nothing else may change: APPEND, COPY,
// MOVE, EXPUNGE, CREATE, \Deleted and every other flag are NO with the
// reason. UIDs are the trial's message ids.
//
// Each trial with a connection logged in has one watcher, a plane wait
// like the gateway's, which tells the trial's connections in IDLE of new
// mail (EXISTS) and ends them all when the trial's token is refused (the
// trial closed); a connection not in IDLE learns of new mail at its next
// NOOP, FETCH or SEARCH. (go-imap's own broadcast of backend updates
// reads each connection's state unlocked, a data race: it is not used.)
// Per trial, logged-in connections and IDLEs are capped.
package inboximap

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-imap"
	"github.com/emersion/go-imap/backend"
	"github.com/emersion/go-imap/responses"
	"github.com/emersion/go-imap/server"
	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Plane is what the mailbox reads through: the inbox's plane client,
// with its shared inbox grant.
type Plane interface {
	ResolveReader(ctx context.Context, req *rpc.ReadRequest) (rpc.CredentialResponse, error)
	List(ctx context.Context, req *rpc.ReadRequest) ([]rpc.Message, error)
	Get(ctx context.Context, req *rpc.ReadRequest) (rpc.Message, error)
	Flag(ctx context.Context, req *rpc.FlagRequest) error
}

const (
	// planeTimeout bounds one plane call of a command.
	planeTimeout = 10 * time.Second
	// writeTimeout bounds one write to a client.
	writeTimeout = 30 * time.Second
	// retryAfter is how long a watcher waits after the plane was
	// unavailable before it asks again.
	retryAfter = time.Second
)

// Server is the IMAP door of a shared inbox.
type Server struct {
	plane   Plane
	log     zerolog.Logger
	known   connlimit.Callers
	conns   *connlimit.Shares // logged-in connections per trial
	idles   *connlimit.Shares // IDLEs per trial
	maxOpen int
	imap    *server.Server
	ctx     context.Context // the door's life: logins, reads and watchers end with it

	mu       sync.Mutex
	open     map[string]*conn // by door, remote and local address
	pre      map[*conn]uint64 // not logged in yet, by order of arrival
	accepted uint64
	trials   map[string]*trial
	doors    map[string]*server.Server // agent doors, by their trial's namespace
}

// trial is one trial's logged-in connections and its watcher.
type trial struct {
	ns, token string
	conns     map[*conn]bool
	idling    map[*conn]bool
	seen      atomic.Int64 // messages the watcher has counted
	stop      context.CancelFunc
}

// New returns the IMAP door reading through plane, with tlsConfig for
// STARTTLS (and for the implicit-TLS port, Serve).
func New(ctx context.Context, plane Plane, tlsConfig *tls.Config, log zerolog.Logger) *Server {
	s := &Server{plane: plane, log: log, conns: connlimit.NewShares(limits.IMAPTrialConns),
		idles: connlimit.NewShares(limits.IMAPTrialIdles), maxOpen: connlimit.ProcessCap(),
		ctx: ctx, open: map[string]*conn{}, pre: map[*conn]uint64{}, trials: map[string]*trial{}, doors: map[string]*server.Server{}}
	s.imap = newIMAP(s, tlsConfig, log)
	return s
}

// newIMAP is go-imap's server as this door configures it: no login
// before TLS, literals bounded, no automatic logout (conn keeps the
// deadlines), IDLE capped per trial. The fuzz target parses commands
// through the same configuration.
func newIMAP(bkd backend.Backend, tlsConfig *tls.Config, log zerolog.Logger) *server.Server {
	is := server.New(bkd)
	is.TLSConfig = tlsConfig
	is.AllowInsecureAuth = false
	is.MaxLiteralSize = limits.IMAPLiteralBytes
	is.ErrorLog = errorLog{log}
	s, _ := bkd.(*Server)
	d, isDoor := bkd.(door)
	if isDoor {
		s = d.s
	}
	is.Enable(lineBound{s, d.ns})
	if s != nil {
		// Enable skips an extension that offers IDLE (go-imap-idle's,
		// built in since): this one offers it once enabled.
		ic := &idleCap{s: s}
		is.Enable(ic)
		ic.on = true
	}
	return is
}

// Serve answers IMAP with STARTTLS on plain and implicit TLS on secure
// until ctx (given to New) ends, then closes every connection.
func (s *Server) Serve(plain, secure net.Listener) error {
	// One Serve for both: go-imap's Serve is not safe to run twice at once.
	ln := merge(&listener{Listener: plain, s: s}, tls.NewListener(&listener{Listener: secure, s: s}, s.imap.TLSConfig))
	errs := make(chan error, 1)
	go func() { errs <- s.imap.Serve(ln) }()
	select {
	case <-s.ctx.Done():
		s.imap.Close()
		s.closeDoors()
		return nil
	case err := <-errs:
		s.imap.Close()
		s.closeDoors()
		return err
	}
}

// An agent door is an IMAP listener inside the agent's network namespace,
// which the supervisor binds there and hands over: only that namespace's
// processes reach it, so the kernel already separates, and LOGIN and
// AUTHENTICATE PLAIN are taken there without TLS. It is one trial's: a
// token of any other trial is refused as a wrong password.

// door is the backend of an agent door's own go-imap server (go-imap
// allows insecure auth per server): its logins must be trial ns's.
type door struct {
	s  *Server
	ns string
}

func (d door) Login(info *imap.ConnInfo, _, password string) (backend.User, error) {
	return d.s.login(info, d.ns, password)
}

// ServeDoor serves ln as trial ns's agent door until CloseDoor(ns) or the
// end of the door's life (New's ctx); a door ns had is closed first.
func (s *Server) ServeDoor(ns string, ln net.Listener) {
	is := newIMAP(door{s: s, ns: ns}, nil, s.log)
	is.AllowInsecureAuth = true // the namespace's loopback: see door
	s.mu.Lock()
	old := s.doors[ns]
	s.doors[ns] = is
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
	go is.Serve(&listener{Listener: ln, s: s, door: ns})
}

// CloseDoor closes trial ns's agent door and its connections.
func (s *Server) CloseDoor(ns string) {
	s.mu.Lock()
	is := s.doors[ns]
	delete(s.doors, ns)
	s.mu.Unlock()
	if is != nil {
		is.Close()
	}
}

func (s *Server) closeDoors() {
	s.mu.Lock()
	doors := s.doors
	s.doors = map[string]*server.Server{}
	s.mu.Unlock()
	for _, is := range doors {
		is.Close()
	}
}

// merged accepts from several listeners as one.
type merged struct {
	lns   []net.Listener
	conns chan net.Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
}

func merge(lns ...net.Listener) *merged {
	m := &merged{lns: lns, conns: make(chan net.Conn), errs: make(chan error, len(lns)), done: make(chan struct{})}
	for _, ln := range lns {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					m.errs <- err
					return
				}
				select {
				case m.conns <- c:
				case <-m.done:
					c.Close()
					return
				}
			}
		}()
	}
	return m
}

func (m *merged) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case err := <-m.errs:
		return nil, err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *merged) Close() error {
	m.once.Do(func() {
		close(m.done)
		for _, ln := range m.lns {
			ln.Close()
		}
	})
	return nil
}

func (m *merged) Addr() net.Addr { return m.lns[0].Addr() }

// Login decides the caller from its password alone: the trial's inbox
// token, which the plane resolves to the trial. A connection's third
// failure ends it.
func (s *Server) Login(info *imap.ConnInfo, _, password string) (backend.User, error) {
	return s.login(info, "", password)
}

// login is Login at the host's ports (door "") or at trial door's agent
// door, which takes that trial's token only.
func (s *Server) login(info *imap.ConnInfo, door, password string) (backend.User, error) {
	c := s.connOf(door, info)
	if c == nil {
		return nil, errUnavail
	}
	if c.fails.Load() >= limits.IMAPFailedLogins {
		c.end()
		return nil, backend.ErrInvalidCredentials
	}
	ns, err := "", error(nil)
	if validToken(password) {
		ns, err = s.known.Resolve(password, time.Now(), func() (string, error) {
			ctx, cancel := context.WithTimeout(s.ctx, planeTimeout)
			defer cancel()
			resp, err := s.plane.ResolveReader(ctx, &rpc.ReadRequest{InboxToken: password})
			return resp.Namespace, err
		})
	} else {
		err = rpc.Errorf(rpc.CodeNotFound, "no such token")
	}
	if err == nil && door != "" && ns != door {
		err = rpc.Errorf(rpc.CodeNotFound, "another trial's token") // as a wrong one: says nothing of that trial
	}
	if err != nil {
		switch a, _ := answers.For(err); a {
		case answerUnavail:
			s.log.Warn().Str("code", rpc.CodeOf(err)).Msg("imap: plane unavailable at login")
			return nil, errUnavail
		case answerGone:
			if c.fails.Add(1) >= limits.IMAPFailedLogins {
				c.closing.Store(true) // after this NO
			}
			return nil, backend.ErrInvalidCredentials
		default:
			s.log.Error().Str("code", rpc.CodeOf(err)).Msg("imap: the plane failed the inbox's reader check")
			return nil, errBug
		}
	}
	release, ok := s.conns.Take(ns)
	if !ok {
		return nil, errors.New("too many connections to this mailbox; log out of one first")
	}
	u := &user{srv: s, c: c, token: password, ns: ns}
	if !s.join(u, release) {
		release()
		return nil, errUnavail // closed meanwhile, evicted by newer ones
	}
	c.loggedIn()
	return u, nil
}

// validToken is an inbox token's syntax (package inbox's tokenSyntax):
// anything else is refused without asking the plane.
func validToken(t string) bool {
	if len(t) < 32 || len(t) > 256 {
		return false
	}
	for i := range len(t) {
		switch b := t[i]; {
		case 'A' <= b && b <= 'Z', 'a' <= b && b <= 'z', '0' <= b && b <= '9', b == '.', b == '_', b == '~', b == '-':
		default:
			return false
		}
	}
	return true
}

// join counts u's connection under its trial, starting the trial's
// watcher with the first, and no longer as waiting for its login; the
// connection's Close gives back release. False: the connection was
// closed before (release is the caller's to give back).
func (s *Server) join(u *user, release func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-u.c.closed:
		return false
	default:
	}
	delete(s.pre, u.c)
	u.c.release = release
	t := s.trials[u.ns]
	if t == nil {
		ctx, stop := context.WithCancel(s.ctx)
		t = &trial{ns: u.ns, token: u.token, conns: map[*conn]bool{}, idling: map[*conn]bool{}, stop: stop}
		s.trials[u.ns] = t
		go s.watch(ctx, t)
	}
	t.conns[u.c] = true
	u.c.trial = t
	return true
}

// leave forgets a closed connection, and returns what it holds of its
// trial's share (nil if it never logged in).
func (s *Server) leave(c *conn) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, c.key)
	delete(s.pre, c)
	if t := c.trial; t != nil {
		delete(t.conns, c)
		delete(t.idling, c)
		if len(t.conns) == 0 {
			t.stop()
			if s.trials[t.ns] == t {
				delete(s.trials, t.ns)
			}
		}
	}
	return c.release
}

// seen is the number of messages the watcher of ns has counted (0: no
// watcher, or nothing yet).
func (s *Server) seen(ns string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.trials[ns]; t != nil {
		return int(t.seen.Load())
	}
	return 0
}

// watch follows t's mail with the plane's wait: it counts what is there,
// then tells t's connections each time more arrives. A refusal (the
// trial closed, or its token was rotated away) ends them all.
func (s *Server) watch(ctx context.Context, t *trial) {
	var after, seen int64
	wait := int64(0) // the first pages at once, then waits
	for ctx.Err() == nil {
		msgs, err := s.plane.List(ctx, &rpc.ReadRequest{InboxToken: t.token, After: after, WaitMillis: wait, Door: rpc.DoorIMAP})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// A token that opens nothing now ends the trial's connections;
			// after an outage or a bug (logged) the wait is tried again.
			switch a, _ := answers.For(err); a {
			case answerGone:
				s.endTrial(t)
				return
			case answerBug:
				s.log.Error().Str("code", rpc.CodeOf(err)).Msg("imap: the plane failed the inbox's wait")
			}
			select {
			case <-ctx.Done():
			case <-time.After(retryAfter):
			}
			continue
		}
		for _, m := range msgs {
			after = max(after, m.ID)
		}
		seen += int64(len(msgs))
		t.seen.Store(seen)
		// Every count is told, the first too (mail may have come after
		// a connection's SELECT and before this list): an EXISTS that
		// repeats what a client knows is harmless.
		if len(msgs) > 0 {
			s.mu.Lock()
			for c := range t.idling {
				go c.exists(int(seen))
			}
			s.mu.Unlock()
		}
		if len(msgs) == 0 {
			wait = rpc.MaxWait.Milliseconds()
		}
	}
}

// idle marks c as in IDLE, or not: the watcher tells it of new mail.
func (s *Server) idle(c *conn, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := c.trial; t != nil && on && t.conns[c] {
		t.idling[c] = true
	} else if t != nil {
		delete(t.idling, c)
	}
}

// endTrial ends every connection of t, and forgets its token.
func (s *Server) endTrial(t *trial) {
	s.known.Forget(t.token)
	s.mu.Lock()
	cs := make([]*conn, 0, len(t.conns))
	for c := range t.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.end()
	}
}

func (s *Server) connOf(door string, info *imap.ConnInfo) *conn {
	if info == nil || info.RemoteAddr == nil || info.LocalAddr == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[connKey(door, info.RemoteAddr, info.LocalAddr)]
}

// connKey names a connection: addresses repeat across namespaces, so an
// agent door's are prefixed with its trial's namespace.
func connKey(door string, remote, local net.Addr) string {
	return door + "|" + remote.String() + "|" + local.String()
}

// listener registers the connections it accepts, over the process's cap
// closed at once.
type listener struct {
	net.Listener
	s    *Server
	door string // an agent door's trial namespace; empty: a host port
}

func (l *listener) Accept() (net.Conn, error) {
	var pause time.Duration
	for {
		nc, err := l.Listener.Accept()
		if errors.Is(err, net.ErrClosed) {
			return nil, err
		}
		if err != nil {
			// Out of descriptors, or a connection reset before it was
			// accepted: go-imap's Serve would end on it; wait and go on,
			// as net/http does.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			l.s.log.Warn().Err(err).Dur("retry_in", pause).Msg("imap: accept failed")
			select {
			case <-time.After(pause):
				continue
			case <-l.s.ctx.Done():
				return nil, err
			}
		}
		pause = 0
		c := &conn{Conn: nc, s: l.s, key: connKey(l.door, nc.RemoteAddr(), nc.LocalAddr()), closed: make(chan struct{})}
		l.s.mu.Lock()
		full := len(l.s.open) >= l.s.maxOpen
		var oldest *conn
		if !full {
			l.s.open[c.key] = c
			if len(l.s.pre) >= limits.IMAPPreauthConns {
				for w, n := range l.s.pre {
					if oldest == nil || n < l.s.pre[oldest] {
						oldest = w
					}
				}
				delete(l.s.pre, oldest)
			}
			l.s.accepted++
			l.s.pre[c] = l.s.accepted
		}
		l.s.mu.Unlock()
		if full {
			nc.Close()
			continue
		}
		if oldest != nil {
			oldest.end() // the oldest not logged in makes room
		}
		nc.SetDeadline(time.Now().Add(limits.IMAPPreauthTimeout))
		return c, nil
	}
}

// errTooMuch ends a connection that sent more than its bound.
var errTooMuch = errors.New("imap: the client sent more than its bound")

// lineBound bounds every line a client sends to limits.IMAPLineBytes,
// and every command, its literals included, to limits.IMAPCommandBytes.
// It reads the client's bytes as the server does, decrypted, through
// go-imap's per-connection mirror of what it reads (SetDebug, kept across
// STARTTLS), whose write error ends the connection. go-imap's reader
// builds an atom a character at a time (atom += string(char)), which is
// quadratic in the atom's length: the bound keeps a line's cost small.
// It also hands each of the door's connections its go-imap connection,
// to tell it of new mail.
type lineBound struct {
	s    *Server
	door string
}

func (lineBound) Capabilities(server.Conn) []string    { return nil }
func (lineBound) Command(string) server.HandlerFactory { return nil }

func (l lineBound) NewConn(ic server.Conn) server.Conn {
	ic.(interface{ SetDebug(io.Writer) }).SetDebug(imap.NewDebugWriter(io.Discard, &lineTap{}))
	if l.s != nil {
		if c := l.s.connOf(l.door, ic.Info()); c != nil {
			c.ic = ic // before the connection is served
		}
	}
	return ic
}

// lineTap counts the bytes of the client's line (its CR included)
// before its line feed, and those of its command: a line that announces
// a literal ({n} or {n+}, n within go-imap's MaxLiteralSize, which
// refuses a larger one) goes on after the literal's n bytes, which are
// the line's too and never end it. It also counts the bytes of each atom
// as go-imap's reader delimits one (outside a quoted string, up to a
// space, a parenthesis, a brace or a CR, and inside square brackets up
// to the CR), the reader's cost being the square of that count.
type lineTap struct {
	run  int    // the line's bytes
	cmd  int    // the command's bytes
	lit  int    // bytes of an announced literal still to come
	tail []byte // the line's last bytes, to tell a literal's announcement

	atom     int  // the bytes of the atom being read
	brackets int  // its open square brackets
	quoted   bool // in a quoted string ...
	escaped  bool // ... just after its backslash
}

func (l *lineTap) Write(p []byte) (int, error) {
	for _, b := range p {
		if l.cmd++; l.cmd > limits.IMAPCommandBytes {
			return 0, errTooMuch
		}
		if l.lit > 0 {
			l.lit--
		} else if b == '\n' {
			l.lit = literal(l.tail)
			if l.lit == 0 {
				l.cmd = 0
			}
			l.run, l.tail = 0, l.tail[:0]
			l.atom, l.brackets, l.quoted, l.escaped = 0, 0, false, false
			continue
		} else {
			if l.tail = append(l.tail, b); len(l.tail) > 32 {
				l.tail = append(l.tail[:0], l.tail[len(l.tail)-16:]...)
			}
			if !l.atomByte(b) {
				return 0, errTooMuch
			}
		}
		if l.run++; l.run > limits.IMAPLineBytes {
			return 0, errTooMuch
		}
	}
	return len(p), nil
}

// atomByte follows one byte of a line outside a literal, and reports
// whether the atom it is part of is still within limits.IMAPAtomBytes.
func (l *lineTap) atomByte(b byte) bool {
	switch {
	case l.quoted:
		switch {
		case l.escaped:
			l.escaped = false
		case b == '\\':
			l.escaped = true
		case b == '"':
			l.quoted = false
		}
		return true
	case b == '\r':
		l.atom, l.brackets = 0, 0
		return true
	case l.brackets == 0 && (b == ' ' || b == '(' || b == ')' || b == '{' || b == '"'):
		l.atom, l.quoted = 0, b == '"'
		return true
	case b == '[':
		l.brackets++
	case b == ']' && l.brackets > 0:
		l.brackets--
	}
	l.atom++
	return l.atom <= limits.IMAPAtomBytes
}

// literal is the size a line's end announces ("{n}\r" or "{n+}\r"), 0 if
// none or one over limits.IMAPLiteralBytes (refused, so never sent).
func literal(end []byte) int {
	s, ok := bytes.CutSuffix(end, []byte("}\r"))
	if !ok {
		return 0
	}
	s = bytes.TrimSuffix(s, []byte("+"))
	i := bytes.LastIndexByte(s, '{')
	if i < 0 || i == len(s)-1 || len(s)-i > 6 {
		return 0
	}
	n := 0
	for _, d := range s[i+1:] {
		if d < '0' || d > '9' {
			return 0
		}
		n = 10*n + int(d-'0')
	}
	if n > limits.IMAPLiteralBytes {
		return 0
	}
	return n
}

// conn is one client connection under the door's bounds: before login,
// IMAPPreauthBytes read and the deadline Accept set; after, IMAPIdle
// between reads (lineBound bounds its lines).
type conn struct {
	net.Conn
	s       *Server
	key     string
	authed  atomic.Bool
	closing atomic.Bool // end at the next read (after the answer to this command)
	fails   atomic.Int32
	read    atomic.Int64 // before login
	trial   *trial       // under Server.mu
	ic      server.Conn  // go-imap's connection over this one
	release func()       // its trial's share, under Server.mu
	once    sync.Once
	closed  chan struct{}
}

// exists tells the client the mailbox holds n messages, unless the
// connection has closed.
func (c *conn) exists(n int) {
	st := imap.NewMailboxStatus(inboxName, []imap.StatusItem{imap.StatusMessages})
	st.Messages = uint32(n)
	select {
	case c.ic.Context().Responses <- &responses.Select{Mailbox: st}:
	case <-c.closed:
	}
}

func (c *conn) Read(p []byte) (int, error) {
	if c.closing.Load() {
		return 0, io.EOF
	}
	if c.authed.Load() {
		c.Conn.SetReadDeadline(time.Now().Add(limits.IMAPIdle))
		return c.Conn.Read(p)
	}
	n, err := c.Conn.Read(p)
	if c.read.Add(int64(n)) > limits.IMAPPreauthBytes {
		return 0, errTooMuch
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	if c.authed.Load() {
		c.Conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	return c.Conn.Write(p)
}

// loggedIn lifts the pre-login bounds.
func (c *conn) loggedIn() {
	c.Conn.SetDeadline(time.Time{})
	c.authed.Store(true)
}

// end closes the connection now.
func (c *conn) end() {
	c.closing.Store(true)
	c.Close()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		close(c.closed)
		if release := c.s.leave(c); release != nil {
			release()
		}
	})
	return err
}

// idleCap caps a trial's IDLEs: go-imap's IDLE, counted.
type idleCap struct {
	s  *Server
	on bool // set once, before serving
}

func (*idleCap) Capabilities(server.Conn) []string { return nil }

func (x *idleCap) Command(name string) server.HandlerFactory {
	if name != "IDLE" || !x.on {
		return nil
	}
	return func() server.Handler { return &idle{s: x.s} }
}

type idle struct {
	server.Idle
	s *Server
}

func (h *idle) Handle(conn server.Conn) error {
	u, ok := conn.Context().User.(*user)
	if !ok {
		return errors.New("log in first")
	}
	release, ok := h.s.idles.Take(u.ns)
	if !ok {
		return errors.New("too many IDLE commands on this mailbox at once")
	}
	defer release()
	h.s.idle(u.c, true)
	defer h.s.idle(u.c, false)
	// Mail the watcher counted before this IDLE is told now.
	if mb, ok := conn.Context().Mailbox.(*mailbox); ok {
		if err := mb.catchUp(); err != nil {
			return err
		}
	}
	return h.Idle.Handle(conn)
}

// errorLog is go-imap's error log in ours, at debug: it logs every
// client that goes away.
type errorLog struct{ log zerolog.Logger }

func (e errorLog) Printf(format string, v ...any) { e.log.Debug().Msgf("imap: "+format, v...) }
func (e errorLog) Println(v ...any)               { e.log.Debug().Msgf("imap: %v", v) }
