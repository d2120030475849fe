// Package inboxproc is mail-inbox's configuration: its typed Config, the
// flags that say it and the command line that writes it. It links none of
// the inbox's handlers (nor the MCP SDK), so that a supervisor building a
// mail-inbox child (mail-plane up, sidecar) does not; the process's life
// is cmd/mail-inbox's.
package inboxproc

import (
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
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
	// IMAPListen (STARTTLS) and IMAPSListen (implicit TLS) are the
	// mailbox over IMAP, a shared inbox's only, with the leaf of the
	// plane's CA in TLSCert and TLSKey.
	IMAPListen, IMAPSListen string
	TLSCert, TLSKey         string
	// PortControl is an inherited descriptor (0: none) over which the
	// supervisor hands over agents' IMAP doors inside their network
	// namespaces (fdpass.KindIMAP).
	PortControl int
}

// Defaults is mail-inbox without flags or environment.
func Defaults() Config { return Config{Surface: cliapp.DefaultSurface(), Listen: DefaultListen} }

// Flags are mail-inbox's flags.
func Flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "token-file", Usage: "file holding the one trial's inbox token (strict mode; under systemd: $CREDENTIALS_DIRECTORY/token)", EnvVars: []string{"MAILPLANE_TOKEN_FILE"}},
		cliapp.ListenFlag(DefaultListen, "MAILPLANE_INBOX_LISTEN"),
		&cli.BoolFlag{Name: "root-redirect", Usage: "with --token-file: answer GET / with a redirect to the token URL (the reference's drop-in contract)"},
		&cli.StringFlag{Name: "imap-listen", Usage: "the mailbox over IMAP with STARTTLS (shared inbox only): host:port, fd:N or systemd:NAME; needs --tls-cert"},
		&cli.StringFlag{Name: "imaps-listen", Usage: "the mailbox over IMAP with implicit TLS (shared inbox only); needs --tls-cert"},
		&cli.StringFlag{Name: "tls-cert", Usage: "PEM certificate chain for the IMAP ports (a leaf of the plane's CA)"},
		&cli.StringFlag{Name: "tls-key", Usage: "PEM private key of --tls-cert"},
		&cli.IntFlag{Name: "port-control", Usage: "inherited descriptor of the supervisor's port control, which hands over agents' IMAP doors in their network namespaces (with --imap-listen)"},
	}, cliapp.SurfaceFlags...)
}

// FromContext reads Flags.
func FromContext(c *cli.Context) Config {
	return Config{Surface: cliapp.SurfaceFromContext(c), Listen: c.String("listen"),
		TokenFile: c.String("token-file"), RootRedirect: c.Bool("root-redirect"),
		IMAPListen: c.String("imap-listen"), IMAPSListen: c.String("imaps-listen"), TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"),
		PortControl: c.Int("port-control")}
}

// Args are the flags for cfg: FromContext of Args(cfg) is cfg.
func (cfg Config) Args() []string {
	a := cliapp.Args(cliapp.Listener{Surface: cfg.Surface, Listen: cfg.Listen}.Args())
	a.Str("token-file", cfg.TokenFile)
	a.Bool("root-redirect", cfg.RootRedirect)
	a.Str("imap-listen", cfg.IMAPListen)
	a.Str("imaps-listen", cfg.IMAPSListen)
	a.Str("tls-cert", cfg.TLSCert)
	a.Str("tls-key", cfg.TLSKey)
	if cfg.PortControl > 0 {
		a.Str("port-control", strconv.Itoa(cfg.PortControl))
	}
	return a
}
