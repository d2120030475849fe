package writerproc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/listen"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/internal/writer"
)

// tlsFlags are the writer's TLS and AUTH settings. The certificate is a
// leaf the plane's local CA issued (mail-plane ca issue, or mail-plane up
// itself); the writer never sees the CA's key.
var tlsFlags = []cli.Flag{
	&cli.StringFlag{Name: "tls-cert", Usage: "PEM certificate chain for STARTTLS, --smtp-tls-listen and --https-listen"},
	&cli.StringFlag{Name: "tls-key", Usage: "PEM private key of --tls-cert"},
	&cli.StringFlag{Name: "smtp-tls-listen", Usage: "SMTP with implicit TLS (the port 465 convention): host:port, fd:N or systemd:NAME; needs --tls-cert"},
	&cli.StringFlag{Name: "https-listen", Usage: "the HTTP door over TLS: host:port, fd:N or systemd:NAME; needs --tls-cert"},
	&cli.StringFlag{Name: "smtp-plain-auth-nets", Value: defaultPlainAuthNets, Usage: "local addresses (CIDR, comma-separated) at which SMTP AUTH is offered without TLS; none: only after STARTTLS or on --smtp-tls-listen"},
}

// defaultPlainAuthNets are the loopback addresses.
const defaultPlainAuthNets = "127.0.0.0/8,::1/128"

// tlsConfig loads --tls-cert and --tls-key; nil when neither is set.
func tlsConfig(cfg Config) (*tls.Config, error) {
	certFile, keyFile := cfg.TLSCert, cfg.TLSKey
	if certFile == "" && keyFile == "" {
		if cfg.SMTPTLSListen != "" {
			return nil, fmt.Errorf("--smtp-tls-listen needs --tls-cert and --tls-key")
		}
		if cfg.HTTPSListen != "" {
			return nil, fmt.Errorf("--https-listen needs --tls-cert and --tls-key")
		}
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %v", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// plainAuthNets parses --smtp-plain-auth-nets.
func plainAuthNets(s string) ([]netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("--smtp-plain-auth-nets: %v", err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// tlsDoors are the optional TLS listeners: SMTP with implicit TLS and the
// HTTP door over HTTPS.
type tlsDoors struct {
	smtp *smtpd.Server
	http *http.Server
}

// startTLSDoors opens --smtp-tls-listen and --https-listen, if set, and
// serves them; a listener that stops reports on errc.
func startTLSDoors(cfg Config, limits connlimit.Limits, tlsCfg *tls.Config, smtpCfg smtpd.Config, h http.Handler, plane smtpd.Sender, errc chan<- error, log zerolog.Logger) (*tlsDoors, error) {
	d := &tlsDoors{}
	if addr := cfg.SMTPTLSListen; addr != "" {
		ln, err := listen.Listen(addr)
		if err != nil {
			return nil, cliapp.Usagef("--smtp-tls-listen: %v", err)
		}
		cfg := smtpCfg
		cfg.ImplicitTLS = true
		d.smtp = smtpd.New(cfg, plane, log)
		go func() { errc <- d.smtp.Serve(connlimit.Listen(ln, limits)) }()
		log.Info().Str("smtp_tls", ln.Addr().String()).Msg("writer listening")
	}
	if addr := cfg.HTTPSListen; addr != "" {
		ln, err := listen.Listen(addr)
		if err != nil {
			d.shutdown()
			return nil, cliapp.Usagef("--https-listen: %v", err)
		}
		d.http = writer.NewHTTPServer(writer.AtDoor(h, "https", "", 0), limits.Idle, limits.Lifetime, log)
		d.http.TLSConfig = tlsCfg.Clone()
		go func() {
			httpLimits := limits
			httpLimits.Idle = 0 // net/http's own
			err := d.http.ServeTLS(connlimit.Listen(ln, httpLimits), "", "")
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			errc <- err
		}()
		log.Info().Str("https", ln.Addr().String()).Msg("writer listening")
	}
	return d, nil
}

// shutdown stops the TLS doors, giving open sessions the usual grace.
func (d *tlsDoors) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if d.smtp != nil {
		if err := d.smtp.Shutdown(ctx); err != nil {
			d.smtp.Close()
		}
	}
	if d.http != nil {
		if err := d.http.Shutdown(ctx); err != nil {
			d.http.Close()
		}
	}
}
