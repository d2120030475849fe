package mailmsg

import (
	"context"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
)

// Every parser of a sender's bytes here runs in linear time, whatever the
// shape of the bytes: these are the shapes that made the old header
// unfolding and the standard library's encoded-word decoder quadratic, and
// their neighbours.

func scrub(raw []byte) {
	Scrub(context.Background(), raw, "s@example.com", []string{"r@example.com"})
}

// folded is a header folded onto n continuation lines, then a body.
func folded(n int) []byte {
	return []byte("Subject: s\r\nX: a\r\n" + strings.Repeat(" \r\n", n) + "\r\nbody\r\n")
}

// manyHeaders is n short header fields, then a body.
func manyHeaders(n int) []byte {
	return []byte(strings.Repeat("X-A: b\r\n", n) + "\r\nbody\r\n")
}

// manyParts is a multipart message of n small parts, each with a header
// the plane must scrub.
func manyParts(n int) []byte {
	var b strings.Builder
	b.WriteString("Content-Type: multipart/mixed; boundary=b\r\n\r\n")
	for range n {
		b.WriteString("--b\r\nX-Tags: t\r\nContent-Type: text/plain\r\n\r\nhello\r\n")
	}
	b.WriteString("--b--\r\n")
	return []byte(b.String())
}

// nested is n multipart levels, each one part deep, around a text.
func nested(n int) []byte {
	var b strings.Builder
	for i := range n {
		b.WriteString("Content-Type: multipart/mixed; boundary=b" + strings.Repeat("x", i%50) + "\r\n\r\n--b" + strings.Repeat("x", i%50) + "\r\n")
	}
	b.WriteString("Content-Type: text/plain\r\n\r\n" + strings.Repeat("text ", n) + "\r\n")
	return []byte(b.String())
}

// capped is how many times a run repeats the parse of a header past the
// caps (limits.HeaderLines, limits.HeaderBytes): the parse stops there, so
// it takes microseconds whatever n is, under complexity.MinBase; repeated,
// its base is measurable and still flat in n.
const capped = 256

func TestScrubLinear(t *testing.T) {
	for _, c := range []struct {
		name  string
		input func(int) []byte
		base  int
		reps  int
	}{
		{"folded header", folded, 10_000, capped},
		{"many headers", manyHeaders, 10_000, capped},
		{"many parts", manyParts, 19_200, 1},
		{"nested parts", nested, 9600, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "Scrub/"+c.name, func(n int) func() {
				raw := c.input(n)
				return complexity.Repeat(c.reps, func() { scrub(raw) })
			}, c.base)
		})
	}
}

// The one-pass unfolding itself, below the caps that normally stop it
// first: a field folded n times is split and unfolded in linear time.
func TestUnfoldLinear(t *testing.T) {
	complexity.Linear(t, "headerFields+unfold/folded", func(n int) func() {
		header := []byte("X: a\r\n" + strings.Repeat(" b\r\n", n))
		return func() {
			for _, f := range headerFields(header) {
				unfold(f.value)
			}
		}
	}, 320_000)
}

func TestParseLinear(t *testing.T) {
	for _, c := range []struct {
		name  string
		input func(int) []byte
		base  int
		reps  int
	}{
		{"folded header", folded, 10_000, capped},
		{"many headers", manyHeaders, 10_000, capped},
		{"many parts", manyParts, 4800, 1},
		{"nested parts", nested, 32_000, 1},
		{"base64 body", func(n int) []byte {
			return []byte("Content-Transfer-Encoding: base64\r\n\r\n" + strings.Repeat("QUJD\r\n", n))
		}, 1_280_000, 1},
		{"quoted-printable body", func(n int) []byte {
			return []byte("Content-Transfer-Encoding: quoted-printable\r\n\r\n" + strings.Repeat("a=3Db=\r\n", n))
		}, 320_000, 1},
		{"html body", func(n int) []byte {
			return []byte("Content-Type: text/html\r\n\r\n" + strings.Repeat(`<p><a href="https://x.example/a">x</a> y</p>`, n))
		}, 48_000, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "Parse/"+c.name, func(n int) func() {
				raw := c.input(n)
				return complexity.Repeat(c.reps, func() { Parse(raw) })
			}, c.base)
		})
	}
}

func TestHeaderValueLinear(t *testing.T) {
	complexity.Linear(t, "HeaderValue/folded", func(n int) func() {
		raw := []byte("X-WebsiteBench-Namespace: a\r\n" + strings.Repeat(" \r\n", n) + "\r\nbody")
		return complexity.Repeat(4*capped, func() { HeaderValue(raw, "X-WebsiteBench-Capability") })
	}, 10_000)
}

// Header value decoding (RFC 2047): the standard library's decoder looks
// for the end of the value's last word again after every malformed word.
func TestDecodeHeaderLinear(t *testing.T) {
	for _, c := range []struct {
		name string
		word string
		base int
		reps int // bare starts: a base whose 8n stays under the memory that page faults and the collector dominate, repeated
	}{
		{"malformed q words", "=?a?q?=Z", 128_000, 1},
		{"bare starts", "=?", 640_000, 4},
		{"valid words", "=?utf-8?q?caf=C3=A9?= ", 256_000, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "decodeHeader/"+c.name, func(n int) func() {
				v := strings.Repeat(c.word, n) + "?="
				return complexity.Repeat(c.reps, func() { decodeHeader(v) })
			}, c.base)
		})
	}
}

func TestHTMLTextLinear(t *testing.T) {
	for _, c := range []struct {
		name, unit string
		base       int
	}{
		{"unclosed links", `<a href="x">`, 320_000},
		{"unclosed scripts", "<script>", 160_000},
		{"unclosed comments", "<!--", 640_000},
		{"unclosed tags", "<", 640_000},
		{"links", `<a href='https://x.example/'>y</a>`, 64_000},
		{"entities", "&amp;&#x41;&nbsp;", 128_000},
		{"blank lines", "<p>\n \n", 320_000},
		{"tags", "<b>", 320_000},
		{"breaks", "<br>", 640_000},
		{"spaces", "a \t", 640_000},
		{"small tags", "<>", 640_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "HTMLText/"+c.name, func(n int) func() {
				h := strings.Repeat(c.unit, n)
				return func() { HTMLText(h) }
			}, c.base)
		})
	}
}
