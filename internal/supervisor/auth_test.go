package supervisor_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"math"
	"net"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// exchange is what a client without a credential sees of one SMTP port:
// the greeting, EHLO's reply, MAIL's reply, and how long the three took.
type exchange struct {
	greeting, ehlo, mail string
	took                 time.Duration
}

// unauthenticated connects to port, says EHLO and tries MAIL without AUTH.
// ok is false when nothing listens on port.
func unauthenticated(t *testing.T, port int) (exchange, bool) {
	t.Helper()
	start := time.Now()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err != nil {
		return exchange{}, false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	var e exchange
	e.greeting = readReply(r)
	fmt.Fprintf(c, "EHLO probe.example\r\n")
	e.ehlo = readReply(r)
	fmt.Fprintf(c, "MAIL FROM:<%s>\r\n", rpc.CandidateSender)
	e.mail = readReply(r)
	e.took = time.Since(start)
	if e.greeting == "" {
		return e, false // a listener closed under the client
	}
	return e, true
}

// readReply reads one SMTP reply, all its lines, as sent.
func readReply(r *bufio.Reader) string {
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil || len(line) < 4 || line[3] == ' ' {
			return b.String()
		}
	}
}

// writerPorts lists the TCP ports the stack's writer listens on, from
// /proc: its descriptors' sockets that are in the LISTEN state.
func writerPorts(t *testing.T, s *itest.Stack) []int {
	t.Helper()
	for _, pid := range itest.Descendants(t, s.Cmd.Process.Pid) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !strings.HasSuffix(strings.SplitN(string(cmd), "\x00", 2)[0], "mail-writer") {
			continue
		}
		inodes := map[string]bool{}
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
			}
		}
		tcp, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
		if err != nil {
			t.Fatal(err)
		}
		var ports []int
		for _, line := range strings.Split(string(tcp), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			_, hex, _ := strings.Cut(f[1], ":")
			p, _ := strconv.ParseInt(hex, 16, 32)
			ports = append(ports, int(p))
		}
		sort.Ints(ports)
		return ports
	}
	t.Fatal("no mail-writer under up")
	return nil
}

// TestTrialPortsRequireAuth: on an `up` stack, a client without a
// credential is answered the same, byte for byte, on a live trial's port,
// a spare port, a closed trial's port (still served) and the shared port:
// the same greeting and EHLO, and 530 to MAIL, in about the same time;
// nothing is stored. AUTH with trial
// A's token on trial B's port is 535 (as a wrong token is) with net/smtp,
// smtplib and swaks, and stores nothing in either; B's own credential, as
// the bundle names it, delivers into B.
func TestTrialPortsRequireAuth(t *testing.T) {
	s := itest.StartUp(t, "--trials", "3", "--quota-messages", "0")
	a, b, closed := episode{s.Bundle.Trials[0]}, episode{s.Bundle.Trials[1]}, s.Bundle.Trials[2]
	for _, e := range []episode{a, b} {
		env := e.b.CandidateEnvironment
		if env[wbenv.SMTPUsername] != "resend" || env[wbenv.SMTPPassword] != env[wbenv.MailAPIToken] {
			t.Fatalf("bundle's SMTP credential: %q / %q", env[wbenv.SMTPUsername], env[wbenv.SMTPPassword])
		}
	}
	var spare int
	for _, p := range writerPorts(t, s) {
		used := p == s.Bundle.SharedSMTPPort || p == closed.SMTPPort || p == b.b.SMTPTLSPort || strings.HasSuffix(s.Bundle.WriterURL, ":"+strconv.Itoa(p)) ||
			strings.HasSuffix(b.b.WriterHTTPSURL, ":"+strconv.Itoa(p))
		for _, tr := range s.Bundle.Trials {
			used = used || p == tr.SMTPPort
		}
		if !used {
			spare = p
			break
		}
	}
	if spare == 0 {
		t.Fatalf("no spare SMTP port among the writer's %v", writerPorts(t, s))
	}
	// A closed trial's port, while the writer still serves it: up (the
	// supervisor, which would take it back) is stopped across the close,
	// so the writer serves the port for no trial until it resumes.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := s.Admin(t)
	if err := syscall.Kill(s.Cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	itest.WaitStopped(t, s.Cmd.Process.Pid)
	err := admin.TrialClose(ctx, closed.Namespace)
	closedEx, closedServed := unauthenticated(t, closed.SMTPPort)
	ownAfterClose := itest.SendSMTP(closed, closed.SMTPPort, closed.CandidateEnvironment[wbenv.SMTPPassword], "Subject: closed\r\n\r\nx\r\n")
	syscall.Kill(s.Cmd.Process.Pid, syscall.SIGCONT)
	if err != nil {
		t.Fatal(err)
	}
	if !closedServed {
		t.Fatal("the closed trial's port was not served while up was stopped")
	}
	if ownAfterClose == nil || !strings.Contains(ownAfterClose.Error(), "535") {
		t.Fatalf("AUTH with the closed trial's own token on its port: %v, want 535", ownAfterClose)
	}

	ref, ok := unauthenticated(t, s.Bundle.SharedSMTPPort)
	if !ok || !strings.HasPrefix(ref.mail, "530 5.7.0 ") || !strings.HasPrefix(ref.greeting, "220 ") {
		t.Fatalf("shared port: %+v", ref)
	}
	ports := map[string]int{"A's port": a.b.SMTPPort, "B's port": b.b.SMTPPort, "a spare port": spare, "the shared port": s.Bundle.SharedSMTPPort}
	times := map[string][]time.Duration{}
	for range 15 {
		for what, port := range ports {
			got, ok := unauthenticated(t, port)
			if !ok || got.greeting != ref.greeting || got.ehlo != ref.ehlo || got.mail != ref.mail {
				t.Fatalf("%s answers\n%q %q %q\nthe shared port\n%q %q %q", what, got.greeting, got.ehlo, got.mail, ref.greeting, ref.ehlo, ref.mail)
			}
			times[what] = append(times[what], got.took)
		}
	}
	if closedEx.greeting != ref.greeting || closedEx.ehlo != ref.ehlo || closedEx.mail != ref.mail {
		t.Fatalf("the closed trial's port answers\n%q %q %q\nthe shared port\n%q %q %q", closedEx.greeting, closedEx.ehlo, closedEx.mail, ref.greeting, ref.ehlo, ref.mail)
	}
	t.Logf("MAIL without AUTH: %q on every port, the closed trial's too", strings.TrimSpace(ref.mail))
	// Timing: the medians of the whole exchange, which asks the plane
	// nothing, are within a few milliseconds of each other.
	var medians []time.Duration
	for what, ds := range times {
		slices.Sort(ds)
		medians = append(medians, ds[len(ds)/2])
		t.Logf("%s: median exchange %v", what, ds[len(ds)/2])
	}
	slices.Sort(medians)
	if spread := medians[len(medians)-1] - medians[0]; spread > 5*time.Millisecond {
		t.Errorf("the medians of the exchange differ by %v between ports", spread)
	}

	// A's token on B's port: 535 with every client, as a wrong token; B's
	// credential from B's bundle delivers into B.
	tokenA := a.b.CandidateEnvironment[wbenv.SMTPPassword]
	for _, password := range []string{tokenA, "not-a-token"} {
		err := itest.SendSMTP(b.b, b.b.SMTPPort, password, "Subject: cross\r\n\r\nx\r\n")
		if err == nil || !strings.Contains(err.Error(), "535") {
			t.Fatalf("net/smtp AUTH on B's port with %s: %v, want 535", map[bool]string{true: "A's token", false: "a wrong token"}[password == tokenA], err)
		}
	}
	py := fmt.Sprintf(`
import os, smtplib
def send(password, subject):
    with smtplib.SMTP("127.0.0.1", %d, timeout=10) as s:
        if password is not None:
            s.login(os.environ["WEBSITEBENCH_SMTP_USERNAME"], password)
        s.sendmail(os.environ["WEBSITEBENCH_SMTP_FROM"], ["agent@example.com"], "Subject: " + subject + "\r\n\r\nx\r\n")
for password, want in ((None, 530), (%q, 535)):
    try:
        send(password, "cross py")
        raise SystemExit("delivered with %%r" %% (password,))
    except (smtplib.SMTPSenderRefused, smtplib.SMTPAuthenticationError) as e:
        assert e.smtp_code == want, (password, e)
send(os.environ["WEBSITEBENCH_SMTP_PASSWORD"], "own py")
`, b.b.SMTPPort, tokenA)
	cmd := exec.Command("/usr/bin/python3", "-c", py)
	cmd.Env = append(os.Environ(), envList(b.b.CandidateEnvironment)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("smtplib: %v\n%s", err, out)
	}
	if swaks := itest.Optional(t, "swaks"); swaks != "" {
		base := []string{"--server", "127.0.0.1:" + strconv.Itoa(b.b.SMTPPort), "--from", rpc.CandidateSender, "--to", "agent@example.com",
			"--timeout", "10"}
		out, err := exec.Command(swaks, append(base, "--header", "Subject: cross swaks", "--auth", "PLAIN", "--auth-user", "resend", "--auth-password", tokenA)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "<** 535") {
			t.Fatalf("swaks with A's token on B's port: %v\n%s", err, out)
		}
		out, err = exec.Command(swaks, append(base, "--header", "Subject: plain swaks")...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "<** 530") {
			t.Fatalf("swaks without AUTH on B's port: %v\n%s", err, out)
		}
		out, err = exec.Command(swaks, append(base, "--header", "Subject: own swaks", "--auth", "LOGIN", "--auth-user", b.b.CandidateEnvironment[wbenv.SMTPUsername],
			"--auth-password", b.b.CandidateEnvironment[wbenv.SMTPPassword])...).CombinedOutput()
		if err != nil {
			t.Fatalf("swaks with B's credential: %v\n%s", err, out)
		}
	}
	if _, got := a.subjects(t, a.b.ReadCapability); len(got) != 0 {
		t.Fatalf("A holds %q", got)
	}
	if _, got := b.subjects(t, b.b.ReadCapability); strings.Join(got, "|") != "own py|own swaks" {
		t.Fatalf("B holds %q, want only its own two", got)
	}
}

// TestAuthFailuresCloseTheSession: the third failed AUTH of a session is
// answered 421 and the session is closed, so a fourth attempt finds it
// closed, in the clear and under STARTTLS; failures slow the listener's
// next refusals, while a correct AUTH by another client is not slowed.
func TestAuthFailuresCloseTheSession(t *testing.T) {
	s := itest.StartUp(t, "--trials", "1")
	b := s.Bundle.Trials[0]
	addr := "127.0.0.1:" + strconv.Itoa(b.SMTPPort)
	plain := func(pw string) string {
		return "AUTH PLAIN " + base64.StdEncoding.EncodeToString([]byte("\x00resend\x00"+pw)) + "\r\n"
	}

	// 535, 535, 421, then the session is closed: in the clear, and under
	// STARTTLS (where the 421 is the last TLS record).
	var failed []time.Duration
	for _, secure := range []bool{false, true} {
		c, r := session(t, b, addr, secure)
		for i, want := range []string{"535 5.7.8 ", "535 5.7.8 ", "421 4.7.0 "} {
			start := time.Now()
			fmt.Fprint(c, plain(fmt.Sprintf("wrong-%d", i)))
			if got := readReply(r); !strings.HasPrefix(got, want) {
				t.Fatalf("failed AUTH %d (TLS %v) answered %q, want %q", i+1, secure, got, want)
			}
			failed = append(failed, time.Since(start))
		}
		fmt.Fprint(c, plain(b.CandidateEnvironment[wbenv.SMTPPassword]))
		if got, err := r.ReadString('\n'); err == nil {
			t.Fatalf("the fourth AUTH (TLS %v) was answered %q, want a closed session", secure, got)
		}
		c.Close()
	}
	// Six failures in a row on one listener: each waits longer than the
	// one before it did, by the listener's count of recent failures.
	t.Logf("failed AUTH answers: %v", failed)
	if last := failed[len(failed)-1]; last < 4*smtpd.AuthFailureStep {
		t.Errorf("the sixth failure on the listener was answered after %v, want at least %v", last, 4*smtpd.AuthFailureStep)
	}
	// Another client's correct AUTH is not slowed, and delivers. The best
	// of three, so that one stall of a loaded machine is not taken for the
	// failures' delay (which a correct AUTH never waits).
	fastest := time.Duration(math.MaxInt64)
	for range 3 {
		start := time.Now()
		cl, err := smtp.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Auth(smtp.PlainAuth("", "resend", b.CandidateEnvironment[wbenv.SMTPPassword], "127.0.0.1")); err != nil {
			t.Fatalf("a correct AUTH after the failures: %v", err)
		}
		fastest = min(fastest, time.Since(start))
		cl.Close()
	}
	if fastest >= failed[len(failed)-1] {
		t.Errorf("a correct AUTH after six failures took at best %v, as long as a failure (%v)", fastest, failed[len(failed)-1])
	} else {
		t.Logf("a correct AUTH after six failures: %v at best of 3", fastest)
	}
	if err := smtpTo(b, b.SMTPPort, "after failures"); err != nil {
		t.Fatalf("a send with the bundle's credential: %v", err)
	}
}

// TestSMTPPlainPorts: `up --smtp-plain-ports` warns at start, and a trial's
// port then takes plain SMTP without AUTH, into that trial; the shared
// port still requires AUTH.
func TestSMTPPlainPorts(t *testing.T) {
	s := itest.StartUp(t, "--trials", "1", "--smtp-plain-ports")
	e := episode{s.Bundle.Trials[0]}
	if !s.WaitOutput("--smtp-plain-ports: trial SMTP ports take mail without AUTH", itest.Bound) {
		t.Fatalf("no warning at start:\n%s", s.Output())
	}
	if err := itest.SendSMTP(e.b, e.b.SMTPPort, "", "Subject: plain\r\n\r\nhello\r\n"); err != nil {
		t.Fatalf("plain SMTP on the trial's port: %v", err)
	}
	if err := itest.SendSMTP(e.b, s.Bundle.SharedSMTPPort, "", "Subject: shared\r\n\r\nhello\r\n"); err == nil || !strings.Contains(err.Error(), "530") {
		t.Fatalf("plain SMTP on the shared port: %v, want 530", err)
	}
	if _, got := e.subjects(t, e.b.ReadCapability); strings.Join(got, "|") != "plain" {
		t.Fatalf("the trial holds %q", got)
	}
}

// session opens an SMTP session on addr and says EHLO, after STARTTLS
// (verified against the bundle's CA) when secure.
func session(t *testing.T, b rpc.Bundle, addr string, secure bool) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	readReply(r)
	fmt.Fprintf(c, "EHLO probe.example\r\n")
	readReply(r)
	if !secure {
		return c, r
	}
	fmt.Fprintf(c, "STARTTLS\r\n")
	if got := readReply(r); !strings.HasPrefix(got, "220 ") {
		t.Fatalf("STARTTLS: %q", got)
	}
	pem, err := os.ReadFile(b.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	t.Cleanup(func() { tc.Close() })
	r = bufio.NewReader(tc)
	fmt.Fprintf(tc, "EHLO probe.example\r\n")
	readReply(r)
	return tc, r
}

// envList is env as NAME=value entries.
func envList(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
