package gateway

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Limits of the gateway's HTTP server. Its callers are evaluators of many
// trials, and each waiting read holds a connection (and a plane
// connection) for up to rpc.MaxWait, so connections are many and long:
// they share one cap sized to the process (connlimit.ProcessCap), under
// which a connection not answering a request may be closed to make room;
// each trial (the namespace its checked capability opens) has its share
// of requests in flight (limits.TrialRequests); and a request's header
// must arrive within limits.HeaderTimeout.
const (
	readTimeout = 10 * time.Second
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
		Conns:          connlimit.Limits{Pool: connlimit.NewPool(connlimit.ProcessCap())},
		ReadTimeout:    readTimeout,
		HeaderTimeout:  limits.HeaderTimeout,
		WriteTimeout:   writeTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		CutOnStop:      true,
	}, log)
}
