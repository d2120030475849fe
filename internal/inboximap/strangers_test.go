package inboximap_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/limits"
)

// TestIMAPStrangersWaiting: a stranger opens many connections and sends
// each a line it never ends, holding them before any login. Only
// limits.IMAPPreauthConns of them are kept (the oldest closed for a new
// one), the inbox's memory grows by what those hold, and a trial's mail
// client still logs in. Before the bound, 3000 such connections took
// the inbox from 14 MB to 420 MB, and the process cap (thousands) let a
// stranger hold every connection slot of every trial.
func TestIMAPStrangersWaiting(t *testing.T) {
	const strangers = 3000
	s := itest.StartUp(t, "--data", t.TempDir(), "--trials", "1")
	acct := s.Bundle.Trials[0].InboxIMAP
	inbox := descendant(t, s.Cmd.Process.Pid, "mail-inbox")
	base := rssKiB(t, inbox)

	// A line of 2000 short atoms, not ended: a field per atom is kept.
	line := "a NOOP " + strings.Repeat("x ", 2000)
	addr := net.JoinHostPort(acct.Host, strconv.Itoa(acct.Port))
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range strangers {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		c.SetDeadline(time.Now().Add(itest.Bound))
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			t.Fatalf("greeting: %v", err)
		}
		if _, err := c.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	// 100 KB each would be 300 MB; what is held is the newest 128's, and
	// the garbage of those closed for them.
	if grown := rssKiB(t, inbox) - base; grown > 128<<10 {
		t.Errorf("the inbox grew by %d KiB for %d strangers (bound: 128 MiB)", grown, strangers)
	}
	// Every connection but the newest IMAPPreauthConns was closed: its
	// read ends (EOF or reset) where a held one's would wait.
	itest.Eventually(t, "the oldest strangers closed", itest.Bound, func() bool {
		for _, c := range held[:strangers-limits.IMAPPreauthConns] {
			c.SetReadDeadline(time.Now().Add(time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); isTimeout(err) {
				return false
			}
		}
		return true
	})
	for _, c := range held[strangers-limits.IMAPPreauthConns:] {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
			t.Fatalf("a newest stranger's connection ended: %v", err)
		}
	}

	var out read
	python(t, "login", acct, &out)
	if len(out.Login) == 0 || out.Login[0] != "OK" {
		t.Fatalf("the trial's login under the strangers: %v", out.Login)
	}
}

// isTimeout: a read that waited, on a connection still open.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// descendant is the pid of pid's descendant named name.
func descendant(t *testing.T, pid int, name string) int {
	t.Helper()
	for _, p := range itest.Descendants(t, pid) {
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "comm")); err == nil && strings.TrimSpace(string(b)) == name {
			return p
		}
	}
	t.Fatalf("no %s under %d", name, pid)
	return 0
}

// rssKiB is a process's resident memory, from /proc.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestIMAPCommandOfLiterals: a logged-in client's command is bounded
// with its literals (limits.IMAPCommandBytes). Each literal ends a line,
// so the line bound alone let one SEARCH of literals go on for as long
// as the client sent (300 MiB took the inbox to 380 MB); a search with
// two literals is still answered.
func TestIMAPCommandOfLiterals(t *testing.T) {
	s := itest.StartUp(t, "--data", t.TempDir(), "--trials", "1")
	acct := s.Bundle.Trials[0].InboxIMAP
	pem, err := os.ReadFile(acct.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	login := func() (*tls.Conn, *bufio.Reader) {
		c, err := tls.Dial("tcp", net.JoinHostPort(acct.Host, strconv.Itoa(acct.TLSPort)), &tls.Config{RootCAs: roots, ServerName: acct.Host})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(itest.Bound))
		r := bufio.NewReader(c)
		fmt.Fprintf(c, "a LOGIN agent %s\r\nb SELECT INBOX\r\n", acct.Password)
		for line := ""; !strings.HasPrefix(line, "b "); {
			if line, err = r.ReadString('\n'); err != nil || strings.HasPrefix(line, "a NO") {
				t.Fatalf("login: %q %v", line, err)
			}
		}
		return c, r
	}

	c, r := login()
	if _, err := fmt.Fprintf(c, "c SEARCH TEXT {3+}\r\nabc TEXT {5+}\r\nhello\r\n"); err != nil {
		t.Fatal(err)
	}
	for line := ""; !strings.HasPrefix(line, "c "); {
		if line, err = r.ReadString('\n'); err != nil {
			t.Fatalf("a search with two literals: %v", err)
		}
		if strings.HasPrefix(line, "c ") && !strings.HasPrefix(line, "c OK") {
			t.Fatalf("a search with two literals: %q", line)
		}
	}

	// 1 MiB of one command, not ended: the server closes the connection
	// (a read that waits means it is still reading the command).
	c, r = login()
	chunk := " TEXT {2000+}\r\n" + strings.Repeat("z", 2000)
	io.WriteString(c, "d SEARCH")
	for range (1 << 20) / len(chunk) {
		if _, err := io.WriteString(c, chunk); err != nil {
			break
		}
	}
	if rest, err := io.ReadAll(r); isTimeout(err) || strings.HasPrefix(string(rest), "d ") || strings.Contains(string(rest), "\nd ") {
		t.Errorf("a command of 1 MiB (bound %d bytes): %q, %v", limits.IMAPCommandBytes, rest, err)
	}
}
