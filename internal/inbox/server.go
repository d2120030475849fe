package inbox

import (
	"context"
	"net"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/httpserve"
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
)

// Serve answers on ln until ctx ends, then stops, letting answers in
// flight finish.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log zerolog.Logger) error {
	return httpserve.Serve(ctx, ln, h, httpserve.Limits{
		Conns:          connlimit.Limits{MaxConns: MaxConnections, Lifetime: ConnectionLifetime},
		ReadTimeout:    readTimeout,
		WriteTimeout:   writeTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
	}, log)
}
