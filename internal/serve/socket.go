package serve

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// listenSocket creates the socket's directory (0750) and binds a Unix socket at
// path with the given mode. A stale socket file left by a dead plane is
// replaced; a live one is an error. The broker is handed the listener:
// directories and modes are the process's edge, not the broker's.
func listenSocket(path string, mode os.FileMode) (net.Listener, error) {
	if strings.HasPrefix(path, "@") || path == "" {
		return nil, fmt.Errorf("socket %q: a filesystem path is required (abstract sockets have no permissions)", path)
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// Created 0750 whatever the umask: the surfaces' group traverses it.
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("socket directory: %w", err)
		}
		if err := os.Chmod(dir, 0o750); err != nil {
			return nil, fmt.Errorf("socket directory: %w", err)
		}
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another plane is already listening", path)
		}
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
