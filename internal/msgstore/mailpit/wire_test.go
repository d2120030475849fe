package mailpit

import (
	"bytes"
	"strings"
	"testing"
)

const (
	wireTag  = "wb-0123456789abcdef0123456789abcdef0123456789abcdef"
	wireFrom = "site@sender.example"
)

// mailpitStores is what Mailpit v1.33.1 makes of DATA (internal/smtpd):
// undo dot-stuffing up to the end line, prepend its own headers and, when
// lenient, rewrite CR CR LF.
func mailpitStores(t testing.TB, data []byte, lenient bool) []byte {
	t.Helper()
	var out []byte
	for rest := data; ; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			t.Fatalf("DATA does not end with the end line: %q", data)
		}
		line := rest[:i+1]
		rest = rest[i+1:]
		if bytes.Equal(line, []byte(".\r\n")) {
			if len(rest) != 0 {
				t.Fatalf("bytes after the end line: %q", rest)
			}
			break
		}
		if line[0] == '.' {
			line = line[1:]
		}
		out = append(out, line...)
	}
	out = append([]byte("Message-ID: <x@mailpit>\r\nReceived: from x\r\n        by y\r\n"), out...)
	if lenient {
		out = bytes.ReplaceAll(out, []byte("\r\r\n"), []byte("\r\n"))
	}
	return out
}

func roundTrip(t testing.TB, raw []byte, lenient bool) {
	f := newFrame(wireTag, wireFrom, raw)
	f.ref.id = "abc"
	r, err := parseRef(f.ref.String())
	if err != nil {
		t.Fatalf("parseRef(%q): %v", f.ref.String(), err)
	}
	stored := mailpitStores(t, f.data, lenient)
	got, err := unwrap(stored, r, wireTag, wireFrom)
	if err != nil {
		t.Fatalf("unwrap %q (lenient %v): %v\nstored %q", raw, lenient, err, stored)
	}
	if !bytes.Equal(got, raw) {
		t.Fatalf("unwrap gave %q, want %q", got, raw)
	}
	if _, err := unwrap(stored, r, "wb-"+strings.Repeat("f", 48), wireFrom); err == nil {
		t.Fatal("unwrap accepted another tag")
	}
}

func TestFrameRoundTrip(t *testing.T) {
	for _, raw := range []string{
		"", "x", "\r", "\n", "\r\n", ".", ".\r\n", "..\n", "\r\r\n", "\r\r\r\n", "a\r\r", "a\r\r\n\r\r\n",
		"Subject: a\r\n\r\nbody\r\n", "Subject: a\n\nbody", "Subject: a\r\n\r\n.\r\n.\n..\r\n.x",
	} {
		roundTrip(t, []byte(raw), false)
		roundTrip(t, []byte(raw), true)
	}
}

func TestFrameDotStuffing(t *testing.T) {
	f := newFrame(wireTag, wireFrom, []byte("S: x\r\n\r\n.\r\n.a\n.."))
	want := "X-Tags: " + wireTag + "\r\nReturn-Path: <" + wireFrom + ">\r\nS: x\r\n\r\n..\r\n..a\n...\r\n.\r\n"
	if string(f.data) != want {
		t.Fatalf("data %q\nwant %q", f.data, want)
	}
	if !f.ref.tail {
		t.Fatal("no tail recorded for a message without a final line break")
	}
}

func TestParseRefRejects(t *testing.T) {
	good := ref{id: "abc", size: 10, tail: true, rewrites: []int{0, 3, 9}}
	if r, err := parseRef(good.String()); err != nil || r.String() != good.String() {
		t.Fatalf("parseRef(%q) = %v, %v", good.String(), r, err)
	}
	for _, bad := range []string{
		"", "mp1", "mp2:abc:10:" + strings.Repeat("0", 32) + ":0",
		"mp1:a/b:10:" + strings.Repeat("0", 32) + ":0",
		"mp1:abc:010:" + strings.Repeat("0", 32) + ":0",
		"mp1:abc:-1:" + strings.Repeat("0", 32) + ":0",
		"mp1:abc:10:" + strings.Repeat("0", 31) + ":0",
		"mp1:abc:10:" + strings.Repeat("A", 32) + ":0",
		"mp1:abc:10:" + strings.Repeat("0", 32) + ":2",
		"mp1:abc:10:" + strings.Repeat("0", 32) + ":0:",
		"mp1:abc:10:" + strings.Repeat("0", 32) + ":0:AAE", // rewrites 0 and 1 overlap
		"mp1:abc:10:" + strings.Repeat("0", 32) + ":0:Cw",  // rewrite past the end
		"mp1:abc:10:" + strings.Repeat("0", 32) + ":0:AA:x",
	} {
		if _, err := parseRef(bad); err == nil {
			t.Errorf("parseRef(%q) accepted", bad)
		}
	}
}

// FuzzUnwrap: whatever Mailpit hands back and whatever ref the ledger
// holds, unwrap never panics and returns only bytes that match the ref's
// digest; frames round-trip through Mailpit's rules.
func FuzzUnwrap(f *testing.F) {
	f.Add([]byte("Subject: a\r\n\r\nb\r\r\n."), []byte("X-Tags: x\r\n"), "mp1:abc:3:"+strings.Repeat("0", 32)+":1:AA")
	f.Fuzz(func(t *testing.T, raw, stored []byte, refText string) {
		if r, err := parseRef(refText); err == nil {
			if got, err := unwrap(stored, r, wireTag, wireFrom); err == nil && digest(got) != r.sum {
				t.Fatalf("unwrap returned bytes that do not match the digest")
			}
		}
		roundTrip(t, raw, false)
		roundTrip(t, raw, true)
	})
}
