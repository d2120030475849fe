package mailmsg

import (
	"net/mail"
	"strings"
	"unicode"

	"github.com/websitebench/mailplane/internal/limits"
)

// The sender's display name, as mail clients show it: decoded (RFC 2047),
// cleaned of what could hide or reorder text, and never in place of the
// address. The plane keeps the name a sender wrote in From (Scrub) and
// always pairs it with the envelope's address, so the name is the one part
// of the sender a sender chooses freely.

// addressParser reads a From header with the charsets Parse knows.
var addressParser = mail.AddressParser{WordDecoder: &wordDecoder}

// Sender returns the cleaned display name and the address of the first
// address of a From header's value (unfolded), or "" for both when it is
// not an address list.
func Sender(from string) (name, address string) {
	if from == "" || len(from) > limits.HeaderBytes {
		return "", ""
	}
	if plainAddress(from) {
		return "", from // what net/mail reads it as, without its allocations
	}
	list, err := addressParser.ParseList(from)
	if err != nil || len(list) == 0 {
		return "", ""
	}
	return CleanName(list[0].Name, list[0].Address), list[0].Address
}

// CleanName makes a decoded display name fit to show: control and format
// characters (bidirectional overrides, zero-width marks) removed, runs of
// white space made one space, trimmed, and cut to limits.DisplayNameRunes.
// A name that only repeats address is no name.
func CleanName(name, address string) string {
	var b strings.Builder
	space, n := false, 0
	for _, r := range name {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar:
			continue
		}
		if n >= limits.DisplayNameRunes {
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
		n++
	}
	out := b.String()
	if strings.EqualFold(out, address) {
		return ""
	}
	return out
}

// FromHeader is the value of the From header the plane stores: address
// (the envelope sender) with the name, if any, encoded as RFC 5322 and
// RFC 2047 ask.
func FromHeader(name, address string) string {
	if name == "" {
		return address
	}
	// mail.Address quotes or encodes the name; the address is the
	// envelope's, already valid, and written as it is.
	quoted := (&mail.Address{Name: name}).String()
	return strings.TrimSuffix(quoted, "<@>") + "<" + address + ">"
}

// ShowSender is how the agent's views show a sender: "Name <address>",
// or the address alone. A name that could pass for an address (it holds
// an "@" or angle brackets) is shown after the real address, in quotes,
// so that the address the mail came from is what is read first.
func ShowSender(name, address string) string {
	switch {
	case name == "":
		return address
	case strings.ContainsAny(name, "@<>＠﹫＜＞"):
		return address + ` (name: "` + name + `")`
	}
	return name + " <" + address + ">"
}
