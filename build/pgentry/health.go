package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// health asks the server at addr to let the role "mailplane" into its
// database, and is satisfied when the server answers with a SASL
// challenge: it is up, accepts connections, and pg_hba.conf admits the
// role by password. It then hangs up, which PostgreSQL takes as a client
// that went to fetch a password, and does not log.
func health(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	params := "user\x00" + role + "\x00database\x00" + database + "\x00\x00"
	msg := binary.BigEndian.AppendUint32(nil, uint32(8+len(params)))
	msg = binary.BigEndian.AppendUint32(msg, 3<<16) // protocol 3.0
	if _, err := c.Write(append(msg, params...)); err != nil {
		return err
	}
	var head [5]byte // type, then length including itself
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > 4+512 {
		return fmt.Errorf("answer of %d bytes", n)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	switch {
	case head[0] == 'R' && len(body) >= 4 && binary.BigEndian.Uint32(body) == 10: // AuthenticationSASL
		return nil
	case head[0] == 'E':
		// Fields: a type byte, a string; the message is 'M'.
		for _, f := range strings.Split(string(body), "\x00") {
			if strings.HasPrefix(f, "M") {
				return fmt.Errorf("refused: %s", f[1:])
			}
		}
	}
	return fmt.Errorf("unexpected answer %q", head[0])
}
