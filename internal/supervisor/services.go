package supervisor

import (
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/consoleproc"
	"github.com/websitebench/mailplane/internal/gatewayproc"
	"github.com/websitebench/mailplane/internal/inboxproc"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/serve"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/internal/writerproc"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The services a supervisor runs, as Postfix's master.cf lists its
// daemons: each row below is a child's binary, the sockets it is handed
// and its typed configuration, the one its own flags read back
// (serve.Config, writerproc.Config, inboxproc.Config, gatewayproc.Config,
// consoleproc.Config, each with a round-trip test). No child's command
// line is written as strings.

// config is a child's typed configuration.
type config interface{ Args() []string }

// planeCommand is mail-plane serve's command line: mail-plane's logging
// flags come before the subcommand.
type planeCommand struct {
	log   cliapp.Log
	serve serve.Config
}

func (p planeCommand) Args() []string {
	return append(append(p.log.Args(), "serve"), p.serve.Args()...)
}

// fd is the listen address of the i-th socket a child is handed (its lns,
// then its files): fd:3 is the first.
func fd(i int) string { return "fd:" + strconv.Itoa(3+i) }

// sharedServices are up's children besides the plane: one writer, inbox,
// gateway and console that every trial shares. lns are the writer's HTTP
// and SMTP, the inbox's and the gateway's; writerEnd is the writer's end
// of the port control and inboxEnd the inbox's (agents' IMAP doors);
// writer adds up's AUTH settings.
func (st *stack) sharedServices(lns [4]net.Listener, console net.Listener, wtls *writerTLS, writerEnd, inboxEnd *os.File, writer func(*writerproc.Config)) []*surface {
	// fd 3 HTTP, 4 SMTP, 5 SMTP with implicit TLS, 6 HTTPS, 7 the port control.
	wlns := append(lns[0:2:2], wtls.lns[:2]...)
	w := writerproc.Defaults()
	w.Surface = st.surfaceConfig(st.grantFile(rpc.RoleWriter))
	w.HTTPListen, w.SMTPListen, w.SMTPMode, w.PortControl = fd(0), fd(1), string(smtpd.Fixed), 3+len(wlns)
	// Fair shares (limits): one connection cap for all its doors, sized
	// to the process, and short waits for a credential.
	w.MaxConnections, w.IdleTimeout = 0, limits.SharedIdle
	wtls.configure(&w, fd(2), fd(3))
	writer(&w)
	// fd 3 HTTP, 4 IMAP with STARTTLS, 5 IMAP with implicit TLS, 6 the port control.
	in := inboxproc.Config{Surface: st.surfaceConfig(st.grantFile(rpc.RoleInbox)), Listen: fd(0), PortControl: 6}
	wtls.configureInbox(&in, fd(1), fd(2))
	return []*surface{
		{name: "mail-writer", lns: wlns, files: []*os.File{writerEnd}, cfg: w},
		{name: "mail-inbox", lns: []net.Listener{lns[2], wtls.lns[2], wtls.lns[3]}, files: []*os.File{inboxEnd}, cfg: in},
		{name: "mail-gateway", lns: lns[3:4], cfg: gatewayproc.Config{Surface: st.surfaceConfig(st.grantFile(rpc.RoleGateway)), Listen: fd(0)}},
		{name: "mail-console", lns: []net.Listener{console}, cfg: consoleproc.Config{Surface: st.surfaceConfig(st.grantFile(rpc.RoleConsole)), Listen: fd(0)}},
	}
}

// sidecarServices are the sidecar's children besides the plane: the
// trial's writer (SMTP selects the namespace), the gateway, the API
// router in front of both (mail-plane route: it holds no grant) and,
// unless authoring, the inbox, which answers GET / with the mailbox, to
// any host name the agent uses (the reference's contract).
func (st *stack) sidecarServices(lns *sidecarListeners, e sidecarEnv) []*surface {
	trial := st.trialDir()
	w := writerproc.Defaults()
	w.Surface = st.surfaceConfig(filepath.Join(trial, "writer.grant"))
	w.HTTPListen, w.SMTPListen, w.SMTPMode, w.SMTPAdvertiseHost = fd(0), fd(1), string(smtpd.Select), e.advertise
	writer := &surface{name: "mail-writer", lns: []net.Listener{lns.writerHTTP, lns.smtp}, cfg: w}
	gateway := &surface{name: "mail-gateway", lns: []net.Listener{lns.gatewayHTTP},
		cfg: gatewayproc.Config{Surface: st.surfaceConfig(st.grantFile(rpc.RoleGateway)), Listen: fd(0)}}
	route := RouteConfig{Listen: fd(0), Writer: "http://" + lns.writerHTTP.Addr().String(), Gateway: "http://" + lns.gatewayHTTP.Addr().String()}
	all := []*surface{writer, gateway, {name: "mail-plane route", bin: "mail-plane", lns: []net.Listener{lns.api}, cfg: routeCommand{log: st.logs, route: route}}}
	if !e.authoring() {
		in := inboxproc.Config{Surface: st.surfaceConfig(filepath.Join(trial, "inbox.grant")), Listen: fd(0),
			TokenFile: filepath.Join(trial, "inbox.token"), RootRedirect: true}
		in.Surface.AllowHosts = []string{"*"}
		all = append(all, &surface{name: "mail-inbox", lns: []net.Listener{lns.inbox}, cfg: in})
	}
	return all
}

// hooksService is up's webhook deliverer (mail-plane hooks): the hooks
// grant only, a loopback port for its /healthz (fd 3), and its end of the
// supervisor's netns dials (fd 4, hookdial.go).
func (st *stack) hooksService(health net.Listener, dialEnd *os.File) *surface {
	cfg := HooksConfig{Listener: cliapp.Listener{Surface: st.surfaceConfig(st.grantFile(rpc.RoleHooks)), Listen: fd(0)}, DialControl: 4}
	return &surface{name: "mail-plane hooks", bin: "mail-plane", lns: []net.Listener{health}, files: []*os.File{dialEnd}, cfg: hooksCommand{hooks: cfg}}
}
