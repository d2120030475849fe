package writerproc

import (
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/internal/wbenv"
)

// Config is mail-writer's whole configuration: what its flags say
// (FromContext), and what a supervisor builds to start one (Args). A
// writer option is a field here, a flag in Flags, and one line in each of
// FromContext and Args; TestConfigRoundTrip fails for a flag missing from
// either.
type Config struct {
	Surface                          cliapp.Surface
	HTTPListen, SMTPListen, SMTPMode string
	SMTPAdvertiseHost                string
	PortControl                      int // an inherited descriptor; 0: none
	SMTPPlainPorts                   bool
	MaxMessageBytes                  int64
	MaxRecipients, SMTPMaxCommands   int
	MaxConnections                   int // 0: one cap for all listeners, sized to the process
	AuthFailureDelay                 time.Duration
	IdleTimeout, ConnectionLifetime  time.Duration
	TLSCert, TLSKey                  string
	SMTPTLSListen, HTTPSListen       string
	SMTPPlainAuthNets                string // CIDRs, comma-separated, or none
}

// Defaults is mail-writer without flags or environment.
func Defaults() Config {
	return Config{Surface: cliapp.DefaultSurface(), SMTPMode: string(smtpd.Fixed),
		MaxMessageBytes: limits.MessageBytes, MaxRecipients: limits.Recipients, SMTPMaxCommands: smtpd.DefaultMaxCommands,
		MaxConnections: connlimit.DefaultMaxConns, AuthFailureDelay: limits.AuthFailureMaxDelay,
		IdleTimeout: connlimit.DefaultIdle, ConnectionLifetime: connlimit.DefaultLifetime,
		SMTPPlainAuthNets: defaultPlainAuthNets}
}

// Flags are mail-writer's flags.
func Flags() []cli.Flag {
	flags := append([]cli.Flag{}, cliapp.SurfaceFlags...)
	flags = append(flags,
		&cli.StringFlag{Name: "http-listen", Usage: "POST /emails, /internal/bootstrap and /healthz: host:port, fd:N or systemd:NAME"},
		&cli.StringFlag{Name: "smtp-listen", Usage: "SMTP: host:port, fd:N or systemd:NAME"},
		&cli.StringFlag{Name: "smtp-mode", Value: string(smtpd.Fixed), Usage: "fixed (every message to this trial) or select (by X-WebsiteBench-Namespace/-Capability headers)"},
		&cli.IntFlag{Name: "port-control", Usage: "inherited file descriptor on which a supervisor hands this writer per-trial SMTP listeners (mail-plane up); the writer never binds them itself"},
		&cli.BoolFlag{Name: "smtp-plain-ports", Usage: "per-trial SMTP ports (--port-control) take plain SMTP without AUTH, as on a machine with one tenant: any local process can then write into any trial"},
		&cli.StringFlag{Name: "smtp-advertise-host", Usage: "smtp_host in /internal/bootstrap (default: the SMTP listener's host, 127.0.0.1 if it listens on all)", EnvVars: []string{wbenv.MailboxSMTPAdvertiseHost}},
		&cli.Int64Flag{Name: "max-message-bytes", Value: limits.MessageBytes, Usage: "largest POST /emails body and SMTP message (the plane's own limit still applies)"},
		&cli.IntFlag{Name: "max-recipients", Value: limits.Recipients, Usage: "recipients per message (to+cc+bcc; RCPT TO per transaction)"},
		&cli.IntFlag{Name: "smtp-max-commands", Value: smtpd.DefaultMaxCommands, Usage: "commands per SMTP connection, then 421 and close"},
		&cli.IntFlag{Name: "max-connections", Value: connlimit.DefaultMaxConns, Usage: "open connections per listener; more are closed at once (0: one cap for all listeners, sized to the process's descriptors and memory, the quietest idle connection closed to make room: mail-plane up's shared writer)"},
		&cli.DurationFlag{Name: "auth-failure-delay", Value: limits.AuthFailureMaxDelay, Usage: "the longest a refused SMTP AUTH waits as failures on a listener mount (0: no wait; the session still ends at its third failure)"},
		&cli.DurationFlag{Name: "idle-timeout", Value: connlimit.DefaultIdle, Usage: "how long a connection may wait for its client"},
		&cli.DurationFlag{Name: "connection-lifetime", Value: connlimit.DefaultLifetime, Usage: "how long a connection may live at all"},
	)
	return append(flags, tlsFlags...)
}

// FromContext reads Flags.
func FromContext(c *cli.Context) Config {
	return Config{Surface: cliapp.SurfaceFromContext(c),
		HTTPListen: c.String("http-listen"), SMTPListen: c.String("smtp-listen"), SMTPMode: c.String("smtp-mode"),
		SMTPAdvertiseHost: c.String("smtp-advertise-host"), PortControl: c.Int("port-control"), SMTPPlainPorts: c.Bool("smtp-plain-ports"),
		MaxMessageBytes: c.Int64("max-message-bytes"), MaxRecipients: c.Int("max-recipients"), SMTPMaxCommands: c.Int("smtp-max-commands"),
		MaxConnections: c.Int("max-connections"), AuthFailureDelay: c.Duration("auth-failure-delay"),
		IdleTimeout: c.Duration("idle-timeout"), ConnectionLifetime: c.Duration("connection-lifetime"),
		TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"), SMTPTLSListen: c.String("smtp-tls-listen"),
		HTTPSListen: c.String("https-listen"), SMTPPlainAuthNets: c.String("smtp-plain-auth-nets")}
}

// Args are the flags for cfg, the one place a supervisor's writer child
// gets its command line from: FromContext of Args(cfg) is cfg. An empty
// string is left out; numbers and durations always go.
func (cfg Config) Args() []string {
	a := cliapp.Args(cfg.Surface.Args())
	a.Str("http-listen", cfg.HTTPListen)
	a.Str("smtp-listen", cfg.SMTPListen)
	a.Str("smtp-mode", cfg.SMTPMode)
	a.Str("smtp-advertise-host", cfg.SMTPAdvertiseHost)
	a.Str("port-control", strconv.Itoa(cfg.PortControl))
	a.Bool("smtp-plain-ports", cfg.SMTPPlainPorts)
	a.Str("max-message-bytes", strconv.FormatInt(cfg.MaxMessageBytes, 10))
	a.Str("max-recipients", strconv.Itoa(cfg.MaxRecipients))
	a.Str("smtp-max-commands", strconv.Itoa(cfg.SMTPMaxCommands))
	a.Str("max-connections", strconv.Itoa(cfg.MaxConnections))
	a.Str("auth-failure-delay", cfg.AuthFailureDelay.String())
	a.Str("idle-timeout", cfg.IdleTimeout.String())
	a.Str("connection-lifetime", cfg.ConnectionLifetime.String())
	a.Str("tls-cert", cfg.TLSCert)
	a.Str("tls-key", cfg.TLSKey)
	a.Str("smtp-tls-listen", cfg.SMTPTLSListen)
	a.Str("https-listen", cfg.HTTPSListen)
	a.Str("smtp-plain-auth-nets", cfg.SMTPPlainAuthNets)
	return a
}
