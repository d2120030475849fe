package inbox

import (
	"context"
	"net"
	"os"
	"regexp"
	"runtime/debug"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// DefaultListen is the reference's inbox port.
const DefaultListen = "127.0.0.1:8026"

// tokenSyntax is what an inbox token may be: URL-safe characters only, so
// that the token URL needs no escaping, and long enough to be a secret.
// Minted tokens are 43 characters of base64url.
var tokenSyntax = regexp.MustCompile(`^[A-Za-z0-9._~-]{32,256}$`)

// App is mail-inbox's command line.
func App() *cli.App {
	return &cli.App{
		Name:  "mail-inbox",
		Usage: "the agent's HTML inbox: every trial's (shared), or one trial's (--token-file)",
		Description: "Serves GET /healthz, GET /inbox/{token} and GET /inbox/{token}/messages/{id} (with /text and /html,\n" +
			"its text and its HTML's sandboxed frame) as HTML, the links' pings\n" +
			"(POST /inbox/{token}/messages/{id}/ping/{link}), and the same mailbox as MCP tools at /mcp/{token}.\n" +
			"Without --token-file it serves every trial of its plane, with a shared inbox grant: the plane finds\n" +
			"the trial each token opens. With --token-file it serves one trial, with that trial's inbox grant.\n" +
			"GET / is Not found, unless --root-redirect (one trial only) redirects it to the token URL as the\n" +
			"reference does: anyone who can reach the port then has the mailbox.",
		HideHelpCommand: true,
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "token-file", Usage: "file holding the one trial's inbox token (strict mode; under systemd: $CREDENTIALS_DIRECTORY/token)", EnvVars: []string{"MAILPLANE_TOKEN_FILE"}},
			&cli.StringFlag{Name: "listen", Value: DefaultListen, Usage: "host:port, fd:N or systemd:NAME", EnvVars: []string{"MAILPLANE_INBOX_LISTEN"}},
			&cli.BoolFlag{Name: "root-redirect", Usage: "with --token-file: answer GET / with a redirect to the token URL (the reference's drop-in contract)"},
		}, cliapp.SurfaceFlags...), logging.Flags...),
		Action: run,
	}
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

func run(c *cli.Context) error {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	token, err := readToken(c)
	if err != nil {
		return err
	}
	if c.Bool("root-redirect") && token == "" {
		return cliapp.Usagef("--root-redirect needs --token-file: a shared inbox has no one token URL")
	}
	return cliapp.RunSurface(c, "mail-inbox", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error {
		log.Info().Str("listen", ln.Addr().String()).Bool("shared", token == "").Bool("root_redirect", c.Bool("root-redirect")).Msg("inbox listening")
		return Serve(ctx, ln, hosts.Check(New(plane, token, c.Bool("root-redirect"), log)), token == "", log)
	})
}

// readToken reads the inbox token once, at start: none for a shared inbox.
// Errors name the file, never its content.
func readToken(c *cli.Context) (string, error) {
	if c.String("token-file") == "" && os.Getenv("CREDENTIALS_DIRECTORY") == "" {
		return "", nil
	}
	token, err := cliapp.SecretFlag(c, "token-file", "token")
	if err != nil {
		return "", err
	}
	if !tokenSyntax.MatchString(token) {
		return "", cliapp.Usagef("the inbox token: want 32 to 256 characters of A-Z a-z 0-9 . _ ~ -")
	}
	return token, nil
}
