package plane

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"strconv"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// The plane reads its RPC's HTTP/1.1 itself: the one shape of request the
// wire has (docs/rpc.md: a POST, a Content-Length body, a Bearer grant,
// kept-alive connections), and nothing else. net/http's server cost a
// send about a tenth of the plane's CPU outside the call (a header map,
// a parsed URL, a context and a background reader per request); its
// clients, any HTTP/1.1 client among them, are answered as before.

// The bounds of a request's head. headLineBytes is the reader's buffer: a
// request line or header line longer than it is refused, as is a head
// longer than maxHeaderBytes, before more is read.
const (
	headLineBytes  = 4 << 10
	maxHeaderBytes = 16 << 10
)

// head is a request's line and the headers the plane reads; every other
// header is checked for form and skipped. Its byte fields point into buf,
// which is kept between the requests of a connection.
type head struct {
	post      bool // the method is POST
	http10    bool // HTTP/1.0: the connection closes unless asked to stay
	close     bool // the connection closes after the answer
	keepAlive bool // Connection: keep-alive (an HTTP/1.0 caller's ask)
	expect    bool // Expect: 100-continue
	length    int64
	path      []byte // the target up to its query
	grant     []byte // Authorization's value
	deadline  []byte // Mailplane-Deadline's value
	buf       []byte
}

// headError is a head the plane refuses: its answer, after which the
// connection is closed, since what follows in it cannot be framed.
type headError struct {
	status int
	err    *rpc.Error
}

func (e *headError) Error() string { return e.err.Message }

var (
	errHeadTooLarge = &headError{http.StatusRequestHeaderFieldsTooLarge,
		rpc.Errorf(rpc.CodeFrameTooLarge, "request head exceeds %d bytes, or one of its lines %d", maxHeaderBytes, headLineBytes)}
	errHeadMalformed = &headError{http.StatusBadRequest, rpc.Errorf(rpc.CodeBadRequest, "malformed HTTP/1.1 request")}
	errNoLength      = &headError{http.StatusLengthRequired, rpc.Errorf(rpc.CodeBadRequest, "a call's body is sent with a Content-Length")}
)

// readHead reads one request's head from br into h. It returns a
// *headError for a head the plane answers and refuses, or the reader's
// error (the connection ended or timed out: nothing to answer). Each byte
// is looked at a bounded number of times, whatever the head holds.
func readHead(br *bufio.Reader, h *head) error {
	*h = head{length: -1, buf: h.buf[:0]}
	size := 0
	line := func() ([]byte, error) {
		l, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errHeadTooLarge
		}
		if err != nil {
			return nil, err // the connection ended or timed out, mid-head or before it
		}
		if size += len(l); size > maxHeaderBytes {
			return nil, errHeadTooLarge
		}
		l = l[:len(l)-1]
		if n := len(l); n > 0 && l[n-1] == '\r' {
			l = l[:n-1]
		}
		return l, nil
	}
	l, err := line()
	if err != nil {
		return err
	}
	if err := h.requestLine(l); err != nil {
		return err
	}
	var seen uint8 // which of the read headers came already
	for {
		l, err := line()
		if err != nil {
			return err
		}
		if len(l) == 0 {
			break
		}
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok || !isToken(name) {
			return errHeadMalformed // a folded line (obs-fold) too: its name starts with a space
		}
		value = bytes.Trim(value, " \t")
		if !isFieldValue(value) {
			return errHeadMalformed
		}
		field := fieldOf(name)
		if field == 0 {
			continue
		}
		if seen&field != 0 {
			return errHeadMalformed // two of a header the plane reads: which one counts is ambiguous
		}
		seen |= field
		switch field {
		case fieldAuthorization:
			h.grant = h.keep(value)
		case fieldDeadline:
			h.deadline = h.keep(value)
		case fieldLength:
			n, ok := parseLength(value)
			if !ok {
				return errHeadMalformed
			}
			h.length = n
		case fieldTransferEncoding:
			return errNoLength
		case fieldConnection:
			h.connection(value)
		case fieldExpect:
			if !bytes.EqualFold(value, []byte("100-continue")) {
				return &headError{http.StatusExpectationFailed, rpc.Errorf(rpc.CodeBadRequest, "unsupported expectation")}
			}
			h.expect = true
		}
	}
	if h.http10 && !h.keepAlive {
		h.close = true
	}
	return nil
}

// requestLine reads "POST /v1/method HTTP/1.1".
func (h *head) requestLine(l []byte) error {
	method, rest, ok := bytes.Cut(l, []byte(" "))
	if !ok || !isToken(method) {
		return errHeadMalformed
	}
	target, proto, ok := bytes.Cut(rest, []byte(" "))
	if !ok || len(target) == 0 || target[0] != '/' || bytes.IndexByte(proto, ' ') >= 0 {
		return errHeadMalformed
	}
	switch string(proto) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		h.http10 = true
	default:
		return &headError{http.StatusHTTPVersionNotSupported, rpc.Errorf(rpc.CodeBadRequest, "the plane speaks HTTP/1.1")}
	}
	for _, c := range target {
		if c <= ' ' || c == 0x7f {
			return errHeadMalformed
		}
	}
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	h.post = string(method) == http.MethodPost
	h.path = h.keep(target)
	return nil
}

// connection reads Connection's tokens: close, or keep-alive for an
// HTTP/1.0 caller.
func (h *head) connection(v []byte) {
	for len(v) > 0 {
		var tok []byte
		tok, v, _ = bytes.Cut(v, []byte(","))
		tok = bytes.Trim(tok, " \t")
		switch {
		case bytes.EqualFold(tok, []byte("close")):
			h.close = true
		case bytes.EqualFold(tok, []byte("keep-alive")):
			h.keepAlive = true
		}
	}
}

// keep copies b into h's buffer: the reader's buffer it points into is
// overwritten by the next line.
func (h *head) keep(b []byte) []byte {
	start := len(h.buf)
	h.buf = append(h.buf, b...)
	return h.buf[start:len(h.buf):len(h.buf)]
}

// The headers the plane reads, as bits of a set.
const (
	fieldAuthorization uint8 = 1 << iota
	fieldDeadline
	fieldLength
	fieldTransferEncoding
	fieldConnection
	fieldExpect
)

func fieldOf(name []byte) uint8 {
	switch {
	case bytes.EqualFold(name, []byte("Authorization")):
		return fieldAuthorization
	case bytes.EqualFold(name, []byte(rpc.DeadlineHeader)):
		return fieldDeadline
	case bytes.EqualFold(name, []byte("Content-Length")):
		return fieldLength
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		return fieldTransferEncoding
	case bytes.EqualFold(name, []byte("Connection")):
		return fieldConnection
	case bytes.EqualFold(name, []byte("Expect")):
		return fieldExpect
	}
	return 0
}

// parseLength reads a Content-Length: digits only, at most 18 of them
// (no overflow); MaxRequestBytes is checked by the caller.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// isFieldValue is RFC 9110's field-value: no control bytes but tabs.
func isFieldValue(b []byte) bool {
	for _, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// isToken is RFC 9110's token: a method's or a header name's form.
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c >= 0x80 || !tokenChars[c] {
			return false
		}
	}
	return true
}

var tokenChars = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// appendAnswerHead is an answer's status line and headers: Connection
// says close when the connection ends after it, else keep-alive when
// keepAlive (an HTTP/1.0 caller must be told).
func appendAnswerHead(b []byte, status, length int, close, keepAlive, allow bool) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(length), 10)
	switch {
	case close:
		b = append(b, "\r\nConnection: close"...)
	case keepAlive:
		b = append(b, "\r\nConnection: keep-alive"...)
	}
	if allow {
		b = append(b, "\r\nAllow: POST"...)
	}
	return append(b, "\r\n\r\n"...)
}
