package fdpass

import (
	"errors"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHandOver: a listener bound here is served there: a client connects
// to the port and the receiving side accepts it; Remove names the port.
func TestHandOver(t *testing.T) {
	mine, theirs, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	peer, err := net.FileConn(theirs)
	theirs.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	recv := peer.(*net.UnixConn)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := Add(mine, port, ln.(*net.TCPListener)); err != nil {
		t.Fatal(err)
	}
	ln.Close() // the receiver's copy keeps the socket listening

	m, err := Receive(recv)
	if err != nil || m.Op != OpAdd || m.Port != port || m.File == nil {
		t.Fatalf("received %+v, %v", m, err)
	}
	served, err := net.FileListener(m.File)
	m.File.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial the handed-over port: %v", err)
	}
	c.Close()
	if a, err := served.Accept(); err != nil {
		t.Fatalf("accept on the handed-over listener: %v", err)
	} else {
		a.Close()
	}

	if err := Remove(mine, port); err != nil {
		t.Fatal(err)
	}
	if m, err := Receive(recv); err != nil || m.Op != OpRemove || m.Port != port || m.File != nil {
		t.Fatalf("received %+v, %v", m, err)
	}
}

// TestMalformed: anything but the two messages is refused, and a
// descriptor that came with it is closed, not leaked.
func TestMalformed(t *testing.T) {
	mine, theirs, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	peer, _ := net.FileConn(theirs)
	theirs.Close()
	defer peer.Close()
	recv := peer.(*net.UnixConn)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	open := func() int {
		fds, _ := os.ReadDir("/proc/self/fd")
		return len(fds)
	}
	before := open()
	for _, c := range []struct {
		name string
		data []byte
		fd   bool
	}{
		{"add without a descriptor", []byte{OpAdd, 0, 25}, false},
		{"remove with a descriptor", []byte{OpRemove, 0, 25}, true},
		{"unknown operation", []byte{'?', 0, 25}, false},
		{"port zero", []byte{OpAdd, 0, 0}, true},
		{"too long", []byte{OpAdd, 0, 25, 0}, true},
	} {
		var oob []byte
		if c.fd {
			oob = unix.UnixRights(int(f.Fd()))
		}
		if _, _, err := mine.WriteMsgUnix(c.data, oob, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := Receive(recv); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", c.name, err)
		}
	}
	if after := open(); after != before {
		t.Fatalf("%d descriptors open before, %d after: the refused messages' leaked", before, after)
	}
}
