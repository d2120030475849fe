// Package peercred reads the kernel's word on who is at the other end of a
// Unix socket (SO_PEERCRED) and checks it against per-role allow lists.
//
// Only numeric ids count: scratch images have no /etc/passwd, and a PID can
// be reused.
package peercred

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Cred is a peer's uid and gid.
type Cred struct {
	UID, GID uint32
}

// Of returns the credentials of the process that connected c.
func Of(c net.Conn) (Cred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Cred{}, errors.New("peercred: not a Unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var (
		ucred *unix.Ucred
		serr  error
	)
	if err := raw.Control(func(fd uintptr) {
		ucred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, err
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("peercred: SO_PEERCRED: %w", serr)
	}
	return Cred{UID: ucred.Uid, GID: ucred.Gid}, nil
}

// Rule admits a peer: an empty list admits any id; a non-empty one only the
// ids it names. Both lists must admit.
type Rule struct {
	UIDs, GIDs []uint32
}

// Admits reports whether the rule lets c in.
func (r Rule) Admits(c Cred) bool {
	return (len(r.UIDs) == 0 || slices.Contains(r.UIDs, c.UID)) &&
		(len(r.GIDs) == 0 || slices.Contains(r.GIDs, c.GID))
}

// Policy maps a role name to its rule. A role without a rule admits anyone
// the socket's file mode lets connect.
type Policy map[string]Rule

// AdmitsAny reports whether c may use a grant of at least one of roles:
// a peer no role admits is refused before its grant is looked up.
func (p Policy) AdmitsAny(c Cred, roles []string) bool {
	for _, role := range roles {
		r, ok := p[role]
		if !ok || r.Admits(c) {
			return true
		}
	}
	return false
}

// ParseAllow parses "ROLE=ID[,ID...]" entries into p, into UIDs or GIDs.
func (p Policy) ParseAllow(entries []string, gid bool, roles []string) error {
	for _, e := range entries {
		role, ids, ok := strings.Cut(e, "=")
		if !ok || !slices.Contains(roles, role) {
			return fmt.Errorf("allow entry %q: want ROLE=ID[,ID...] with ROLE one of %s", e, strings.Join(roles, ", "))
		}
		r := p[role]
		for _, s := range strings.Split(ids, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
			if err != nil {
				return fmt.Errorf("allow entry %q: %q is not a numeric id", e, s)
			}
			if gid {
				r.GIDs = append(r.GIDs, uint32(n))
			} else {
				r.UIDs = append(r.UIDs, uint32(n))
			}
		}
		p[role] = r
	}
	return nil
}
