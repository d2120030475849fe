package smtpd_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestSMTPIdempotencyKey: a message repeated with the same
// Resend-Idempotency-Key (a client retrying after an ambiguous answer, its
// library minting a new Date and Message-ID) is answered with the first
// message's id and stored once; the same key on another message is 554;
// a key outside 1–256 characters is 554; the same key over POST /emails is
// another request. smtplib sending one EmailMessage twice is stored once.
func TestSMTPIdempotencyKey(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	send := func(headers, body string) (int, string) {
		t.Helper()
		cl := greet(t, w.SMTPAddr)
		for _, s := range envelope(sender, "user@example.com") {
			if code, text := cl.cmd(s.send); code != s.code {
				t.Fatalf("%q: %d %q", s.send, code, text)
			}
		}
		if code, _ := cl.cmd("DATA"); code != 354 {
			t.Fatalf("DATA: %d", code)
		}
		return cl.cmd(headers + "Subject: keyed\r\n\r\n" + body + "\r\n.")
	}
	code, first := send("Resend-Idempotency-Key: signup-42\r\nDate: Mon, 1 Dec 2026 10:00:00 +0000\r\nMessage-ID: <a@site>\r\n", "Your code is 424242.")
	if code != 250 {
		t.Fatalf("first: %d %q", code, first)
	}
	code, again := send("Date: Mon, 1 Dec 2026 10:00:05 +0000\r\nMessage-ID: <b@site>\r\nResend-Idempotency-Key:\r\n signup-42\r\n", "Your code is 424242.")
	if code != 250 || again != first {
		t.Fatalf("repeat: %d %q, want %q", code, again, first)
	}
	if code, text := send("Resend-Idempotency-Key: signup-42\r\n", "Your code is 000000."); code != 554 || !strings.Contains(text, "another message") {
		t.Fatalf("other message, same key: %d %q", code, text)
	}
	if code, text := send("Resend-Idempotency-Key: "+strings.Repeat("k", 257)+"\r\n", "x"); code != 554 || !strings.Contains(text, "1 to 256") {
		t.Fatalf("long key: %d %q", code, text)
	}
	if code, text := send("Resend-Idempotency-Key: \r\n", "x"); code != 554 {
		t.Fatalf("empty key: %d %q", code, text)
	}
	if n := writertest.Count(t, p, id); n != 1 {
		t.Fatalf("stored %d, want 1", n)
	}

	py := fmt.Sprintf(`
import smtplib
from email.message import EmailMessage
m = EmailMessage()
m["From"] = %q
m["To"] = "py@example.com"
m["Subject"] = "retried"
m["Resend-Idempotency-Key"] = "welcome/py@example.com"
m.set_content("Welcome!")
ids = []
for _ in range(2):
    with smtplib.SMTP("127.0.0.1", %d, timeout=10) as s:
        s.ehlo()
        s.mail(%q)
        s.rcpt("py@example.com")
        code, msg = s.data(m.as_bytes())
        assert code == 250, (code, msg)
        ids.append(msg)
assert ids[0] == ids[1], ids
`, sender, w.SMTPPort, sender)
	if out, err := exec.Command("python3", "-c", py).CombinedOutput(); err != nil {
		t.Fatalf("smtplib twice: %v\n%s", err, out)
	}
	msgs := writertest.Messages(t, p, id)
	if len(msgs) != 2 {
		t.Fatalf("stored %d, want 2", len(msgs))
	}
	if strings.TrimRight(msgs[0].Text, "\r\n") != "Your code is 424242." {
		t.Fatalf("stored %q", msgs[0].Text)
	}
}
