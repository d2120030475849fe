package writer

import (
	"bytes"
	"encoding/base64"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/mailmsg"
)

// tagHeader carries Resend's tags in the stored message. It is not X-Tags,
// which the plane reserves for its own storage tag and scrubs.
const (
	tagHeader      = "X-Resend-Tag"
	tagHeaderLower = "x-resend-tag"
)

const (
	// maxLine is RFC 5322's line limit, without CRLF.
	maxLine = 998
	// base64Line is the length of a base64 body line (RFC 2045 §6.8).
	base64Line = 76
	// wordBytes is how many bytes of a subject go into one encoded-word:
	// 45 bytes are 60 base64 characters, and "=?utf-8?b?" + 60 + "?=" is 72,
	// inside RFC 2047's 75.
	wordBytes = 45
)

// compose builds the message for e. The stored text must come back exactly
// as it was sent (docs/reference.md §13, quirk 16), so each body part is written
// as-is (7bit) only when that is already valid mail (ASCII, CRLF line
// endings, short lines) and base64 otherwise: no line ending is ever
// rewritten. From and To are written for a well-formed message; the plane
// replaces them with the envelope (docs/reference.md §8.8), and Cc and Bcc are
// never written (the envelope carries them).
func compose(e *email, now time.Time) []byte {
	var b bytes.Buffer
	// The message in one allocation, not one per doubling: its headers
	// and, a base64 body being 4/3 its size and a CRLF every 76, each
	// body at most 7/5 its size.
	size := 1024
	for _, s := range []*string{e.Text, e.HTML} {
		if s != nil {
			size += len(*s) * 7 / 5
		}
	}
	for _, a := range e.Attachments {
		size += 512 + len(a.Content)*7/5
	}
	if e.Text == nil && e.HTML != nil {
		size += len(*e.HTML) // the text made from it
	}
	b.Grow(size)
	hdr := func(name, value string) {
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(value)
		b.WriteString("\r\n")
	}
	hdr("From", mailmsg.FromHeader(e.FromName, e.From))
	hdr("To", strings.Join(e.To, ", "))
	hdr("Subject", encodeSubject(e.Subject))
	b.WriteString("Date: ")
	b.Write(now.AppendFormat(b.AvailableBuffer(), time.RFC1123Z))
	b.WriteString("\r\n")
	hdr("Message-ID", "<"+ident.UUID()+"@"+messageIDDomain+">")
	if len(e.ReplyTo) > 0 {
		hdr("Reply-To", strings.Join(e.ReplyTo, ", "))
	}
	for _, t := range e.Tags {
		hdr(tagHeader, t.Name+"="+t.Value)
	}
	for _, h := range e.Headers {
		hdr(h.Name, h.Value)
	}
	hdr("MIME-Version", "1.0")
	if len(e.Attachments) > 0 {
		// The body, then each attachment, in one multipart/mixed.
		mixed := "=_" + ident.Hex(16)
		hdr("Content-Type", `multipart/mixed; boundary="`+mixed+`"`)
		b.WriteString("\r\n--" + mixed + "\r\n")
		writeBody(&b, e, mixed)
		b.WriteString("\r\n")
		writeAttachments(&b, mixed, e.Attachments)
		return b.Bytes()
	}
	writeBody(&b, e, "")
	return b.Bytes()
}

// writeBody writes the body entity of e (its Content-Type header, the
// empty line, and the text part, or the text and html alternatives) inside
// the multipart delimited by outer, or as the whole message's body when
// outer is empty.
func writeBody(b *bytes.Buffer, e *email, outer string) {
	text := ""
	if e.Text != nil {
		text = *e.Text
	} else if e.HTML != nil {
		text = mailmsg.HTMLText(*e.HTML)
	}
	if e.HTML == nil {
		writePart(b, "text/plain", text, outer)
		return
	}
	boundary := "=_" + ident.Hex(16)
	b.WriteString(`Content-Type: multipart/alternative; boundary="` + boundary + `"` + "\r\n\r\n")
	for _, p := range []struct{ mt, body string }{{"text/plain", text}, {"text/html", *e.HTML}} {
		b.WriteString("--" + boundary + "\r\n")
		writePart(b, p.mt, p.body, boundary)
		b.WriteString("\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
}

// messageIDDomain is the right side of the Message-IDs the writer mints.
const messageIDDomain = "websitebench.local"

// writePart writes a part's Content-Type and encoding headers, the empty
// line, and its body. Inside a multipart (boundary set) a 7bit body must
// not contain the delimiter.
func writePart(b *bytes.Buffer, mediaType, body, boundary string) {
	b.WriteString("Content-Type: " + mediaType + "; charset=utf-8\r\n")
	if sevenBit(body) && (boundary == "" || !strings.Contains(body, "--"+boundary)) {
		b.WriteString("Content-Transfer-Encoding: 7bit\r\n\r\n")
		b.WriteString(body)
		return
	}
	b.WriteString("Content-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString([]byte(body))
	for len(enc) > base64Line {
		b.WriteString(enc[:base64Line])
		b.WriteString("\r\n")
		enc = enc[base64Line:]
	}
	b.WriteString(enc)
}

// sevenBit reports whether s can stand in a message body unchanged: ASCII
// without control characters other than tab, every CR followed by LF and
// every LF preceded by CR, and no line longer than RFC 5322 allows.
func sevenBit(s string) bool {
	line := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\r':
			if i+1 >= len(s) || s[i+1] != '\n' {
				return false
			}
		case c == '\n':
			if i == 0 || s[i-1] != '\r' {
				return false
			}
			line = -1
		case c == '\t':
		case c < ' ' || c >= 0x7f:
			return false
		}
		if c != '\r' {
			line++
		}
		if line > maxLine {
			return false
		}
	}
	return true
}

// encodeSubject returns the Subject value that mailmsg.Parse decodes back
// to s exactly. Plain printable ASCII stays as it is; anything a reader
// would alter (non-ASCII, control characters, leading or trailing blanks,
// which unfolding trims, "=?" that would be taken for an encoded-word, or
// a line too long to stand unfolded) is written as RFC 2047 encoded-words,
// folded between words.
func encodeSubject(s string) string {
	plain := len(s)+len("Subject: ") <= maxLine && !strings.Contains(s, "=?") &&
		strings.TrimSpace(s) == s
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= ' ' && s[i] < 0x7f
	}
	if plain {
		return s
	}
	var words []string
	for len(s) > 0 {
		n := min(len(s), wordBytes)
		for n < len(s) && n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 {
			n = min(len(s), wordBytes)
		}
		words = append(words, "=?utf-8?b?"+base64.StdEncoding.EncodeToString([]byte(s[:n]))+"?=")
		s = s[n:]
	}
	return strings.Join(words, "\r\n ")
}
