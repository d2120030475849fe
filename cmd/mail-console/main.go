package main

import (
	"context"
	"net"
	"os"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/console"
	"github.com/websitebench/mailplane/internal/consoleproc"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/pkg/rpc"
)

func main() { os.Exit(cliapp.Run(app(), os.Args)) }

// App is mail-console's command line.
func app() *cli.App {
	return cliapp.SurfaceApp("mail-console",
		"the operator's read-only console: every trial, its mail and trail, live; Prometheus metrics",
		"Serves GET /healthz, GET / (the trials), /trials/{ns} (one trial's mail and trail), /live (Server-Sent Events),\n"+
			"/metrics (Prometheus) and /login. Every page needs the plane's admin grant: Authorization: Bearer, or the\n"+
			"session the sign-in form opens, a capability in the path (/s/CAPABILITY/...; no cookie). Holds only the\n"+
			"console grant, which by itself reads nothing: the plane checks the operator's admin grant with every call.",
		consoleproc.Flags(), consoleproc.FromContext, run)
}

// run is the console's life as cfg says, until SIGINT or SIGTERM.
func run(cfg consoleproc.Config) error {
	return cliapp.RunSurface(cfg.Surface, cfg.Listen, "mail-console", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error {
		log.Info().Str("listen", ln.Addr().String()).Msg("console listening")
		return console.Serve(ctx, ln, hosts.Check(console.New(plane, log)), log)
	})
}
