package mailpit

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/mailpitrun"
)

// server is a Mailpit the test runs itself (so that it can kill, stop and
// restart it), with the plane's settings plus extra ones.
type server struct {
	t     testing.TB
	bin   string
	dir   string
	env   []string
	HTTP  string
	SMTP  string
	DB    string
	cmd   *exec.Cmd
	done  chan struct{}
	out   *strings.Builder
	outMu sync.Mutex
}

func startServer(t testing.TB, extra ...string) *server {
	t.Helper()
	dir := itest.ShortTempDir(t)
	s := &server{t: t, bin: itest.Mailpit(t), dir: dir,
		HTTP: filepath.Join(dir, "http.sock"), SMTP: filepath.Join(dir, "smtp.sock"), DB: filepath.Join(dir, "mailpit.db")}
	s.env = append(mailpitrun.Settings(s.HTTP, s.SMTP, s.DB), extra...)
	s.start()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("--- mailpit output:\n%s", s.output())
		}
	})
	return s
}

func (s *server) Write(p []byte) (int, error) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.out.Write(p)
}

func (s *server) output() string {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.out.String()
}

// start runs Mailpit (again, on the same sockets and database) and waits
// for /readyz.
func (s *server) start() {
	s.t.Helper()
	if s.out == nil {
		s.out = &strings.Builder{}
	}
	s.cmd = exec.Command(s.bin)
	s.cmd.Env = s.env
	s.cmd.Stdout, s.cmd.Stderr = s, s
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	s.done = done
	go func() { s.cmd.Wait(); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if code, _ := s.tryGet("/readyz"); code == http.StatusOK {
			return
		}
		select {
		case <-done:
			s.t.Fatalf("mailpit exited while starting:\n%s", s.output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.t.Fatalf("mailpit not ready in 30s:\n%s", s.output())
}

// kill kills Mailpit with SIGKILL: no chance to close anything.
func (s *server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGCONT)
		s.cmd.Process.Kill()
		<-s.done
	}
}

func (s *server) signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

func (s *server) tryGet(path string) (int, []byte) {
	hc := httpClient(s.HTTP)
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost"+path, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// api calls Mailpit's own API (with any method) and decodes JSON into v.
func (s *server) api(method, path string, body string, v any) int {
	s.t.Helper()
	hc := httpClient(s.HTTP)
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode == http.StatusOK {
		if raw, ok := v.(*[]byte); ok {
			*raw = b
		} else if err := json.Unmarshal(b, v); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// total is how many messages Mailpit holds.
func (s *server) total() int {
	var list struct{ Total int }
	if code := s.api(http.MethodGet, "/api/v1/messages?limit=1", "", &list); code != http.StatusOK {
		s.t.Fatalf("messages: HTTP %d", code)
	}
	return list.Total
}

// sendRaw writes data straight into Mailpit's SMTP socket, as any client
// of Mailpit could, and returns its ID.
func (s *server) sendRaw(from string, to []string, data []byte) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dialSMTP(ctx, s.SMTP)
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.close()
	c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	c.maxSize = 0
	id, err := c.send(from, to, frame{data: data, size: len(data)})
	if err != nil {
		s.t.Fatal(err)
	}
	return id
}
