package inboximap_test

import (
	"bufio"
	"errors"
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
