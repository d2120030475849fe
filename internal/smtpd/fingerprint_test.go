package smtpd

import (
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
)

// TestFingerprintLinear: the digest of an SMTP message for
// Resend-Idempotency-Key is linear in its header lines and body bytes.
func TestFingerprintLinear(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(n int) []byte
		base int
	}{
		{"header lines", func(n int) []byte {
			return []byte(strings.Repeat("X-A: 1\r\n Date: folded\r\n", n) + "\r\nbody")
		}, 131_072},
		{"body bytes", func(n int) []byte {
			return []byte("Subject: s\r\n\r\n" + strings.Repeat("x\n", n))
		}, 8_388_608},
		{"no header end", func(n int) []byte {
			return []byte(strings.Repeat("Message-ID: <x>\n", n))
		}, 262_144},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "fingerprint/"+c.name, func(n int) func() {
				raw := c.make(n)
				return func() { fingerprint("s@example.com", []string{"u@example.com"}, raw) }
			}, c.base)
		})
	}
}

// TestFingerprintIgnoresVolatileHeaders: Date, Message-ID, Received and the
// key header itself, folded or not, in any case, do not count; every other
// byte does.
func TestFingerprintIgnoresVolatileHeaders(t *testing.T) {
	base := fingerprint("s@x", []string{"u@x"}, []byte("Subject: a\r\nDate: 1\r\nMessage-ID: <1>\r\n\r\nbody"))
	same := []string{
		"Subject: a\r\ndate: 2\r\n\tcontinued\r\nMESSAGE-ID:\r\n <2>\r\nReceived: by x\r\n\r\nbody",
		"Resend-Idempotency-Key: other\r\nSubject: a\r\n\r\nbody",
	}
	for _, raw := range same {
		if fingerprint("s@x", []string{"u@x"}, []byte(raw)) != base {
			t.Errorf("%q: fingerprint differs", raw)
		}
	}
	differ := []struct {
		from string
		to   []string
		raw  string
	}{
		{"s@x", []string{"u@x"}, "Subject: b\r\n\r\nbody"},
		{"s@x", []string{"u@x"}, "Subject: a\r\n\r\nbody2"},
		{"s@x", []string{"u@x"}, "Subject: a\r\n continued\r\n\r\nbody"},
		{"t@x", []string{"u@x"}, "Subject: a\r\n\r\nbody"},
		{"s@x", []string{"u@x", "v@x"}, "Subject: a\r\n\r\nbody"},
	}
	for _, d := range differ {
		if fingerprint(d.from, d.to, []byte(d.raw)) == base {
			t.Errorf("%+v: same fingerprint", d)
		}
	}
}
