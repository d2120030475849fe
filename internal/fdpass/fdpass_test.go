package fdpass

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// pair is a connected pair: the sending end (Pair's) and the receiving
// end, both closed when the test ends.
func pair(t *testing.T) (mine, recv *net.UnixConn) {
	t.Helper()
	mine, theirs, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mine.Close() })
	peer, err := net.FileConn(theirs)
	theirs.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	return mine, peer.(*net.UnixConn)
}

// TestHandOver: a listener bound here is served there: a client connects
// to the port and the receiving side accepts it; Remove names the port.
func TestHandOver(t *testing.T) {
	mine, recv := pair(t)

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
	mine, recv := pair(t)
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
		{"door key length wrong", []byte{OpAdd, 0, 25, KindSMTP, 3, 'k', 'e'}, true},
		{"door without a key", []byte{OpAdd, 0, 25, KindSMTP, 0}, true},
		{"door of an unknown kind", []byte{OpAdd, 0, 25, 'x', 1, 'k'}, true},
		{"door key over the limit", append([]byte{OpAdd, 0, 25, KindSMTP, MaxDoorKey + 1}, make([]byte, MaxDoorKey+1)...), true},
		{"door removal with a port", []byte{OpRemove, 0, 25, 0, 1, 'k'}, false},
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

// TestDoorHandOver: a door's listener arrives with its kind and key; port
// numbers may repeat across doors, and removing a door names its key.
func TestDoorHandOver(t *testing.T) {
	mine, recv := pair(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	key := strings.Repeat("K", MaxDoorKey)
	if err := AddDoor(mine, key, KindSMTPTLS, port, ln.(*net.TCPListener)); err != nil {
		t.Fatal(err)
	}
	m, err := Receive(recv)
	if err != nil || m.Op != OpAdd || m.Port != port || m.Kind != KindSMTPTLS || m.Door != key || m.File == nil {
		t.Fatalf("received %+v, %v", m, err)
	}
	m.File.Close()
	if err := RemoveDoor(mine, key); err != nil {
		t.Fatal(err)
	}
	if m, err := Receive(recv); err != nil || m.Op != OpRemove || m.Door != key || m.Port != 0 || m.File != nil {
		t.Fatalf("received %+v, %v", m, err)
	}
	if err := AddDoor(mine, "", KindSMTP, port, ln.(*net.TCPListener)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a door without a key: %v", err)
	}
	if err := RemoveDoor(mine, key+"K"); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a key over the limit: %v", err)
	}
}
