package planecli

import (
	"context"
	"fmt"
	"net"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/pkg/rpc"
)

func upCommand() *cli.Command {
	return &cli.Command{
		Name:  "up",
		Usage: "run the plane and the three surfaces on this machine, with one trial",
		Description: "Starts mail-plane serve and mail-writer, mail-inbox and mail-gateway as separate child processes\n" +
			"(found next to this binary, else on PATH), creates one candidate trial, and prints what each party\n" +
			"needs: the agent's inbox URL, the candidate's WEBSITEBENCH_* environment, the evaluator's API URL and\n" +
			"read capability. With --json it prints exactly one JSON line once every surface is healthy.\n" +
			"SIGINT or SIGTERM stops everything and exits 0.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "data directory (default: a new temporary directory, removed on exit)"},
			&cli.StringFlag{Name: "bind-host", Value: "127.0.0.1", Usage: "address the surfaces listen on"},
			&cli.IntFlag{Name: "writer-port", Usage: "POST /emails and bootstrap port (0: any free port)"},
			&cli.IntFlag{Name: "smtp-port", Usage: "SMTP port (0: any free port)"},
			&cli.IntFlag{Name: "inbox-port", Usage: "agent inbox port (0: any free port)"},
			&cli.IntFlag{Name: "gateway-port", Usage: "evaluator API port (0: any free port)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON line when everything is healthy"},
			&cli.DurationFlag{Name: "start-timeout", Value: 20 * time.Second, Usage: "how long to wait for everything to be healthy"},
		}, append(storeFlags(), upTLSFlags()...)...),
		Action: up,
	}
}

func up(c *cli.Context) (err error) {
	log, err := logging.FromFlags(c, "mail-plane up")
	if err != nil {
		return cliapp.UsageError{Err: err}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := newStack(c, c.String("data"), log)
	if err != nil {
		return err
	}
	defer st.close()

	planeArgs := []string{"--store", c.String("store"),
		"--quota-messages", strconv.FormatInt(c.Int64("quota-messages"), 10),
		"--quota-bytes", strconv.FormatInt(c.Int64("quota-bytes"), 10)}
	if c.String("store") == "mailpit" {
		for _, f := range []string{"mailpit-socket", "mailpit-smtp-socket", "mailpit-runtime", "mailpit-binary", "mailpit-image"} {
			if v := c.String(f); v != "" {
				planeArgs = append(planeArgs, "--"+f, v)
			}
		}
	}
	deadline := time.Now().Add(c.Duration("start-timeout"))
	id, err := st.startPlane(ctx, deadline, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate}, planeArgs...)
	if err != nil {
		return err
	}

	host := c.String("bind-host")
	var lns [4]net.Listener
	for i, port := range []int{c.Int("writer-port"), c.Int("smtp-port"), c.Int("inbox-port"), c.Int("gateway-port")} {
		if lns[i], err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
			return cliapp.Usagef("listen on %s port %d: %v", host, port, err)
		}
	}
	wtls, err := st.prepareWriterTLS(c, host)
	if err != nil {
		return err
	}
	trial := st.trialDir()
	surfaces := []*surface{
		{name: "mail-writer", lns: append(lns[0:2:2], wtls.lns...), args: append(st.surfaceArgs(filepath.Join(trial, "writer.grant"),
			"--http-listen", "fd:3", "--smtp-listen", "fd:4", "--smtp-mode", "fixed"), wtls.args...)},
		{name: "mail-inbox", lns: lns[2:3], args: st.surfaceArgs(filepath.Join(trial, "inbox.grant"),
			"--token-file", filepath.Join(trial, "inbox.token"), "--listen", "fd:3")},
		{name: "mail-gateway", lns: lns[3:4], args: st.surfaceArgs(st.gatewayGrant(), "--listen", "fd:3")},
	}
	if err := st.startSurfaces(ctx, deadline, surfaces...); err != nil {
		return err
	}

	port := func(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }
	env := CandidateEnvironment(id, port(lns[0]), port(lns[1]))
	if err := CheckCandidateEnvironment(env, st.socket, id.ReadCapability); err != nil {
		return err
	}
	bundle := map[string]any{
		"namespace":             id.Namespace,
		"candidate_environment": env,
		"inbox_url":             surfaces[1].url,
		"api_url":               surfaces[2].url,
		"read_capability":       id.ReadCapability,
		"plane_socket":          st.socket,
		"data_dir":              st.data,
		"smtp_port":             port(lns[1]),
		"writer_url":            surfaces[0].url,
		"ca_file":               wtls.caFile,
		"smtp_tls_port":         wtls.smtpTLSPort(),
		"writer_https_url":      wtls.httpsURL(),
	}
	if c.Bool("json") {
		if err := printJSON(bundle); err != nil {
			return err
		}
	} else {
		printSummary(bundle, env)
	}
	log.Info().Str("namespace", id.Namespace).Msg("mailplane is up")
	return st.wait(ctx)
}

func printSummary(b map[string]any, env map[string]string) {
	fmt.Printf("mailplane is up: namespace %s\n\n", b["namespace"])
	fmt.Printf("agent       inbox            %s/\n", b["inbox_url"])
	fmt.Printf("evaluator   API              %s\n", b["api_url"])
	fmt.Printf("            read capability  %s\n", b["read_capability"])
	fmt.Printf("candidate   environment:\n")
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("              %s=%s\n", k, env[k])
	}
	fmt.Printf("            SMTP with TLS    port %v (STARTTLS on the SMTP port too), HTTPS %s\n            trust            %s (mail-plane ca export)\n",
		b["smtp_tls_port"], b["writer_https_url"], b["ca_file"])
	fmt.Printf("operator    plane socket     %s\n            data             %s\n\nCtrl-C stops everything.\n", b["plane_socket"], b["data_dir"])
}
