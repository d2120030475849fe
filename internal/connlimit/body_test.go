package connlimit

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestReadBody: a body of up to max bytes is read whole, whatever the
// reads' sizes; one byte more is ErrBodyTooLarge; the buffer never holds
// more than max+1 bytes, and a short body's buffer is at most twice its
// size (or the first chunk); a read error is returned as it came.
func TestReadBody(t *testing.T) {
	const max = 100 << 10
	for _, n := range []int{0, 1, firstChunk, firstChunk + 1, max - 1, max} {
		body := bytes.Repeat([]byte("x"), n)
		for name, r := range map[string]io.Reader{"whole": bytes.NewReader(body), "byte by byte": iotest.OneByteReader(bytes.NewReader(body))} {
			got, err := ReadBody(r, max)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("%d bytes, %s: %d bytes, %v", n, name, len(got), err)
			}
			if cap(got) > max+1 || cap(got) > 2*n && cap(got) > firstChunk {
				t.Errorf("%d bytes, %s: a buffer of %d", n, name, cap(got))
			}
		}
	}
	if _, err := ReadBody(bytes.NewReader(make([]byte, max+1)), max); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("max+1 bytes: %v, want ErrBodyTooLarge", err)
	}
	if _, err := ReadBody(iotest.OneByteReader(bytes.NewReader(make([]byte, 10*max))), max); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("10×max bytes: %v, want ErrBodyTooLarge", err)
	}
	cut := errors.New("cut")
	if _, err := ReadBody(io.MultiReader(bytes.NewReader(make([]byte, 10)), iotest.ErrReader(cut)), max); !errors.Is(err, cut) {
		t.Errorf("a body cut short: %v, want its error", err)
	}
}
