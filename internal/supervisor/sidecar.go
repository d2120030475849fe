package supervisor

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/credfiles"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The reference sidecar's start-up refusals, verbatim (docs/reference.md §1).
const (
	errBootstrapToken = wbenv.MailboxBootstrapToken + " must be at least 32 characters"
	errMailpitMissing = wbenv.MailpitHTTPSocket + " is not configured; refusing an in-memory production mailbox"
	errMailpitReady   = "Mailpit is not ready on its configured HTTP socket; refusing an in-memory production mailbox"
)

// SidecarCommand is mail-plane sidecar.
func SidecarCommand() *cli.Command {
	return &cli.Command{
		Name:  "sidecar",
		Usage: "drop-in for the reference mail sidecar: its flags, environment, ports and routes, on mailplane's split",
		Description: "Takes the reference's flags and WEBSITEBENCH_* variables and serves its three ports: SMTP\n" +
			"(namespace-selecting), the API port (/internal/bootstrap, POST /emails, /api/namespaces/..., /inbox/{ns},\n" +
			"/healthz) and the agent inbox. Behind them run mail-plane serve, mail-writer, mail-gateway and\n" +
			"mail-inbox as separate processes, each with only its own credentials; this process routes the API\n" +
			"port (writes to the writer, reads to the gateway) and holds no grant once the trial is made.\n" +
			"WEBSITEBENCH_MAILPIT_HTTP_SOCKET selects the Mailpit store; without it the embedded store is used.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "smtp-port", Value: 1025, Usage: "SMTP port (on the API bind host)"},
			&cli.IntFlag{Name: "http-port", Value: 8025, Usage: "API port"},
			&cli.IntFlag{Name: "inbox-port", Value: 8026, Usage: "agent inbox port"},
			&cli.StringFlag{Name: "bind-host", Value: "127.0.0.1", Usage: "fallback bind host for both"},
			&cli.StringFlag{Name: "api-bind-host", Usage: "API and SMTP bind host (default: $WEBSITEBENCH_MAILBOX_API_BIND, else --bind-host)"},
			&cli.StringFlag{Name: "inbox-bind-host", Usage: "inbox bind host (default: $WEBSITEBENCH_MAILBOX_INBOX_BIND, else --bind-host)"},
			&cli.StringFlag{Name: "data", Usage: "data directory (default: a new temporary directory, removed on exit)"},
			&cli.BoolFlag{Name: "require-mailpit", Usage: "refuse to start without WEBSITEBENCH_MAILPIT_HTTP_SOCKET, as the reference does"},
			&cli.StringFlag{Name: "profile", Value: rpc.ProfileSidecar, Usage: "sidecar, or authoring: the reference's authoring gateway (no inbox; SMTP fixed to the\n" +
				"current namespace from the first `mail-plane trial rotate` on; prints the capture's environment as one JSON line)"},
			&cli.StringFlag{Name: "namespace", Usage: "the namespace to create (default: minted)"},
		},
		Action: sidecar,
	}
}

// sidecarEnv is what the sidecar takes from its flags and the reference's
// variables, checked before anything starts.
type sidecarEnv struct {
	profile, token, mailpitSocket string
	apiHost, inboxHost, advertise string
}

func (e sidecarEnv) authoring() bool { return e.profile == rpc.ProfileAuthoring }

// readSidecarEnv refuses what the reference refuses at start, in its
// words.
func readSidecarEnv(c *cli.Context) (sidecarEnv, error) {
	e := sidecarEnv{profile: c.String("profile"), token: os.Getenv(wbenv.MailboxBootstrapToken)}
	if e.profile != rpc.ProfileSidecar && e.profile != rpc.ProfileAuthoring {
		return e, cliapp.Usagef("--profile %q: want sidecar or authoring", e.profile)
	}
	if len([]rune(e.token)) < 32 {
		return e, cli.Exit(errBootstrapToken, 1)
	}
	e.mailpitSocket = strings.TrimSpace(os.Getenv(wbenv.MailpitHTTPSocket))
	if e.mailpitSocket == "" && c.Bool("require-mailpit") {
		return e, cli.Exit(errMailpitMissing, 1)
	}
	if e.mailpitSocket != "" && !mailpitReady(e.mailpitSocket) {
		return e, cli.Exit(errMailpitReady, 1)
	}
	e.apiHost = cmp.Or(c.String("api-bind-host"), os.Getenv(wbenv.MailboxAPIBind), c.String("bind-host"))
	e.inboxHost = cmp.Or(c.String("inbox-bind-host"), os.Getenv(wbenv.MailboxInboxBind), c.String("bind-host"))
	e.advertise = cmp.Or(strings.TrimSpace(os.Getenv(wbenv.MailboxSMTPAdvertiseHost)), e.apiHost)
	return e, nil
}

// sidecarListeners are the sidecar's ports: the public ones (API, SMTP,
// the inbox unless authoring) and the writer's and gateway's HTTP on
// loopback, behind the API router.
type sidecarListeners struct {
	api, smtp, inbox, writerHTTP, gatewayHTTP net.Listener
}

// listen binds every port, the public ones first, so that a port in use
// fails before anything starts.
func (l *sidecarListeners) listen(c *cli.Context, e sidecarEnv) error {
	binds := []struct {
		ln   *net.Listener
		host string
		port int
	}{
		{&l.api, e.apiHost, c.Int("http-port")}, {&l.smtp, e.apiHost, c.Int("smtp-port")},
		{&l.writerHTTP, "127.0.0.1", 0}, {&l.gatewayHTTP, "127.0.0.1", 0},
		{&l.inbox, e.inboxHost, c.Int("inbox-port")},
	}
	if e.authoring() {
		binds = binds[:4]
	}
	for _, b := range binds {
		ln, err := net.Listen("tcp", net.JoinHostPort(b.host, strconv.Itoa(b.port)))
		if err != nil {
			return cliapp.Usagef("listen on %s port %d: %v", b.host, b.port, err)
		}
		*b.ln = ln
	}
	return nil
}

func (l *sidecarListeners) close() {
	for _, ln := range []net.Listener{l.api, l.smtp, l.inbox, l.writerHTTP, l.gatewayHTTP} {
		if ln != nil {
			ln.Close()
		}
	}
}

func sidecar(c *cli.Context) error {
	log, err := logging.FromFlags(c, "mail-plane sidecar")
	if err != nil {
		return cliapp.UsageError{Err: err}
	}
	e, err := readSidecarEnv(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var lns sidecarListeners
	defer lns.close()
	if err := lns.listen(c, e); err != nil {
		return err
	}
	st, err := newStack(c, c.String("data"), log)
	if err != nil {
		return err
	}
	defer st.close()
	cfg := st.planeConfig()
	if e.mailpitSocket != "" {
		cfg.Store.Kind, cfg.Store.MailpitSocket = "mailpit", e.mailpitSocket
	}
	deadline := time.Now().Add(30 * time.Second)
	admin, err := st.startPlane(ctx, deadline, cfg)
	if err != nil {
		return err
	}
	defer admin.Close()
	id, err := admin.TrialCreate(ctx, &rpc.TrialCreateRequest{Profile: e.profile, Namespace: c.String("namespace"), BootstrapToken: e.token})
	if err != nil {
		return err
	}
	if err := credfiles.WriteIdentity(st.trialDir(), id); err != nil {
		return err
	}
	if err := st.startSurfaces(ctx, deadline, st.sidecarServices(&lns, e)...); err != nil {
		return err
	}
	if err := announce(e, id, &lns); err != nil {
		return err
	}
	log.Info().Str("namespace", id.Namespace).Msg("sidecar is up")
	return st.wait(ctx)
}

// announce prints what the reference prints once it is up: the capture's
// environment as one JSON line (authoring), else the inbox's address.
func announce(e sidecarEnv, id rpc.Identity, lns *sidecarListeners) error {
	if e.authoring() {
		apiURL := "http://127.0.0.1:" + strconv.Itoa(lns.api.Addr().(*net.TCPAddr).Port)
		if err := cliapp.PrintJSON(wbenv.Authoring(id, apiURL, e.advertise, lns.smtp.Addr().(*net.TCPAddr).Port)); err != nil {
			return err
		}
	} else {
		fmt.Printf("inbox listening on %s:%d\n", e.inboxHost, lns.inbox.Addr().(*net.TCPAddr).Port)
	}
	os.Stdout.Sync() // a pipe cannot sync; a file or terminal can
	return nil
}

// mailpitReady asks Mailpit's /readyz over its HTTP socket.
func mailpitReady(socket string) bool {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	resp, err := hc.Get("http://mailpit/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
