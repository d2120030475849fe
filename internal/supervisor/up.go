package supervisor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/credfiles"
	"github.com/websitebench/mailplane/internal/fdpass"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/internal/serve"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// UpCommand is mail-plane up.
func UpCommand() *cli.Command {
	return &cli.Command{
		Name:  "up",
		Usage: "run the plane and three surfaces shared by every trial on this machine, with one trial open",
		Description: "Starts mail-plane serve and one mail-writer, one mail-inbox and one mail-gateway as separate child\n" +
			"processes (found next to this binary, else on PATH). The surfaces serve every trial of the plane:\n" +
			"the credential a caller presents selects its trial, and the plane decides. Each candidate trial\n" +
			"gets an SMTP port of its own, which this process binds and hands to the writer (the writer never\n" +
			"binds); AUTH with the trial's mail-API token selects the trial on the shared SMTP port too.\n" +
			"It opens --trials trials (default 1) and prints what each party needs; more are opened on the\n" +
			"running stack with `mail-plane trial open` or the admin RPC trial.open (admin_grant_file).\n" +
			"With --json it prints exactly one JSON line once every surface is healthy.\n" +
			"With --data DIR a second start comes back with every trial still open, on the same ports.\n" +
			"SIGINT or SIGTERM stops everything and exits 0.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "data directory (default: a new temporary directory, removed on exit)"},
			&cli.StringFlag{Name: "bind-host", Value: "127.0.0.1", Usage: "address the surfaces and per-trial SMTP ports listen on"},
			&cli.IntFlag{Name: "writer-port", Usage: "POST /emails and bootstrap port (0: any free port, or the last start's with --data)"},
			&cli.IntFlag{Name: "smtp-port", Usage: "shared SMTP port, for AUTH (0: as --writer-port)"},
			&cli.IntFlag{Name: "inbox-port", Usage: "agent inbox port (0: as --writer-port)"},
			&cli.IntFlag{Name: "gateway-port", Usage: "evaluator API port (0: as --writer-port)"},
			&cli.IntFlag{Name: "trials", Value: 1, Usage: "trials to open at start (0: none; with --data, trials still open from the last start count)"},
			&cli.DurationFlag{Name: "ttl", Usage: "TTL of the trials opened at start (0: none)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON line when everything is healthy"},
			&cli.DurationFlag{Name: "start-timeout", Value: 20 * time.Second, Usage: "how long to wait for everything to be healthy"},
		}, append(serve.StoreFlags(), upTLSFlags()...)...),
		Action: up,
	}
}

// upState is what up keeps in its data directory between starts: the
// shared surfaces' ports, and the bundles of the trials it opened itself
// (0600, in the operator's 0700 directory), so that a restart prints the
// same bundle for a trial that is still open.
type upState struct {
	Ports  [4]int       `json:"ports"` // writer, SMTP, inbox, gateway
	Trials []rpc.Bundle `json:"trials"`
}

func up(c *cli.Context) (err error) {
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
	var prev upState
	if b, err := os.ReadFile(statePath); err == nil {
		if err := json.Unmarshal(b, &prev); err != nil {
			return fmt.Errorf("%s: %v", statePath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}

	// The shared surfaces' listeners, bound first so that the plane can
	// advertise them: flags, else the last start's ports, else any.
	host := c.String("bind-host")
	var lns [4]net.Listener
	var ports [4]int
	for i, flag := range []string{"writer-port", "smtp-port", "inbox-port", "gateway-port"} {
		port := cmp.Or(c.Int(flag), prev.Ports[i])
		if lns[i], err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
			return cliapp.Usagef("listen on %s port %d: %v", host, port, err)
		}
		defer lns[i].Close()
		ports[i] = lns[i].Addr().(*net.TCPAddr).Port
	}
	adv := advertiseHost(host)
	url := func(port int) string { return "http://" + net.JoinHostPort(adv, strconv.Itoa(port)) }
	wtls, err := st.prepareWriterTLS(c, host)
	if err != nil {
		return err
	}
	defer wtls.close()

	planeArgs := []string{"--store", c.String("store"),
		"--quota-messages", strconv.FormatInt(c.Int64("quota-messages"), 10),
		"--quota-bytes", strconv.FormatInt(c.Int64("quota-bytes"), 10),
		"--event-budget", strconv.FormatInt(c.Int64("event-budget"), 10),
		"--evidence-retention", c.Duration("evidence-retention").String(),
		"--advertise-writer", url(ports[0]), "--advertise-smtp", net.JoinHostPort(adv, strconv.Itoa(ports[1])),
		"--advertise-inbox", url(ports[2]), "--advertise-gateway", url(ports[3]),
		"--advertise-ca-file", wtls.caFile, "--advertise-smtp-tls-port", strconv.Itoa(wtls.smtpTLSPort()),
		"--advertise-writer-https", wtls.httpsURL()}
	if c.String("store") == "postgres" && c.String("dsn-file") != "" {
		planeArgs = append(planeArgs, "--dsn-file", c.String("dsn-file"))
	}
	if c.String("store") == "mailpit" {
		for _, f := range []string{"mailpit-socket", "mailpit-smtp-socket", "mailpit-runtime", "mailpit-binary", "mailpit-image"} {
			if v := c.String(f); v != "" {
				planeArgs = append(planeArgs, "--"+f, v)
			}
		}
	}
	deadline := time.Now().Add(c.Duration("start-timeout"))
	admin, err := st.startPlane(ctx, deadline, planeArgs...)
	if err != nil {
		return err
	}
	defer admin.Close()

	ctl, writerEnd, err := fdpass.Pair()
	if err != nil {
		return err
	}
	defer ctl.Close()
	surfaces := []*surface{
		// fd 3 HTTP, 4 SMTP, 5 SMTP with implicit TLS, 6 HTTPS, 7 the port control.
		{name: "mail-writer", lns: append(lns[0:2:2], wtls.lns...), files: []*os.File{writerEnd}, args: append(st.surfaceArgs(st.grantFile(rpc.RoleWriter),
			"--http-listen", "fd:3", "--smtp-listen", "fd:4", "--smtp-mode", "fixed", "--port-control", "7"), wtls.args...)},
		{name: "mail-inbox", lns: lns[2:3], args: st.surfaceArgs(st.grantFile(rpc.RoleInbox), "--listen", "fd:3")},
		{name: "mail-gateway", lns: lns[3:4], args: st.surfaceArgs(st.grantFile(rpc.RoleGateway), "--listen", "fd:3")},
	}
	if err := st.startSurfaces(ctx, deadline, surfaces...); err != nil {
		return err
	}
	keeper := &portKeeper{admin: admin, ctl: ctl, host: host, log: log, ready: make(chan struct{})}
	go keeper.run(ctx)
	select {
	case <-keeper.ready:
	case <-ctx.Done():
		return errors.New("interrupted while starting")
	case <-time.After(time.Until(deadline)):
		return errors.New("the per-trial SMTP ports were not ready in time")
	}

	state := upState{Ports: ports}
	var fresh []string
	state.Trials, fresh, err = openTrials(ctx, admin, prev.Trials, c.Int("trials"), c.Duration("ttl"))
	defer func() {
		// A start that fails leaves nothing half-made: the trials it opened
		// are closed again.
		if err != nil {
			for _, ns := range fresh {
				admin.TrialClose(context.WithoutCancel(ctx), ns)
			}
		}
	}()
	if err != nil {
		return err
	}
	for _, b := range state.Trials {
		if err := wbenv.Check(b.CandidateEnvironment, st.socket, b.ReadCapability); err != nil {
			return err
		}
	}
	if err := writeState(statePath, state); err != nil {
		return err
	}
	out := rpc.StackBundle{
		Trials: state.Trials, PlaneSocket: st.socket, DataDir: st.data, AdminGrantFile: st.grantFile(rpc.RoleAdmin),
		WriterURL: url(ports[0]), SharedSMTPPort: ports[1], InboxBaseURL: url(ports[2]), APIURL: url(ports[3]),
	}
	if len(state.Trials) > 0 {
		out.Bundle = &state.Trials[0]
	}
	if c.Bool("json") {
		if err := cliapp.PrintJSON(out); err != nil {
			return err
		}
	} else {
		printSummary(out)
	}
	log.Info().Int("trials", len(state.Trials)).Msg("mailplane is up")
	return st.wait(ctx)
}

// openTrials keeps the bundles of prev whose trials are still open and
// opens more, up to n in all; fresh names those it opened.
func openTrials(ctx context.Context, admin *rpc.Client, prev []rpc.Bundle, n int, ttl time.Duration) (out []rpc.Bundle, fresh []string, err error) {
	out = []rpc.Bundle{} // "trials": [] with none, never null
	if len(prev) > 0 {
		open, err := admin.AllTrials(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, b := range prev {
			if slices.ContainsFunc(open, func(t rpc.TrialInfo) bool { return t.Namespace == b.Namespace }) {
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

// writeState replaces up's state file (0600) whole: a crash leaves the old
// one or the new one.
func writeState(path string, s upState) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := credfiles.WriteSecret(tmp, string(b)); err != nil {
		return err
	}
	return os.Rename(tmp, path)
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
		fmt.Printf("agent       inbox            %s\n", b.InboxURL)
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
		if len(b.Trials) > 1 {
			fmt.Printf("(%d trials open; --json prints them all)\n", len(b.Trials))
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
	fmt.Printf("            open a trial     mail-plane trial open --socket %s --grant-file %s\n\nCtrl-C stops everything.\n",
		b.PlaneSocket, b.AdminGrantFile)
}
