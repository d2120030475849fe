// Package httpserve runs an HTTP surface with its limits named in one
// place, and stops it cleanly: the one server loop that mail-gateway,
// mail-inbox and the sidecar's API router share.
package httpserve

import (
	"cmp"
	"context"
	"errors"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
)

// Limits of one server. Conns bounds the connections (over the cap, one
// is accepted and closed at once) and how long each may live.
type Limits struct {
	Conns          connlimit.Limits
	ReadTimeout    time.Duration // to read one request, headers included
	HeaderTimeout  time.Duration // to read a request's header, if shorter than ReadTimeout
	WriteTimeout   time.Duration // to answer one request
	IdleTimeout    time.Duration // between requests on a kept-alive connection
	MaxHeaderBytes int
	// CutOnStop cancels the requests in flight when the server stops
	// (waiting reads of the gateway), instead of letting them finish.
	CutOnStop bool
}

// shutdownTimeout is how long requests in flight get when the server stops.
const shutdownTimeout = 5 * time.Second

// Serve answers on ln until ctx ends, then stops.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, l Limits, log zerolog.Logger) error {
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		// A request is busy under the pool once its caller is known, and
		// one answered before its body was read closes its connection.
		Handler:           connlimit.GuardHTTP(h),
		ReadHeaderTimeout: cmp.Or(l.HeaderTimeout, l.ReadTimeout),
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ConnState:         connlimit.HTTPConnState(), // a known caller's request is never closed to make room
		ConnContext:       connlimit.HTTPConnContext,
		Protocols:         HTTP1(),
		ErrorLog:          stdlog.New(log.With().Str("source", "net/http").Logger(), "", 0),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(connlimit.Listen(ln, l.Conns)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if l.CutOnStop {
		cancelBase()
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// HTTP1 is the protocols of every server of the project: HTTP/1.1 alone.
// HTTP/2 would let one connection hold many requests, each with its
// body, where the connection caps count one.
func HTTP1() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return p
}

// Hosts are the DNS names a surface answers to, besides localhost and any
// IP literal. A request whose Host header names anything else is refused
// with 421 before it is routed: a page served from another name that
// rebinds to this address (DNS rebinding) reaches nothing. An IP literal
// is always accepted, since no rebinding can produce one.
type Hosts []string

// Check wraps h with the Host check.
func (hs Hosts) Check(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hs.allows(r.Host) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusMisdirectedRequest)
			w.Write([]byte("Misdirected request: this server does not answer to that host name.\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (hs Hosts) allows(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") {
		return true
	}
	for _, allowed := range hs {
		if allowed == "*" || strings.EqualFold(allowed, host) {
			return true
		}
	}
	return false
}
