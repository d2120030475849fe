package supervisor

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/hooksproc"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// HooksConfig is mail-plane hooks' configuration: a surface's (the plane
// socket and the hooks grant) and the loopback port of its /healthz.
type HooksConfig = cliapp.Listener

// HooksCommand is mail-plane hooks, the stack's child that delivers
// provider webhooks (package hooksproc); not for people.
func HooksCommand() *cli.Command {
	return &cli.Command{
		Name:   "hooks",
		Usage:  "delivers the trials' provider webhooks (run by mail-plane up)",
		Hidden: true,
		Flags:  cliapp.ListenerFlags("127.0.0.1:0", "MAILPLANE_HOOKS_LISTEN"),
		Action: func(c *cli.Context) error {
			if err := cliapp.NoArgs(c); err != nil {
				return err
			}
			cfg := cliapp.ListenerFromContext(c)
			return cliapp.RunSurface(cfg.Surface, cfg.Listen, "mail-plane hooks", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, _ httpserve.Hosts) error {
				return serveHooks(ctx, ln, plane, log)
			})
		},
	}
}

// serveHooks delivers until ctx ends, answering /healthz on ln.
func serveHooks(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: limits.HeaderTimeout}
	go srv.Serve(ln)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Info().Str("listen", ln.Addr().String()).Msg("hooks delivering")
	err := hooksproc.New(plane, log).Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// hooksCommand is mail-plane hooks' command line: its logging is its
// surface's.
type hooksCommand struct {
	hooks HooksConfig
}

func (h hooksCommand) Args() []string {
	return append([]string{"hooks"}, h.hooks.Args()...)
}
