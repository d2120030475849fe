package serve

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestListenSocket: the edge makes the socket's directory 0750 whatever
// the umask and gives the socket its mode; it replaces a dead plane's
// socket file, and refuses a live plane's socket, a file that is no
// socket, and an abstract name.
func TestListenSocket(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "run", "plane.sock")
	ln, err := listenSocket(path, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("socket directory: %v %v, want 0750", fi.Mode(), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket: %v %v, want 0660", fi.Mode(), err)
	}
	if _, err := listenSocket(path, 0o660); err == nil || !strings.Contains(err.Error(), "another plane") {
		t.Errorf("a second plane on a live socket: %v", err)
	}
	// A dead plane leaves its socket file behind (a listener closed
	// without unlinking it, as a killed process would).
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	ln, err = listenSocket(path, 0o600)
	if err != nil {
		t.Fatalf("a dead plane's socket: %v", err)
	}
	ln.Close()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, "@plane", ""} {
		if ln, err := listenSocket(p, 0o600); err == nil {
			ln.Close()
			t.Errorf("listenSocket(%q) listens", p)
		}
	}
}
