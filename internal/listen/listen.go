// Package listen opens a surface's TCP listeners: a host:port to bind, or
// a socket handed down by the parent ("fd:N", as mail-plane up does) or by
// systemd socket activation ("systemd:NAME", matched against
// LISTEN_FDNAMES).
package listen

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Listen returns a listener for spec.
func Listen(spec string) (net.Listener, error) {
	switch {
	case strings.HasPrefix(spec, "fd:"):
		n, err := strconv.Atoi(strings.TrimPrefix(spec, "fd:"))
		if err != nil || n < 3 {
			return nil, fmt.Errorf("listen %q: want fd:N with N >= 3", spec)
		}
		return fileListener(n, spec)
	case strings.HasPrefix(spec, "systemd:"):
		name := strings.TrimPrefix(spec, "systemd:")
		if pid, _ := strconv.Atoi(os.Getenv("LISTEN_PID")); pid != os.Getpid() {
			return nil, fmt.Errorf("listen %q: not started by systemd socket activation", spec)
		}
		count, _ := strconv.Atoi(os.Getenv("LISTEN_FDS"))
		names := strings.Split(os.Getenv("LISTEN_FDNAMES"), ":")
		for i := 0; i < count && i < len(names); i++ {
			if names[i] == name {
				return fileListener(3+i, spec)
			}
		}
		return nil, fmt.Errorf("listen %q: systemd passed no socket named %q", spec, name)
	}
	return net.Listen("tcp", spec)
}

func fileListener(fd int, spec string) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), spec)
	if f == nil {
		return nil, fmt.Errorf("listen %q: no such descriptor", spec)
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", spec, err)
	}
	return ln, nil
}
