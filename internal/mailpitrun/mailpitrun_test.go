package mailpitrun

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/msgstore"
	"github.com/websitebench/mailplane/internal/msgstore/mailpit"
)

// The plane's private Mailpit from a binary: the reference's settings,
// sockets only, in a fresh 0700 directory; restarted if it dies; its
// database kept across runs; everything else removed on Stop.
func TestEphemeralBinary(t *testing.T) {
	data := filepath.Join(t.TempDir(), "mailpit")
	cfg := Config{Runtime: RuntimeBinary, Binary: itest.Mailpit(t), DataDir: data, Log: zerolog.Nop()}
	ctx := context.Background()
	e, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop() })
	if fi, err := os.Stat(e.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(data); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data directory: %v %v", fi.Mode(), err)
	}
	p := e.running()
	pid := p.cmd.Process.Pid
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	want := Settings(e.HTTPSocket, e.SMTPSocket, filepath.Join(data, "mailpit.db"))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Mailpit's environment:\n%s\nwant only:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l := tcpListeners(t, pid); len(l) > 0 {
		t.Fatalf("Mailpit listens on TCP: %v", l)
	}

	s, err := mailpit.New(mailpit.Config{HTTPSocket: e.HTTPSocket, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ns := testNS()
	raw := scrub(t, []byte("Subject: kept\r\n\r\nacross runs\r\n"), testEnv.From, testEnv.To)
	ref, err := s.Put(ctx, ns, testEnv, raw)
	if err != nil {
		t.Fatal(err)
	}

	// Killed, it is started again on the same sockets and database.
	p.cmd.Process.Kill()
	itest.Eventually(t, "mailpit started again", itest.Bound, func() bool { return s.Ping(ctx) == nil })
	if q := e.running(); q == p {
		t.Fatal("no new run")
	}
	if got, err := s.Get(ctx, ns, ref, testEnv); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Get after Mailpit restarted: %v", err)
	}

	q := e.running()
	e.Stop()
	select {
	case <-q.done:
	default:
		t.Fatal("Mailpit still runs after Stop")
	}
	if _, err := os.Stat(e.Dir); !os.IsNotExist(err) {
		t.Fatalf("socket directory left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "mailpit.db")); err != nil {
		t.Fatalf("database: %v", err)
	}

	// A new run (a restarted plane) reads the mail of the last.
	readsLast(t, cfg, ns, ref, raw, "the next run")
}

func TestEphemeralNotConfigured(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background(), Config{DataDir: t.TempDir()})
	if !errors.Is(err, ErrNoBinary) {
		t.Fatalf("without a mailpit binary: %v", err)
	}
	// A binary that is not Mailpit exits at once: a clear failure, not a hang.
	_, err = Start(context.Background(), Config{Binary: "/bin/true", DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "exited during startup") {
		t.Fatalf("with /bin/true: %v", err)
	}
}

// The docker runtime, with an image built here FROM scratch from the
// static Mailpit binary (no image is pulled).
func TestEphemeralDocker(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker CLI")
	}
	if out, err := exec.Command(docker, "version").CombinedOutput(); err != nil {
		t.Skipf("docker daemon unavailable: %v\n%s", err, out)
	}
	image := "mailplane-test-mailpit:" + ident.Hex(6)
	ctxDir := t.TempDir()
	bin := staticMailpit(t)
	copyFile(t, bin, filepath.Join(ctxDir, "mailpit"))
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM scratch\nCOPY mailpit /mailpit\nENTRYPOINT [\"/mailpit\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(docker, "build", "-q", "-t", image, ctxDir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(docker, "rmi", "-f", image).Run() })

	data := filepath.Join(t.TempDir(), "mailpit")
	cfg := Config{Runtime: RuntimeDocker, Image: image, DataDir: data, Log: zerolog.Nop()}
	ctx := context.Background()
	e, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop() })
	name := e.running().name
	s, err := mailpit.New(mailpit.Config{HTTPSocket: e.HTTPSocket, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ns := testNS()
	raw := scrub(t, []byte("Subject: in a container\r\n\r\nhello\r\n"), testEnv.From, testEnv.To)
	ref, err := s.Put(ctx, ns, testEnv, raw)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, ns, ref, testEnv); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Get: %v", err)
	}
	inspect, err := exec.Command(docker, "inspect", "--format", "{{.HostConfig.NetworkMode}} {{.HostConfig.ReadonlyRootfs}} {{.Config.User}}", name).CombinedOutput()
	if err != nil || strings.TrimSpace(string(inspect)) != "none true "+strconv.Itoa(os.Getuid())+":"+strconv.Itoa(os.Getgid()) {
		t.Fatalf("container settings: %q %v", inspect, err)
	}
	e.Stop()
	if out, _ := exec.Command(docker, "ps", "-aq", "--filter", "name="+name).CombinedOutput(); len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("container %s left behind", name)
	}

	readsLast(t, cfg, ns, ref, raw, "the next container")
}

// running is the current run of Mailpit.
func (e *Run) running() *proc {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.current
}

// staticMailpit is a Mailpit binary that runs in an empty image: the test
// binary if it is static (make builds it so), else one built static here.
func staticMailpit(t *testing.T) string {
	bin := itest.Mailpit(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			dir := t.TempDir()
			cmd := exec.Command("go", "install", "github.com/axllent/mailpit@"+itest.MailpitVersion)
			cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("build a static mailpit: %v\n%s", err, out)
			}
			return filepath.Join(dir, "mailpit")
		}
	}
	return bin
}

func copyFile(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// tcpListeners lists the TCP sockets pid listens on.
func tcpListeners(t *testing.T, pid int) []string {
	inodes := map[string]bool{}
	fds, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	for _, fd := range fds {
		l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/net/" + table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && fields[3] == "0A" && inodes[fields[9]] {
				out = append(out, table+" "+fields[1])
			}
		}
		f.Close()
	}
	return out
}

var testEnv = msgstore.Envelope{From: "site@sender.example", To: []string{"user@example.com"}}

func testNS() msgstore.Namespace {
	return msgstore.Namespace{Name: ident.Namespace(), Tag: ident.StorageTag()}
}

func scrub(t *testing.T, raw []byte, from string, to []string) []byte {
	t.Helper()
	out, err := mailmsg.Scrub(context.Background(), raw, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readsLast starts Mailpit again with cfg (a restarted plane) and checks
// that it reads the last run's message ref, named what.
func readsLast(t *testing.T, cfg Config, ns msgstore.Namespace, ref string, raw []byte, what string) {
	t.Helper()
	ctx := context.Background()
	e, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	s, err := mailpit.New(mailpit.Config{HTTPSocket: e.HTTPSocket, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Get(ctx, ns, ref, testEnv); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Get from %s: %v", what, err)
	}
}
