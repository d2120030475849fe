// Package mailmsg handles the bytes of one message: checking addresses,
// scrubbing the headers a sender may not set, and parsing what was stored
// into the fields readers see. It is pure (no I/O) so that every surface
// and the plane can share it without linking any store.
package mailmsg

import (
	"net/mail"
	"strings"

	"github.com/websitebench/mailplane/internal/limits"
)

// ValidAddress reports whether s is a bare address (local@domain) that a
// mail store will accept as an envelope address: no display name, no angle
// brackets, no list, no white space or control characters. The reference
// let "Alice <a@example.com>" and "a@x,b@y" through and then failed at the
// store, reporting an outage; here they are simply not addresses.
func ValidAddress(s string) bool {
	if s == "" || len(s) > limits.AddressBytes || !strings.Contains(s, "@") {
		return false
	}
	if plainAddress(s) {
		return true // what mail.ParseAddress takes as it is, without its allocations
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r == '<' || r == '>' || r == ',' || r == '"' || r == '(' || r == ')' {
			return false
		}
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return false
	}
	local, domain, _ := strings.Cut(s, "@")
	return local != "" && domain != "" && !strings.Contains(domain, "@")
}

// plainAddress reports whether s is two RFC 5322 dot-atoms of ASCII
// joined by one "@": net/mail reads such an address as itself, with no
// display name, so ValidAddress holds, and Sender reads it without
// net/mail. Nearly every address is one.
func plainAddress(s string) bool {
	at := strings.IndexByte(s, '@')
	return at >= 0 && dotAtom(s[:at]) && dotAtom(s[at+1:])
}

// dotAtom reports whether s is ASCII atext, with single dots between its
// runs.
func dotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			if s[i-1] == '.' {
				return false
			}
		case c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>[]:;@\,"`, c) >= 0:
			return false
		}
	}
	return true
}

// SameAddress compares two addresses as recipient filters do: without
// regard to case.
func SameAddress(a, b string) bool { return strings.EqualFold(a, b) }
