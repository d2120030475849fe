package writerproc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
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
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/internal/writer"
)

// shutdownGrace is how long open requests and sessions get to finish on
// SIGTERM.
const shutdownGrace = 5 * time.Second

// App returns mail-writer's command line.
func App() *cli.App {
	return &cli.App{
		Name:  "mail-writer",
		Usage: "the candidate's write-only mail door: Resend-style POST /emails, SMTP and bootstrap",
		Description: "Serves POST /emails, GET /internal/bootstrap and GET /healthz on --http-listen and SMTP on\n" +
			"--smtp-listen. Every message is offered to mail-plane with this writer's grant and the credential its\n" +
			"client presented; the plane decides. The writer reads no mail and holds no other secret.",
		Flags: Flags(),
		Action: func(c *cli.Context) error {
			if err := cliapp.NoArgs(c); err != nil {
				return err
			}
			return Run(FromContext(c))
		},
		HideHelpCommand: true,
	}
}

// options are mail-writer's limits and settings, read from its command
// line and checked.
type options struct {
	mode      smtpd.Mode
	maxBytes  int64
	maxRcpt   int
	maxCmds   int
	maxConns  int
	idle      time.Duration
	lifetime  time.Duration
	authDelay time.Duration // -1: no wait (smtpd's convention)
	tls       *tls.Config
	authNets  []netip.Prefix
	// portControl is the supervisor's socket that hands over per-trial
	// listeners (--port-control), checked before anything is served.
	portControl *net.UnixConn
}

// readOptions reads and checks the command line; every error is a usage
// error.
func readOptions(cfg Config) (options, error) {
	o := options{mode: smtpd.Mode(cfg.SMTPMode)}
	if o.mode != smtpd.Fixed && o.mode != smtpd.Select {
		return o, cliapp.Usagef("--smtp-mode %q: want fixed or select", o.mode)
	}
	if cfg.HTTPListen == "" {
		return o, cliapp.Usagef("--http-listen is required")
	}
	if cfg.SMTPListen == "" {
		return o, cliapp.Usagef("--smtp-listen is required")
	}
	o.maxBytes, o.maxRcpt, o.maxCmds = cfg.MaxMessageBytes, cfg.MaxRecipients, cfg.SMTPMaxCommands
	o.maxConns, o.idle, o.lifetime = cfg.MaxConnections, cfg.IdleTimeout, cfg.ConnectionLifetime
	if o.maxBytes <= 0 || o.maxRcpt <= 0 || o.maxCmds <= 0 || o.maxConns < 0 || o.idle <= 0 || o.lifetime <= 0 {
		return o, cliapp.Usagef("limits must be positive")
	}
	o.authDelay = cfg.AuthFailureDelay
	if o.authDelay < 0 {
		return o, cliapp.Usagef("--auth-failure-delay must not be negative")
	}
	if o.authDelay == 0 {
		o.authDelay = -1 // smtpd: no wait
	}
	return o, nil
}

// readTLS reads the TLS settings (tls.go) into o.
func readTLS(cfg Config, o *options) error {
	var err error
	if o.tls, err = tlsConfig(cfg); err != nil {
		return cliapp.UsageError{Err: err}
	}
	if o.authNets, err = plainAuthNets(cfg.SMTPPlainAuthNets); err != nil {
		return cliapp.UsageError{Err: err}
	}
	return nil
}

// mainListeners are the writer's two required listeners and the SMTP
// address its bootstrap hands out.
type mainListeners struct {
	http, smtp net.Listener
	host       string // advertised SMTP host
	port       int    // the SMTP listener's port
}

// openMain opens --http-listen and --smtp-listen.
func openMain(cfg Config) (mainListeners, error) {
	var l mainListeners
	var err error
	if l.http, err = listen.Listen(cfg.HTTPListen); err != nil {
		return l, cliapp.Usagef("--http-listen: %v", err)
	}
	if l.smtp, err = listen.Listen(cfg.SMTPListen); err != nil {
		l.http.Close()
		return l, cliapp.Usagef("--smtp-listen: %v", err)
	}
	addr, _ := l.smtp.Addr().(*net.TCPAddr)
	if addr == nil {
		return l, cliapp.Usagef("--smtp-listen: not a TCP socket")
	}
	l.host, l.port = cfg.SMTPAdvertiseHost, addr.Port
	if l.host == "" {
		l.host = advertiseHost(addr.IP)
	}
	return l, nil
}

func (l mainListeners) close() {
	l.http.Close()
	l.smtp.Close()
}

// planeClient is what the writer's process asks of the plane: the mail
// APIs' and SMTP's calls, and the reports of refused sessions.
type planeClient interface {
	writer.Plane
	smtpd.Sender
	Reporter
}

// Run is the writer's life as cfg says, until SIGINT or SIGTERM.
func Run(cfg Config) error {
	log, err := cfg.Surface.Logger("mail-writer")
	if err != nil {
		return cliapp.UsageError{Err: err}
	}
	o, err := readOptions(cfg)
	if err != nil {
		return err
	}
	if err := readTLS(cfg, &o); err != nil {
		return err
	}
	if fd := cfg.PortControl; fd > 0 {
		if o.portControl, err = fdpass.Conn(fd); err != nil {
			return cliapp.Usagef("--port-control: %v", err)
		}
	}
	plane, err := cfg.Surface.PlaneClient()
	if err != nil {
		return err
	}
	defer plane.Close()
	lns, err := openMain(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return serve(ctx, cfg, o, lns, plane, log)
}

// serve serves the mail APIs and SMTP on lns, the TLS listeners and the
// per-trial ports, until ctx ends or a listener stops.
func serve(ctx context.Context, cfg Config, o options, lns mainListeners, plane planeClient, log zerolog.Logger) error {
	lim, httpLim := listenerLimits(o.maxConns, o.idle, o.lifetime, log)
	h := writer.NewHandler(writer.Config{MaxBodyBytes: o.maxBytes, MaxRecipients: o.maxRcpt, SMTPHost: lns.host, SMTPPort: lns.port, Idle: o.idle}, plane, log)
	api := cfg.Surface.Hosts().Check(h)
	hs := writer.NewHTTPServer(writer.AtDoor(api, "http", "", 0), o.idle, o.lifetime, log)
	smtpCfg := smtpd.Config{Mode: o.mode, MaxMessageBytes: o.maxBytes, MaxRecipients: o.maxRcpt, MaxCommands: o.maxCmds, TLS: o.tls, PlainAuthNets: o.authNets,
		AuthFailureDelay: o.authDelay, Shares: connlimit.NewShares(limits.TrialSends)}
	shared := smtpCfg
	// With per-trial ports handed over, the main SMTP listener is the
	// shared one: a client says which trial by AUTH, before MAIL.
	shared.RequireAuth = o.portControl != nil
	ss := smtpd.New(shared, plane, log)

	errc := make(chan error, 4) // HTTP, SMTP, implicit TLS, HTTPS
	sheds := newShedReports(plane, log)
	go sheds.run(ctx)
	tlsDoors, err := startTLSDoors(cfg, lim, o.tls, shared, api, plane, errc, log)
	if err != nil {
		lns.close()
		return err
	}
	defer tlsDoors.shutdown()
	go func() {
		errc <- hs.Serve(connlimit.Listen(lns.http, httpLim))
	}()
	go func() {
		smtpLim := lim
		smtpLim.OnShed = sheds.on(lns.port)
		errc <- ss.Serve(connlimit.Listen(lns.smtp, smtpLim))
	}()
	if o.portControl != nil {
		// A door is one trial's, inside its namespace: the reference's
		// cap per listener, not the shared writer's pool.
		doorLim := connlimit.Limits{MaxConns: connlimit.DefaultMaxConns, Idle: o.idle, Lifetime: o.lifetime}
		doors := newDoorServers(smtpCfg, plane, api, doorLim, sheds, log)
		startPortControl(o.portControl, trialServers(smtpCfg, cfg.SMTPPlainPorts, plane, log), lim, sheds, doors, log)
	}
	log.Info().Str("http", lns.http.Addr().String()).Str("smtp", lns.smtp.Addr().String()).Str("smtp_mode", string(o.mode)).
		Str("smtp_advertise", net.JoinHostPort(lns.host, fmt.Sprint(lns.port))).Msg("writer listening")

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

// startPortControl serves the per-trial SMTP listeners and doors the
// supervisor hands over the control socket fd. The supervisor closing the
// control socket (it is stopping) ends the per-trial ports, not the
// writer: SIGTERM follows.
func startPortControl(ctl *net.UnixConn, newServer func(fdpass.Message) *smtpd.Server, lim connlimit.Limits, sheds *shedReports, doors *doorServers, log zerolog.Logger) {
	go func() {
		err := servePorts(ctl, newServer, lim, sheds, doors, log)
		log.Info().Err(err).Msg("per-trial SMTP ports closed: the supervisor's port control ended")
	}()
}

// listenerLimits are the limits of the writer's SMTP listeners, and of
// its HTTP ones (whose idle bound net/http keeps itself). With maxConns 0
// they share one connlimit.Pool sized to the process (mail-plane up's
// shared writer).
func listenerLimits(maxConns int, idle, lifetime time.Duration, log zerolog.Logger) (smtpLim, httpLim connlimit.Limits) {
	smtpLim = connlimit.Limits{MaxConns: maxConns, Idle: idle, Lifetime: lifetime}
	if maxConns == 0 {
		smtpLim.Pool = connlimit.NewPool(connlimit.ProcessCap())
		log.Info().Int("max_connections", smtpLim.Pool.Max()).Msg("one connection cap for every listener, sized to the process")
	}
	httpLim = smtpLim
	httpLim.Idle = 0
	return smtpLim, httpLim
}

// advertiseHost is the SMTP host to hand out: the listener's address, or
// 127.0.0.1 when it listens on every address.
func advertiseHost(ip net.IP) string {
	if ip == nil || ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return ip.String()
}
