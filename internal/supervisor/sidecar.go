package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/credfiles"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The reference sidecar's start-up refusals, verbatim (BEHAVIOR.md §1).
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

func sidecar(c *cli.Context) (err error) {
	log, err := logging.FromFlags(c, "mail-plane sidecar")
	if err != nil {
		return cliapp.UsageError{Err: err}
	}
	profile := c.String("profile")
	if profile != rpc.ProfileSidecar && profile != rpc.ProfileAuthoring {
		return cliapp.Usagef("--profile %q: want sidecar or authoring", profile)
	}
	authoring := profile == rpc.ProfileAuthoring
	token := os.Getenv(wbenv.MailboxBootstrapToken)
	if len([]rune(token)) < 32 {
		return cli.Exit(errBootstrapToken, 1)
	}
	mailpitSocket := strings.TrimSpace(os.Getenv(wbenv.MailpitHTTPSocket))
	if mailpitSocket == "" && c.Bool("require-mailpit") {
		return cli.Exit(errMailpitMissing, 1)
	}
	if mailpitSocket != "" && !mailpitReady(mailpitSocket) {
		return cli.Exit(errMailpitReady, 1)
	}
	apiHost := firstNonEmpty(c.String("api-bind-host"), os.Getenv(wbenv.MailboxAPIBind), c.String("bind-host"))
	inboxHost := firstNonEmpty(c.String("inbox-bind-host"), os.Getenv(wbenv.MailboxInboxBind), c.String("bind-host"))
	advertise := firstNonEmpty(strings.TrimSpace(os.Getenv(wbenv.MailboxSMTPAdvertiseHost)), apiHost)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	bind := func(host string, port int) (net.Listener, error) {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return nil, cliapp.Usagef("listen on %s port %d: %v", host, port, err)
		}
		return ln, nil
	}
	// Public ports first, so that a port in use fails before anything starts.
	var api, smtp, inbox, writerHTTP, gatewayHTTP net.Listener
	type bindSpec struct {
		ln   *net.Listener
		host string
		port int
	}
	binds := []bindSpec{
		{&api, apiHost, c.Int("http-port")}, {&smtp, apiHost, c.Int("smtp-port")},
		{&writerHTTP, "127.0.0.1", 0}, {&gatewayHTTP, "127.0.0.1", 0},
	}
	if !authoring {
		binds = append(binds, bindSpec{&inbox, inboxHost, c.Int("inbox-port")})
	}
	for _, b := range binds {
		if *b.ln, err = bind(b.host, b.port); err != nil {
			return err
		}
		defer (*b.ln).Close()
	}

	st, err := newStack(c, c.String("data"), log)
	if err != nil {
		return err
	}
	defer st.close()
	var store []string
	if mailpitSocket != "" {
		store = []string{"--store", "mailpit", "--mailpit-socket", mailpitSocket}
	}
	deadline := time.Now().Add(30 * time.Second)
	admin, err := st.startPlane(ctx, deadline, store...)
	if err != nil {
		return err
	}
	defer admin.Close()
	id, err := admin.TrialCreate(ctx, &rpc.TrialCreateRequest{Profile: profile, Namespace: c.String("namespace"), BootstrapToken: token})
	if err != nil {
		return err
	}
	if err := credfiles.WriteIdentity(st.trialDir(), id); err != nil {
		return err
	}
	trial := st.trialDir()
	surfaces := []*surface{
		{name: "mail-writer", lns: []net.Listener{writerHTTP, smtp}, args: st.surfaceArgs(filepath.Join(trial, "writer.grant"),
			"--http-listen", "fd:3", "--smtp-listen", "fd:4", "--smtp-mode", "select", "--smtp-advertise-host", advertise)},
		{name: "mail-gateway", lns: []net.Listener{gatewayHTTP}, args: st.surfaceArgs(st.grantFile(rpc.RoleGateway), "--listen", "fd:3")},
	}
	if !authoring {
		surfaces = append(surfaces, &surface{name: "mail-inbox", lns: []net.Listener{inbox}, args: st.surfaceArgs(filepath.Join(trial, "inbox.grant"),
			"--token-file", filepath.Join(trial, "inbox.token"), "--listen", "fd:3",
			// The reference's contract: GET / hands out the mailbox, to any
			// host name the agent uses.
			"--root-redirect", "--allow-host", "*")})
	}
	if err := st.startSurfaces(ctx, deadline, surfaces...); err != nil {
		return err
	}
	// The API port has the reference's limits, like every door of its.
	served := make(chan error, 1)
	routing, stopRouting := context.WithCancel(ctx)
	go func() {
		served <- httpserve.Serve(routing, api, apiRouter(surfaces[0].url, surfaces[1].url, log), httpserve.Limits{
			Conns:          connlimit.Limits{MaxConns: connlimit.DefaultMaxConns, Lifetime: connlimit.DefaultLifetime},
			ReadTimeout:    connlimit.DefaultIdle,
			WriteTimeout:   rpc.MaxWait + 15*time.Second, // a proxied wait at the gateway
			IdleTimeout:    connlimit.DefaultIdle,
			MaxHeaderBytes: 16 << 10,
		}, log)
	}()
	defer func() { stopRouting(); <-served }()

	if authoring {
		apiURL := "http://127.0.0.1:" + strconv.Itoa(api.Addr().(*net.TCPAddr).Port)
		if err := cliapp.PrintJSON(wbenv.Authoring(id, apiURL, advertise, smtp.Addr().(*net.TCPAddr).Port)); err != nil {
			return err
		}
	} else {
		fmt.Printf("inbox listening on %s:%d\n", inboxHost, inbox.Addr().(*net.TCPAddr).Port)
	}
	os.Stdout.Sync()
	log.Info().Str("namespace", id.Namespace).Msg("sidecar is up")
	return st.wait(ctx)
}

// writeRouteTimeout bounds one write routed to the writer.
const writeRouteTimeout = 30 * time.Second

// apiRouter serves the reference's API port from two processes: the
// writer's routes (POST /emails, /internal/bootstrap) go to the writer,
// everything else to the gateway. It adds nothing and keeps nothing.
func apiRouter(writerURL, gatewayURL string, log zerolog.Logger) http.Handler {
	proxy := func(target string) *httputil.ReverseProxy {
		u, _ := url.Parse(target)
		return &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) },
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				log.Warn().Err(err).Str("to", target).Msg("api router: the surface did not answer")
				apierr.Unavailable.Write(w)
			},
		}
	}
	writer, gateway := proxy(writerURL), proxy(gatewayURL)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/emails", "/internal/bootstrap":
			// A write runs to its answer even if its client half-closes
			// after the request (as HTTP/1.0 clients and body-to-EOF senders
			// do), as at the writer itself: the client's going quiet is not
			// an outage. The writer's own limits bound it.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), writeRouteTimeout)
			defer cancel()
			if r.Method == http.MethodPost && r.Header.Get("Content-Length") == "" && len(r.TransferEncoding) == 0 {
				// A POST with no framing: a proxy would add Content-Length: 0,
				// and the writer must judge the request as it came.
				forwardUnframed(ctx, w, r, writerURL, log)
				return
			}
			writer.ServeHTTP(w, r.WithContext(ctx))
		default:
			gateway.ServeHTTP(w, r)
		}
	})
}

// forwardUnframed hands the writer a POST that came with neither a
// Content-Length nor chunked framing exactly so (its header, no body), so
// that the writer answers it in the reference's check order (a wrong
// credential 401, a wrong type 415, else 411), and copies the answer back.
func forwardUnframed(ctx context.Context, w http.ResponseWriter, r *http.Request, writerURL string, log zerolog.Logger) {
	u, _ := url.Parse(writerURL)
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		log.Warn().Err(err).Msg("api router: the writer did not answer")
		apierr.Unavailable.Write(w)
		return
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	out := r.Clone(ctx)
	out.URL = &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	out.Host = u.Host
	out.Header.Del("Content-Length")
	out.Close = true
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", out.Method, out.URL.RequestURI(), out.Host)
	out.Header.Write(&head)
	head.WriteString("\r\n")
	if _, err := c.Write(head.Bytes()); err != nil {
		apierr.Unavailable.Write(w)
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), out)
	if err != nil {
		log.Warn().Err(err).Msg("api router: the writer's answer was unreadable")
		apierr.Unavailable.Write(w)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
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

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
