// Package cliapp holds what every mailplane binary's command line shares:
// running a urfave/cli app with exit codes a service manager can act on,
// and the flags that connect a surface to the plane.
package cliapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/listen"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Exit statuses. A configuration error exits 2 so that systemd's
// RestartPreventExitStatus=2 stops a restart loop on it.
const (
	ExitFailure = 1
	ExitUsage   = 2
)

// UsageError is a configuration error: bad flags, missing files, invalid
// values. The process exits 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// Run runs app and returns the exit status: 0, 1 for a runtime failure, 2
// for a configuration error. The error goes to stderr as one line.
func Run(app *cli.App, args []string) int {
	usage := func(_ *cli.Context, err error, _ bool) error { return UsageError{err} }
	app.OnUsageError = usage
	var mark func([]*cli.Command)
	mark = func(cmds []*cli.Command) {
		for _, c := range cmds {
			c.OnUsageError = usage
			mark(c.Subcommands)
		}
	}
	mark(app.Commands)
	app.ExitErrHandler = func(*cli.Context, error) {} // Run decides the status
	stopProfile := withProfile(app)
	err := app.Run(args)
	stopProfile()
	if err == nil {
		return 0
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		// A deliberate exit: its message is the whole line (the drop-in
		// sidecar's start-up refusals must read exactly as the reference's).
		fmt.Fprintln(os.Stderr, err)
		return ec.ExitCode()
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", app.Name, err)
	var ue UsageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitFailure
}

// PlaneFlags connect a surface to the plane.
var PlaneFlags = []cli.Flag{
	&cli.StringFlag{Name: "plane-socket", Value: DefaultSocket, Usage: "the plane's Unix socket", EnvVars: []string{"MAILPLANE_SOCKET"}},
	&cli.StringFlag{Name: "grant-file", Usage: "file holding this surface's grant (under systemd: $CREDENTIALS_DIRECTORY/grant)", EnvVars: []string{"MAILPLANE_GRANT_FILE"}},
}

// SurfaceFlags are the flags of an HTTP surface: PlaneFlags and the host
// names it answers to.
var SurfaceFlags = append(append([]cli.Flag{}, PlaneFlags...),
	&cli.StringSliceFlag{Name: "allow-host", Usage: "a DNS name this surface answers to besides localhost and IP literals (repeatable; * for any)", EnvVars: []string{"MAILPLANE_ALLOW_HOSTS"}},
)

// AllowedHosts is the --allow-host list.
func AllowedHosts(c *cli.Context) httpserve.Hosts {
	return httpserve.Hosts(c.StringSlice("allow-host"))
}

// Where the plane listens and keeps its data unless told otherwise.
const (
	DefaultSocket = "/run/mailplane/plane.sock"
	DefaultData   = "/var/lib/mailplane"
)

// PrintJSON prints v as one line of JSON on standard output, <, > and &
// as they are.
func PrintJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// PlaneClient builds the plane client PlaneFlags describe. The grant file
// is read once, at start; its content never reaches a log.
func PlaneClient(c *cli.Context) (*rpc.Client, error) {
	grant, err := SecretFlag(c, "grant-file", "grant")
	if err != nil {
		return nil, err
	}
	return rpc.NewClient(c.String("plane-socket"), grant), nil
}

// SecretFlag reads the secret in the file that flag names or, under
// systemd, in $CREDENTIALS_DIRECTORY/credential. Errors name the file,
// never its content.
func SecretFlag(c *cli.Context, flag, credential string) (string, error) {
	path := c.String(flag)
	if path == "" {
		if dir := os.Getenv("CREDENTIALS_DIRECTORY"); dir != "" {
			path = dir + "/" + credential
		}
	}
	if path == "" {
		return "", Usagef("--%s is required", flag)
	}
	secret, err := rpc.ReadSecretFile(path)
	if err != nil {
		return "", Usagef("%s: %v", credential, err)
	}
	return secret, nil
}

// RunSurface is the life of a surface with one HTTP listener (the inbox,
// the gateway): its logger, its plane client, its --listen socket, the
// host names it answers to, and serve until SIGINT or SIGTERM.
func RunSurface(c *cli.Context, name string, serve func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error) error {
	log, err := logging.FromFlags(c, name)
	if err != nil {
		return UsageError{err}
	}
	if c.NArg() > 0 {
		return Usagef("unexpected arguments: %v", c.Args().Slice())
	}
	plane, err := PlaneClient(c)
	if err != nil {
		return err
	}
	defer plane.Close()
	ln, err := listen.Listen(c.String("listen"))
	if err != nil {
		return Usagef("--listen: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err = serve(ctx, ln, plane, log, AllowedHosts(c))
	log.Info().Msg(name + " stopped")
	return err
}
