package console

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// DefaultListen is the console's port: loopback, for the operator's own
// browser.
const DefaultListen = "127.0.0.1:8027"

// Limits of the console's HTTP server: few, trusted callers; a live
// stream lasts streamFor.
const (
	maxConns       = 128
	readTimeout    = 10 * time.Second
	writeTimeout   = streamFor + 15*time.Second
	idleTimeout    = 60 * time.Second
	maxHeaderBytes = 16 << 10
)

// App is mail-console's command line.
func App() *cli.App {
	return &cli.App{
		Name:  "mail-console",
		Usage: "the operator's read-only console: every trial, its mail and trail, live; Prometheus metrics",
		Description: "Serves GET /healthz, GET / (the trials), /trials/{ns} (one trial's mail and trail), /live (Server-Sent Events),\n" +
			"/metrics (Prometheus) and /login. Every page needs the plane's admin grant: Authorization: Bearer, or the\n" +
			"session the sign-in form opens, a capability in the path (/s/CAPABILITY/...; no cookie). Holds only the\n" +
			"console grant, which by itself reads nothing: the plane checks the operator's admin grant with every call.",
		HideHelpCommand: true,
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Value: DefaultListen, Usage: "host:port, fd:N or systemd:NAME", EnvVars: []string{"MAILPLANE_CONSOLE_LISTEN"}},
		}, cliapp.SurfaceFlags...), logging.Flags...),
		Action: run,
	}
}

func run(c *cli.Context) error {
	return cliapp.RunSurface(c, "mail-console", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error {
		log.Info().Str("listen", ln.Addr().String()).Msg("console listening")
		return Serve(ctx, ln, hosts.Check(New(plane, log)), log)
	})
}

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
