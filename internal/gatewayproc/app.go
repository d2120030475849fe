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
// (FromContext), and what a supervisor builds to start one (Args).
type Config struct {
	Surface cliapp.Surface
	Listen  string
}

// Defaults is mail-gateway without flags or environment.
func Defaults() Config { return Config{Surface: cliapp.DefaultSurface(), Listen: DefaultListen} }

// Flags are mail-gateway's flags.
func Flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "listen", Value: DefaultListen, Usage: "host:port, fd:N or systemd:NAME", EnvVars: []string{"MAILPLANE_GATEWAY_LISTEN"}},
	}, cliapp.SurfaceFlags...)
}

// FromContext reads Flags.
func FromContext(c *cli.Context) Config {
	return Config{Surface: cliapp.SurfaceFromContext(c), Listen: c.String("listen")}
}

// Args are the flags for cfg: FromContext of Args(cfg) is cfg.
func (cfg Config) Args() []string {
	a := cliapp.Args(cfg.Surface.Args())
	a.Str("listen", cfg.Listen)
	return a
}

// App is mail-gateway's command line.
func App() *cli.App {
	return &cli.App{
		Name:  "mail-gateway",
		Usage: "the evaluator's Bearer-gated JSON API (and HTML view) over mailplane",
		Description: "Serves GET /healthz, /api/namespaces/{ns}/messages[/latest|/{id}] (with ?recipient=, ?after=ID\n" +
			"and ?wait=DURATION of at most 60s) and /inbox/{ns}[/messages/{id}]. The caller's Bearer value is the\n" +
			"namespace's read capability; the plane checks it. Holds only the gateway grant.",
		HideHelpCommand: true,
		Flags:           Flags(),
		Action: func(c *cli.Context) error {
			if err := cliapp.NoArgs(c); err != nil {
				return err
			}
			return Run(FromContext(c))
		},
	}
}

// Run is the gateway's life as cfg says, until SIGINT or SIGTERM.
func Run(cfg Config) error {
	return cliapp.RunSurface(cfg.Surface, cfg.Listen, "mail-gateway", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error {
		log.Info().Str("listen", ln.Addr().String()).Msg("gateway listening")
		return gateway.Serve(ctx, ln, hosts.Check(gateway.New(plane, log)), log)
	})
}
