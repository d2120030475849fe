package mailpit

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/websitebench/mailplane/internal/ident"
)

// What the store sends Mailpit, and how it finds the plane's exact bytes
// again in what Mailpit gives back ("mail as sent").
//
// Mailpit keeps the DATA it receives, changed in three ways only (v1.33.1,
// internal/smtpd): it prepends headers (Received; Message-ID when there is
// none; Bcc for envelope recipients missing from the headers); it replaces
// Return-Path unless the first one already names the envelope sender; and,
// unless it runs with --smtp-strict-rfc-headers, it rewrites every CR CR LF
// as CR LF. SMTP adds one rule of its own: DATA ends after a line break.
//
// So the store sends
//
//	X-Tags: <tag> EOL  Return-Path: <from> EOL  raw  [CRLF]
//
// (our Return-Path comes first, so Mailpit leaves the message's own alone;
// everything Mailpit prepends lands before our X-Tags), and the ref it
// returns records raw's length, whether it added the CRLF, where raw had CR
// CR LF, and a digest of raw. The plane's bytes are then the known-length
// tail of what Mailpit holds, preceded by our own header block, and checked
// against the digest.

// These three are loops rather than regexps with counted repetitions,
// which compile to one copy of their class per repetition and are built at
// start (ident.Word).

// validTag says whether s is a private storage tag the plane mints per
// namespace: ^wb-[0-9a-f]{48}$.
func validTag(s string) bool {
	h, ok := strings.CutPrefix(s, "wb-")
	if !ok || len(h) != 48 {
		return false
	}
	for i := range len(h) {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// validID says whether s is a Mailpit message ID as its SMTP reply names
// it: ^[A-Za-z0-9_-]{1,64}$.
func validID(s string) bool { return ident.Word(s, 1, 64, "_-") }

// queuedID finds the ID in Mailpit's "250 2.0.0 Ok: queued as <ID>": the
// first "queued as " followed by an ID character, and up to 64 of them
// (what the regexp queued as ([A-Za-z0-9_-]{1,64}) finds); "" if none.
func queuedID(s string) string {
	const marker = "queued as "
	for {
		i := strings.Index(s, marker)
		if i < 0 {
			return ""
		}
		s = s[i+len(marker):]
		n := 0
		for n < min(len(s), 64) && ident.Word(s[n:n+1], 1, 1, "_-") {
			n++
		}
		if n > 0 {
			return s[:n]
		}
	}
}

var crcrlf = []byte("\r\r\n")

// lineEnding is the line ending raw uses (that of its first line), CRLF
// when it has none: our header block matches it.
func lineEnding(raw []byte) string {
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		if i > 0 && raw[i-1] == '\r' {
			return "\r\n"
		}
		return "\n"
	}
	return "\r\n"
}

// header is the block the store puts in front of raw.
func header(tag, from, eol string) []byte {
	return []byte("X-Tags: " + tag + eol + "Return-Path: <" + from + ">" + eol)
}

// digest identifies raw in a ref: the first 16 bytes of its SHA-256.
func digest(raw []byte) [16]byte {
	sum := sha256.Sum256(raw)
	var d [16]byte
	copy(d[:], sum[:])
	return d
}

// ref is how the plane's ledger finds a message in Mailpit.
type ref struct {
	id   string
	size int      // len(raw)
	sum  [16]byte // digest(raw)
	tail bool     // the store added CRLF after raw
	// rewrites are the offsets, in raw (+ CRLF), of each CR CR LF that
	// Mailpit rewrites when it is not strict, left to right without
	// overlap as bytes.ReplaceAll finds them.
	rewrites []int
}

const refVersion = "mp1"

// String encodes r as mp1:ID:SIZE:SUM:TAIL[:REWRITES], REWRITES being the
// offsets' deltas as unsigned varints in unpadded base64url.
func (r ref) String() string {
	var b strings.Builder
	b.WriteString(refVersion + ":" + r.id + ":" + strconv.Itoa(r.size) + ":" + hex.EncodeToString(r.sum[:]) + ":")
	if r.tail {
		b.WriteString("1")
	} else {
		b.WriteString("0")
	}
	if len(r.rewrites) > 0 {
		var buf []byte
		prev := 0
		for _, p := range r.rewrites {
			buf = binary.AppendUvarint(buf, uint64(p-prev))
			prev = p
		}
		b.WriteString(":" + base64.RawURLEncoding.EncodeToString(buf))
	}
	return b.String()
}

var errBadRef = errors.New("mailpit: malformed message reference")

// parseRef reads a ref written by String. The ledger is trusted, but a ref
// is still checked whole: a bad one is "not found", never a panic.
func parseRef(s string) (ref, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 5 || len(parts) > 6 || parts[0] != refVersion || !validID(parts[1]) {
		return ref{}, errBadRef
	}
	r := ref{id: parts[1]}
	size, err := strconv.Atoi(parts[2])
	if err != nil || size < 0 || size > MaxResponseBytes || parts[2] != strconv.Itoa(size) {
		return ref{}, errBadRef
	}
	r.size = size
	sum, err := hex.DecodeString(parts[3])
	if err != nil || len(sum) != len(r.sum) || parts[3] != hex.EncodeToString(sum) {
		return ref{}, errBadRef
	}
	copy(r.sum[:], sum)
	switch parts[4] {
	case "0":
	case "1":
		r.tail = true
	default:
		return ref{}, errBadRef
	}
	if len(parts) == 6 {
		buf, err := base64.RawURLEncoding.DecodeString(parts[5])
		if err != nil || len(buf) == 0 {
			return ref{}, errBadRef
		}
		limit := size
		if r.tail {
			limit += 2
		}
		prev := 0
		for first := true; len(buf) > 0; first = false {
			d, n := binary.Uvarint(buf)
			// Matches do not overlap: each is at least 3 bytes after the last.
			if n <= 0 || d > uint64(limit) || (!first && d < 3) {
				return ref{}, errBadRef
			}
			buf = buf[n:]
			p := prev + int(d)
			if p+3 > limit {
				return ref{}, errBadRef
			}
			r.rewrites = append(r.rewrites, p)
			prev = p
		}
	}
	return r, nil
}

// frame is one message ready for DATA.
type frame struct {
	data []byte // dot-stuffed, ending in the final ".\r\n"
	size int    // bytes Mailpit counts against its size limit (unstuffed, without the final dot)
	ref  ref    // all but the ID, which Mailpit assigns
}

// newFrame builds what the store sends for raw: our header block, raw, a
// CRLF when raw does not end a line, dot-stuffed (RFC 5321 §4.5.2), then
// the end-of-data line.
func newFrame(tag, from string, raw []byte) frame {
	h := header(tag, from, lineEnding(raw))
	tail := len(raw) == 0 || raw[len(raw)-1] != '\n'
	r := ref{size: len(raw), sum: digest(raw), tail: tail}
	body := raw
	if tail {
		body = make([]byte, 0, len(raw)+2)
		body = append(append(body, raw...), '\r', '\n')
	}
	for i := 0; ; {
		j := bytes.Index(body[i:], crcrlf)
		if j < 0 {
			break
		}
		r.rewrites = append(r.rewrites, i+j)
		i += j + len(crcrlf)
	}
	out := make([]byte, 0, len(h)+len(body)+len(body)/64+3)
	out = append(out, h...)
	for rest := body; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		if line[0] == '.' {
			out = append(out, '.')
		}
		out = append(out, line...)
		rest = rest[len(line):]
	}
	out = append(out, '.', '\r', '\n')
	return frame{data: out, size: len(h) + len(body), ref: r}
}

var errMismatch = errors.New("mailpit: the stored message is not the one this reference names")

// unwrap finds the plane's bytes in stored, the message as Mailpit returns
// it: first as a strict Mailpit keeps it, then with the CR CR LF that a
// lenient one rewrote put back. Either way the bytes must follow our header
// block with tag and from, and match the digest.
func unwrap(stored []byte, r ref, tag, from string) ([]byte, error) {
	n := r.size
	if r.tail {
		n += 2
	}
	if body, ok := tailOf(stored, n); ok {
		if raw, ok := check(stored[:len(stored)-n], body, r, tag, from); ok {
			return raw, nil
		}
	}
	if len(r.rewrites) > 0 {
		if body, ok := tailOf(stored, n-len(r.rewrites)); ok {
			if full, ok := restore(body, r.rewrites); ok {
				if raw, ok := check(stored[:len(stored)-len(body)], full, r, tag, from); ok {
					return raw, nil
				}
			}
		}
	}
	return nil, errMismatch
}

func tailOf(b []byte, n int) ([]byte, bool) {
	if n < 0 || n > len(b) {
		return nil, false
	}
	return b[len(b)-n:], true
}

// check verifies that body (raw plus the CRLF the store added) is what r
// names and that before (everything Mailpit stored before it) ends with our
// header block on a line of its own.
func check(before, body []byte, r ref, tag, from string) ([]byte, bool) {
	raw := body
	if r.tail {
		if !bytes.HasSuffix(body, []byte("\r\n")) {
			return nil, false
		}
		raw = body[:len(body)-2]
	}
	if len(raw) != r.size || digest(raw) != r.sum {
		return nil, false
	}
	h := header(tag, from, lineEnding(raw))
	if !bytes.HasSuffix(before, h) {
		return nil, false
	}
	if k := len(before) - len(h); k > 0 && before[k-1] != '\n' {
		return nil, false
	}
	return raw, true
}

// restore undoes a lenient Mailpit's CR CR LF → CR LF rewrite: the i-th
// rewrite, at offset p in the original, is the CR LF at p-i in body.
func restore(body []byte, rewrites []int) ([]byte, bool) {
	out := make([]byte, 0, len(body)+len(rewrites))
	from := 0
	for i, p := range rewrites {
		at := p - i
		if at < from || at+2 > len(body) || body[at] != '\r' || body[at+1] != '\n' {
			return nil, false
		}
		out = append(out, body[from:at]...)
		out = append(out, '\r')
		from = at
	}
	return append(out, body[from:]...), true
}
