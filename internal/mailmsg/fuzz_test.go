package mailmsg

import (
	"bytes"
	"context"
	"errors"
	"net/mail"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/limits"
)

// FuzzScrub: whatever a sender puts in DATA, the stored message carries no
// header it may not set, the body is untouched, and parsing never panics.
func FuzzScrub(f *testing.F) {
	f.Add([]byte("From: a@b\r\nX-Tags: t\r\nSubject: s\r\n\r\nbody\r\n"))
	f.Add([]byte("X-WebsiteBench-Namespace:\r\n folded\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nX-Tags: x\r\n\r\nhi\r\n--b--\r\n"))
	f.Add([]byte("no header at all"))
	f.Add([]byte("\r\n\r\n"))
	f.Add([]byte("Content-Type: multipart/alternative; boundary=\"=_\"\n\n--=_\nContent-Type: text/html\n\n<a href=x>y</a>\n--=_--"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := Scrub(context.Background(), raw, "s@example.com", []string{"r@example.com"})
		if err != nil {
			// Refused: only a header block over the limits is.
			if !errors.Is(err, ErrHeaderTooLarge) || len(raw) < limits.HeaderLines && len(raw) < limits.HeaderBytes {
				t.Fatalf("Scrub(%q): %v", raw, err)
			}
			Parse(raw)
			return
		}
		header, sep, body, over := splitHeader(out)
		if over {
			t.Fatalf("stored a header block over the limits: %q", out)
		}
		for _, fl := range headerFields(header) {
			name := strings.ToLower(strings.TrimSpace(fl.name))
			if name == "x-tags" || strings.HasPrefix(name, "x-websitebench-") || name == "cc" || name == "bcc" {
				t.Fatalf("header %q survived in %q", fl.name, out)
			}
		}
		if v, ok := HeaderValue(out, "From"); !ok || v != "s@example.com" {
			t.Fatalf("From = %q %v in %q", v, ok, out)
		}
		// A top-level body that is not multipart is kept byte for byte.
		if _, origSep, origBody, _ := splitHeader(raw); origSep != nil && sep != nil {
			if _, ok := HeaderValue(raw, "Content-Type"); !ok && !bytes.Equal(body, origBody) {
				t.Fatalf("body changed:\n%q\n%q", origBody, body)
			}
		}
		Parse(out)
		Parse(raw)
	})
}

// FuzzParse: parsing stored bytes never panics and yields valid fields.
func FuzzParse(f *testing.F) {
	f.Add([]byte("Subject: =?utf-8?b?w6k=?=\r\nContent-Transfer-Encoding: base64\r\n\r\nAAAA"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=x\n\n--x\nContent-Disposition: attachment; filename=\"a\"\n\nzz\n--x--"))
	f.Add([]byte("Content-Type: text/html; charset=latin1\r\n\r\n<p>caf\xe9</p>"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p := Parse(raw)
		for _, a := range p.Attachments {
			if a.Size < 0 || len(a.SHA256) != 64 || a.PartID == "" {
				t.Fatalf("attachment %+v", a)
			}
		}
	})
}

// FuzzValidAddress: an address we accept never carries a character that
// could break out of an SMTP command or a header; and a plain address
// (plainAddress, which ValidAddress and Sender read without net/mail) is
// one net/mail reads as itself.
func FuzzValidAddress(f *testing.F) {
	for _, s := range []string{"a@b.c", "Alice <a@b>", "a@b\r\nRCPT TO:<x@y>", "\"q\"@b", "a@[127.0.0.1]", "a..b@c", ".a@b", "a@b.", "a@@b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidAddress(s) && strings.ContainsAny(s, "\r\n<>, \t\x00") {
			t.Fatalf("accepted %q", s)
		}
		if plainAddress(s) {
			a, err := mail.ParseAddress(s)
			list, listErr := addressParser.ParseList(s)
			if err != nil || a.Name != "" || a.Address != s || strings.Count(s, "@") != 1 ||
				listErr != nil || len(list) != 1 || *list[0] != *a {
				t.Fatalf("plainAddress(%q), but net/mail reads %+v, %v and %v, %v", s, a, err, list, listErr)
			}
		}
	})
}
