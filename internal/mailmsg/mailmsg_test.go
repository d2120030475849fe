package mailmsg

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/limits"
)

func TestValidAddress(t *testing.T) {
	for s, want := range map[string]bool{
		"a@example.com":                 true,
		"Mixed.Case@Example.COM":        true,
		"first.last+tag@sub.example":    true,
		"":                              false,
		"no-at":                         false,
		"Alice <alice@example.com>":     false,
		"c1@example.com,c2@example.com": false,
		"a b@example.com":               false,
		"a@":                            false,
		"@b":                            false,
		"a@b\r\nBcc: x@y":               false,
		"<>":                            false,
		"a..b@example.com":              false,
		".a@example.com":                false,
		"a@example.com.":                false,
		"a@b@example.com":               false,
		"o'hara!#$%&*/=?^_`{|}~@x-y.z":  true,
		"\"quoted\"@example.com":        false,
		"a@[127.0.0.1]":                 true,
		strings.Repeat("a", 310) + "@example.com": false,
	} {
		if got := ValidAddress(s); got != want {
			t.Errorf("ValidAddress(%q) = %v, want %v", s, got, want)
		}
	}
}

// The §8.8 example: spoofed From/To/Cc/Bcc, X-Tags and X-WebsiteBench-*
// headers go; everything else stays in order; From and To are appended.
func TestScrubReferenceExample(t *testing.T) {
	raw := "From: spoof@evil.example\r\n" +
		"To: victim@example.com\r\n" +
		"Cc: cc@example.com\r\n" +
		"Bcc: bcc@example.com\r\n" +
		"X-Tags: evil-tag\r\n" +
		"X-WebsiteBench-Namespace: other\r\n" +
		"X-Websitebench-Capability: abc\r\n" +
		"x-websitebench-anything:\r\n  folded\r\n" +
		"Subject: SMTP scrub check\r\n" +
		"Reply-To: reply@elsewhere.example\r\n" +
		"X-Other: kept\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"\r\n" +
		"body line\r\nFrom: not a header\r\n"
	out, err := Scrub(context.Background(), []byte(raw), "site@reference.example", []string{"smtp-user@example.com", "second@example.com"}, "X-Tags: wb-1")
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	want := "Subject: SMTP scrub check\r\n" +
		"Reply-To: reply@elsewhere.example\r\n" +
		"X-Other: kept\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"From: site@reference.example\r\n" +
		"To: smtp-user@example.com, second@example.com\r\n" +
		"X-Tags: wb-1\r\n" +
		"\r\n" +
		"body line\r\nFrom: not a header\r\n"
	if got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}

func TestScrubParts(t *testing.T) {
	raw := "Content-Type: multipart/mixed; boundary=\"b1\"\n" +
		"To: x@y\n\npreamble\n--b1\nX-Tags: inner\nContent-Type: text/plain\n\nhello\n" +
		"--b1\nX-WebsiteBench-Namespace: n\nContent-Type: application/octet-stream\nContent-Disposition: attachment; filename=a.bin\n\nAAAA\n--b1--\nepilogue\n"
	out, err := Scrub(context.Background(), []byte(raw), "s@x", []string{"r@x"})
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, gone := range []string{"X-Tags", "X-WebsiteBench", "To: x@y"} {
		if strings.Contains(got, gone) {
			t.Errorf("%q survived:\n%s", gone, got)
		}
	}
	for _, kept := range []string{"preamble\n--b1\n", "hello\n--b1\n", "filename=a.bin\n\nAAAA\n--b1--\nepilogue\n", "From: s@x\nTo: r@x\n\n"} {
		if !strings.Contains(got, kept) {
			t.Errorf("%q lost:\n%s", kept, got)
		}
	}
	p := Parse([]byte(got))
	if p.Text != "hello" || len(p.Attachments) != 1 || p.Attachments[0].FileName != "a.bin" || p.Attachments[0].PartID != "2" {
		t.Fatalf("parse after scrub: %+v", p)
	}
}

func TestHeaderValueUnfolds(t *testing.T) {
	raw := []byte("X-WebsiteBench-Capability:\r\n " + strings.Repeat("a", 64) + "\r\nSubject: s\r\n\r\nbody")
	v, ok := HeaderValue(raw, "x-websitebench-capability")
	if !ok || v != strings.Repeat("a", 64) {
		t.Fatalf("got %q %v", v, ok)
	}
	if _, ok := HeaderValue(raw, "X-WebsiteBench-Namespace"); ok {
		t.Fatal("absent header found")
	}
	if _, ok := HeaderValue([]byte("Subject: s\r\n\r\nX-WebsiteBench-Namespace: body"), "X-WebsiteBench-Namespace"); ok {
		t.Fatal("found a header in the body")
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		name, raw, subject, text string
		attachments              int
	}{
		{"plain as sent", "Subject: hi\n\nline1\nline2", "hi", "line1\nline2", 0},
		{"no added CRLF", "Subject: x\r\n\r\nx", "x", "x", 0},
		{"encoded subject", "Subject: =?utf-8?q?caf=C3=A9?=\n\nb", "café", "b", 0},
		{"base64", "Content-Transfer-Encoding: base64\n\nWW91ciBjb2RlIGlzIDEyMzQ1Ng==\n", "", "Your code is 123456", 0},
		{"quoted-printable", "Content-Transfer-Encoding: quoted-printable\n\na=3Db=\n c", "", "a=b c", 0},
		{"latin1", "Content-Type: text/plain; charset=iso-8859-1\n\ncaf\xe9", "", "café", 0},
		{"html only", "Content-Type: text/html\n\n<p>Hi</p><p>Open <a href=\"https://x.example/v?t=1&amp;u=2\">this</a></p><script>alert(1)</script>", "", "Hi\n\nOpen this (https://x.example/v?t=1&u=2)", 0},
		{"alternative", "Content-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/plain\n\nplain\n--b\nContent-Type: text/html\n\n<b>html</b>\n--b--\n", "", "plain", 0},
		{"no header", "just text", "", "", 0},
		{"broken multipart", "Content-Type: multipart/mixed; boundary=zz\n\nno parts here", "", "", 0},
	}
	for _, c := range cases {
		p := Parse([]byte(c.raw))
		if p.Subject != c.subject || p.Text != c.text || len(p.Attachments) != c.attachments {
			t.Errorf("%s: got %+v", c.name, p)
		}
	}
}

// A header block over the limits is refused whole, with one fixed error:
// cut at the limit, the fields past it would reach the store unscrubbed.
func TestScrubRefusesOversizedHeader(t *testing.T) {
	ctx := context.Background()
	line := "X-Pad: " + strings.Repeat("p", 57) + "\r\n" // 66 bytes
	atLines := strings.Repeat("X: a\r\n", limits.HeaderLines-2)
	for name, c := range map[string]struct {
		raw     string
		refused bool
	}{
		"lines at the limit with From and To": {atLines + "\r\nbody", false},
		"one line more":                       {atLines + "X: a\r\n\r\nbody", true},
		"folded past the limit":               {"X: a\r\n" + strings.Repeat(" \r\n", limits.HeaderLines) + "From: spoof@evil.example\r\n\r\nbody", true},
		"bytes past the limit":                {strings.Repeat(line, limits.HeaderBytes/len(line)+1) + "\r\nbody", true},
		"one long line":                       {"X: " + strings.Repeat("x", limits.HeaderBytes) + "\r\n\r\nbody", true},
		"in a MIME part": {"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n" +
			strings.Repeat("X: a\r\n", limits.HeaderLines+1) + "\r\nhi\r\n--b--\r\n", true},
		"a long body": {"Subject: s\r\n\r\n" + strings.Repeat("body\r\n", 2*limits.HeaderLines), false},
	} {
		out, err := Scrub(ctx, []byte(c.raw), "s@example.com", []string{"r@example.com"})
		switch {
		case c.refused && (!errors.Is(err, ErrHeaderTooLarge) || out != nil):
			t.Errorf("%s: got %d bytes, %v; want ErrHeaderTooLarge", name, len(out), err)
		case !c.refused && err != nil:
			t.Errorf("%s: %v", name, err)
		case !c.refused:
			if _, _, _, over := splitHeader(out); over {
				t.Errorf("%s: stored a header block over the limits", name)
			}
		}
	}
}

func TestScrubHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Scrub(ctx, []byte("Subject: s\r\n\r\nb"), "s@x", []string{"r@x"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// Readers never fail: past the limits, the rest of a message (which Scrub
// would not have stored) is read as its body, and HeaderValue does not
// look there.
func TestReadersStopAtTheLimits(t *testing.T) {
	raw := []byte("Subject: s\r\n" + strings.Repeat("X: a\r\n", limits.HeaderLines-1) + "X-WebsiteBench-Namespace: late\r\n\r\nbody")
	if v, ok := HeaderValue(raw, "X-WebsiteBench-Namespace"); ok {
		t.Fatalf("found %q past the limit", v)
	}
	if v, ok := HeaderValue(raw, "Subject"); !ok || v != "s" {
		t.Fatalf("Subject = %q %v", v, ok)
	}
	p := Parse(raw)
	if p.Subject != "s" || !strings.HasPrefix(p.Text, "X-WebsiteBench-Namespace: late\r\n\r\nbody") {
		t.Fatalf("got %+v", p)
	}
}

// decodeBody gives the base64 decoder a body with its line breaks, which
// it skips wherever they stand (in a quantum, in the padding): the same
// answer as the body without them, checked here over short bodies of
// every shape.
func TestBase64SkipsLineBreaks(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 2026))
	const alphabet = "ABab+/09=\r\n="
	for range 200_000 {
		b := make([]byte, rng.IntN(14))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		clean := bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r"), nil), []byte("\n"), nil)
		o1 := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
		n1, e1 := base64.StdEncoding.Decode(o1, b)
		o2 := make([]byte, base64.StdEncoding.DecodedLen(len(clean)))
		n2, e2 := base64.StdEncoding.Decode(o2, clean)
		if (e1 == nil) != (e2 == nil) || e1 == nil && !bytes.Equal(o1[:n1], o2[:n2]) {
			t.Fatalf("%q: %v %q, without line breaks %v %q", b, e1, o1[:n1], e2, o2[:n2])
		}
	}
}
