package main

import (
	"context"
	"net"
	"os"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/gateway"
	"github.com/websitebench/mailplane/internal/gatewayproc"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/pkg/rpc"
)

func main() { os.Exit(cliapp.Run(app(), os.Args)) }

// App is mail-gateway's command line.
func app() *cli.App {
	return cliapp.SurfaceApp("mail-gateway",
		"the evaluator's Bearer-gated JSON API (and HTML view) over mailplane",
		"Serves GET /healthz, /api/namespaces/{ns}/messages[/latest|/{id}] (with ?recipient=, ?after=ID\n"+
			"and ?wait=DURATION of at most 60s) and /inbox/{ns}[/messages/{id}]. The caller's Bearer value is the\n"+
			"namespace's read capability; the plane checks it. Holds only the gateway grant.",
		gatewayproc.Flags(), gatewayproc.FromContext, run)
}

// run is the gateway's life as cfg says, until SIGINT or SIGTERM.
func run(cfg gatewayproc.Config) error {
	return cliapp.RunSurface(cfg.Surface, cfg.Listen, "mail-gateway", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error {
		log.Info().Str("listen", ln.Addr().String()).Msg("gateway listening")
		return gateway.Serve(ctx, ln, hosts.Check(gateway.New(plane, log)), log)
	})
}
