package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/websitebench/mailplane/internal/fdpass"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Binding inside a network namespace. A socket belongs to the namespace
// of the thread that creates it, so the supervisor creates a door's
// sockets on a thread locked to its goroutine, moved into the namespace
// with setns(2), and moves the thread back before unlocking it; a thread
// that cannot move back is never unlocked, and dies with its goroutine.
// The supervisor needs CAP_SYS_ADMIN (setns), CAP_NET_ADMIN if the
// namespace's loopback is down (bringing it up), and read access to the
// namespace file.

// Refusals a netns door is reported with (rpc.NetnsDoor's Error).
var (
	errNetnsMissing    = errors.New("no such file")
	errNetnsNotNet     = errors.New("not a network namespace file")
	errNetnsPermission = errors.New("permission denied: the supervisor needs read access to the file and CAP_SYS_ADMIN to enter it")
	errNetnsLoopback   = errors.New("the namespace's loopback is down and cannot be brought up (the supervisor needs CAP_NET_ADMIN)")
	// Doors on the host's own loopback would take plain SMTP from every
	// local process: there a trial's port asks for AUTH.
	errNetnsHost = errors.New("it is the stack's own network namespace, which every local process shares")
	// On a restart, the path may have come to name another namespace (a
	// reused /proc/PID/ns/net does that by itself): doors bound there
	// would take that namespace's plain SMTP into the trial.
	errNetnsChanged = errors.New("the path now names another network namespace than the trial was opened in")
)

// nsID is a namespace file's identity: a namespace is one inode of nsfs.
type nsID struct{ dev, ino uint64 }

// sealReason is the rpc.Seal… reason for a restored door's error.
func sealReason(err error) string {
	switch {
	case errors.Is(err, errNetnsMissing), errors.Is(err, errNetnsNotNet):
		return rpc.SealNetnsGone
	case errors.Is(err, errNetnsChanged), errors.Is(err, errNetnsHost):
		return rpc.SealNetnsChanged
	case errors.Is(err, unix.EADDRINUSE):
		return rpc.SealPortTaken
	}
	return rpc.SealDoorsUnbound
}

// listenIn binds one TCP listener per port (0: any free one) on
// rpc.NetnsDoorHost inside the network namespace that the file at path
// names, bringing its loopback up if it is down, and answers that
// namespace's identity. With want (a restored door's), it binds only if
// the file is still that namespace. On any error nothing stays bound.
func listenIn(path string, ports []int, want nsID) ([]*net.TCPListener, nsID, error) {
	ns, err := openNetns(path)
	if err != nil {
		return nil, nsID{}, err
	}
	defer ns.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &st); err != nil {
		return nil, nsID{}, fmt.Errorf("cannot stat it: %w", err)
	}
	id := nsID{dev: st.Dev, ino: st.Ino}
	if want.ino != 0 && id != want {
		return nil, id, fmt.Errorf("%w (inode %d on device %d, the trial's was inode %d on device %d)", errNetnsChanged, id.ino, id.dev, want.ino, want.dev)
	}
	type result struct {
		lns []*net.TCPListener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		lns, err, back := bindInside(ns, ports)
		if back {
			runtime.UnlockOSThread()
		} // else: the thread is in the namespace still, and exits with this goroutine
		done <- result{lns, err}
	}()
	r := <-done
	return r.lns, id, r.err
}

// openNetns opens a namespace file and checks that it names a network
// namespace.
func openNetns(path string) (*os.File, error) {
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errNetnsMissing
	case errors.Is(err, fs.ErrPermission):
		return nil, errNetnsPermission
	case err != nil:
		return nil, fmt.Errorf("cannot open it: %w", err)
	}
	kind, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	if err != nil || kind != unix.CLONE_NEWNET {
		f.Close()
		return nil, errNetnsNotNet
	}
	if same, err := sameFile(f, "/proc/self/ns/net"); err != nil || same {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("cannot compare it with the stack's own: %w", err)
		}
		return nil, errNetnsHost
	}
	return f, nil
}

// sameFile reports whether f is the file at path (a namespace is one
// inode of nsfs).
func sameFile(f *os.File, path string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		return false, err
	}
	if err := unix.Stat(path, &b); err != nil {
		return false, err
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// bindInside runs on a locked thread: it enters ns, binds, and returns to
// the thread's own namespace; back reports whether it did.
func bindInside(ns *os.File, ports []int) (lns []*net.TCPListener, err error, back bool) {
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("cannot open the supervisor's own network namespace: %w", err), true
	}
	defer home.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, errNetnsPermission, true
		}
		return nil, fmt.Errorf("cannot enter it: %w", err), true
	}
	lns, err = bindDoors(ports)
	if berr := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); berr != nil {
		for _, ln := range lns {
			ln.Close()
		}
		return nil, fmt.Errorf("cannot return from it: %w", berr), false
	}
	return lns, err, true
}

// bindDoors brings the current namespace's loopback up and binds on it.
func bindDoors(ports []int) ([]*net.TCPListener, error) {
	if err := loopbackUp(); err != nil {
		return nil, err
	}
	var lns []*net.TCPListener
	for _, port := range ports {
		ln, err := net.Listen("tcp4", net.JoinHostPort(rpc.NetnsDoorHost, strconv.Itoa(port)))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("cannot bind %s port %d in it: %w", rpc.NetnsDoorHost, port, err)
		}
		lns = append(lns, ln.(*net.TCPListener))
	}
	return lns, nil
}

// loopbackUp sets the loopback interface up (ip link set lo up), as a
// namespace made by `ip netns add` starts with it down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cannot make a socket in it: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("it has no loopback: %w", err)
	}
	flags := ifr.Uint16()
	if flags&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(flags | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return errNetnsLoopback
	}
	return nil
}

// bindDoor binds a trial's doors inside its namespace (at d's ports, or
// free ones), hands them to the writer, and answers d with the ports or
// with why nothing of it is served.
func (k *portKeeper) bindDoor(d rpc.NetnsDoor) rpc.NetnsDoor {
	if d.Agent {
		return k.bindAgentDoor(d)
	}
	kinds := []byte{fdpass.KindSMTP, fdpass.KindHTTP}
	ports := []int{d.SMTPPort, d.HTTPPort}
	if k.tls {
		kinds, ports = append(kinds, fdpass.KindSMTPTLS), append(ports, d.SMTPTLSPort)
	}
	lns, id, err := listenIn(d.Netns, ports, nsID{d.NetnsDev, d.NetnsIno})
	if err != nil {
		d.Error, d.Reason = err.Error(), sealReason(err)
		return d
	}
	d.NetnsDev, d.NetnsIno = id.dev, id.ino
	defer func() {
		for _, ln := range lns {
			ln.Close() // the writer holds its own copies
		}
	}()
	// SMTP first: the HTTP door's bootstrap names the SMTP port.
	for i, ln := range lns {
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		if err := fdpass.AddDoor(k.ctl, d.Key, kinds[i], ports[i], ln); err != nil {
			fdpass.RemoveDoor(k.ctl, d.Key)
			d.Error = "cannot hand the doors to the writer"
			k.log.Error().Err(err).Msg("port control: a door not handed over")
			return d
		}
	}
	d.SMTPPort, d.HTTPPort = ports[0], ports[1]
	if k.tls {
		d.SMTPTLSPort = ports[2]
	}
	if k.dialer != nil {
		k.dialer.add(d.Key, d.Netns, id)
	}
	return d
}

// bindAgentDoor binds an agent's doors inside its namespace (IMAP, and
// the pages and MCP over HTTP) and hands them to the inbox, which serves
// them for the trial the key names.
func (k *portKeeper) bindAgentDoor(d rpc.NetnsDoor) rpc.NetnsDoor {
	kinds := []byte{fdpass.KindIMAP, fdpass.KindHTTP}
	lns, id, err := listenIn(d.Netns, []int{d.IMAPPort, d.HTTPPort}, nsID{d.NetnsDev, d.NetnsIno})
	if err != nil {
		d.Error, d.Reason = err.Error(), sealReason(err)
		return d
	}
	d.NetnsDev, d.NetnsIno = id.dev, id.ino
	ports := make([]int, len(lns))
	for i, ln := range lns {
		defer ln.Close() // the inbox holds its own copies
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		if err := fdpass.AddDoor(k.inboxCtl, d.Key, kinds[i], ports[i], ln); err != nil {
			fdpass.RemoveDoor(k.inboxCtl, d.Key)
			d.Error = "cannot hand the doors to the inbox"
			k.log.Error().Err(err).Msg("port control: an agent's door not handed over")
			return d
		}
	}
	d.IMAPPort, d.HTTPPort = ports[0], ports[1]
	return d
}

// doors does one ports.sync answer's door work: binds the doors asked for
// (a restored trial's at its ports) and closes those released, and puts
// the outcome in the next request. A restored trial whose namespace is
// gone, or is another one now, is not served, never moved to the host:
// the plane seals it.
func (k *portKeeper) doors(resp rpc.PortsSyncResponse, req *rpc.PortsSyncRequest) {
	for _, d := range resp.Doors {
		got := k.bindDoor(d)
		if got.Error != "" {
			k.log.Error().Str("namespace", d.Namespace).Str("netns", d.Netns).Str("error", got.Error).
				Str("reason", got.Reason).Msg("cannot bind a trial's doors in its network namespace; they are not served")
		}
		req.Doors = append(req.Doors, got)
	}
	for _, key := range resp.CloseDoors {
		if k.dialer != nil {
			k.dialer.remove(key)
		}
		// A key is the writer's or the inbox's: each ignores the other's.
		if err := errors.Join(fdpass.RemoveDoor(k.ctl, key), fdpass.RemoveDoor(k.inboxCtl, key)); err != nil {
			k.log.Error().Err(err).Msg("port control: the writer or the inbox is gone")
			return
		}
		req.DoorsClosed = append(req.DoorsClosed, key)
	}
}
