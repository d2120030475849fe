// Package itest runs mailplane's real binaries as separate processes for
// integration tests: a plane on a temporary socket, trials on it, and the
// surfaces in front of it. Nothing here is a mock.
package itest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Bin returns the path of a mailplane binary: from $MAILPLANE_BIN (make
// sets it after `make build`), else built once per test process.
func Bin(t testing.TB, name string) string {
	t.Helper()
	if dir := os.Getenv("MAILPLANE_BIN"); dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "mailplane-bin-")
		if buildErr != nil {
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-o", buildDir+"/", "./cmd/...")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, name)
}

// Proc is a running binary whose output is kept for the test's log.
type Proc struct {
	Cmd  *exec.Cmd
	Name string
	out  *SyncBuffer
	done chan struct{}
}

// Start runs a mailplane binary; it is killed when the test ends.
func Start(t testing.TB, name string, args ...string) *Proc {
	t.Helper()
	return StartCmd(t, exec.Command(Bin(t, name), args...), name)
}

// StartCmd runs cmd with its output captured; it is killed at cleanup.
func StartCmd(t testing.TB, cmd *exec.Cmd, name string) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Name: name, out: &SyncBuffer{}, done: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = p.out
	}
	if cmd.Stderr == nil {
		cmd.Stderr = p.out
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() || testing.Verbose() {
			t.Logf("--- output of %s:\n%s", name, p.Output())
		}
	})
	return p
}

// Output is everything the process wrote so far.
func (p *Proc) Output() string { return p.out.String() }

// WaitOutput waits up to timeout for the process's output to contain
// want, and reports whether it did. A line the process wrote before it
// answered a request can still be on its way through the pipe that
// exec.Cmd copies from when the answer arrives.
func (p *Proc) WaitOutput(want string, timeout time.Duration) bool {
	for end := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(p.Output(), want) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL to the process group and waits for it.
func (p *Proc) Kill() {
	if p.Cmd.Process != nil {
		syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Stop sends SIGTERM and waits up to Bound; it returns the exit code.
func (p *Proc) Stop(t testing.TB) int {
	t.Helper()
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(Bound):
		t.Fatalf("%s did not stop within %v of SIGTERM", p.Name, Bound)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// SyncBuffer is a log a test reads while a process or a server writes
// it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Plane is a running mail-plane serve.
type Plane struct {
	*Proc
	Socket string
	Data   string
	Admin  *rpc.Client
	args   []string
	// console reads the plane's metrics (Metric), made on first use.
	console *rpc.Client
}

// StartPlane runs mail-plane serve on a fresh socket and data directory,
// with extra flags, and waits until it answers.
func StartPlane(t testing.TB, extra ...string) *Plane {
	t.Helper()
	dir := ShortTempDir(t)
	p := &Plane{Socket: filepath.Join(dir, "run", "plane.sock"), Data: filepath.Join(dir, "data")}
	p.args = append([]string{"serve", "--socket", p.Socket, "--data", p.Data}, extra...)
	p.Restart(t)
	return p
}

// Restart starts the plane again (after Kill or Stop) on the same data.
func (p *Plane) Restart(t testing.TB) {
	t.Helper()
	cmd := exec.Command(Bin(t, "mail-plane"), p.args...)
	// Debug logging unless the test set a level (benchmarks do).
	cmd.Env = append(os.Environ(), "MAILPLANE_LOG_LEVEL="+cmp.Or(os.Getenv("MAILPLANE_LOG_LEVEL"), "debug"))
	p.Proc = StartCmd(t, cmd, "mail-plane")
	deadline := time.Now().Add(Bound)
	for time.Now().Before(deadline) {
		if g, err := rpc.ReadSecretFile(filepath.Join(p.Data, "admin.grant")); err == nil {
			if p.Admin == nil {
				p.Admin = rpc.NewClient(p.Socket, g)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := p.Admin.Health(ctx)
			cancel()
			if err == nil {
				return
			}
		}
		select {
		case <-p.Done():
			t.Fatalf("mail-plane exited while starting:\n%s", p.Output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("mail-plane did not answer within %v:\n%s", Bound, p.Output())
}

// GatewayGrant is the gateway grant the plane wrote on first start.
func (p *Plane) GatewayGrant(t testing.TB) string { return p.Grant(t, rpc.RoleGateway) }

// Grant returns the grant for role that serve wrote into its data
// directory: the admin's, the gateway's, or a shared writer's or inbox's.
func (p *Plane) Grant(t testing.TB, role rpc.Role) string {
	t.Helper()
	g, err := rpc.ReadSecretFile(filepath.Join(p.Data, string(role)+".grant"))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Client returns a plane client presenting grant, closed at cleanup.
func (p *Plane) Client(t testing.TB, grant string) *rpc.Client {
	c := rpc.NewClient(p.Socket, grant)
	t.Cleanup(c.Close)
	return c
}

// Trial creates a trial with the given profile.
func (p *Plane) Trial(t testing.TB, profile string) rpc.Identity {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := p.Admin.TrialCreate(ctx, &rpc.TrialCreateRequest{Profile: profile})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// WriteSecret writes a secret into a new 0600 file under the test's
// temporary directory and returns its path.
func WriteSecret(t testing.TB, name, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ShortTempDir is a temporary directory with a short path: a Unix socket
// path must fit in 108 bytes, and t.TempDir's can be longer.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// WaitHTTP waits until GET url answers with status want.
func WaitHTTP(t testing.TB, url string, want int, p *Proc) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(Bound)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(url); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
		}
		if p != nil {
			select {
			case <-p.Done():
				t.Fatalf("%s exited:\n%s", p.Name, p.Output())
			default:
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not answer %d within %v", url, want, Bound)
}

// ReadLine reads the first line a process writes to r, within timeout.
func ReadLine(t testing.TB, r io.Reader, timeout time.Duration) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		ch <- line
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(timeout):
		t.Fatalf("no line within %v", timeout)
		return ""
	}
}

// Itoa is strconv.Itoa, for building flag lists.
func Itoa(n int) string { return strconv.Itoa(n) }
