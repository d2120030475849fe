package supervisor

import (
	"net"
	"strconv"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/websitebench/mailplane/internal/itest"
)

// TestHookDialAimsOnlyAtTheDoorsNamespace: a netns trial's webhook dial
// is made only into a door the supervisor bound, only to an IP address or
// localhost; a host name (which would need a resolver, and could name
// anywhere) is refused before any socket is made. The door here is a
// real namespace with a listener on its loopback.
func TestHookDialAimsOnlyAtTheDoorsNamespace(t *testing.T) {
	_, path := itest.Netns(t, "hd")
	lns, id, err := listenIn(path, []int{0}, nsID{})
	if err != nil {
		t.Fatal(err)
	}
	defer lns[0].Close()
	port := strconv.Itoa(lns[0].Addr().(*net.TCPAddr).Port)
	h := newHookDialer(zerolog.Nop())
	h.add("door", path, id)
	for _, addr := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::ffff:127.0.0.1]:" + port} {
		fd, err := h.dial(dialRequest{Door: "door", Addr: addr})
		if err != nil {
			t.Errorf("dial %s: %v", addr, err)
			continue
		}
		unix.Close(fd)
	}
	// The host's loopback is not the namespace's: a listener there is
	// not reached.
	host, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	hostPort := strconv.Itoa(host.Addr().(*net.TCPAddr).Port)
	for _, addr := range []string{"example.com:80", "localhost.example.com:" + port, "ip6-localhost:" + port, "127.0.0.1", "", "127.0.0.1:" + hostPort, "[::1]:" + hostPort} {
		if fd, err := h.dial(dialRequest{Door: "door", Addr: addr}); err == nil {
			unix.Close(fd)
			t.Errorf("dial %q was made", addr)
		}
	}
	if _, err := h.dial(dialRequest{Door: "another", Addr: "127.0.0.1:" + port}); err != errNoDoor {
		t.Errorf("a door not bound: %v, want errNoDoor", err)
	}
	h.remove("door")
	if _, err := h.dial(dialRequest{Door: "door", Addr: "127.0.0.1:" + port}); err != errNoDoor {
		t.Errorf("a door removed: %v, want errNoDoor", err)
	}
}
