package mailindex

import (
	"bytes"
	"encoding/binary"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// htmlOnly is a message whose only part is HTML of n links and inline
// tags: the reader's text is derived from it (mailmsg.HTMLText), and its
// links and codes are found in both.
func htmlOnly(n int) []byte {
	var b strings.Builder
	b.WriteString("Subject: Your code\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>")
	for i := range n {
		b.WriteString(`<a href="https://site.example/v?t=`)
		b.WriteByte(byte('a' + i%26))
		b.WriteString(`">Verify</a> code <b>48291</b> <span>`)
	}
	b.WriteString("</p>\r\n")
	return []byte(b.String())
}

// manyParts is a multipart message of n parts, alternately text and
// inline images.
func manyParts(n int) []byte {
	var b strings.Builder
	b.WriteString("Content-Type: multipart/related; boundary=b\r\n\r\n")
	for i := range n {
		if i%2 == 0 {
			b.WriteString("--b\r\nContent-Type: text/plain\r\n\r\nopen https://a.example/x\r\n")
		} else {
			b.WriteString("--b\r\nContent-Type: image/png\r\nContent-ID: <i@x>\r\nContent-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=\r\n")
		}
	}
	b.WriteString("--b--\r\n")
	return []byte(b.String())
}

// Indexing runs in time linear in the message, whatever its shape.
func TestOfLinear(t *testing.T) {
	for name, shape := range map[string]func(int) []byte{"html only": htmlOnly, "many parts": manyParts} {
		t.Run(name, func(t *testing.T) {
			complexity.Linear(t, "index/"+name, func(n int) func() {
				raw := shape(n)
				return func() { Of(raw) }
			}, 500)
		})
	}
}

// Decoding runs in time linear in the stored bytes: those of a message
// of many parts, an index of many headers, and counts of elements whose
// bytes stop reading (each element is then one failed read).
func TestDecodeLinear(t *testing.T) {
	shapes := map[string]struct {
		base  int
		shape func(int) []byte
	}{
		"many parts": {40000, func(n int) []byte { return Of(manyParts(n)).Encode() }},
		"many headers": {100000, func(n int) []byte {
			x := Index{V: Version, Headers: make([]rpc.Header, n)}
			for i := range x.Headers {
				x.Headers[i] = rpc.Header{Name: "X-H", Value: strings.Repeat("v", i%32)}
			}
			return x.Encode()
		}},
		"stuck counts": {200000, func(n int) []byte {
			b := binary.AppendUvarint([]byte{0}, Version)
			b = append(b, make([]byte, 7)...) // Subject to HTMLText, empty
			b = binary.AppendUvarint(b, uint64(n)+1)
			return append(b, bytes.Repeat([]byte{0xff}, 8*n)...) // no uvarint ends
		}},
	}
	for name, c := range shapes {
		t.Run(name, func(t *testing.T) {
			complexity.Linear(t, "Decode/"+name, func(n int) func() {
				b := c.shape(n)
				return func() { Decode(b) }
			}, c.base)
		})
	}
}

// An index read back is the index stored; one of another version is not
// read.
func TestDecode(t *testing.T) {
	for _, raw := range [][]byte{htmlOnly(3), manyParts(4), []byte("no header at all")} {
		x := Of(raw)
		got, err := Decode(x.Encode())
		if err != nil || !reflect.DeepEqual(got, x) {
			t.Fatalf("decoded %+v, %v; stored %+v", got, err, x)
		}
	}
	x := Of(htmlOnly(1))
	if x.Text == "" || len(x.LinkURLs) != 1 || len(x.Found.Codes) == 0 || x.Found.ActionLink == "" {
		t.Fatalf("an HTML-only message's index: %+v", x)
	}
	x.V = Version + 1
	if _, err := Decode(x.Encode()); err != ErrStale {
		t.Fatalf("an index of version %d: %v", x.V, err)
	}
	if _, err := Decode([]byte(`{"v":`)); err == nil {
		t.Fatal("a truncated index decoded")
	}
}

// An index stored by version 1 (as JSON and bytes) is still read, as
// the index of its message.
func TestDecodeV1(t *testing.T) {
	for file, raw := range map[string][]byte{"testdata/v1-parts.index": manyParts(4), "testdata/v1-html.index": htmlOnly(3)} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		want := Of(raw)
		want.V = 1
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v, %v; want %+v", file, got, err, want)
		}
		if _, err := Decode(b[:len(b)-1]); err == nil {
			t.Errorf("%s: a truncated index decoded", file)
		}
	}
}

// Decode never panics, whatever it is given, and refuses what it does
// not read whole.
func FuzzDecode(f *testing.F) {
	f.Add(Of(manyParts(3)).Encode())
	f.Add(Of(htmlOnly(2)).Encode())
	for _, file := range []string{"testdata/v1-parts.index", "testdata/v1-html.index"} {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := Decode(b)
		if err != nil {
			return
		}
		x.V = Version // an index of version 1 is stored again as this version
		if y, err := Decode(x.Encode()); err != nil || !reflect.DeepEqual(y, x) {
			t.Fatalf("decoded %+v from %q, and then %+v, %v", x, b, y, err)
		}
	})
}

// Of never fails on a sender's bytes, and what it makes reads back.
func FuzzOf(f *testing.F) {
	f.Add(htmlOnly(2))
	f.Add(manyParts(3))
	f.Add([]byte("Subject: =?utf-8?q?x?=\r\n\r\n\xff"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		x := Of(raw)
		got, err := Decode(x.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if len(got.LinkURLs) != len(x.LinkURLs) || len(got.Attachments) != len(x.Attachments) {
			t.Fatalf("read back %+v, made %+v", got, x)
		}
	})
}

// BenchmarkRead compares what a read of a stored message cost before the
// index (mailmsg.Parse, and for the console otp.Extract too: Of) with
// what it costs now (Decode).
func BenchmarkRead(b *testing.B) {
	for name, raw := range map[string][]byte{"parts-1KiB": manyParts(8), "html-100KiB": htmlOnly(1500)} {
		stored := Of(raw).Encode()
		b.Run(name+"/parse", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				mailmsg.Parse(raw)
			}
		})
		b.Run(name+"/index", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				Of(raw)
			}
		})
		b.Run(name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := Decode(stored); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
