// Package supervisor runs a whole mailplane on one machine: mail-plane up
// (the plane and one writer, inbox and gateway shared by every trial) and
// mail-plane sidecar (the reference's drop-in: one trial, its ports, and
// its API router as a child, mail-plane route, that holds no grant). It
// binds the TCP ports and hands each listening socket to the child that
// serves it; the children hold only their own secrets.
package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/serve"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// stack is a plane and its surfaces run as children of this process, by
// mail-plane up and mail-plane sidecar. Each child is handed only its own
// secrets, by flag.
type stack struct {
	data, socket string
	logs         cliapp.Log // every child's logging flags, as this process's
	log          zerolog.Logger
	children     []*surface
	exited       chan *surface // each child, when it exits
	plane        *surface      // stopped after the surfaces that call it
	stopBound    time.Duration // how long a child has after SIGTERM
	removeData   bool
}

// surface is one child process of a stack: a line of the table of
// services (services.go).
type surface struct {
	name  string // its binary, unless bin is set
	bin   string
	cfg   config         // its command line is cfg.Args(), nothing else
	lns   []net.Listener // passed as fd 3, 4, ...
	files []*os.File     // passed after lns
	url   string         // health check base
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has exited
}

// newStack prepares a stack whose data lives in data, or in a new
// temporary directory (removed by close) when data is empty.
func newStack(c *cli.Context, data string, log zerolog.Logger) (*stack, error) {
	s := &stack{log: log, exited: make(chan *surface, 8), stopBound: stopTimeout,
		logs: cliapp.LogFromContext(c)}
	var err error
	if data == "" {
		if data, err = os.MkdirTemp("", "mailplane-"); err != nil {
			return nil, err
		}
		s.removeData = true
	}
	if s.data, err = filepath.Abs(data); err != nil {
		return nil, err
	}
	s.socket = filepath.Join(s.data, "run", "plane.sock")
	return s, nil
}

// close stops every child, surfaces first and the plane last, and removes
// a temporary data directory.
func (s *stack) close() {
	s.stopAll()
	if s.removeData {
		os.RemoveAll(s.data)
	}
}

func (s *stack) trialDir() string { return filepath.Join(s.data, "trial") }

// grantFile is the file of the plane's own grant for role: the admin's,
// the gateway's, and the shared writer's and inbox's.
func (s *stack) grantFile(role rpc.Role) string {
	return filepath.Join(s.data, "plane", string(role)+".grant")
}

// planeConfig is the configuration of the stack's plane: serve's
// defaults, on the stack's socket and in its data directory.
func (s *stack) planeConfig() serve.Config {
	cfg := serve.Defaults()
	cfg.Socket = s.socket
	cfg.Data = filepath.Join(s.data, "plane")
	return cfg
}

// startPlane runs mail-plane serve as cfg says (cfg.Args, the one place
// its flags come from) and waits until it answers; it returns a client
// with the plane's admin grant.
func (s *stack) startPlane(ctx context.Context, deadline time.Time, cfg serve.Config) (*rpc.Client, error) {
	p := &surface{name: "mail-plane", cfg: planeCommand{log: s.logs, serve: cfg}}
	if err := s.start(p); err != nil {
		return nil, err
	}
	s.plane = p
	return waitPlane(ctx, s.exited, s.socket, s.grantFile(rpc.RoleAdmin), deadline)
}

// surfaceConfig is what every surface of the stack shares: logging, the
// plane's socket, and the grant in grantFile.
func (s *stack) surfaceConfig(grantFile string) cliapp.Surface {
	return cliapp.Surface{Log: s.logs, PlaneSocket: s.socket, GrantFile: grantFile}
}

// startSurfaces starts each surface on its listeners (fd 3, 4, ...),
// closes this process's copies of them, and waits until every surface
// answers GET /healthz.
func (s *stack) startSurfaces(ctx context.Context, deadline time.Time, surfaces ...*surface) error {
	for _, sf := range surfaces {
		sf.url = "http://" + sf.lns[0].Addr().String()
		if err := s.start(sf); err != nil {
			return err
		}
		for _, ln := range sf.lns {
			ln.Close() // the child holds its own copy
		}
		for _, f := range sf.files {
			f.Close()
		}
	}
	for _, sf := range surfaces {
		if err := waitHealthy(ctx, s.exited, sf, deadline); err != nil {
			return err
		}
	}
	return nil
}

// wait returns nil once ctx ends (a signal), and an error if a child
// exits first.
func (s *stack) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		s.log.Info().Msg("stopping")
		return nil
	case sf := <-s.exited:
		return fmt.Errorf("%s exited unexpectedly; stopping everything", sf.name)
	}
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
		return "", cliapp.Usagef("%s not found next to mail-plane or on PATH (make build puts all five in bin/)", name)
	}
	return p, nil
}

// start starts a child and counts it among the stack's; when it exits, it
// is sent on exited.
func (st *stack) start(s *surface) error {
	path, err := binary(cmp.Or(s.bin, s.name))
	if err != nil {
		return err
	}
	return st.run(s, path)
}

// run starts the program at path as child s.
func (st *stack) run(s *surface, path string) error {
	s.cmd = exec.Command(path, s.cfg.Args()...)
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
	s.cmd.ExtraFiles = append(s.cmd.ExtraFiles, s.files...)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	s.done = make(chan struct{})
	st.children = append(st.children, s)
	go func() {
		s.cmd.Wait()
		close(s.done)
		st.exited <- s
	}()
	return nil
}

// childEnv is the environment of a child: this one's, without anything
// that names a secret or a file or socket behind one (the sidecar's
// bootstrap token, Mailpit's socket, a grant or token file, the
// credentials directory): each child is handed its own by flag. The plane
// alone keeps WEBSITEBENCH_MAILPIT_HTTP_SOCKET, which it may read, and
// the database's DSN (serve.DSNEnv): a surface never holds it.
func childEnv(name string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case (k == wbenv.MailpitHTTPSocket || k == serve.DSNEnv) && name == "mail-plane":
		case k == serve.DSNEnv:
			continue
		case strings.HasPrefix(k, wbenv.Prefix):
			continue
		case k == "MAILPLANE_GRANT_FILE", k == "MAILPLANE_ADMIN_GRANT_FILE", k == "MAILPLANE_TOKEN_FILE",
			k == "MAILPLANE_SOCKET", k == "MAILPLANE_DATA", k == "CREDENTIALS_DIRECTORY":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// stopTimeout is how long a child has to stop after SIGTERM before it is
// killed. The surfaces stop together, then the plane: a stack's stop takes
// at most twice this (and a harness such as the Python client's Stack
// waits 15 s before it kills everything itself).
const stopTimeout = 5 * time.Second

// stopAll stops every child still running: the surfaces first, together,
// then the plane they call.
func (s *stack) stopAll() {
	var surfaces []*surface
	for _, c := range s.children {
		if c != s.plane {
			surfaces = append(surfaces, c)
		}
	}
	stopChildren(surfaces, s.stopBound, s.log)
	if s.plane != nil {
		stopChildren([]*surface{s.plane}, s.stopBound, s.log)
	}
}

// stopChildren sends SIGTERM to each child still running and waits for
// them all, at most bound; a child still running then is named in the log
// and killed with its process group (SIGKILL). No wait is unbounded: a
// child that does not go even then (stuck in the kernel) is logged and
// left behind.
func stopChildren(children []*surface, bound time.Duration, log zerolog.Logger) {
	for _, c := range children {
		if c.done != nil {
			c.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(bound)
	for _, c := range children {
		if c.done == nil {
			continue
		}
		select {
		case <-c.done:
			continue
		case <-time.After(time.Until(deadline)):
		}
		select {
		case <-c.done: // it stopped while another was being killed
			continue
		default:
		}
		pid := c.cmd.Process.Pid
		log.Warn().Str("child", c.name).Int("pid", pid).Dur("after", bound).Msg("did not stop after SIGTERM; killing it")
		syscall.Kill(-pid, syscall.SIGKILL) // its group: what it started itself
		c.cmd.Process.Kill()
		select {
		case <-c.done:
		case <-time.After(time.Second):
			log.Error().Str("child", c.name).Int("pid", pid).Msg("still running after SIGKILL; leaving it")
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
