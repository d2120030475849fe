// Package fdpass hands listening sockets from a supervisor to a surface
// over a Unix seqpacket socket (SCM_RIGHTS), as Postfix's master hands
// its daemons their sockets: the surface serves ports it could not bind
// itself, and never gains the right to bind.
//
// A message is three bytes, an operation and a port (big-endian), and for
// OpAdd exactly one file descriptor: the bound, listening socket.
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

// Message is one instruction from the supervisor.
type Message struct {
	Op   byte
	Port int
	File *os.File // OpAdd: the listener; the receiver owns it
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

func header(op byte, port int) []byte {
	b := []byte{op, 0, 0}
	binary.BigEndian.PutUint16(b[1:], uint16(port))
	return b
}

// ErrMalformed is a message that is not one of the above.
var ErrMalformed = errors.New("fdpass: malformed message")

// Receive reads the next message. Any descriptor that does not belong to
// a well-formed OpAdd is closed.
func Receive(c *net.UnixConn) (Message, error) {
	buf := make([]byte, 8)
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
	if n != 3 {
		closeAll()
		return Message{}, ErrMalformed
	}
	m := Message{Op: buf[0], Port: int(binary.BigEndian.Uint16(buf[1:3]))}
	switch {
	case m.Op == OpAdd && len(fds) == 1 && m.Port > 0:
		m.File = os.NewFile(uintptr(fds[0]), fmt.Sprintf("port-%d", m.Port))
		return m, nil
	case m.Op == OpRemove && len(fds) == 0 && m.Port > 0:
		return m, nil
	}
	closeAll()
	return Message{}, ErrMalformed
}
