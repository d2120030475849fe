package console

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/limits"
)

// Limits of the console's HTTP server: few, trusted callers; a live
// stream lasts streamFor.
const (
	maxConns       = 128
	readTimeout    = 10 * time.Second
	writeTimeout   = streamFor + 15*time.Second
	idleTimeout    = 60 * time.Second
	maxHeaderBytes = 16 << 10
)

// Serve answers on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log zerolog.Logger) error {
	return httpserve.Serve(ctx, ln, h, httpserve.Limits{
		Conns:          connlimit.Limits{MaxConns: maxConns},
		ReadTimeout:    readTimeout,
		HeaderTimeout:  limits.HeaderTimeout,
		WriteTimeout:   writeTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		CutOnStop:      true,
	}, log)
}
