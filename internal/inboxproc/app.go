// Package inboxproc is the mail-inbox process around package inbox: its
// typed configuration (Config), the command line that reads it, and its
// life (the token, a plane client, one listener, serve until a signal).
package inboxproc

import (
	"context"
	"net"
	"os"
	"runtime/debug"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/inbox"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// DefaultListen is the reference's inbox port.
const DefaultListen = "127.0.0.1:8026"

// Config is mail-inbox's whole configuration: what its flags say
// (FromContext), and what a supervisor builds to start one (Args).
type Config struct {
	Surface cliapp.Surface
	Listen  string
	// TokenFile holds the one trial's inbox token; empty: a shared inbox
	// (unless systemd passes the token as a credential).
	TokenFile    string
	RootRedirect bool
}

// Defaults is mail-inbox without flags or environment.
func Defaults() Config { return Config{Surface: cliapp.DefaultSurface(), Listen: DefaultListen} }

// Flags are mail-inbox's flags.
func Flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "token-file", Usage: "file holding the one trial's inbox token (strict mode; under systemd: $CREDENTIALS_DIRECTORY/token)", EnvVars: []string{"MAILPLANE_TOKEN_FILE"}},
		cliapp.ListenFlag(DefaultListen, "MAILPLANE_INBOX_LISTEN"),
		&cli.BoolFlag{Name: "root-redirect", Usage: "with --token-file: answer GET / with a redirect to the token URL (the reference's drop-in contract)"},
	}, cliapp.SurfaceFlags...)
}

// FromContext reads Flags.
func FromContext(c *cli.Context) Config {
	return Config{Surface: cliapp.SurfaceFromContext(c), Listen: c.String("listen"),
		TokenFile: c.String("token-file"), RootRedirect: c.Bool("root-redirect")}
}

// Args are the flags for cfg: FromContext of Args(cfg) is cfg.
func (cfg Config) Args() []string {
	a := cliapp.Args(cliapp.Listener{Surface: cfg.Surface, Listen: cfg.Listen}.Args())
	a.Str("token-file", cfg.TokenFile)
	a.Bool("root-redirect", cfg.RootRedirect)
	return a
}

// App is mail-inbox's command line.
func App() *cli.App {
	return cliapp.SurfaceApp("mail-inbox",
		"the agent's HTML inbox: every trial's (shared), or one trial's (--token-file)",
		"Serves GET /healthz, GET /inbox/{token} and GET /inbox/{token}/messages/{id} (with /text and /html,\n"+
			"its text and its HTML's sandboxed frame) as HTML, the links' pings\n"+
			"(POST /inbox/{token}/messages/{id}/ping/{link}), and the same mailbox as MCP tools at /mcp/{token}.\n"+
			"Without --token-file it serves every trial of its plane, with a shared inbox grant: the plane finds\n"+
			"the trial each token opens. With --token-file it serves one trial, with that trial's inbox grant.\n"+
			"GET / is Not found, unless --root-redirect (one trial only) redirects it to the token URL as the\n"+
			"reference does: anyone who can reach the port then has the mailbox.",
		Flags(), FromContext, Run)
}

// gcPercent is the inbox's garbage collection target (GOGC), unless the
// environment sets GOGC. An MCP call leaves about 330 KB of garbage, most
// of it the SDK's JSON decode buffers (32 KiB for each of the nine values
// it decodes), against a live heap of a few MB: at Go's default of 100 the
// collector ran every dozen calls. At 400, MCP read_message at 8 clients
// went from 731 to 1,044–1,531 calls/s and its p99 from 1.8–2.0× the HTML
// page's to 1.4–1.5× (bench -only agent, two runs each); the price is a
// heap that may grow to five times the live one under load, not at rest.
const gcPercent = 400

// Run is the inbox's life as cfg says, until SIGINT or SIGTERM.
func Run(cfg Config) error {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	token, err := readToken(cfg.TokenFile)
	if err != nil {
		return err
	}
	if cfg.RootRedirect && token == "" {
		return cliapp.Usagef("--root-redirect needs --token-file: a shared inbox has no one token URL")
	}
	return cliapp.RunSurface(cfg.Surface, cfg.Listen, "mail-inbox", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error {
		log.Info().Str("listen", ln.Addr().String()).Bool("shared", token == "").Bool("root_redirect", cfg.RootRedirect).Msg("inbox listening")
		return inbox.Serve(ctx, ln, hosts.Check(inbox.New(plane, token, cfg.RootRedirect, log)), token == "", log)
	})
}

// readToken reads the inbox token once, at start: none for a shared inbox.
// Errors name the file, never its content.
func readToken(path string) (string, error) {
	if path == "" && os.Getenv("CREDENTIALS_DIRECTORY") == "" {
		return "", nil
	}
	token, err := cliapp.ReadSecret(path, "token-file", "token")
	if err != nil {
		return "", err
	}
	if !inbox.ValidToken(token) {
		return "", cliapp.Usagef("the inbox token: want 32 to 256 characters of A-Z a-z 0-9 . _ ~ -")
	}
	return token, nil
}
