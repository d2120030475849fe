package inbox

import (
	"context"
	"net"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/limits"
)

// Limits of a trial's own inbox's HTTP server, the reference's
// (docs/reference.md §3, §11): its client is an untrusted agent's browser. A
// shared inbox serves every trial: its connections share one cap sized to
// the process, with short timeouts before a token is read, and each
// token its share of requests in flight (package limits).
const (
	MaxConnections     = connlimit.DefaultMaxConns // open at once; one more is closed at once
	ConnectionLifetime = connlimit.DefaultLifetime // a connection is closed this long after accept
	readTimeout        = connlimit.DefaultIdle     // to read one request, headers included
	idleTimeout        = connlimit.DefaultIdle     // between requests on a kept-alive connection
	writeTimeout       = 2 * connlimit.DefaultIdle // to read from the plane and write one answer
	maxHeaderBytes     = 16 << 10
)

// Serve answers on ln until ctx ends, then stops, letting answers in
// flight finish.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, shared bool, log zerolog.Logger) error {
	l := httpserve.Limits{
		Conns:          connlimit.Limits{MaxConns: MaxConnections, Lifetime: ConnectionLifetime},
		ReadTimeout:    readTimeout,
		WriteTimeout:   writeTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
	}
	if shared {
		l.Conns.Pool = connlimit.NewPool(connlimit.ProcessCap())
		l.HeaderTimeout, l.IdleTimeout = limits.HeaderTimeout, limits.SharedIdle
		log.Info().Int("max_connections", l.Conns.Pool.Max()).Msg("one connection cap, sized to the process")
	}
	return httpserve.Serve(ctx, ln, h, l, log)
}
