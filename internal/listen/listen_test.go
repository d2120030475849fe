package listen

import (
	"net"
	"os"
	"strconv"
	"testing"
)

func TestListen(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	for _, bad := range []string{"fd:x", "fd:2", "systemd:http", "nohost"} {
		if l, err := Listen(bad); err == nil {
			l.Close()
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestSystemdNames: a socket handed down under its LISTEN_FDNAMES name is
// found by that name, for this process only.
func TestSystemdNames(t *testing.T) {
	parent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	f, err := parent.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Put the descriptor where systemd would: at 3 + its index (here 4, the
	// second of two named sockets).
	if err := dup2(int(f.Fd()), 4); err != nil {
		t.Skipf("cannot place a descriptor at 4: %v", err)
	}
	t.Setenv("LISTEN_FDS", "2")
	t.Setenv("LISTEN_FDNAMES", "smtp:http")
	t.Setenv("LISTEN_PID", "1")
	if _, err := Listen("systemd:http"); err == nil {
		t.Fatal("accepted sockets meant for another process")
	}
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	ln, err := Listen("systemd:http")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ln.Addr().String() != parent.Addr().String() {
		t.Fatalf("got %v, want %v", ln.Addr(), parent.Addr())
	}
	if _, err := Listen("systemd:nope"); err == nil {
		t.Fatal("found a socket that was not passed")
	}
}
