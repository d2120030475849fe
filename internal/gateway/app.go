package gateway

import (
	"context"
	"net"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// DefaultListen is the reference's API port.
const DefaultListen = "127.0.0.1:8025"

// App is mail-gateway's command line.
func App() *cli.App {
	return &cli.App{
		Name:  "mail-gateway",
		Usage: "the evaluator's Bearer-gated JSON API (and HTML view) over mailplane",
		Description: "Serves GET /healthz, /api/namespaces/{ns}/messages[/latest|/{id}] (with ?recipient=, ?after=ID\n" +
			"and ?wait=DURATION of at most 60s) and /inbox/{ns}[/messages/{id}]. The caller's Bearer value is the\n" +
			"namespace's read capability; the plane checks it. Holds only the gateway grant.",
		HideHelpCommand: true,
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Value: DefaultListen, Usage: "host:port, fd:N or systemd:NAME", EnvVars: []string{"MAILPLANE_GATEWAY_LISTEN"}},
		}, cliapp.SurfaceFlags...), logging.Flags...),
		Action: run,
	}
}

func run(c *cli.Context) error {
	return cliapp.RunSurface(c, "mail-gateway", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error {
		log.Info().Str("listen", ln.Addr().String()).Msg("gateway listening")
		return Serve(ctx, ln, hosts.Check(New(plane, log)), log)
	})
}
