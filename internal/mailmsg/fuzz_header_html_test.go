package mailmsg

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzHeaderValue: the selecting SMTP listener reads the namespace and
// capability of a message with HeaderValue, from bytes a sender wrote.
// Whatever they are, a value it finds comes from a field of the top-level
// header block (never from a MIME part or the body), is unfolded onto one
// line and trimmed, and is the first such field's.
func FuzzHeaderValue(f *testing.F) {
	for _, s := range []string{
		"X-WebsiteBench-Namespace: ns\r\nX-WebsiteBench-Capability:\r\n cap\r\n\r\nbody",
		"Subject: x\r\n\r\nX-WebsiteBench-Namespace: in-the-body\r\n",
		"x-websitebench-namespace :ns\nx-websitebench-namespace: second\n\n",
		"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nX-WebsiteBench-Namespace: part\r\n\r\n--b--\r\n",
		"X-WebsiteBench-Namespace\r\n: folded-name\r\n\r\n",
		"\r\nX-WebsiteBench-Namespace: after-an-empty-line\r\n",
	} {
		f.Add([]byte(s), "X-WebsiteBench-Namespace")
	}
	f.Fuzz(func(t *testing.T, raw []byte, name string) {
		v, ok := HeaderValue(raw, name)
		if !ok {
			if v != "" {
				t.Fatalf("absent but %q", v)
			}
			return
		}
		// A lone CR is not a line ending (SMTP lines end in LF); it stays
		// in the value, which then matches no namespace or capability.
		if strings.Contains(v, "\n") || v != strings.TrimSpace(v) {
			t.Fatalf("value %q is not unfolded and trimmed", v)
		}
		header, _, _, _ := splitHeader(raw)
		var first *field
		for _, fl := range headerFields(header) {
			if strings.EqualFold(strings.TrimSpace(fl.name), name) {
				first = &fl
				break
			}
		}
		if first == nil {
			t.Fatalf("%q found outside the top-level header block of %q", name, raw)
		}
		if want := unfold(first.value); v != want {
			t.Fatalf("value %q, the first field says %q", v, want)
		}
	})
}

// FuzzHTMLText: text derived from an HTML part a sender wrote never makes
// the parser panic, keeps valid UTF-8 valid, has no line with spaces
// around it and no run of blank lines, and grows at most by the URLs it
// repeats next to their links.
func FuzzHTMLText(f *testing.F) {
	for _, s := range []string{
		`<p>Your code is <b>123456</b></p><a href="https://x.example/v?t=1&amp;u=2">Verify</a>`,
		"<script>alert(1)</script><style>p{}</style><!-- c -->text",
		`<a href='https://a.example'>https://a.example</a><br/><div>x</div>`,
		"&lt;not a tag&gt; &amp;amp; &#x41; &nbsp;\u00a0",
		`<a href=https://b.example/x>b<a href="c">c</a></a>`,
		"<table><tr><td>1</td></tr></table>\r\n\r\n\r\n<p>end",
		"<a\nhref\n=\n\"x\"\n>y</a\n>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		out := HTMLText(h)
		if utf8.ValidString(h) && !utf8.ValidString(out) {
			t.Fatalf("valid UTF-8 in, invalid out: %q", out)
		}
		for _, l := range strings.Split(out, "\n") {
			if l != strings.TrimSpace(l) && utf8.ValidString(l) {
				t.Fatalf("line %q has spaces around it", l)
			}
		}
		if strings.Contains(out, "\n\n\n") {
			t.Fatalf("a run of blank lines in %q", out)
		}
		if links := bytes.Count([]byte(strings.ToLower(h)), []byte("<a")); len(out) > len(h)+links*(len(h)+3) {
			t.Fatalf("%d bytes of text from %d bytes of HTML", len(out), len(h))
		}
	})
}
