package inbox

import (
	"context"
	"net"
	"regexp"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
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
		Usage: "the agent's HTML inbox for one trial's mail",
		Description: "Serves GET / (a redirect to /inbox/{token}, unless --no-root-redirect), GET /healthz,\n" +
			"GET /inbox/{token} and GET /inbox/{token}/messages/{id}, as HTML only. Holds the trial's inbox\n" +
			"grant and inbox token, nothing else.",
		HideHelpCommand: true,
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "token-file", Usage: "file holding the inbox token (under systemd: $CREDENTIALS_DIRECTORY/token)", EnvVars: []string{"MAILPLANE_TOKEN_FILE"}},
			&cli.StringFlag{Name: "listen", Value: DefaultListen, Usage: "host:port, fd:N or systemd:NAME", EnvVars: []string{"MAILPLANE_INBOX_LISTEN"}},
			&cli.BoolFlag{Name: "no-root-redirect", Usage: "answer GET / with Not found instead of redirecting to the token URL (for agents handed the full URL)"},
		}, cliapp.PlaneFlags...), logging.Flags...),
		Action: run,
	}
}

func run(c *cli.Context) error {
	token, err := readToken(c)
	if err != nil {
		return err
	}
	return cliapp.RunSurface(c, "mail-inbox", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger) error {
		log.Info().Str("listen", ln.Addr().String()).Bool("root_redirect", !c.Bool("no-root-redirect")).Msg("inbox listening")
		return Serve(ctx, ln, New(plane, token, c.Bool("no-root-redirect"), log), log)
	})
}

// readToken reads the inbox token once, at start. Errors name the file,
// never its content.
func readToken(c *cli.Context) (string, error) {
	token, err := cliapp.SecretFlag(c, "token-file", "token")
	if err != nil {
		return "", err
	}
	if !tokenSyntax.MatchString(token) {
		return "", cliapp.Usagef("the inbox token: want 32 to 256 characters of A-Z a-z 0-9 . _ ~ -")
	}
	return token, nil
}
