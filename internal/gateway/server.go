package gateway

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Limits of the gateway's HTTP server. Its callers are trusted evaluators,
// but each waiting read holds a connection (and a plane connection) for up
// to rpc.MaxWait, so connections are many and long, and still bounded
// (over the cap, a connection is accepted and closed at once).
const (
	MaxConnections = 512
	readTimeout    = 10 * time.Second
	// writeTimeout lets a request wait rpc.MaxWait for mail and still
	// answer.
	writeTimeout   = rpc.MaxWait + 15*time.Second
	idleTimeout    = 30 * time.Second
	maxHeaderBytes = 16 << 10
)

// Serve answers on ln until ctx ends, then stops: waiting reads are cut
// short (their callers see 503 and retry elsewhere), the rest finish.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log zerolog.Logger) error {
	return httpserve.Serve(ctx, ln, h, httpserve.Limits{
		Conns:          connlimit.Limits{MaxConns: MaxConnections},
		ReadTimeout:    readTimeout,
		WriteTimeout:   writeTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		CutOnStop:      true,
	}, log)
}
