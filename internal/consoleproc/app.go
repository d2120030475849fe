// Package consoleproc is the mail-console process around package console:
// its typed configuration (Config), the command line that reads it, and
// its life (a plane client, one listener, serve until a signal).
package consoleproc

import (
	"context"
	"net"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/console"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// DefaultListen is the console's port: loopback, for the operator's own
// browser.
const DefaultListen = "127.0.0.1:8027"

// Config is mail-console's whole configuration: what its flags say
// (FromContext), and what a supervisor builds to start one (Args). It is
// a surface's and one listener's, nothing of its own.
type Config = cliapp.Listener

// Defaults is mail-console without flags or environment.
func Defaults() Config { return cliapp.DefaultListener(DefaultListen) }

// Flags are mail-console's flags.
func Flags() []cli.Flag { return cliapp.ListenerFlags(DefaultListen, "MAILPLANE_CONSOLE_LISTEN") }

// FromContext reads Flags.
func FromContext(c *cli.Context) Config { return cliapp.ListenerFromContext(c) }

// App is mail-console's command line.
func App() *cli.App {
	return cliapp.SurfaceApp("mail-console",
		"the operator's read-only console: every trial, its mail and trail, live; Prometheus metrics",
		"Serves GET /healthz, GET / (the trials), /trials/{ns} (one trial's mail and trail), /live (Server-Sent Events),\n"+
			"/metrics (Prometheus) and /login. Every page needs the plane's admin grant: Authorization: Bearer, or the\n"+
			"session the sign-in form opens, a capability in the path (/s/CAPABILITY/...; no cookie). Holds only the\n"+
			"console grant, which by itself reads nothing: the plane checks the operator's admin grant with every call.",
		Flags(), FromContext, Run)
}

// Run is the console's life as cfg says, until SIGINT or SIGTERM.
func Run(cfg Config) error {
	return cliapp.RunSurface(cfg.Surface, cfg.Listen, "mail-console", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error {
		log.Info().Str("listen", ln.Addr().String()).Msg("console listening")
		return console.Serve(ctx, ln, hosts.Check(console.New(plane, log)), log)
	})
}
