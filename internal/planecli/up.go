package planecli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
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
		}, storeFlags()...),
		Action: up,
	}
}

// surface is one child process of up.
type surface struct {
	name string
	args []string
	lns  []net.Listener // passed as fd 3, 4, ...
	url  string         // health check base
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

func up(c *cli.Context) (err error) {
	log, err := logging.FromFlags(c, "mail-plane up")
	if err != nil {
		return cliapp.UsageError{Err: err}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	data := c.String("data")
	if data == "" {
		if data, err = os.MkdirTemp("", "mailplane-"); err != nil {
			return err
		}
		defer os.RemoveAll(data)
	}
	if data, err = filepath.Abs(data); err != nil {
		return err
	}
	socket := filepath.Join(data, "run", "plane.sock")
	logArgs := []string{"--log-level", c.String("log-level"), "--log-format", c.String("log-format")}

	var children []*surface
	defer func() { stopAll(children, log) }()
	exited := make(chan *surface, 4)

	planeArgs := append(append([]string{}, logArgs...), "serve", "--socket", socket, "--data", filepath.Join(data, "plane"),
		"--store", c.String("store"),
		"--quota-messages", strconv.FormatInt(c.Int64("quota-messages"), 10),
		"--quota-bytes", strconv.FormatInt(c.Int64("quota-bytes"), 10))
	if c.String("store") == "mailpit" {
		for _, f := range []string{"mailpit-socket", "mailpit-smtp-socket", "mailpit-runtime", "mailpit-binary", "mailpit-image"} {
			if v := c.String(f); v != "" {
				planeArgs = append(planeArgs, "--"+f, v)
			}
		}
	}
	p := &surface{name: "mail-plane", args: planeArgs}
	if err := start(p, exited); err != nil {
		return err
	}
	children = append(children, p)

	deadline := time.Now().Add(c.Duration("start-timeout"))
	admin, err := waitPlane(ctx, exited, socket, filepath.Join(data, "plane", "admin.grant"), deadline)
	if err != nil {
		return err
	}
	defer admin.Close()
	id, err := admin.TrialCreate(ctx, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		return err
	}
	trialDir := filepath.Join(data, "trial")
	if err := WriteParts(trialDir, id); err != nil {
		return err
	}

	host := c.String("bind-host")
	bind := func(port int) (net.Listener, error) {
		return net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	var lns [4]net.Listener
	for i, port := range []int{c.Int("writer-port"), c.Int("smtp-port"), c.Int("inbox-port"), c.Int("gateway-port")} {
		if lns[i], err = bind(port); err != nil {
			return cliapp.Usagef("listen on %s port %d: %v", host, port, err)
		}
	}
	planeFlags := []string{"--plane-socket", socket}
	surfaces := []*surface{
		{name: "mail-writer", lns: lns[0:2], args: append(append(append([]string{}, logArgs...), planeFlags...),
			"--grant-file", filepath.Join(trialDir, "writer.grant"), "--http-listen", "fd:3", "--smtp-listen", "fd:4", "--smtp-mode", "fixed")},
		{name: "mail-inbox", lns: lns[2:3], args: append(append(append([]string{}, logArgs...), planeFlags...),
			"--grant-file", filepath.Join(trialDir, "inbox.grant"), "--token-file", filepath.Join(trialDir, "inbox.token"), "--listen", "fd:3")},
		{name: "mail-gateway", lns: lns[3:4], args: append(append(append([]string{}, logArgs...), planeFlags...),
			"--grant-file", filepath.Join(data, "plane", "gateway.grant"), "--listen", "fd:3")},
	}
	for _, s := range surfaces {
		s.url = "http://" + s.lns[0].Addr().String()
		if err := start(s, exited); err != nil {
			return err
		}
		children = append(children, s)
	}
	for _, ln := range lns {
		ln.Close() // the children hold their own copies
	}
	for _, s := range surfaces {
		if err := waitHealthy(ctx, exited, s, deadline); err != nil {
			return err
		}
	}

	port := func(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }
	env := CandidateEnvironment(id, port(lns[0]), port(lns[1]))
	if err := CheckCandidateEnvironment(env, socket, id.ReadCapability); err != nil {
		return err
	}
	bundle := map[string]any{
		"namespace":             id.Namespace,
		"candidate_environment": env,
		"inbox_url":             surfaces[1].url,
		"api_url":               surfaces[2].url,
		"read_capability":       id.ReadCapability,
		"plane_socket":          socket,
		"data_dir":              data,
		"smtp_port":             port(lns[1]),
		"writer_url":            surfaces[0].url,
	}
	if c.Bool("json") {
		if err := printJSON(bundle); err != nil {
			return err
		}
	} else {
		printSummary(bundle, env)
	}
	log.Info().Str("namespace", id.Namespace).Msg("mailplane is up")

	select {
	case <-ctx.Done():
		log.Info().Msg("stopping")
		return nil
	case s := <-exited:
		return fmt.Errorf("%s exited unexpectedly; stopping everything", s.name)
	}
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
	fmt.Printf("operator    plane socket     %s\n            data             %s\n\nCtrl-C stops everything.\n", b["plane_socket"], b["data_dir"])
}

// binary finds a mailplane binary next to this one, else on PATH.
func binary(name string) (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", cliapp.Usagef("%s not found next to mail-plane or on PATH (make build puts all four in bin/)", name)
	}
	return p, nil
}

// start starts s; when it exits, s is sent on exited.
func start(s *surface, exited chan<- *surface) error {
	path, err := binary(s.name)
	if err != nil {
		return err
	}
	s.cmd = exec.Command(path, s.args...)
	s.cmd.Stdout = os.Stderr // children's output is log, never the bundle
	s.cmd.Stderr = os.Stderr
	s.cmd.Env = childEnv(s.name)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	for _, ln := range s.lns {
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			return err
		}
		defer f.Close()
		s.cmd.ExtraFiles = append(s.cmd.ExtraFiles, f)
	}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	s.done = make(chan struct{})
	go func() {
		s.cmd.Wait()
		close(s.done)
		exited <- s
	}()
	return nil
}

// childEnv is the environment of a child: this one's, without anything
// that names a secret or a file or socket behind one (the sidecar's
// bootstrap token, Mailpit's socket, a grant or token file, the
// credentials directory): each child is handed its own by flag. The plane
// alone keeps WEBSITEBENCH_MAILPIT_HTTP_SOCKET, which it may read.
func childEnv(name string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == mailpitSocketEnv && name == "mail-plane":
		case strings.HasPrefix(k, "WEBSITEBENCH_"):
			continue
		case k == "MAILPLANE_GRANT_FILE", k == "MAILPLANE_ADMIN_GRANT_FILE", k == "MAILPLANE_TOKEN_FILE",
			k == "MAILPLANE_SOCKET", k == "MAILPLANE_DATA", k == "CREDENTIALS_DIRECTORY":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// stopAll sends SIGTERM to every child still running, surfaces first and
// the plane last, and SIGKILL to any that outlives 5 s.
func stopAll(children []*surface, log zerolog.Logger) {
	for i := len(children) - 1; i >= 0; i-- {
		s := children[i]
		if s.done == nil {
			continue
		}
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			log.Warn().Str("child", s.name).Msg("did not stop in 5s; killing")
			s.cmd.Process.Kill()
			<-s.done
		}
	}
}

// waitPlane waits for the plane to answer a health call with the admin
// grant it wrote.
func waitPlane(ctx context.Context, exited <-chan *surface, socket, grantFile string, deadline time.Time) (*rpc.Client, error) {
	for {
		if g, err := rpc.ReadSecretFile(grantFile); err == nil {
			cl := rpc.NewClient(socket, g)
			hctx, cancel := context.WithTimeout(ctx, time.Second)
			h, err := cl.Health(hctx)
			cancel()
			if err == nil && h.Store == "ok" {
				return cl, nil
			}
			cl.Close()
		}
		if err := pause(ctx, exited, deadline, "mail-plane"); err != nil {
			return nil, err
		}
	}
}

// waitHealthy waits for GET /healthz on s to answer 200.
func waitHealthy(ctx context.Context, exited <-chan *surface, s *surface, deadline time.Time) error {
	hc := &http.Client{Timeout: time.Second}
	for {
		if resp, err := hc.Get(s.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := pause(ctx, exited, deadline, s.name); err != nil {
			return err
		}
	}
}

// pause waits a little before the next readiness probe, failing if a child
// exited, the deadline passed or up is being stopped.
func pause(ctx context.Context, exited <-chan *surface, deadline time.Time, what string) error {
	if time.Now().After(deadline) {
		return fmt.Errorf("%s did not become healthy in time", what)
	}
	select {
	case s := <-exited:
		return fmt.Errorf("%s exited while starting (its log is above)", s.name)
	case <-ctx.Done():
		return errors.New("interrupted while starting")
	case <-time.After(10 * time.Millisecond):
		return nil
	}
}
