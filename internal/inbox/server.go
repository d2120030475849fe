package inbox

import (
	"context"
	"errors"
	stdlog "log"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
)

// Limits of the inbox's HTTP server, the reference's (BEHAVIOR.md §3,
// §11): its client is an untrusted agent's browser.
const (
	MaxConnections     = connlimit.DefaultMaxConns // open at once; one more is closed at once
	ConnectionLifetime = connlimit.DefaultLifetime // a connection is closed this long after accept
	readTimeout        = connlimit.DefaultIdle     // to read one request, headers included
	idleTimeout        = connlimit.DefaultIdle     // between requests on a kept-alive connection
	writeTimeout       = 2 * connlimit.DefaultIdle // to read from the plane and write one answer
	maxHeaderBytes     = 16 << 10
	shutdownTimeout    = 5 * time.Second
)

// Serve answers on ln until ctx ends, then stops, letting answers in
// flight finish.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log zerolog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          stdlog.New(log.With().Str("source", "net/http").Logger(), "", 0),
	}
	errc := make(chan error, 1)
	go func() {
		errc <- srv.Serve(connlimit.Listen(ln, connlimit.Limits{MaxConns: MaxConnections, Lifetime: ConnectionLifetime}))
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
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
