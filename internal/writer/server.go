package writer

import (
	"context"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
)

// NewHTTPServer returns the http.Server for h. net/http keeps the idle
// bound itself (between requests and while a request's header arrives);
// the listener adds the connection cap and lifetime. A connection is busy
// (never closed to make room under a connlimit.Pool) while a request on
// it is answered.
func NewHTTPServer(h http.Handler, idle, lifetime time.Duration, zl zerolog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: idle,
		ReadTimeout:       lifetime,
		WriteTimeout:      lifetime,
		IdleTimeout:       idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(debugWriter{zl}, "http: ", 0),
		ConnState:         connlimit.HTTPConnState(),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return ConnContext(ctx, c)
		},
	}
}

// debugWriter sends net/http's own error lines (bad requests, vanished
// clients) to the debug log.
type debugWriter struct{ log zerolog.Logger }

func (d debugWriter) Write(p []byte) (int, error) {
	d.log.Debug().Msg(string(p))
	return len(p), nil
}

// ConnContext is the http.Server.ConnContext of a listener that serves
// h: it hands the handler the listener's own connection c (under TLS, the
// connection beneath it), whose remaining lifetime decides whether a
// response asks the client to close.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// doorSMTP is the SMTP address a door's bootstrap names: the door's own,
// inside the namespace, not the host's.
type doorSMTP struct {
	host string
	port int
}

type doorSMTPKey struct{}

// WithDoorSMTP serves h as one trial's door inside its network namespace:
// GET /internal/bootstrap names that door's SMTP address (host, port), not
// the writer's.
func WithDoorSMTP(h http.Handler, host string, port int) http.Handler {
	d := doorSMTP{host: host, port: port}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), doorSMTPKey{}, d)))
	})
}
