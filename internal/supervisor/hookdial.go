package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/websitebench/mailplane/internal/limits"
)

// Webhooks of a netns trial are delivered inside its network namespace,
// where its site listens. The hooks process cannot enter a namespace (it
// has no privilege, and should not); it asks the supervisor, over a
// seqpacket pair, for a connection to an address inside the namespace of
// a trial's door, and gets the connected socket's descriptor back. The
// supervisor dials only into the namespaces of doors it bound, checked by
// the namespace file's identity, and only to IP addresses.

// hookDialer serves the hooks process's dials.
type hookDialer struct {
	mu       sync.Mutex
	doors    map[string]doorNS // door key: its namespace
	inflight map[string]int    // door key: its dials in progress
	log      zerolog.Logger
}

type doorNS struct {
	path string
	id   nsID
}

func newHookDialer(log zerolog.Logger) *hookDialer {
	return &hookDialer{doors: map[string]doorNS{}, inflight: map[string]int{}, log: log}
}

func (h *hookDialer) add(key, path string, id nsID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.doors[key] = doorNS{path, id}
}

func (h *hookDialer) remove(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.doors, key)
}

// dialRequest is one dial the hooks process asks for; its answer names
// its ID, since dials are answered as they finish.
type dialRequest struct {
	ID   uint64 `json:"id"`
	Door string `json:"door"`
	Addr string `json:"addr"` // IP:port
}

// serve answers c's requests until it closes: "ok ID" with the socket,
// or "error ID: …". Each dial runs on its own: a candidate whose
// address never answers a connect holds its own dials for
// limits.WebhookTimeout, never another trial's; a door has at most
// limits.TrialWebhookDeliveries dials in progress.
func (h *hookDialer) serve(c *net.UnixConn) {
	buf := make([]byte, 1024)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		var req dialRequest
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			c.Write([]byte("error 0: not a dial request"))
			continue
		}
		if !h.begin(req.Door) {
			c.Write(fmt.Appendf(nil, "error %d: too many dials at once", req.ID))
			continue
		}
		go func() {
			defer h.end(req.Door)
			fd, err := h.dial(req)
			if err != nil {
				c.Write(fmt.Appendf(nil, "error %d: %v", req.ID, err))
				return
			}
			c.WriteMsgUnix(fmt.Appendf(nil, "ok %d", req.ID), unix.UnixRights(fd), nil)
			unix.Close(fd)
		}()
	}
}

func (h *hookDialer) begin(door string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inflight[door] >= limits.TrialWebhookDeliveries {
		return false
	}
	h.inflight[door]++
	return true
}

func (h *hookDialer) end(door string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inflight[door]--; h.inflight[door] <= 0 {
		delete(h.inflight, door)
	}
}

var errNoDoor = errors.New("no such door")

// dial connects to req.Addr inside req.Door's namespace: the socket is
// made there, on a thread that returns to the supervisor's namespace, and
// connected with limits.WebhookTimeout.
func (h *hookDialer) dial(req dialRequest) (int, error) {
	h.mu.Lock()
	d, ok := h.doors[req.Door]
	h.mu.Unlock()
	if !ok {
		return -1, errNoDoor
	}
	addr := req.Addr
	if host, port, err := net.SplitHostPort(addr); err == nil && strings.EqualFold(host, "localhost") {
		addr = net.JoinHostPort("127.0.0.1", port) // the namespace's loopback, as its /etc/hosts says
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return -1, errors.New("the address is not IP:port (nor localhost:port)")
	}
	ns, err := openNetns(d.path)
	if err != nil {
		return -1, err
	}
	defer ns.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &st); err != nil || (nsID{st.Dev, st.Ino}) != d.id {
		return -1, errNetnsChanged
	}
	family := unix.AF_INET
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, err, back := socketInside(ns, family)
		if back {
			runtime.UnlockOSThread()
		}
		done <- result{fd, err}
	}()
	r := <-done
	if r.err != nil {
		return -1, r.err
	}
	if err := connectTimeout(r.fd, ap, limits.WebhookTimeout); err != nil {
		unix.Close(r.fd)
		return -1, err
	}
	return r.fd, nil
}

// socketInside runs on a locked thread: it enters ns, makes a socket and
// returns to the thread's own namespace; back reports whether it did.
func socketInside(ns *os.File, family int) (fd int, err error, back bool) {
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return -1, err, true
	}
	defer home.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return -1, fmt.Errorf("cannot enter it: %w", err), true
	}
	fd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if berr := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); berr != nil {
		if err == nil {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("cannot return from it: %w", berr), false
	}
	return fd, err, true
}

// connectTimeout connects the non-blocking socket fd to ap within d.
func connectTimeout(fd int, ap netip.AddrPort, d time.Duration) error {
	var sa unix.Sockaddr
	if a := ap.Addr(); a.Is4() || a.Is4In6() {
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.Unmap().As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	}
	err := unix.Connect(fd, sa)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINPROGRESS) {
		return err
	}
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return errors.New("connect timed out")
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n > 0 {
			break
		}
	}
	soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return err
	}
	if soerr != 0 {
		return unix.Errno(soerr)
	}
	return nil
}
