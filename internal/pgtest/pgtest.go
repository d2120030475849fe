// Package pgtest starts a real PostgreSQL for tests, from Debian's
// binaries (make deps installs them): initdb into a temporary directory,
// the server run as the unprivileged postgres user when the tests run as
// root, listening on 127.0.0.1 on a free port and on a socket in that
// directory. Everything is removed when the test ends.
package pgtest

import (
	"context"
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
	t    testing.TB
	bin  string // the directory of postgres, initdb
	dir  string // data directory and socket directory's parent
	port int
	cred *syscall.Credential // the postgres user's, when we are root

	mu  sync.Mutex
	cmd *exec.Cmd
	dbs int
}

// Start initializes and starts a PostgreSQL for t; t.Cleanup stops it and
// removes its files. Without Debian's binaries the test is skipped, or
// fails under CI.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, bin: binDir()}
	itest.Require(t, filepath.Join(s.bin, "postgres"))
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() {
		s.Stop()
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgtest: running as root needs the postgres user (Debian's postgresql package makes it): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	initdb := s.command(filepath.Join(s.bin, "initdb"), "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	s.port = freePort(t)
	s.start()
	return s
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// start runs the server and waits until it takes connections.
func (s *Server) start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := s.command(filepath.Join(s.bin, "postgres"), "-D", s.data(), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+s.dir,
		"-c", "fsync=off", "-c", "max_connections=200", "-c", "shared_buffers=32MB")
	log, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("pgtest: starting postgres: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, s.dsn("postgres"))
		cancel()
		if err == nil {
			c.Close(context.Background())
			return
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
			s.t.Fatalf("pgtest: postgres did not start: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	s.cmd.Process.Signal(sig)
	s.cmd.Wait()
	s.cmd = nil
}

// Restart starts a stopped (or killed) server again, on the same port
// with the same data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// DSN returns the URL of a new, empty database on the server.
func (s *Server) DSN() string {
	s.t.Helper()
	s.mu.Lock()
	s.dbs++
	name := "test" + strconv.Itoa(s.dbs)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		s.t.Fatalf("pgtest: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		s.t.Fatalf("pgtest: create database: %v", err)
	}
	return s.dsn(name)
}

func (s *Server) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Log returns the server's log, for a failing test's message.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	return strings.TrimSpace(string(b))
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
