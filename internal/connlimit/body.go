package connlimit

import (
	"errors"
	"io"
)

// ErrBodyTooLarge: a body went on past the most ReadBody was to hold.
var ErrBodyTooLarge = errors.New("connlimit: body too large")

// firstChunk is the buffer a body starts in.
const firstChunk = 4 << 10

// ReadBody reads r to its end into a buffer that grows (doubling) as the
// body arrives and never holds more than max bytes and one more: a body
// that stops short costs what it sent, not what it declared, and the
// growth leaves at most as much behind again. A body longer than max is
// ErrBodyTooLarge.
func ReadBody(r io.Reader, max int64) ([]byte, error) {
	limit := max + 1 // one more, to see a body that goes on
	buf := make([]byte, 0, min(firstChunk, limit))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= limit {
				return nil, ErrBodyTooLarge
			}
			buf = append(make([]byte, 0, min(2*int64(cap(buf)), limit)), buf...)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case int64(len(buf)) > max:
			return nil, ErrBodyTooLarge
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return nil, err
		}
	}
}
