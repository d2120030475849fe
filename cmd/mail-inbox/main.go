package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"runtime/debug"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/fdpass"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/inbox"
	"github.com/websitebench/mailplane/internal/inboximap"
	"github.com/websitebench/mailplane/internal/inboxproc"
	"github.com/websitebench/mailplane/internal/listen"
	"github.com/websitebench/mailplane/pkg/rpc"
)

func main() { os.Exit(cliapp.Run(app(), os.Args)) }

// app is mail-inbox's command line.
func app() *cli.App {
	return cliapp.SurfaceApp("mail-inbox",
		"the agent's HTML inbox: every trial's (shared), or one trial's (--token-file)",
		"Serves GET /healthz, GET /inbox/{token} and GET /inbox/{token}/messages/{id} (with /text and /html,\n"+
			"its text and its HTML's sandboxed frame) as HTML, the links' pings\n"+
			"(POST /inbox/{token}/messages/{id}/ping/{link}), and the same mailbox as MCP tools at /mcp/{token}.\n"+
			"Without --token-file it serves every trial of its plane, with a shared inbox grant: the plane finds\n"+
			"the trial each token opens. With --token-file it serves one trial, with that trial's inbox grant.\n"+
			"GET / is Not found, unless --root-redirect (one trial only) redirects it to the token URL as the\n"+
			"reference does: anyone who can reach the port then has the mailbox.",
		inboxproc.Flags(), inboxproc.FromContext, run)
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

// run is the inbox's life as cfg says, until SIGINT or SIGTERM.
func run(cfg inboxproc.Config) error {
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
	imapTLS, err := imapConfig(cfg, token)
	if err != nil {
		return err
	}
	var ctl *net.UnixConn
	if cfg.PortControl > 0 {
		if imapTLS == nil {
			return cliapp.Usagef("--port-control needs --imap-listen: it hands over IMAP doors")
		}
		if ctl, err = fdpass.Conn(cfg.PortControl); err != nil {
			return cliapp.Usagef("--port-control: %v", err)
		}
		defer ctl.Close()
	}
	return cliapp.RunSurface(cfg.Surface, cfg.Listen, "mail-inbox", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, hosts httpserve.Hosts) error {
		log.Info().Str("listen", ln.Addr().String()).Bool("shared", token == "").Bool("root_redirect", cfg.RootRedirect).Msg("inbox listening")
		if imapTLS == nil {
			return inbox.Serve(ctx, ln, hosts.Check(inbox.New(plane, token, cfg.RootRedirect, log)), token == "", log)
		}
		plain, err := listen.Listen(cfg.IMAPListen)
		if err != nil {
			return cliapp.Usagef("--imap-listen: %v", err)
		}
		secure, err := listen.Listen(cfg.IMAPSListen)
		if err != nil {
			plain.Close()
			return cliapp.Usagef("--imaps-listen: %v", err)
		}
		log.Info().Str("imap", plain.Addr().String()).Str("imaps", secure.Addr().String()).Msg("inbox listening over IMAP")
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		imapErr := make(chan error, 1)
		door := inboximap.New(ctx, plane, imapTLS, log)
		go func() { imapErr <- door.Serve(plain, secure) }()
		if ctl != nil {
			go serveDoors(ctx, ctl, door, func(ns string) http.Handler { return hosts.Check(inbox.NewDoor(plane, ns, log)) }, log)
		}
		err = inbox.Serve(ctx, ln, hosts.Check(inbox.New(plane, token, cfg.RootRedirect, log)), token == "", log)
		stop()
		return errors.Join(err, <-imapErr)
	})
}

// imapConfig checks the IMAP flags and loads their certificate: nil when
// the inbox serves no IMAP. IMAP is a shared inbox's, both ports at once,
// and never without TLS.
func imapConfig(cfg inboxproc.Config, token string) (*tls.Config, error) {
	if cfg.IMAPListen == "" && cfg.IMAPSListen == "" {
		return nil, nil
	}
	switch {
	case token != "":
		return nil, cliapp.Usagef("--imap-listen: IMAP is served by a shared inbox only (no --token-file)")
	case cfg.IMAPListen == "" || cfg.IMAPSListen == "":
		return nil, cliapp.Usagef("--imap-listen and --imaps-listen go together")
	case cfg.TLSCert == "" || cfg.TLSKey == "":
		return nil, cliapp.Usagef("--imap-listen needs --tls-cert and --tls-key")
	}
	pair, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, cliapp.Usagef("--tls-cert/--tls-key: %v", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
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

// serveDoors serves the agents' doors the supervisor hands over ctl
// (bound inside their network namespaces: IMAP, and the pages and MCP over
// HTTP, each of one trial) and closes those it takes back, until ctl
// closes (the supervisor is stopping) or ctx ends, which close them all.
func serveDoors(ctx context.Context, ctl *net.UnixConn, imapDoor *inboximap.Server, pages func(ns string) http.Handler, log zerolog.Logger) {
	httpDoors := map[string]context.CancelFunc{}
	defer func() {
		for _, stop := range httpDoors {
			stop()
		}
	}()
	for {
		m, err := fdpass.Receive(ctl)
		if errors.Is(err, fdpass.ErrMalformed) {
			log.Error().Msg("port control: malformed message ignored")
			continue
		}
		if err != nil {
			log.Info().Err(err).Msg("agents' doors: the supervisor's port control ended")
			return
		}
		if m.Op == fdpass.OpRemove {
			imapDoor.CloseDoor(m.Door)
			if stop := httpDoors[m.Door]; stop != nil {
				stop()
				delete(httpDoors, m.Door)
			}
			continue
		}
		ln, err := net.FileListener(m.File)
		m.File.Close()
		if err != nil {
			log.Error().Err(err).Msg("port control: a door's socket is not a listener")
			continue
		}
		switch m.Kind {
		case fdpass.KindIMAP:
			imapDoor.ServeDoor(m.Door, ln)
		case fdpass.KindHTTP:
			if stop := httpDoors[m.Door]; stop != nil {
				stop()
			}
			dctx, stop := context.WithCancel(ctx)
			httpDoors[m.Door] = stop
			go inbox.Serve(dctx, ln, pages(m.Door), false, log)
		default:
			ln.Close()
			log.Error().Msg("port control: a listener that is no agent's door ignored")
			continue
		}
		log.Debug().Int("port", m.Port).Str("kind", string(m.Kind)).Msg("agent's door serving")
	}
}
