package mailpit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
)

// errDown marks an answer by which Mailpit says it cannot serve now: a
// 5xx, a /readyz that is not 200, a session it refuses to open.
var errDown = errors.New("mailpit: unavailable")

// statusErr is Mailpit's unexpected HTTP status for what: an outage if
// Mailpit says it cannot serve now (5xx, 429), else a bug (a request it
// did not understand).
func statusErr(what string, status int) error {
	if status >= 500 || status == http.StatusTooManyRequests {
		return fmt.Errorf("mailpit: %s answered HTTP %d: %w", what, status, errDown)
	}
	return fmt.Errorf("mailpit: %s answered HTTP %d", what, status)
}

// Unavailable reports whether err, which the store returned, means
// Mailpit cannot answer now: it is not running or not ready, its sockets
// refuse or drop the connection, it answers "try later" (5xx over HTTP,
// 4xx over SMTP), or the call ran out of time. Its other errors (a reply
// that does not parse, a record that is not the message asked for) are
// bugs.
func (s *Store) Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var se *smtpError
	if errors.As(err, &se) {
		return se.r.code >= 400 && se.r.code < 500
	}
	var ne net.Error
	return errors.Is(err, errDown) || errors.Is(err, ErrNotReady) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ENOENT)
}
