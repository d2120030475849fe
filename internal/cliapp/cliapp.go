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

	"github.com/websitebench/mailplane/internal/connlimit"
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

// SurfaceFlags are the flags every surface shares (Surface): logging,
// PlaneFlags and the host names it answers to.
var SurfaceFlags = append(append(append([]cli.Flag{}, logging.Flags...), PlaneFlags...),
	&cli.StringSliceFlag{Name: "allow-host", Usage: "a DNS name this surface answers to besides localhost and IP literals (repeatable; * for any)", EnvVars: []string{"MAILPLANE_ALLOW_HOSTS"}},
)

// Log is what logging.Flags say, which every binary takes.
type Log struct{ Level, Format string }

// LogFromContext reads logging.Flags.
func LogFromContext(c *cli.Context) Log {
	return Log{Level: c.String("log-level"), Format: c.String("log-format")}
}

// Args are logging.Flags for l; an empty string is left out.
func (l Log) Args() []string {
	a := Args{}
	a.Str("log-level", l.Level)
	a.Str("log-format", l.Format)
	return a
}

// Surface is what SurfaceFlags say: the part of every surface's
// configuration (writer, inbox, gateway, console) that is the same.
type Surface struct {
	Log                    Log
	PlaneSocket, GrantFile string
	AllowHosts             []string
}

// DefaultSurface is SurfaceFlags without flags or environment.
func DefaultSurface() Surface {
	return Surface{Log: Log{Level: "info", Format: "json"}, PlaneSocket: DefaultSocket}
}

// SurfaceFromContext reads SurfaceFlags.
func SurfaceFromContext(c *cli.Context) Surface {
	return Surface{Log: LogFromContext(c), PlaneSocket: c.String("plane-socket"), GrantFile: c.String("grant-file"),
		AllowHosts: c.StringSlice("allow-host")}
}

// Args are SurfaceFlags for s; an empty string is left out.
func (s Surface) Args() []string {
	a := Args(s.Log.Args())
	a.Str("plane-socket", s.PlaneSocket)
	a.Str("grant-file", s.GrantFile)
	for _, h := range s.AllowHosts {
		a.Str("allow-host", h)
	}
	return a
}

// Logger is the logger l asks for, writing to stderr.
func (l Log) Logger(component string) (zerolog.Logger, error) {
	return logging.New(os.Stderr, l.Level, l.Format, component)
}

// Logger is the logger s asks for, writing to stderr.
func (s Surface) Logger(component string) (zerolog.Logger, error) { return s.Log.Logger(component) }

// Hosts are the host names s answers to.
func (s Surface) Hosts() httpserve.Hosts { return httpserve.Hosts(s.AllowHosts) }

// Listener is the configuration of a surface with one HTTP listener and
// nothing of its own besides (the gateway, the console): SurfaceFlags and
// --listen (ListenFlag).
type Listener struct {
	Surface Surface
	Listen  string
}

// ListenFlag is a surface's --listen: at def unless env or the flag says
// otherwise.
func ListenFlag(def, env string) cli.Flag {
	return &cli.StringFlag{Name: "listen", Value: def, Usage: "host:port, fd:N or systemd:NAME", EnvVars: []string{env}}
}

// ListenerFlags are a Listener's flags: --listen (ListenFlag), then
// SurfaceFlags.
func ListenerFlags(def, env string) []cli.Flag {
	return append([]cli.Flag{ListenFlag(def, env)}, SurfaceFlags...)
}

// DefaultListener is ListenerFlags without flags or environment.
func DefaultListener(def string) Listener { return Listener{Surface: DefaultSurface(), Listen: def} }

// ListenerFromContext reads ListenerFlags.
func ListenerFromContext(c *cli.Context) Listener {
	return Listener{Surface: SurfaceFromContext(c), Listen: c.String("listen")}
}

// Args are ListenerFlags for l: ListenerFromContext of Args(l) is l.
func (l Listener) Args() []string {
	a := Args(l.Surface.Args())
	a.Str("listen", l.Listen)
	return a
}

// SurfaceApp is the command line of a surface whose configuration C its
// flags say (read by fromContext): it takes no arguments, and runs run
// with what the flags say.
func SurfaceApp[C any](name, usage, description string, flags []cli.Flag, fromContext func(*cli.Context) C, run func(C) error) *cli.App {
	return &cli.App{
		Name:            name,
		Usage:           usage,
		Description:     description,
		HideHelpCommand: true,
		Flags:           flags,
		Action: func(c *cli.Context) error {
			if err := NoArgs(c); err != nil {
				return err
			}
			return run(fromContext(c))
		},
	}
}

// Args is a command line being built from a typed configuration.
type Args []string

// Str adds --name v, unless v is empty (the flag's default is empty, or
// it has none worth repeating).
func (a *Args) Str(name, v string) {
	if v != "" {
		*a = append(*a, "--"+name, v)
	}
}

// Bool adds --name when v is set.
func (a *Args) Bool(name string, v bool) {
	if v {
		*a = append(*a, "--"+name)
	}
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

// PlaneClient builds the plane client s describes. The grant file is
// read once, at start; its content never reaches a log.
func (s Surface) PlaneClient() (*rpc.Client, error) {
	grant, err := ReadSecret(s.GrantFile, "grant-file", "grant")
	if err != nil {
		return nil, err
	}
	// No more plane connections than the process's connection cap, whose
	// descriptors count one plane connection per connection.
	return rpc.NewClientConns(s.PlaneSocket, grant, connlimit.ProcessCap()), nil
}

// ReadSecret reads the secret in the file at path (flag's value) or, when
// path is empty and under systemd, in $CREDENTIALS_DIRECTORY/credential.
// Errors name the file, never its content.
func ReadSecret(path, flag, credential string) (string, error) {
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
// the gateway, the console): its logger, its plane client, its listen
// socket, the host names it answers to, and serve until SIGINT or SIGTERM.
func RunSurface(s Surface, listenAt, name string, serve func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error) error {
	log, err := s.Logger(name)
	if err != nil {
		return UsageError{err}
	}
	plane, err := s.PlaneClient()
	if err != nil {
		return err
	}
	defer plane.Close()
	ln, err := listen.Listen(listenAt)
	if err != nil {
		return Usagef("--listen: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err = serve(ctx, ln, plane, log, s.Hosts())
	log.Info().Msg(name + " stopped")
	return err
}

// NoArgs refuses positional arguments: every surface takes flags only.
func NoArgs(c *cli.Context) error {
	if c.NArg() > 0 {
		return Usagef("unexpected arguments: %v", c.Args().Slice())
	}
	return nil
}
