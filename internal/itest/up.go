package itest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// Stack is a running `mail-plane up --json`: the plane and the three
// shared surfaces, with the bundle it printed.
type Stack struct {
	*Proc
	Bundle rpc.StackBundle
	// console reads the plane's metrics (Metric), made on first use.
	console *rpc.Client
}

// StackBundle is what up --json prints.
type StackBundle = rpc.StackBundle

// StartUp runs mail-plane up --json with args and waits for its bundle.
func StartUp(t testing.TB, args ...string) *Stack {
	t.Helper()
	cmd := exec.Command(Bin(t, "mail-plane"), append([]string{"up", "--json"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &Stack{Proc: StartCmd(t, cmd, "mail-plane up")}
	line := ReadLine(t, stdout, 60*time.Second)
	if err := json.Unmarshal([]byte(line), &s.Bundle); err != nil {
		t.Fatalf("up's bundle %q: %v\n%s", line, err, s.Output())
	}
	return s
}

// Admin is a client of the stack's plane with its admin grant.
func (s *Stack) Admin(t testing.TB) *rpc.Client {
	t.Helper()
	g, err := rpc.ReadSecretFile(s.Bundle.AdminGrantFile)
	if err != nil {
		t.Fatal(err)
	}
	c := rpc.NewClient(s.Bundle.PlaneSocket, g)
	t.Cleanup(c.Close)
	return c
}

// Processes counts the stack's processes: up itself and its descendants.
func (s *Stack) Processes(t testing.TB) int {
	t.Helper()
	return len(Descendants(t, s.Cmd.Process.Pid)) + 1
}

// Descendants lists the pids of every living descendant of pid, read
// from /proc.
func Descendants(t testing.TB, pid int) []int {
	t.Helper()
	parent := map[int]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after
		// its closing parenthesis.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for a := parent[p]; a > 1; a = parent[a] {
			if a == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// SendSMTP sends msg to port of a stack as a candidate configured with its
// bundle b would: STARTTLS, verifying the writer against the bundle's CA,
// and AUTH PLAIN (user "resend", Resend's convention) when password is
// not empty.
func SendSMTP(b rpc.Bundle, port int, password, msg string) error {
	pem, err := os.ReadFile(b.CAFile)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c, err := smtp.Dial("127.0.0.1:" + strconv.Itoa(port))
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.StartTLS(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}); err != nil {
		return err
	}
	if password != "" {
		if err := c.Auth(smtp.PlainAuth("", "resend", password, "127.0.0.1")); err != nil {
			return err
		}
	}
	return Deliver(c, rpc.CandidateSender, msg)
}

// Deliver sends msg from from to agent@example.com over c, a session
// already past its TLS and AUTH, and quits.
func Deliver(c *smtp.Client, from, msg string) error {
	if err := c.Mail(from); err != nil {
		return err
	}
	if err := c.Rcpt("agent@example.com"); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(msg)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// Require returns the path of tool (a name on PATH, or an absolute path)
// for a test that cannot run without it: under CI (CI set) a missing tool
// fails the test, since CI installs every tool its tests need and a
// missing one is a broken set-up, not a reason to pass; elsewhere the test
// is skipped, loudly.
func Require(t testing.TB, tool string) string {
	t.Helper()
	if p := find(tool); p != "" {
		return p
	}
	missing(t, tool, "the test DID NOT RUN")
	t.SkipNow()
	return ""
}

// Optional is Require for a part of a test: elsewhere than under CI, a
// missing tool only skips that part (Optional returns ""), loudly.
func Optional(t testing.TB, tool string) string {
	t.Helper()
	if p := find(tool); p != "" {
		return p
	}
	missing(t, tool, "that part of the test DID NOT RUN")
	return ""
}

func find(tool string) string {
	if filepath.IsAbs(tool) {
		if _, err := os.Stat(tool); err == nil {
			return tool
		}
		return ""
	}
	p, _ := exec.LookPath(tool)
	return p
}

func missing(t testing.TB, tool, what string) {
	t.Helper()
	msg := fmt.Sprintf("%s is not installed (make deps installs it): %s", tool, what)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	fmt.Fprintf(os.Stderr, "\n!!! %s: %s\n\n", t.Name(), msg)
	t.Log(msg)
}
