// Package gatewayproc is the mail-gateway process around package gateway:
// its typed configuration (Config), the command line that reads it, and
// its life (a plane client, one listener, serve until a signal).
package gatewayproc

import (
	"context"
	"net"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/gateway"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// DefaultListen is the reference's API port.
const DefaultListen = "127.0.0.1:8025"

// Config is mail-gateway's whole configuration: what its flags say
// (FromContext), and what a supervisor builds to start one (Args). It is
// a surface's and one listener's, nothing of its own.
type Config = cliapp.Listener

// Defaults is mail-gateway without flags or environment.
func Defaults() Config { return cliapp.DefaultListener(DefaultListen) }

// Flags are mail-gateway's flags.
func Flags() []cli.Flag { return cliapp.ListenerFlags(DefaultListen, "MAILPLANE_GATEWAY_LISTEN") }

// FromContext reads Flags.
func FromContext(c *cli.Context) Config { return cliapp.ListenerFromContext(c) }

// App is mail-gateway's command line.
func App() *cli.App {
	return cliapp.SurfaceApp("mail-gateway",
		"the evaluator's Bearer-gated JSON API (and HTML view) over mailplane",
		"Serves GET /healthz, /api/namespaces/{ns}/messages[/latest|/{id}] (with ?recipient=, ?after=ID\n"+
			"and ?wait=DURATION of at most 60s) and /inbox/{ns}[/messages/{id}]. The caller's Bearer value is the\n"+
			"namespace's read capability; the plane checks it. Holds only the gateway grant.",
		Flags(), FromContext, Run)
}

// Run is the gateway's life as cfg says, until SIGINT or SIGTERM.
func Run(cfg Config) error {
	return cliapp.RunSurface(cfg.Surface, cfg.Listen, "mail-gateway", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error {
		log.Info().Str("listen", ln.Addr().String()).Msg("gateway listening")
		return gateway.Serve(ctx, ln, hosts.Check(gateway.New(plane, log)), log)
	})
}
