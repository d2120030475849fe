package connlimit

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
)

// serve accepts from a listener with lim and echoes until the
// connection ends.
func serve(t *testing.T, lim Limits) (*Listener, string) {
	t.Helper()
	return serveWith(t, lim, func(c net.Conn) { io.Copy(c, c) })
}

// serveWith accepts from a listener with lim and hands each connection to
// handle, which it closes when handle returns.
func serveWith(t *testing.T, lim Limits, handle func(net.Conn)) (*Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(ln, lim)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return l, ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

// echo reports whether the connection still answers.
func echo(c net.Conn) bool {
	if _, err := c.Write([]byte("x")); err != nil {
		return false
	}
	b := make([]byte, 1)
	_, err := io.ReadFull(c, b)
	return err == nil
}

func TestCap(t *testing.T) {
	l, addr := serve(t, Limits{MaxConns: 2})
	a, b := dial(t, addr), dial(t, addr)
	if !echo(a) || !echo(b) {
		t.Fatal("connections within the cap do not answer")
	}
	c := dial(t, addr)
	if echo(c) {
		t.Fatal("a third connection over a cap of 2 answers")
	}
	itest.Eventually(t, "one shed connection", itest.Bound, func() bool { return l.Shed() == 1 })
	a.Close()
	itest.Eventually(t, "a freed place", itest.Bound, func() bool { return l.Open() == 1 })
	if d := dial(t, addr); !echo(d) {
		t.Fatal("a freed place is not reused")
	}
}

func TestIdle(t *testing.T) {
	l, addr := serve(t, Limits{Idle: 600 * time.Millisecond})
	c := dial(t, addr)
	for range 5 { // activity keeps it open past the idle bound
		if !echo(c) {
			t.Fatal("an active connection was closed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1200 * time.Millisecond)
	if echo(c) {
		t.Fatal("an idle connection stayed open")
	}
	itest.Eventually(t, "the place freed", itest.Bound, func() bool { return l.Open() == 0 })
}

func TestLifetime(t *testing.T) {
	l, addr := serve(t, Limits{Lifetime: 300 * time.Millisecond})
	c := dial(t, addr)
	start := time.Now()
	for echo(c) {
		if time.Since(start) > 2*time.Second {
			t.Fatal("a busy connection outlived its lifetime")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("closed after %v, before its lifetime", d)
	}
	itest.Eventually(t, "the place freed", itest.Bound, func() bool { return l.Open() == 0 })
}

func TestRemaining(t *testing.T) {
	c := &Conn{born: time.Now().Add(-10 * time.Second), lifetime: 30 * time.Second}
	if r := c.Remaining(); r > 20*time.Second || r < 19*time.Second {
		t.Fatalf("Remaining = %v", r)
	}
	if (&Conn{}).Remaining() < time.Hour {
		t.Fatal("no lifetime must mean no end")
	}
}
