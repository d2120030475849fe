// Package fdpass hands listening sockets from a supervisor to a surface
// over a Unix seqpacket socket (SCM_RIGHTS), as Postfix's master hands
// its daemons their sockets: the surface serves ports it could not bind
// itself, and never gains the right to bind.
//
// A message is three bytes, an operation and a port (big-endian), and for
// OpAdd exactly one file descriptor: the bound, listening socket. A
// listener of a trial's doors inside its network namespace follows with
// its kind and its door's key (a byte of length, then the key): port
// numbers repeat across namespaces, so the key names it; OpRemove with a
// key closes all of that door's listeners.
package fdpass

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Operations.
const (
	OpAdd    = '+' // serve this listener, bound to Port
	OpRemove = '-' // stop serving Port and close its listener
)

// Kinds of a door's listener. A listener without a door is a trial's SMTP
// port on the host.
const (
	KindHTTP    = 'h' // the mail API and bootstrap
	KindSMTP    = 's' // SMTP, plain (STARTTLS where the writer has TLS)
	KindSMTPTLS = 't' // SMTP with implicit TLS
	// KindIMAP is an agent's door, to the inbox: IMAP inside the agent's
	// network namespace, whose door key is the trial's namespace.
	KindIMAP = 'i'
)

// MaxDoorKey bounds a door's key.
const MaxDoorKey = 64

// Message is one instruction from the supervisor.
type Message struct {
	Op   byte
	Port int
	Kind byte     // with Door: KindHTTP, KindSMTP, KindSMTPTLS or KindIMAP
	Door string   // the key of the netns door the listener belongs to; empty: a host port
	File *os.File // OpAdd: the listener; the receiver owns it
	// Plain, with OpAdd, serves SMTP without AUTH: for a listener that
	// only its trial's own network namespace can reach. A listener in the
	// host's namespace requires AUTH (the writer's trialPortConfig).
	Plain bool
}

// Pair returns a connected seqpacket pair: the supervisor keeps the first,
// and hands the second to the child (exec.Cmd.ExtraFiles).
func Pair() (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	mine := os.NewFile(uintptr(fds[0]), "fdpass")
	defer mine.Close()
	c, err := net.FileConn(mine)
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "fdpass-child"), nil
}

// Conn opens the child's end, inherited as file descriptor fd.
func Conn(fd int) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), "fdpass")
	if f == nil {
		return nil, fmt.Errorf("fdpass: fd %d is not open", fd)
	}
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("fdpass: fd %d: %w", fd, err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("fdpass: fd %d is not a Unix socket", fd)
	}
	return uc, nil
}

// Add sends ln's socket, bound to port, over c.
func Add(c *net.UnixConn, port int, ln *net.TCPListener) error {
	f, err := ln.File()
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, err = c.WriteMsgUnix(header(OpAdd, port), unix.UnixRights(int(f.Fd())), nil)
	return err
}

// Remove tells the receiver to close port's listener.
func Remove(c *net.UnixConn, port int) error {
	_, err := c.Write(header(OpRemove, port))
	return err
}

// AddDoor sends ln, a listener of kind bound to port inside a network
// namespace, as one of door's.
func AddDoor(c *net.UnixConn, door string, kind byte, port int, ln *net.TCPListener) error {
	if !validDoor(door) || !validKind(kind) {
		return ErrMalformed
	}
	f, err := ln.File()
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, err = c.WriteMsgUnix(doorHeader(OpAdd, port, kind, door), unix.UnixRights(int(f.Fd())), nil)
	return err
}

// RemoveDoor tells the receiver to close every listener of door.
func RemoveDoor(c *net.UnixConn, door string) error {
	if !validDoor(door) {
		return ErrMalformed
	}
	_, err := c.Write(doorHeader(OpRemove, 0, 0, door))
	return err
}

func header(op byte, port int) []byte {
	b := []byte{op, 0, 0}
	binary.BigEndian.PutUint16(b[1:], uint16(port))
	return b
}

func doorHeader(op byte, port int, kind byte, door string) []byte {
	return append(append(header(op, port), kind, byte(len(door))), door...)
}

func validDoor(door string) bool { return door != "" && len(door) <= MaxDoorKey }

func validKind(kind byte) bool {
	return kind == KindHTTP || kind == KindSMTP || kind == KindSMTPTLS || kind == KindIMAP
}

// parse reads a message's bytes: a host port's three, or a door's.
func parse(b []byte) (Message, bool) {
	if len(b) < 3 {
		return Message{}, false
	}
	m := Message{Op: b[0], Port: int(binary.BigEndian.Uint16(b[1:3]))}
	if len(b) == 3 {
		return m, true
	}
	if len(b) < 5 || int(b[4]) != len(b)-5 {
		return Message{}, false
	}
	m.Kind, m.Door = b[3], string(b[5:])
	ok := validDoor(m.Door) && (validKind(m.Kind) || (m.Op == OpRemove && m.Kind == 0))
	return m, ok
}

// ErrMalformed is a message that is not one of the above.
var ErrMalformed = errors.New("fdpass: malformed message")

// Receive reads the next message. Any descriptor that does not belong to
// a well-formed OpAdd is closed.
func Receive(c *net.UnixConn) (Message, error) {
	buf := make([]byte, 5+MaxDoorKey+1) // one byte more: a longer message is malformed
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return Message{}, err
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return Message{}, ErrMalformed
		}
		for _, m := range msgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	if n == 0 && oobn == 0 {
		return Message{}, errors.New("fdpass: closed")
	}
	m, ok := parse(buf[:n])
	if !ok {
		closeAll()
		return Message{}, ErrMalformed
	}
	switch {
	case m.Op == OpAdd && len(fds) == 1 && m.Port > 0:
		m.File = os.NewFile(uintptr(fds[0]), fmt.Sprintf("port-%d", m.Port))
		return m, nil
	case m.Op == OpRemove && len(fds) == 0 && m.Door == "" && m.Port > 0:
		return m, nil
	case m.Op == OpRemove && len(fds) == 0 && m.Door != "" && m.Port == 0 && m.Kind == 0:
		return m, nil
	}
	closeAll()
	return Message{}, ErrMalformed
}
