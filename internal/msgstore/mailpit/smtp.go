package mailpit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/msgstore"
	"github.com/websitebench/mailplane/internal/redact"
)

// The SMTP client is ours, not net/smtp's or go-smtp's: both rewrite bare
// LF as CRLF in DATA, and the plane's bytes must reach Mailpit as they are.
// It speaks only what the store needs (EHLO, MAIL, RCPT, DATA, NOOP, QUIT)
// and bounds every reply it reads.

// Limits on Mailpit's SMTP replies.
const (
	maxReplyLine  = 4 << 10
	maxReplyLines = 32
	// maxReplyText is how much of a reply an error quotes (redacted), as
	// the reference does.
	maxReplyText = 200
	// heloName is the name the store gives in EHLO, the reference's.
	heloName = "websitebench.local"
)

// smtpConn is one SMTP session with Mailpit, reused for many messages.
type smtpConn struct {
	nc      net.Conn
	br      *bufio.Reader
	maxSize int // Mailpit's SIZE from EHLO; 0: none announced
	idle    time.Time
}

// reply is one (possibly multi-line) SMTP reply.
type reply struct {
	code  int
	lines []string
}

func (r reply) text() string {
	t := strings.Join(r.lines, " | ")
	t = redact.Text(t)
	if len(t) > maxReplyText {
		t = t[:maxReplyText]
	}
	return t
}

// smtpError is a reply Mailpit should not have given at stage. A 5xx is a
// refusal of this message (msgstore.ErrRefused); anything else an outage.
type smtpError struct {
	stage string
	r     reply
}

func (e *smtpError) Error() string {
	return fmt.Sprintf("mailpit: %s answered %d: %s", e.stage, e.r.code, e.r.text())
}

func (e *smtpError) Unwrap() error {
	if e.r.code >= 500 && e.r.code < 600 {
		return msgstore.ErrRefused
	}
	return nil
}

// dialSMTP opens a session: connect, read the greeting, EHLO.
func dialSMTP(ctx context.Context, path string) (*smtpConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("mailpit: SMTP socket: %w", err)
	}
	c := &smtpConn{nc: nc, br: bufio.NewReaderSize(nc, maxReplyLine)}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	r, err := c.read()
	if err == nil && r.code != 220 {
		err = &smtpError{stage: "greeting", r: r}
	}
	if err == nil {
		r, err = c.cmd("EHLO " + heloName)
		if err == nil && r.code != 250 {
			err = &smtpError{stage: "EHLO", r: r}
		}
	}
	if err != nil {
		nc.Close()
		if _, ok := err.(*smtpError); ok {
			// Mailpit is up but will not talk: an outage, whatever the code.
			return nil, fmt.Errorf("mailpit: SMTP session refused: %s: %w", err, errDown)
		}
		return nil, err
	}
	for _, l := range r.lines {
		if f := strings.Fields(l); len(f) == 2 && strings.EqualFold(f[0], "SIZE") {
			if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
				c.maxSize = n
			}
		}
	}
	return c, nil
}

// read reads one reply, at most maxReplyLines lines of maxReplyLine bytes.
func (c *smtpConn) read() (reply, error) {
	var r reply
	for {
		line, err := c.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return r, errors.New("mailpit: SMTP reply line too long")
		}
		if err != nil {
			return r, fmt.Errorf("mailpit: SMTP read: %w", err)
		}
		s := strings.TrimRight(string(line), "\r\n")
		if len(s) < 3 {
			return r, errors.New("mailpit: malformed SMTP reply")
		}
		code, err := strconv.Atoi(s[:3])
		if err != nil || code < 100 || code > 599 || (r.code != 0 && code != r.code) {
			return r, errors.New("mailpit: malformed SMTP reply")
		}
		r.code = code
		more := len(s) > 3 && s[3] == '-'
		if len(s) > 3 && s[3] != '-' && s[3] != ' ' {
			return r, errors.New("mailpit: malformed SMTP reply")
		}
		if len(s) > 4 {
			r.lines = append(r.lines, s[4:])
		}
		if !more {
			return r, nil
		}
		if len(r.lines) >= maxReplyLines {
			return r, errors.New("mailpit: SMTP reply has too many lines")
		}
	}
}

// cmd sends one command line and reads its reply.
func (c *smtpConn) cmd(line string) (reply, error) {
	if _, err := c.nc.Write([]byte(line + "\r\n")); err != nil {
		return reply{}, fmt.Errorf("mailpit: SMTP write: %w", err)
	}
	return c.read()
}

// errStale marks a failure of the first command on a reused session: the
// session may simply have been closed by Mailpit while it sat idle, and
// nothing was sent yet, so the message is tried once more on a new one.
type errStale struct{ err error }

func (e errStale) Error() string { return e.err.Error() }
func (e errStale) Unwrap() error { return e.err }

// send runs one mail transaction and returns the ID Mailpit gave the
// message. It fails before DATA (nothing stored) unless DATA itself fails.
func (c *smtpConn) send(from string, to []string, f frame) (string, error) {
	if c.maxSize > 0 && f.size > c.maxSize {
		return "", fmt.Errorf("mailpit: message of %d bytes is over Mailpit's limit of %d: %w", f.size, c.maxSize, msgstore.ErrRefused)
	}
	// MAIL, RCPT and DATA go in one write and their replies are read
	// after: the Put sits inside the plane's serialized ledger transaction,
	// so each round trip saved is throughput. Mailpit does not announce
	// PIPELINING, but its server reads commands one line at a time from a
	// buffer and answers each in order, which is all this needs. The
	// message itself is sent only after DATA's 354: were DATA refused, its
	// lines would be read as commands. When a reply before 354 is wrong the
	// caller closes the session, and Mailpit drops a DATA cut short.
	var cmds strings.Builder
	cmds.WriteString("MAIL FROM:<" + from + ">\r\n")
	for _, rcpt := range to {
		cmds.WriteString("RCPT TO:<" + rcpt + ">\r\n")
	}
	cmds.WriteString("DATA\r\n")
	if _, err := c.nc.Write([]byte(cmds.String())); err != nil {
		return "", errStale{fmt.Errorf("mailpit: SMTP write: %w", err)}
	}
	r, err := c.read()
	if err != nil || r.code == 421 {
		if err == nil {
			err = &smtpError{stage: "MAIL", r: r}
		}
		return "", errStale{err}
	}
	var refused error
	if r.code != 250 {
		refused = &smtpError{stage: "MAIL", r: r}
	}
	for range to {
		if r, err = c.read(); err != nil {
			return "", err
		}
		if refused == nil && r.code != 250 && r.code != 251 {
			refused = &smtpError{stage: "RCPT", r: r}
		}
	}
	if r, err = c.read(); err != nil {
		return "", err
	}
	if refused != nil {
		return "", refused
	}
	if r.code != 354 {
		return "", &smtpError{stage: "DATA", r: r}
	}
	if _, err := c.nc.Write(f.data); err != nil {
		return "", fmt.Errorf("mailpit: SMTP write: %w", err)
	}
	if r, err = c.read(); err != nil {
		return "", err
	}
	if r.code != 250 {
		return "", &smtpError{stage: "end of DATA", r: r}
	}
	id := queuedID(strings.Join(r.lines, " "))
	if id == "" {
		// A Mailpit that drops messages it accepts (--ignore-duplicate-ids,
		// --smtp-ignore-rejected-recipients) answers 250 without an ID:
		// nothing was kept, and sending again will not change that.
		return "", fmt.Errorf("mailpit: accepted the message without storing it (%s): %w", r.text(), msgstore.ErrRefused)
	}
	return id, nil
}

// noop checks that the session is alive.
func (c *smtpConn) noop() error {
	r, err := c.cmd("NOOP")
	if err != nil {
		return err
	}
	if r.code != 250 {
		return &smtpError{stage: "NOOP", r: r}
	}
	return nil
}

func (c *smtpConn) close() {
	c.nc.SetDeadline(time.Now().Add(100 * time.Millisecond))
	c.nc.Write([]byte("QUIT\r\n"))
	c.nc.Close()
}
