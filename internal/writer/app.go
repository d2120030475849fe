package writer

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/fdpass"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/listen"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/internal/wbenv"
)

// shutdownGrace is how long open requests and sessions get to finish on
// SIGTERM.
const shutdownGrace = 5 * time.Second

// App returns mail-writer's command line.
func App() *cli.App {
	flags := append(append([]cli.Flag{}, logging.Flags...), cliapp.SurfaceFlags...)
	flags = append(flags,
		&cli.StringFlag{Name: "http-listen", Usage: "POST /emails, /internal/bootstrap and /healthz: host:port, fd:N or systemd:NAME"},
		&cli.StringFlag{Name: "smtp-listen", Usage: "SMTP: host:port, fd:N or systemd:NAME"},
		&cli.StringFlag{Name: "smtp-mode", Value: string(smtpd.Fixed), Usage: "fixed (every message to this trial) or select (by X-WebsiteBench-Namespace/-Capability headers)"},
		&cli.IntFlag{Name: "port-control", Usage: "inherited file descriptor on which a supervisor hands this writer per-trial SMTP listeners (mail-plane up); the writer never binds them itself"},
		&cli.StringFlag{Name: "smtp-advertise-host", Usage: "smtp_host in /internal/bootstrap (default: the SMTP listener's host, 127.0.0.1 if it listens on all)", EnvVars: []string{wbenv.MailboxSMTPAdvertiseHost}},
		&cli.Int64Flag{Name: "max-message-bytes", Value: limits.MessageBytes, Usage: "largest POST /emails body and SMTP message (the plane's own limit still applies)"},
		&cli.IntFlag{Name: "max-recipients", Value: limits.Recipients, Usage: "recipients per message (to+cc+bcc; RCPT TO per transaction)"},
		&cli.IntFlag{Name: "smtp-max-commands", Value: smtpd.DefaultMaxCommands, Usage: "commands per SMTP connection, then 421 and close"},
		&cli.IntFlag{Name: "max-connections", Value: connlimit.DefaultMaxConns, Usage: "open connections per listener; more are closed at once"},
		&cli.DurationFlag{Name: "idle-timeout", Value: connlimit.DefaultIdle, Usage: "how long a connection may wait for its client"},
		&cli.DurationFlag{Name: "connection-lifetime", Value: connlimit.DefaultLifetime, Usage: "how long a connection may live at all"},
	)
	flags = append(flags, tlsFlags...)
	return &cli.App{
		Name:  "mail-writer",
		Usage: "the candidate's write-only mail door: Resend-style POST /emails, SMTP and bootstrap",
		Description: "Serves POST /emails, GET /internal/bootstrap and GET /healthz on --http-listen and SMTP on\n" +
			"--smtp-listen. Every message is offered to mail-plane with this writer's grant and the credential its\n" +
			"client presented; the plane decides. The writer reads no mail and holds no other secret.",
		Flags:           flags,
		Action:          run,
		HideHelpCommand: true,
	}
}

func run(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliapp.Usagef("unexpected argument %q", c.Args().First())
	}
	log, err := logging.FromFlags(c, "mail-writer")
	if err != nil {
		return cliapp.UsageError{Err: err}
	}
	mode := smtpd.Mode(c.String("smtp-mode"))
	if mode != smtpd.Fixed && mode != smtpd.Select {
		return cliapp.Usagef("--smtp-mode %q: want fixed or select", mode)
	}
	for _, name := range []string{"http-listen", "smtp-listen"} {
		if c.String(name) == "" {
			return cliapp.Usagef("--%s is required", name)
		}
	}
	maxBytes, maxRcpt, maxCmds := c.Int64("max-message-bytes"), c.Int("max-recipients"), c.Int("smtp-max-commands")
	maxConns, idle, lifetime := c.Int("max-connections"), c.Duration("idle-timeout"), c.Duration("connection-lifetime")
	if maxBytes <= 0 || maxRcpt <= 0 || maxCmds <= 0 || maxConns <= 0 || idle <= 0 || lifetime <= 0 {
		return cliapp.Usagef("limits must be positive")
	}
	tlsCfg, err := tlsConfig(c)
	if err != nil {
		return cliapp.UsageError{Err: err}
	}
	authNets, err := plainAuthNets(c.String("smtp-plain-auth-nets"))
	if err != nil {
		return cliapp.UsageError{Err: err}
	}
	plane, err := cliapp.PlaneClient(c)
	if err != nil {
		return err
	}
	defer plane.Close()

	httpLn, err := listen.Listen(c.String("http-listen"))
	if err != nil {
		return cliapp.Usagef("--http-listen: %v", err)
	}
	smtpLn, err := listen.Listen(c.String("smtp-listen"))
	if err != nil {
		httpLn.Close()
		return cliapp.Usagef("--smtp-listen: %v", err)
	}
	smtpAddr, _ := smtpLn.Addr().(*net.TCPAddr)
	if smtpAddr == nil {
		return cliapp.Usagef("--smtp-listen: not a TCP socket")
	}
	host := c.String("smtp-advertise-host")
	if host == "" {
		host = advertiseHost(smtpAddr.IP)
	}

	h := NewHandler(Config{MaxBodyBytes: maxBytes, MaxRecipients: maxRcpt, SMTPHost: host, SMTPPort: smtpAddr.Port, Idle: idle}, plane, log)
	hosts := cliapp.AllowedHosts(c)
	hs := NewHTTPServer(hosts.Check(h), idle, lifetime, log)
	smtpCfg := smtpd.Config{Mode: mode, MaxMessageBytes: maxBytes, MaxRecipients: maxRcpt, MaxCommands: maxCmds, TLS: tlsCfg, PlainAuthNets: authNets}
	shared := smtpCfg
	// With per-trial ports handed over, the main SMTP listener is the
	// shared one: a client says which trial by AUTH, before MAIL.
	shared.RequireAuth = c.Int("port-control") > 0
	ss := smtpd.New(shared, plane, log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 4) // HTTP, SMTP, implicit TLS, HTTPS
	sheds := newShedReports(plane, log)
	go sheds.run(ctx)
	tlsDoors, err := startTLSDoors(c, tlsCfg, shared, hosts.Check(h), plane, errc, log)
	if err != nil {
		httpLn.Close()
		smtpLn.Close()
		return err
	}
	defer tlsDoors.shutdown()
	go func() {
		errc <- hs.Serve(connlimit.Listen(httpLn, connlimit.Limits{MaxConns: maxConns, Lifetime: lifetime}))
	}()
	go func() {
		errc <- ss.Serve(connlimit.Listen(smtpLn, connlimit.Limits{MaxConns: maxConns, Idle: idle, Lifetime: lifetime,
			OnShed: sheds.on(smtpAddr.Port)}))
	}()
	if fd := c.Int("port-control"); fd > 0 {
		ctl, err := fdpass.Conn(fd)
		if err != nil {
			return cliapp.Usagef("--port-control: %v", err)
		}
		// The supervisor closing the control socket (it is stopping) ends
		// the per-trial ports, not the writer: SIGTERM follows.
		go func() {
			err := servePorts(ctl, func() *smtpd.Server { return smtpd.New(smtpCfg, plane, log) },
				connlimit.Limits{MaxConns: maxConns, Idle: idle, Lifetime: lifetime}, sheds, log)
			log.Info().Err(err).Msg("per-trial SMTP ports closed: the supervisor's port control ended")
		}()
	}
	log.Info().Str("http", httpLn.Addr().String()).Str("smtp", smtpLn.Addr().String()).Str("smtp_mode", string(mode)).
		Str("smtp_advertise", net.JoinHostPort(host, fmt.Sprint(smtpAddr.Port))).Msg("writer listening")

	var failed error
	select {
	case err := <-errc:
		failed = fmt.Errorf("listener stopped: %w", err)
	case <-ctx.Done():
		log.Info().Msg("shutting down")
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		hs.Close()
	}
	if err := ss.Shutdown(sctx); err != nil {
		ss.Close()
	}
	return failed
}

// servePorts serves the per-trial SMTP listeners the supervisor hands
// over ctl, each by its own server (so that closing one forgets it), and
// closes those it takes back, until ctl closes (the supervisor is
// stopping), when it closes them all.
func servePorts(ctl *net.UnixConn, newServer func() *smtpd.Server, limits connlimit.Limits, sheds *shedReports, log zerolog.Logger) error {
	defer ctl.Close()
	servers := map[int]*smtpd.Server{}
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	for {
		m, err := fdpass.Receive(ctl)
		if errors.Is(err, fdpass.ErrMalformed) {
			log.Error().Msg("port control: malformed message ignored")
			continue
		}
		if err != nil {
			return fmt.Errorf("port control: %w", err)
		}
		if old, ok := servers[m.Port]; ok {
			old.Close()
			delete(servers, m.Port)
			log.Debug().Int("port", m.Port).Msg("per-trial SMTP port closed")
		}
		if m.Op == fdpass.OpRemove {
			continue
		}
		ln, err := net.FileListener(m.File)
		m.File.Close()
		if err != nil {
			log.Error().Err(err).Int("port", m.Port).Msg("port control: not a listener")
			continue
		}
		s := newServer()
		servers[m.Port] = s
		lim := limits
		lim.OnShed = sheds.on(m.Port)
		go s.Serve(connlimit.Listen(ln, lim))
		log.Debug().Int("port", m.Port).Msg("per-trial SMTP port serving")
	}
}

// advertiseHost is the SMTP host to hand out: the listener's address, or
// 127.0.0.1 when it listens on every address.
func advertiseHost(ip net.IP) string {
	if ip == nil || ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return ip.String()
}

// NewHTTPServer returns the http.Server for h. net/http keeps the idle
// bound itself (between requests and while a request's header arrives);
// the listener adds the connection cap and lifetime.
func NewHTTPServer(h http.Handler, idle, lifetime time.Duration, zl zerolog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: idle,
		ReadTimeout:       lifetime,
		WriteTimeout:      lifetime,
		IdleTimeout:       idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(debugWriter{zl}, "http: ", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
}

// debugWriter sends net/http's own error lines (bad requests, vanished
// clients) to the debug log.
type debugWriter struct{ log zerolog.Logger }

func (d debugWriter) Write(p []byte) (int, error) {
	d.log.Debug().Msg(string(p))
	return len(p), nil
}
