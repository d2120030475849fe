// Package pgtest starts a real PostgreSQL for tests (and for make bench),
// from Debian's binaries (make deps installs them): initdb into a
// temporary directory, the server run as the unprivileged postgres user
// when we run as root, listening on 127.0.0.1 on a free port and on a
// socket in that directory. Everything is removed when the test ends.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/websitebench/mailplane/internal/itest"
)

// Server is a running (or stopped) PostgreSQL of one test.
type Server struct {
	t       testing.TB // nil when launched outside a test
	bin     string     // the directory of postgres, initdb
	dir     string     // data directory and socket directory's parent
	port    int
	durable bool                // fsync on (make bench); tests run without
	cred    *syscall.Credential // the postgres user's, when we are root

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited and been waited for
	dbs    int
}

// Start initializes and starts a PostgreSQL for t; t.Cleanup stops it and
// removes its files. Without Debian's binaries the test is skipped, or
// fails under CI.
func Start(t testing.TB) *Server {
	t.Helper()
	itest.Require(t, filepath.Join(binDir(), "postgres"))
	s, err := Launch(false)
	if s != nil {
		t.Cleanup(s.Close)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	return s
}

// Launch initializes and starts a PostgreSQL, with fsync on if durable;
// Close stops it and removes its files. On an error the server, if not
// nil, still needs its Close.
func Launch(durable bool) (*Server, error) {
	s := &Server{bin: binDir(), durable: durable}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s.dir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return s, fmt.Errorf("pgtest: running as root needs the postgres user (Debian's postgresql package makes it): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return s, err
		}
	}
	initdb := s.command(filepath.Join(s.bin, "initdb"), "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return s, fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return s, err
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return s, s.start()
}

// Close stops the server and removes its files.
func (s *Server) Close() {
	s.Stop()
	os.RemoveAll(s.dir)
}

// binDir is the bin directory of the newest PostgreSQL Debian installed.
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	if len(dirs) == 0 {
		return "/usr/lib/postgresql/VERSION/bin"
	}
	return dirs[len(dirs)-1]
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	// The server dies with the test process, even one killed.
	// Its own process group: Kill ends the postmaster and its backends
	// together, as a crash of the machine would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	return cmd
}

// start runs the server and waits until it takes connections. A server
// that exits before it does (one killed a moment ago can leave its shared
// memory held for a while) is started again, within the same bound.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		exited, err := s.spawn()
		if err != nil {
			return err
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			c, err := pgx.Connect(ctx, s.dsn("postgres"))
			cancel()
			if err == nil {
				c.Close(context.Background())
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pgtest: postgres did not start: %v\n%s", err, s.Log())
			}
			select {
			case <-exited:
			case <-time.After(50 * time.Millisecond):
				continue
			}
			break // it exited: start it again
		}
		s.cmd, s.exited = nil, nil
		time.Sleep(200 * time.Millisecond)
	}
}

// spawn starts postgres; exited is closed once the process has exited
// (and been waited for).
func (s *Server) spawn() (exited chan struct{}, err error) {
	fsync := "off"
	if s.durable {
		fsync = "on"
	}
	cmd := s.command(filepath.Join(s.bin, "postgres"), "-D", s.data(), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+s.dir,
		"-c", "fsync="+fsync, "-c", "max_connections=200", "-c", "shared_buffers=32MB")
	log, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	exited = make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	return exited, nil
}

// Stop shuts the server down (fast shutdown: sessions are ended) and
// waits for it; a stopped server stays stopped.
func (s *Server) Stop() { s.signal(syscall.SIGINT) }

// Kill ends the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	if sig == syscall.SIGKILL {
		// The whole group: a postmaster killed alone leaves backends that
		// hold its shared memory for a while, and a restart then refuses
		// to start ("pre-existing shared memory block is still in use").
		syscall.Kill(-pid, sig)
	} else {
		s.cmd.Process.Signal(sig)
	}
	<-s.exited
	s.cmd, s.exited = nil, nil
	// Wait (bounded) until no process of the group is left.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := syscall.Kill(-pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
}

// Restart starts a stopped (or killed) server again, on the same port
// with the same data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// DSN returns the URL of a new, empty database on the server.
func (s *Server) DSN() string {
	s.t.Helper()
	dsn, err := s.NewDB()
	if err != nil {
		s.t.Fatal(err)
	}
	return dsn
}

// NewDB creates a new, empty database on the server and returns its URL.
func (s *Server) NewDB() (string, error) {
	s.mu.Lock()
	s.dbs++
	name := "test" + strconv.Itoa(s.dbs)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database: %w", err)
	}
	return s.dsn(name), nil
}

func (s *Server) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Log returns the server's log, for a failing test's message.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	return strings.TrimSpace(string(b))
}
