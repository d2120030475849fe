package mailmsg

import "strings"

// Field is one field of a message's top-level header, as a person reads
// it: the name as written, the value unfolded and decoded (RFC 2047).
type Field struct {
	Name, Value string
}

// Headers returns the top-level header's fields in their order (Parse's
// Headers). Like Parse it never fails: a header block over the limits is
// read up to them, and a line that is no field is left out.
func Headers(raw []byte) []Field { return Parse(raw).Headers }

// noBreaks turns a bare CR or LF left in an unfolded value (a line break
// that is no fold) into a space: a field's value is one line.
func noBreaks(v string) string {
	if !strings.ContainsAny(v, "\r\n") {
		return v
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, v)
}
