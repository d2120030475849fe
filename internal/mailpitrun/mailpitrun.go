// Package mailpitrun runs the plane's private Mailpit: a child process or a
// container the plane's edge starts when no running Mailpit is named, and
// starts again if it exits. The store (msgstore/mailpit) only talks to a
// Mailpit; it never starts one.
package mailpitrun

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/redact"
)

// A private Mailpit the plane starts when no running one is named, with the
// reference's settings (docs/reference.md §9.3): Unix sockets only, in a fresh
// 0700 directory (socketDir); POP3, relay, forwarding, webhooks, chaos and
// metrics off; no version check; remote CSS and fonts blocked; no internal
// HTTP requests; at most 16 recipients. Three settings differ, each for a
// rule of ours:
//   - no message cap (MP_MAX_MESSAGES=0): Mailpit's cap prunes the oldest
//     mail of every namespace together; the plane's per-namespace quotas
//     bound storage instead, and nothing is pruned for another trial;
//   - a 2 MB message limit: the plane accepts 1 MiB of message and adds
//     headers (scrubbing, our tag), so Mailpit's 1 MB would refuse mail the
//     plane already accepted;
//   - strict RFC headers: Mailpit then keeps CR CR LF as it was sent.
//
// Its database lives in the plane's data directory, not in a tmpfs, so the
// plane's mail outlives the plane's process. If Mailpit exits while the
// plane runs, it is started again on the same sockets and database.

// Runtimes a private Mailpit can run in.
const (
	RuntimeBinary = "binary" // a mailpit executable, as a child process
	RuntimeDocker = "docker" // a container, through the docker CLI
)

// DefaultImage is the reference's pinned Mailpit image.
const DefaultImage = "ghcr.io/axllent/mailpit:v1.30.6@sha256:7f33095f80e901f6ad08028f06ca284aa58fe84942be5496008d041d3b9f4d4d"

// Timings of a private Mailpit.
const (
	startTimeout = 45 * time.Second // the reference's
	readyPoll    = 100 * time.Millisecond
	restartDelay = time.Second
	stopGrace    = 5 * time.Second
	dockerStop   = "3" // docker stop --time, the reference's
)

// Paths inside the container.
const (
	containerRun  = "/run/websitebench-mailpit"
	containerData = "/var/lib/mailpit"
)

// maxOutputLines of Mailpit's output are kept to explain a failed start,
// and at most maxOutputText bytes of its last line are quoted (redacted).
const (
	maxOutputLines = 8
	maxOutputText  = 200
)

// Config says how to run a private Mailpit.
type Config struct {
	// Runtime is RuntimeBinary (default) or RuntimeDocker.
	Runtime string
	// Binary is the mailpit executable (binary runtime); default: mailpit
	// on PATH.
	Binary string
	// Docker is the docker CLI (docker runtime); default: docker on PATH.
	Docker string
	// Image is the container image (docker runtime); default DefaultImage.
	Image string
	// DataDir holds Mailpit's database; it is created 0700.
	DataDir string
	Log     zerolog.Logger
}

// Run is a running private Mailpit.
type Run struct {
	// Dir is the 0700 directory of its sockets, removed by Stop.
	Dir        string
	HTTPSocket string
	SMTPSocket string

	cfg      Config
	argv     []string // the command, without the per-run container name
	stop     chan struct{}
	stopOnce sync.Once
	finished chan struct{} // closed when the supervisor has returned

	mu      sync.Mutex
	current *proc
	stopped bool
}

// proc is one run of Mailpit.
type proc struct {
	cmd  *exec.Cmd
	name string // docker: the container's name
	done chan struct{}

	mu   sync.Mutex
	tail []string // its last lines of output
}

// ErrNoBinary: the binary runtime was asked for with no binary named and
// none on PATH.
var ErrNoBinary = errors.New("no mailpit binary was found to start one (--mailpit-binary, or mailpit on PATH)")

// Start starts a private Mailpit and waits until it is ready.
func Start(ctx context.Context, cfg Config) (*Run, error) {
	if cfg.Runtime == "" {
		cfg.Runtime = RuntimeBinary
	}
	if cfg.DataDir == "" {
		return nil, errors.New("mailpit: no data directory for a private Mailpit")
	}
	// Absolute: docker mounts only absolute paths.
	data, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = data
	e := &Run{cfg: cfg, stop: make(chan struct{}), finished: make(chan struct{})}
	switch cfg.Runtime {
	case RuntimeBinary:
		bin := cfg.Binary
		if bin == "" {
			p, err := exec.LookPath("mailpit")
			if err != nil {
				return nil, ErrNoBinary
			}
			bin = p
		}
		if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
			return nil, fmt.Errorf("mailpit: binary %s: not an executable file", bin)
		}
		e.argv = []string{bin}
	case RuntimeDocker:
		docker := cfg.Docker
		if docker == "" {
			docker = "docker"
		}
		p, err := exec.LookPath(docker)
		if err != nil {
			return nil, errors.New("Docker is unavailable for Mailpit")
		}
		if cfg.Image == "" {
			cfg.Image = DefaultImage
			e.cfg.Image = DefaultImage
		}
		e.argv = []string{p}
	default:
		return nil, fmt.Errorf("mailpit: runtime %q: want %s or %s", cfg.Runtime, RuntimeBinary, RuntimeDocker)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("mailpit: data directory: %w", err)
	}
	dir, err := socketDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	e.Dir = dir
	e.HTTPSocket = filepath.Join(dir, "http.sock")
	e.SMTPSocket = filepath.Join(dir, "smtp.sock")

	p, err := e.spawn()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := e.waitReady(ctx, p); err != nil {
		e.terminate(p)
		os.RemoveAll(dir)
		return nil, err
	}
	go e.supervise(p)
	cfg.Log.Info().Str("runtime", cfg.Runtime).Str("http_socket", e.HTTPSocket).Str("data", cfg.DataDir).Msg("private mailpit ready")
	return e, nil
}

// maxSocketPath keeps a socket path within sockaddr_un (108 bytes).
const maxSocketPath = 104

// socketDir makes the fresh 0700 directory of Mailpit's sockets: run/ in
// its data directory (so that a plane killed before it could clean up
// leaves nothing elsewhere, and the next start replaces it), or, when that
// path is too long for a socket, a new temporary directory.
func socketDir(data string) (string, error) {
	dir := filepath.Join(data, "run")
	if len(dir)+len("/http.sock") > maxSocketPath {
		return os.MkdirTemp("", "mailplane-mailpit-") // created 0700
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// settings are Mailpit's environment; see the comment at the top.
func Settings(httpSocket, smtpSocket, database string) []string {
	return []string{
		"MP_UI_BIND_ADDR=unix:" + httpSocket + ":660",
		"MP_SMTP_BIND_ADDR=unix:" + smtpSocket + ":660",
		"MP_DATABASE=" + database,
		"MP_MAX_MESSAGES=0",
		"MP_MAX_MESSAGE_SIZE=2",
		"MP_SMTP_MAX_RECIPIENTS=16",
		"MP_SMTP_STRICT_RFC_HEADERS=true",
		"MP_POP3_AUTH_FILE=",
		"MP_SMTP_RELAY_CONFIG=",
		"MP_SMTP_RELAY_ALL=false",
		"MP_SMTP_FORWARD_CONFIG=",
		"MP_WEBHOOK_URL=",
		"MP_ENABLE_CHAOS=false",
		"MP_ENABLE_PROMETHEUS=false",
		"MP_DISABLE_VERSION_CHECK=true",
		"MP_BLOCK_REMOTE_CSS_AND_FONTS=true",
		"MP_ALLOW_INTERNAL_HTTP_REQUESTS=false",
	}
}

// spawn starts one run of Mailpit.
func (e *Run) spawn() (*proc, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil, errors.New("mailpit: stopped")
	}
	p := &proc{done: make(chan struct{})}
	var cmd *exec.Cmd
	switch e.cfg.Runtime {
	case RuntimeBinary:
		// Sockets left by a run that was killed would make Mailpit refuse
		// to start; the directory is ours alone.
		os.Remove(e.HTTPSocket)
		os.Remove(e.SMTPSocket)
		cmd = exec.Command(e.argv[0])
		// Only our settings: nothing an operator exported for another
		// Mailpit (MP_*) reaches this one.
		cmd.Env = Settings(e.HTTPSocket, e.SMTPSocket, filepath.Join(e.cfg.DataDir, "mailpit.db"))
	case RuntimeDocker:
		p.name = "mailplane-mailpit-" + ident.Hex(12)
		args := []string{"run", "--rm", "--name", p.name}
		if rootlessPodman(e.argv[0]) {
			args = append(args, "--userns=keep-id")
		}
		args = append(args,
			"--user", strconv.Itoa(os.Getuid())+":"+strconv.Itoa(os.Getgid()),
			"--network", "none",
			"--read-only",
			"--cap-drop", "ALL",
			"--security-opt", "no-new-privileges",
			"--tmpfs", "/tmp:rw,noexec,nosuid,nodev,size=64m",
			"--mount", "type=bind,src="+e.Dir+",dst="+containerRun,
			"--mount", "type=bind,src="+e.cfg.DataDir+",dst="+containerData,
		)
		for _, kv := range Settings(containerRun+"/http.sock", containerRun+"/smtp.sock", containerData+"/mailpit.db") {
			args = append(args, "--env", kv)
		}
		args = append(args, e.cfg.Image)
		cmd = exec.Command(e.argv[0], args...)
	}
	// Its own process group, so that a terminal's Ctrl-C reaches the plane
	// only and the plane stops Mailpit in order; and SIGTERM if the plane
	// dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		if e.cfg.Runtime == RuntimeDocker {
			return nil, errors.New("Docker is unavailable for Mailpit")
		}
		return nil, fmt.Errorf("mailpit: start: %w", err)
	}
	p.cmd = cmd
	e.current = p
	go p.collect(out, e.cfg.Log)
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// collect logs Mailpit's output and keeps its last lines.
func (p *proc) collect(r io.Reader, log zerolog.Logger) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		log.Debug().Str("mailpit", line).Msg("mailpit output")
		p.mu.Lock()
		p.tail = append(p.tail, line)
		if len(p.tail) > maxOutputLines {
			p.tail = p.tail[1:]
		}
		p.mu.Unlock()
	}
	io.Copy(io.Discard, r)
}

func (p *proc) lastOutput() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.tail) == 0 {
		return "no output"
	}
	s := redact.Text(p.tail[len(p.tail)-1])
	if len(s) > maxOutputText {
		s = s[:maxOutputText]
	}
	return s
}

// waitReady polls /readyz until it answers 200, Mailpit exits, or
// startTimeout passes.
func (e *Run) waitReady(ctx context.Context, p *proc) error {
	hc := unixClient(e.HTTPSocket)
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(startTimeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, "http://localhost/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("mailpit: Mailpit exited during startup (%s)", p.lastOutput())
		case <-ctx.Done():
			return fmt.Errorf("mailpit: interrupted while Mailpit was starting: %w", ctx.Err())
		case <-time.After(readyPoll):
		}
		if time.Now().After(deadline) {
			return errors.New("mailpit: Mailpit did not become ready")
		}
	}
}

// supervise starts Mailpit again whenever it exits, until Stop.
func (e *Run) supervise(p *proc) {
	defer close(e.finished)
	for {
		select {
		case <-e.stop:
			return
		case <-p.done:
		}
		e.cfg.Log.Warn().Str("last_output", p.lastOutput()).Msg("mailpit exited; starting it again")
		for {
			select {
			case <-e.stop:
				return
			case <-time.After(restartDelay):
			}
			np, err := e.spawn()
			if err == nil {
				p = np
				break
			}
			e.cfg.Log.Error().Err(err).Msg("mailpit did not start again")
		}
	}
}

// Stop stops Mailpit and removes its socket directory; its database stays.
func (e *Run) Stop() error {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		e.stopped = true
		p := e.current
		e.mu.Unlock()
		close(e.stop)
		<-e.finished
		if p != nil {
			e.terminate(p)
		}
		os.RemoveAll(e.Dir)
		e.cfg.Log.Info().Msg("private mailpit stopped")
	})
	return nil
}

// terminate stops one run: SIGTERM (docker stop for a container), then
// SIGKILL after stopGrace.
func (e *Run) terminate(p *proc) {
	select {
	case <-p.done:
		return
	default:
	}
	if p.name != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		exec.CommandContext(ctx, e.argv[0], "stop", "--time", dockerStop, p.name).Run()
		cancel()
	} else {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		e.cfg.Log.Warn().Msg("mailpit did not stop in time; killing it")
		p.cmd.Process.Kill()
		<-p.done
	}
	if p.name != "" {
		// Should the container have outlived its CLI, it goes now.
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		exec.CommandContext(ctx, e.argv[0], "rm", "-f", p.name).Run()
		cancel()
	}
}

// rootlessPodman detects the Podman Docker shim, which needs the host uid
// kept inside the container (--userns=keep-id), as the reference does.
func rootlessPodman(docker string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, docker, "info").CombinedOutput()
	s := strings.ToLower(string(out))
	return err == nil && strings.Contains(s, "podman") && strings.Contains(s, "rootless")
}

// unixClient talks HTTP/1.1 to Mailpit's socket, for its readiness probe.
func unixClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
}
