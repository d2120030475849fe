package writer

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/httpserve"
)

// NewHTTPServer returns the http.Server for h. net/http keeps the idle
// bound itself (between requests and while a request's header arrives);
// the listener adds the connection cap and lifetime. A connection is busy
// (never closed to make room under a connlimit.Pool) while a known
// caller's request on it is answered (caller.go); HTTP/1.1 only, so that
// one connection holds one request, over TLS too.
func NewHTTPServer(h http.Handler, idle, lifetime time.Duration, zl zerolog.Logger) *http.Server {
	return &http.Server{
		Handler:           connlimit.GuardHTTP(h), // see caller.go
		ReadHeaderTimeout: idle,
		ReadTimeout:       lifetime,
		WriteTimeout:      lifetime,
		IdleTimeout:       idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(debugWriter{zl}, "http: ", 0),
		ConnState:         connlimit.HTTPConnState(),
		Protocols:         httpserve.HTTP1(),
		// The listener's own connection, also beneath TLS: its remaining
		// lifetime decides whether an answer asks the client to close
		// (closeIfOld).
		ConnContext: connlimit.HTTPConnContext,
	}
}

// debugWriter sends net/http's own error lines (bad requests, vanished
// clients) to the debug log.
type debugWriter struct{ log zerolog.Logger }

func (d debugWriter) Write(p []byte) (int, error) {
	d.log.Debug().Msg(string(p))
	return len(p), nil
}

// door is the listener a request came in by, the key of its fair share:
// the host's HTTP or HTTPS listener, or one trial's door inside its
// network namespace, whose bootstrap names the door's own SMTP address
// (port numbers repeat across namespaces; door keys do not).
type door struct {
	key      string
	smtpHost string
	smtpPort int // 0: the writer's
}

type doorCtxKey struct{}

// AtDoor serves h as the listener key. For one trial's door inside its
// network namespace, GET /internal/bootstrap names that door's SMTP
// address (smtpHost, smtpPort), not the writer's; smtpPort 0 keeps the
// writer's.
func AtDoor(h http.Handler, key, smtpHost string, smtpPort int) http.Handler {
	d := door{key: key, smtpHost: smtpHost, smtpPort: smtpPort}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), doorCtxKey{}, d)))
	})
}

// doorKey is the key of the door r came in by ("" for a handler served
// without AtDoor).
func doorKey(r *http.Request) string {
	d, _ := r.Context().Value(doorCtxKey{}).(door)
	return d.key
}
