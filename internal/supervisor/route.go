package supervisor

import (
	"context"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/apiroute"
	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/listen"
)

// RouteConfig is mail-plane route's configuration: the sidecar's API
// router, run as a child of its own so that the process that serves the
// candidate's untrusted HTTP holds no grant at all (the sidecar holds the
// admin grant).
type RouteConfig struct {
	Listen, Writer, Gateway string // the API port; the writer's and the gateway's origins
}

// routeFlags are mail-plane route's flags.
func routeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "listen", Usage: "the API port: host:port, fd:N or systemd:NAME"},
		&cli.StringFlag{Name: "writer", Usage: "the writer's origin (http://host:port): POST /emails and /internal/bootstrap go there"},
		&cli.StringFlag{Name: "gateway", Usage: "the gateway's origin (http://host:port): everything else goes there"},
	}
}

// routeFromContext reads routeFlags.
func routeFromContext(c *cli.Context) RouteConfig {
	return RouteConfig{Listen: c.String("listen"), Writer: c.String("writer"), Gateway: c.String("gateway")}
}

// Args are routeFlags for cfg: routeFromContext of Args(cfg) is cfg.
func (cfg RouteConfig) Args() []string {
	a := cliapp.Args{}
	a.Str("listen", cfg.Listen)
	a.Str("writer", cfg.Writer)
	a.Str("gateway", cfg.Gateway)
	return a
}

// RouteCommand is mail-plane route, the sidecar's child that serves its
// API port; not for people.
func RouteCommand() *cli.Command {
	return &cli.Command{
		Name:   "route",
		Usage:  "the sidecar's API router (run by mail-plane sidecar)",
		Hidden: true,
		Flags:  routeFlags(),
		Action: func(c *cli.Context) error {
			if err := cliapp.NoArgs(c); err != nil {
				return err
			}
			cfg := routeFromContext(c)
			if cfg.Listen == "" || cfg.Writer == "" || cfg.Gateway == "" {
				return cliapp.Usagef("--listen, --writer and --gateway are required")
			}
			log, err := cliapp.LogFromContext(c).Logger("mail-plane route")
			if err != nil {
				return cliapp.UsageError{Err: err}
			}
			ln, err := listen.Listen(cfg.Listen)
			if err != nil {
				return cliapp.Usagef("--listen: %v", err)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return apiroute.Serve(ctx, ln, cfg.Writer, cfg.Gateway, log)
		},
	}
}

// routeCommand is mail-plane route's command line: mail-plane's logging
// flags come before the subcommand.
type routeCommand struct {
	log   cliapp.Log
	route RouteConfig
}

func (r routeCommand) Args() []string {
	return append(append(r.log.Args(), "route"), r.route.Args()...)
}
