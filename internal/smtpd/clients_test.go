package smtpd_test

import (
	"fmt"
	"net/smtp"
	"os/exec"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestRealClients: Go's net/smtp, Python's smtplib and swaks each deliver a
// message through the fixed listener, and the plane then holds it.
func TestRealClients(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	want := map[string]string{}

	// Go's net/smtp, with a display-name From header the plane rewrites.
	msg := "From: Site <" + sender + ">\r\nTo: go@example.com\r\nSubject: net/smtp\r\n\r\nYour code is 111111.\r\n"
	if err := smtp.SendMail(w.SMTPAddr, nil, sender, []string{"go@example.com"}, []byte(msg)); err != nil {
		t.Fatalf("net/smtp: %v", err)
	}
	want["net/smtp"] = "Your code is 111111."

	// Python's smtplib with EmailMessage (what most sites' backends use).
	py := fmt.Sprintf(`
import smtplib
from email.message import EmailMessage
m = EmailMessage()
m["From"] = %q
m["To"] = "py@example.com"
m["Subject"] = "smtplib"
m.set_content("Your code is 222222.")
with smtplib.SMTP(%q, %d, timeout=10) as s:
    s.send_message(m)
`, sender, "127.0.0.1", w.SMTPPort)
	if out, err := exec.Command("python3", "-c", py).CombinedOutput(); err != nil {
		t.Fatalf("python smtplib: %v\n%s", err, out)
	}
	want["smtplib"] = "Your code is 222222."

	if swaks := swaksPath(t); swaks != "" {
		out, err := exec.Command(swaks, "--server", w.SMTPAddr, "--from", sender, "--to", "swaks@example.com",
			"--header", "Subject: swaks", "--body", "Your code is 333333.", "--timeout", "10").CombinedOutput()
		if err != nil {
			t.Fatalf("swaks: %v\n%s", err, out)
		}
		want["swaks"] = "Your code is 333333."
	}

	got := map[string]string{}
	for _, m := range writertest.Messages(t, p, id) {
		got[m.Subject] = m.Text
		if m.EnvelopeFrom != sender {
			t.Errorf("%s: envelope_from %q", m.Subject, m.EnvelopeFrom)
		}
	}
	// Each client ends the body with its own line breaks (smtplib turns
	// "\n" into CRLF on the wire, swaks adds blank lines).
	for subject, text := range want {
		if strings.TrimRight(got[subject], "\r\n") != text {
			t.Errorf("%s: stored text %q, want %q", subject, got[subject], text)
		}
	}
	if len(got) != len(want) {
		t.Errorf("stored %v, want %v", got, want)
	}
}

// swaksPath finds swaks (make deps installs it): required under CI,
// elsewhere the swaks part is skipped loudly.
func swaksPath(t *testing.T) string { return itest.Optional(t, "swaks") }

// TestSelectMode is docs/reference.md §7.3 on a sidecar trial: the message names
// its namespace and capability in headers; a folded capability header
// works (quirk 11), and anything else is 550 Invalid namespace capability.
func TestSelectMode(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileSidecar, "select", nil)
	other := p.Trial(t, rpc.ProfileSidecar)
	half := len(id.ReadCapability) / 2
	cases := []struct {
		name    string
		headers string
		code    int
		text    string
	}{
		{"namespace and capability", "X-WebsiteBench-Namespace: " + id.Namespace + "\r\nX-WebsiteBench-Capability: " + id.ReadCapability + "\r\n", 250, ""},
		{"header names in any case", "x-websitebench-namespace: " + id.Namespace + "\r\nX-WEBSITEBENCH-CAPABILITY: " + id.ReadCapability + "\r\n", 250, ""},
		{"folded capability (quirk 11)", "X-WebsiteBench-Namespace: " + id.Namespace + "\r\nX-WebsiteBench-Capability:\r\n " + id.ReadCapability + "\r\n", 250, ""},
		{"capability folded mid-value", "X-WebsiteBench-Namespace: " + id.Namespace + "\r\nX-WebsiteBench-Capability: " + id.ReadCapability[:half] + "\r\n\t" + id.ReadCapability[half:] + "\r\n", 550, "Invalid namespace capability"},
		{"no headers (quirk 27)", "", 550, "Invalid namespace capability"},
		{"wrong capability", "X-WebsiteBench-Namespace: " + id.Namespace + "\r\nX-WebsiteBench-Capability: " + other.ReadCapability + "\r\n", 550, "Invalid namespace capability"},
		{"another trial's namespace", "X-WebsiteBench-Namespace: " + other.Namespace + "\r\nX-WebsiteBench-Capability: " + other.ReadCapability + "\r\n", 550, "Invalid namespace capability"},
		{"invalid namespace", "X-WebsiteBench-Namespace: ../x\r\nX-WebsiteBench-Capability: " + id.ReadCapability + "\r\n", 550, "Invalid namespace capability"},
		{"bootstrap token is no capability", "X-WebsiteBench-Namespace: " + id.Namespace + "\r\nX-WebsiteBench-Capability: " + id.BootstrapToken + "\r\n", 550, "Invalid namespace capability"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := writertest.Count(t, p, id)
			cl := greet(t, w.SMTPAddr)
			msg := c.headers + "Subject: " + c.name + "\r\n\r\nbody"
			for _, s := range steps(envelope("site@reference.example", "user@example.com"), data(msg, c.code, c.text)) {
				if code, text := cl.cmd(s.send); code != s.code || !strings.Contains(text, s.text) {
					t.Fatalf("%.30q: %d %q, want %d %q", s.send, code, text, s.code, s.text)
				}
			}
			want := before
			if c.code == 250 {
				want++
			}
			if n := writertest.Count(t, p, id); n != want {
				t.Fatalf("stored %d, want %d", n-before, want-before)
			}
		})
	}
	if n := writertest.Count(t, p, other); n != 0 {
		t.Fatalf("the other trial received %d", n)
	}
	for _, secret := range []string{id.ReadCapability, other.ReadCapability, id.BootstrapToken, id.WriterGrant} {
		if strings.Contains(w.Output(), secret) {
			t.Fatal("a secret reached the writer's log")
		}
	}
	// Python's EmailMessage folds the long capability header by itself,
	// which the reference refused.
	py := fmt.Sprintf(`
import smtplib
from email.message import EmailMessage
m = EmailMessage()
m["From"] = "site@reference.example"
m["To"] = "py@example.com"
m["Subject"] = "folded by python " + "x" * 40
m["X-WebsiteBench-Namespace"] = %q
m["X-WebsiteBench-Capability"] = %q
m.set_content("hello")
assert "X-WebsiteBench-Capability:\n " in m.as_string(), "python did not fold the header"
with smtplib.SMTP("127.0.0.1", %d, timeout=10) as s:
    s.send_message(m)
`, id.Namespace, id.ReadCapability, w.SMTPPort)
	if out, err := exec.Command("python3", "-c", py).CombinedOutput(); err != nil {
		t.Fatalf("python smtplib, select mode: %v\n%s", err, out)
	}
	var found bool
	for _, m := range writertest.Messages(t, p, id) {
		found = found || strings.HasPrefix(m.Subject, "folded by python")
	}
	if !found {
		t.Fatal("the message Python folded was not stored")
	}
}
