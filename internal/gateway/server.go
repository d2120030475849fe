package gateway

import (
	"context"
	"errors"
	stdlog "log"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Limits of the gateway's HTTP server. Its callers are trusted evaluators,
// but each waiting read holds a connection (and a plane connection) for up
// to rpc.MaxWait, so connections are many and long, and still bounded
// (over the cap, a connection is accepted and closed at once).
const (
	MaxConnections    = 512
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 10 * time.Second
	// writeTimeout lets a request wait rpc.MaxWait for mail and still
	// answer.
	writeTimeout    = rpc.MaxWait + 15*time.Second
	idleTimeout     = 30 * time.Second
	maxHeaderBytes  = 16 << 10
	shutdownTimeout = 5 * time.Second
)

// Serve answers on ln until ctx ends, then stops: waiting reads are cut
// short (their callers see 503 and retry elsewhere), the rest finish.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log zerolog.Logger) error {
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          stdlog.New(log.With().Str("source", "net/http").Logger(), "", 0),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(connlimit.Listen(ln, connlimit.Limits{MaxConns: MaxConnections})) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	cancelBase()
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
