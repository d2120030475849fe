package supervisor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/credfiles"
	"github.com/websitebench/mailplane/internal/fdpass"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/internal/serve"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/internal/writerproc"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// UpCommand is mail-plane up.
func UpCommand() *cli.Command {
	return &cli.Command{
		Name:  "up",
		Usage: "run the plane, three surfaces shared by every trial and the operator's console on this machine, with one trial open",
		Description: "Starts mail-plane serve and one mail-writer, one mail-inbox and one mail-gateway as separate child\n" +
			"processes (found next to this binary, else on PATH). The surfaces serve every trial of the plane:\n" +
			"the credential a caller presents selects its trial, and the plane decides. Each candidate trial\n" +
			"gets an SMTP port of its own, which this process binds and hands to the writer (the writer never\n" +
			"binds); a client authenticates there with the trial's mail-API token (--smtp-plain-ports: not),\n" +
			"and AUTH with that token selects the trial on the shared SMTP port too.\n" +
			"It also starts mail-console, the operator's read-only console, on 127.0.0.1 only (console_url; its\n" +
			"pages need the admin grant).\n" +
			"It opens --trials trials (default 1) and prints what each party needs; more are opened on the\n" +
			"running stack with `mail-plane trial open` or the admin RPC trial.open (admin_grant_file).\n" +
			"With --json it prints exactly one JSON line once every surface is healthy.\n" +
			"With --data DIR a second start comes back with every trial still open, on the same ports; a trial\n" +
			"whose port another process took meanwhile is sealed (sealed_reason port_taken: it takes no mail;\n" +
			"--move-taken-ports moves it instead), and so is a netns trial whose path names another namespace.\n" +
			"SIGINT or SIGTERM stops everything and exits 0.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "data directory (default: a new temporary directory, removed on exit)"},
			&cli.StringFlag{Name: "bind-host", Value: "127.0.0.1", Usage: "address the surfaces and per-trial SMTP ports listen on"},
			&cli.IntFlag{Name: "writer-port", Usage: "POST /emails and bootstrap port (0: any free port, or the last start's with --data)"},
			&cli.IntFlag{Name: "smtp-port", Usage: "shared SMTP port, for AUTH (0: as --writer-port)"},
			&cli.IntFlag{Name: "inbox-port", Usage: "agent inbox port (0: as --writer-port)"},
			&cli.IntFlag{Name: "gateway-port", Usage: "evaluator API port (0: as --writer-port)"},
			&cli.IntFlag{Name: "console-port", Usage: "the operator's console port, on 127.0.0.1 whatever --bind-host (0: any free port, or the last start's with --data)"},
			&cli.IntFlag{Name: "trials", Value: 1, Usage: "trials to open at start (0: none; with --data, trials still open from the last start count)"},
			&cli.DurationFlag{Name: "ttl", Usage: "TTL of the trials opened at start (0: none)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON line when everything is healthy"},
			&cli.DurationFlag{Name: "auth-failure-delay", Value: limits.AuthFailureMaxDelay, Usage: "the longest the writer makes a refused SMTP AUTH wait as failures on a listener mount (0: no wait; a session still ends at its third failure)"},
			&cli.BoolFlag{Name: "move-taken-ports", Usage: "with --data: a trial whose SMTP port another process took while up was stopped moves to a new port (logged, and recorded in its trail) instead of being sealed; a candidate configured before the restart then reaches that process"},
			&cli.BoolFlag{Name: "smtp-plain-ports", Usage: "per-trial SMTP ports take plain SMTP without AUTH (a machine with one tenant only: any local process can then write into any trial)"},
			&cli.DurationFlag{Name: "start-timeout", Value: 20 * time.Second, Usage: "how long to wait for everything to be healthy"},
		}, append(serve.StoreFlags(), upTLSFlags()...)...),
		Action: up,
	}
}

// writerAuth sets the writer's AUTH settings as up's
// --auth-failure-delay and --smtp-plain-ports say (the latter the opt-out
// of AUTH on trial ports for a machine with one tenant).
func writerAuth(c *cli.Context, log zerolog.Logger) func(*writerproc.Config) {
	delay, plain := c.Duration("auth-failure-delay"), c.Bool("smtp-plain-ports")
	if plain {
		log.Warn().Msg("--smtp-plain-ports: trial SMTP ports take mail without AUTH; any local process can write into any trial")
	}
	return func(w *writerproc.Config) { w.AuthFailureDelay, w.SMTPPlainPorts = delay, plain }
}

// upState is what up keeps in its data directory between starts: the
// shared surfaces' ports, and the bundles of the trials it opened itself
// (0600, in the operator's 0700 directory), so that a restart prints the
// same bundle for a trial that is still open.
type upState struct {
	Ports [4]int `json:"ports"` // writer, SMTP, inbox, gateway
	// TLSPorts are the writer's SMTP with implicit TLS and HTTPS: kept
	// bundles name them, so a restart binds them again or fails.
	// The inbox's IMAP ports follow them.
	TLSPorts [4]int       `json:"tls_ports"`
	Trials   []rpc.Bundle `json:"trials"`
	// ConsolePort is the operator's console's, on 127.0.0.1.
	ConsolePort int `json:"console_port,omitempty"`
}

func up(c *cli.Context) error {
	log, err := logging.FromFlags(c, "mail-plane up")
	if err != nil {
		return cliapp.UsageError{Err: err}
	}
	if c.Int("trials") < 0 || c.Duration("ttl") < 0 {
		return cliapp.Usagef("--trials and --ttl must not be negative")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := newStack(c, c.String("data"), log)
	if err != nil {
		return err
	}
	defer st.close()
	statePath := filepath.Join(st.data, "up.json")
	prev, err := readState(statePath)
	if err != nil {
		return err
	}
	// The shared surfaces' listeners, bound first so that the plane can
	// advertise them: flags, else the last start's ports, else any.
	host := c.String("bind-host")
	lns, err := listenShared(c, host, prev.Ports)
	if err != nil {
		return err
	}
	defer closeListeners(lns[:])
	// The operator's console listens on loopback whatever --bind-host: a
	// candidate's or an agent's network (a container's, a netns door's)
	// never leads to it.
	cln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cmp.Or(c.Int("console-port"), prev.ConsolePort))))
	if err != nil {
		return cliapp.Usagef("listen on 127.0.0.1 for the console: %v", err)
	}
	defer cln.Close()
	wtls, err := st.prepareWriterTLS(c, host, prev.TLSPorts)
	if err != nil {
		return err
	}
	defer wtls.close()
	sh := shared{host: host, ports: portsOf(lns), wtls: wtls, consolePort: cln.Addr().(*net.TCPAddr).Port}
	deadline := time.Now().Add(c.Duration("start-timeout"))
	admin, err := st.startPlane(ctx, deadline, sh.planeConfig(st, serve.StoreFromFlags(c)))
	if err != nil {
		return err
	}
	defer admin.Close()
	dialer := newHookDialer(log)
	ctl, inboxCtl, err := st.startShared(ctx, deadline, lns, cln, wtls, writerAuth(c, log), dialer)
	if err != nil {
		return err
	}
	defer ctl.Close()
	defer inboxCtl.Close()
	keeper := &portKeeper{admin: admin, ctl: ctl, inboxCtl: inboxCtl, host: host, tls: wtls.smtpTLSPort() > 0, moveTaken: c.Bool("move-taken-ports"),
		ports: hostPortRange(), log: log, ready: make(chan struct{}), dialer: dialer}
	go keeper.run(ctx)
	select {
	case <-keeper.ready:
	case <-ctx.Done():
		return errors.New("interrupted while starting")
	case <-time.After(time.Until(deadline)):
		return errors.New("the per-trial SMTP ports were not ready in time")
	}
	out, err := sh.openAll(ctx, st, admin, prev.Trials, c, statePath)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if err := cliapp.PrintJSON(out); err != nil {
			return err
		}
	} else {
		printSummary(out)
	}
	log.Info().Int("trials", len(out.Trials)).Msg("mailplane is up")
	return st.wait(ctx)
}

// readState reads up's state file, if the data directory has one.
func readState(path string) (upState, error) {
	var prev upState
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return prev, nil
	}
	if err != nil {
		return prev, err
	}
	if err := json.Unmarshal(b, &prev); err != nil {
		return prev, fmt.Errorf("%s: %v", path, err)
	}
	return prev, nil
}

// listenShared binds the shared surfaces' ports (writer, SMTP, inbox,
// gateway): the flags', else the last start's, else any.
func listenShared(c *cli.Context, host string, prev [4]int) ([4]net.Listener, error) {
	var lns [4]net.Listener
	for i, flag := range []string{"writer-port", "smtp-port", "inbox-port", "gateway-port"} {
		port := cmp.Or(c.Int(flag), prev[i])
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			closeListeners(lns[:i])
			return lns, cliapp.Usagef("listen on %s port %d: %v", host, port, err)
		}
		lns[i] = ln
	}
	return lns, nil
}

func closeListeners(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}

func portsOf(lns [4]net.Listener) (ports [4]int) {
	for i, ln := range lns {
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// shared is where up's shared surfaces listen, as the plane advertises it.
type shared struct {
	host  string
	ports [4]int // writer, SMTP, inbox, gateway
	wtls  *writerTLS
	// consolePort is the operator's console's, on 127.0.0.1.
	consolePort int
}

// url is the advertised origin of a shared surface's port.
func (sh shared) url(port int) string {
	return "http://" + net.JoinHostPort(advertiseHost(sh.host), strconv.Itoa(port))
}

// planeConfig is the plane child's configuration: the stack's socket and
// data, up's store flags, and the shared surfaces it advertises.
func (sh shared) planeConfig(st *stack, store serve.StoreConfig) serve.Config {
	cfg := st.planeConfig()
	cfg.Store = store
	cfg.Advertise = serve.AdvertiseConfig{Writer: sh.url(sh.ports[0]),
		SMTP:  net.JoinHostPort(advertiseHost(sh.host), strconv.Itoa(sh.ports[1])),
		Inbox: sh.url(sh.ports[2]), Gateway: sh.url(sh.ports[3]),
		CAFile: sh.wtls.caFile, SMTPTLSPort: sh.wtls.smtpTLSPort(), WriterHTTPS: sh.wtls.httpsURL()}
	cfg.Advertise.IMAPPort, cfg.Advertise.IMAPSPort = sh.wtls.imapPorts()
	return cfg
}

// startShared starts the shared writer, inbox and gateway on their
// listeners, and the hooks process; it returns up's ends of the writer's
// and the inbox's port controls.
func (st *stack) startShared(ctx context.Context, deadline time.Time, lns [4]net.Listener, console net.Listener, wtls *writerTLS, auth func(*writerproc.Config), dialer *hookDialer) (ctl, inboxCtl *net.UnixConn, err error) {
	ctl, writerEnd, err := fdpass.Pair()
	if err != nil {
		return nil, nil, err
	}
	inboxCtl, inboxEnd, err := fdpass.Pair()
	if err != nil {
		ctl.Close()
		writerEnd.Close()
		return nil, nil, err
	}
	hooks, err := net.Listen("tcp", "127.0.0.1:0") // the hooks process's /healthz
	if err != nil {
		ctl.Close()
		writerEnd.Close()
		inboxCtl.Close()
		inboxEnd.Close()
		return nil, nil, err
	}
	dctl, dialEnd, err := fdpass.Pair()
	if err != nil {
		ctl.Close()
		writerEnd.Close()
		inboxCtl.Close()
		inboxEnd.Close()
		hooks.Close()
		return nil, nil, err
	}
	go func() {
		defer dctl.Close()
		dialer.serve(dctl) // until the hooks process closes its end
	}()
	surfaces := append(st.sharedServices(lns, console, wtls, writerEnd, inboxEnd, auth), st.hooksService(hooks, dialEnd))
	if err := st.startSurfaces(ctx, deadline, surfaces...); err != nil {
		ctl.Close()
		inboxCtl.Close()
		return nil, nil, err
	}
	return ctl, inboxCtl, nil
}

// openAll keeps the trials of the last start that are still open, opens
// more up to --trials, records them in up's state file and returns the
// stack's bundle. A start that fails leaves nothing half-made: the trials
// it opened are closed again.
func (sh shared) openAll(ctx context.Context, st *stack, admin *rpc.Client, prev []rpc.Bundle, c *cli.Context, statePath string) (out rpc.StackBundle, err error) {
	state := upState{Ports: sh.ports, TLSPorts: [4]int{sh.wtls.port(0), sh.wtls.port(1), sh.wtls.port(2), sh.wtls.port(3)}, ConsolePort: sh.consolePort}
	var fresh []string
	defer func() {
		if err != nil {
			for _, ns := range fresh {
				admin.TrialClose(context.WithoutCancel(ctx), ns)
			}
		}
	}()
	if state.Trials, fresh, err = openTrials(ctx, admin, prev, c.Int("trials"), c.Duration("ttl"), sh.ports[1]); err != nil {
		return out, err
	}
	for _, b := range state.Trials {
		if err := wbenv.Check(b.CandidateEnvironment, st.socket, b.ReadCapability); err != nil {
			return out, err
		}
	}
	key, err := evidenceKey(ctx, admin)
	if err != nil {
		return out, err
	}
	for i := range state.Trials { // bundles kept by a start that did not have them
		state.Trials[i].EvidencePublicKey = key
		if t := &state.Trials[i]; t.InboxMCPURL == "" {
			t.InboxMCPURL = strings.Replace(t.InboxURL, "/inbox/", "/mcp/", 1)
		}
	}
	if err := writeState(statePath, state); err != nil {
		return out, err
	}
	out = rpc.StackBundle{
		Trials: state.Trials, PlaneSocket: st.socket, DataDir: st.data, AdminGrantFile: st.grantFile(rpc.RoleAdmin),
		WriterURL: sh.url(sh.ports[0]), SharedSMTPPort: sh.ports[1], InboxBaseURL: sh.url(sh.ports[2]), APIURL: sh.url(sh.ports[3]),
		ConsoleURL: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(sh.consolePort)),
	}
	out.EvidencePublicKey = key
	if len(state.Trials) > 0 {
		out.Bundle = &state.Trials[0]
	}
	out.BundleFile = filepath.Join(st.data, "bundle.json")
	b, err := json.Marshal(out)
	if err != nil {
		return out, err
	}
	return out, writeSecret(out.BundleFile, b)
}

// openTrials keeps the bundles of prev whose trials are still open, with
// the SMTP port each owns now (else the shared one) and why the plane
// sealed it, if it did, and opens more, up to n in all; fresh names those
// it opened.
func openTrials(ctx context.Context, admin *rpc.Client, prev []rpc.Bundle, n int, ttl time.Duration, shared int) (out []rpc.Bundle, fresh []string, err error) {
	out = []rpc.Bundle{} // "trials": [] with none, never null
	if len(prev) > 0 {
		open, err := admin.AllTrials(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, b := range prev {
			if i := slices.IndexFunc(open, func(t rpc.TrialInfo) bool { return t.Namespace == b.Namespace }); i >= 0 {
				b = withPort(b, cmp.Or(open[i].SMTPPort, shared))
				b.SealedReason = open[i].SealedReason
				out = append(out, b)
			}
		}
	}
	for len(out) < n {
		b, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate, TTLMillis: ttl.Milliseconds()})
		if err != nil {
			return nil, fresh, err
		}
		out = append(out, b)
		fresh = append(fresh, b.Namespace)
	}
	return out, fresh, nil
}

// evidenceKey is the public key the plane signs trails with, for the
// bundle: mail-plane evidence verify --key.
func evidenceKey(ctx context.Context, admin *rpc.Client) (string, error) {
	h, err := admin.Health(ctx)
	if err != nil {
		return "", err
	}
	if h.EvidencePublicKey == "" {
		return "", errors.New("the plane names no evidence key")
	}
	return h.EvidencePublicKey, nil
}

// withPort is bundle b with the SMTP port its trial owns now: the plane
// moves a trial whose port another process took while up was stopped.
func withPort(b rpc.Bundle, port int) rpc.Bundle {
	if port == b.SMTPPort {
		return b
	}
	b.SMTPPort = port
	b.CandidateEnvironment = maps.Clone(b.CandidateEnvironment)
	b.CandidateEnvironment[wbenv.SMTPPort] = strconv.Itoa(port)
	return b
}

// writeState replaces up's state file (0600) whole.
func writeState(path string, s upState) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return writeSecret(path, b)
}

// writeSecret replaces the file at path (0600) with b whole: a crash
// leaves the old one or the new one.
func writeSecret(path string, b []byte) error {
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := credfiles.WriteSecret(tmp, string(b)); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// shellQuote quotes a path for a POSIX shell where it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// advertiseHost is the host clients are told: the bound one, or 127.0.0.1
// for a wildcard bind.
func advertiseHost(host string) string {
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "127.0.0.1"
	}
	return host
}

func printSummary(b rpc.StackBundle) {
	if b.Bundle != nil {
		fmt.Printf("mailplane is up: namespace %s\n\n", b.Namespace)
		if b.SealedReason != "" {
			fmt.Printf("SEALED      %s: this trial takes no mail, its result is void (mail-plane trial info)\n", b.SealedReason)
		}
		fmt.Printf("agent       inbox            %s\n", b.InboxURL)
		fmt.Printf("            inbox (MCP)      %s\n", b.InboxMCPURL)
		if m := b.InboxIMAP; m != nil {
			fmt.Printf("            inbox (IMAP)     %s port %d (STARTTLS), %d (TLS); password: the inbox token; CA %s\n", m.Host, m.Port, m.TLSPort, m.CAFile)
		}
		fmt.Printf("evaluator   API              %s\n", b.APIURL)
		fmt.Printf("            read capability  %s\n", b.ReadCapability)
		fmt.Printf("candidate   environment:\n")
		keys := make([]string, 0, len(b.CandidateEnvironment))
		for k := range b.CandidateEnvironment {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Printf("              %s=%s\n", k, b.CandidateEnvironment[k])
		}
		if p := b.Providers; p != nil {
			fmt.Printf("            provider APIs (docs/providers.md): sendgrid, postmark, mailgun at %s with the mail-API token;\n", p.SendGrid.BaseURL)
			fmt.Printf("              ses at %s, access key id %s, secret %s (--json: providers)\n", p.SES.Endpoint, p.SES.AccessKeyID, p.SES.SecretAccessKey)
		}
		if len(b.Trials) > 1 {
			fmt.Printf("(%d trials open; --json prints them all)\n", len(b.Trials))
		}
		for _, t := range b.Trials[1:] {
			if t.SealedReason != "" {
				fmt.Printf("SEALED      trial %s: %s, it takes no mail\n", t.Namespace, t.SealedReason)
			}
		}
	} else {
		fmt.Printf("mailplane is up with no trial open\n")
	}
	if b.Bundle != nil && b.CAFile != "" {
		fmt.Printf("            SMTP with TLS    port %d (STARTTLS on the SMTP ports too), HTTPS %s\n            trust            %s (mail-plane ca export)\n",
			b.SMTPTLSPort, b.WriterHTTPSURL, b.CAFile)
	}
	fmt.Printf("operator    plane socket     %s\n            admin grant      %s\n            data             %s\n",
		b.PlaneSocket, b.AdminGrantFile, b.DataDir)
	fmt.Printf("            evidence key     %s (mail-plane evidence verify --key)\n", b.EvidencePublicKey)
	fmt.Printf("            console          %s (sign in with the admin grant)\n", b.ConsoleURL)
	fmt.Printf("            bundle           %s (up --json's shape)\n", b.BundleFile)
	fmt.Printf("            open a trial     mail-plane trial open (with the CLI's environment:)\n\n")
	fmt.Printf("export MAILPLANE_SOCKET=%s MAILPLANE_ADMIN_GRANT_FILE=%s\n\nCtrl-C stops everything.\n",
		shellQuote(b.PlaneSocket), shellQuote(b.AdminGrantFile))
}
