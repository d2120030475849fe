package smtpd_test

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/smtp"
	"os/exec"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// python runs a Python program and fails the test with its output.
func python(t *testing.T, what, program string) {
	t.Helper()
	if out, err := exec.Command("python3", "-c", program).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
}

// pyMessage is the Python prologue every smtplib client here shares: a
// message m, and a context that verifies against the exported CA only.
func pyMessage(subject, to, body, caFile string) string {
	return fmt.Sprintf(`
import smtplib, ssl
from email.message import EmailMessage
m = EmailMessage()
m["From"] = %q
m["To"] = %q
m["Subject"] = %q
m.set_content(%q)
ctx = ssl.create_default_context(cafile=%q)
assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
`, sender, to, subject, body, caFile)
}

// TestTLSAndAuthClients: the clients the issue names, each verifying the
// writer's certificate against the exported CA and authenticating with the
// trial's mail-API token, deliver, and the gateway's view of the trial holds
// exactly their messages: smtplib with starttls()+login() (PLAIN), smtplib
// with AUTH LOGIN, smtplib's SMTP_SSL on the implicit-TLS listener, Go's
// net/smtp with STARTTLS and PLAIN, and swaks --tls --auth.
func TestTLSAndAuthClients(t *testing.T) {
	p := itest.StartPlane(t)
	id := p.Trial(t, rpc.ProfileCandidate)
	w := writertest.StartTLS(t, p, id, "fixed", "127.0.0.1")
	want := map[string]string{}

	python(t, "smtplib starttls+login", pyMessage("smtplib starttls", "py@example.com", "Your code is 111111.", w.CAFile)+fmt.Sprintf(`
with smtplib.SMTP("127.0.0.1", %d, timeout=10) as s:
    s.starttls(context=ctx)
    s.login("resend", %q)
    s.send_message(m)
`, w.SMTPPort, id.MailAPIToken))
	want["smtplib starttls"] = "Your code is 111111."

	python(t, "smtplib AUTH LOGIN", pyMessage("smtplib auth login", "py@example.com", "Your code is 121212.", w.CAFile)+fmt.Sprintf(`
with smtplib.SMTP("127.0.0.1", %d, timeout=10) as s:
    s.starttls(context=ctx)
    s.ehlo()
    assert "LOGIN" in s.esmtp_features["auth"].split(), s.esmtp_features
    s.user, s.password = "anyone", %q
    code, _ = s.auth("LOGIN", s.auth_login, initial_response_ok=False)
    assert code == 235, code
    s.send_message(m)
`, w.SMTPPort, id.MailAPIToken))
	want["smtplib auth login"] = "Your code is 121212."

	// The DNS name in the certificate, as most configurations spell it.
	python(t, "smtplib SMTP_SSL", pyMessage("smtplib ssl", "py@example.com", "Your code is 222222.", w.CAFile)+fmt.Sprintf(`
with smtplib.SMTP_SSL("localhost", %d, timeout=10, context=ctx) as s:
    s.ehlo()
    assert "starttls" not in s.esmtp_features, "STARTTLS offered inside TLS"
    s.login("resend", %q)
    s.send_message(m)
`, w.SMTPTLSPort, id.MailAPIToken))
	want["smtplib ssl"] = "Your code is 222222."

	goSMTP(t, w, id.MailAPIToken, "net/smtp", "Your code is 333333.")
	want["net/smtp"] = "Your code is 333333."

	if swaks := swaksPath(t); swaks != "" {
		out, err := exec.Command(swaks, "--server", w.SMTPAddr, "--from", sender, "--to", "swaks@example.com",
			"--tls", "--tls-verify", "--tls-ca-path", w.CAFile,
			"--auth", "LOGIN", "--auth-user", "resend", "--auth-password", id.MailAPIToken,
			"--header", "Subject: swaks", "--body", "Your code is 444444.", "--timeout", "10").CombinedOutput()
		if err != nil {
			t.Fatalf("swaks: %v\n%s", err, out)
		}
		want["swaks"] = "Your code is 444444."
	}

	got := map[string]string{}
	for _, m := range writertest.Messages(t, p, id) {
		got[m.Subject] = strings.TrimRight(m.Text, "\r\n")
		if m.EnvelopeFrom != sender {
			t.Errorf("%s: envelope_from %q", m.Subject, m.EnvelopeFrom)
		}
	}
	for subject, text := range want {
		if got[subject] != text {
			t.Errorf("%s: stored %q, want %q", subject, got[subject], text)
		}
	}
	if len(got) != len(want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	if strings.Contains(w.Output(), id.MailAPIToken) {
		t.Fatal("the AUTH password reached the writer's log")
	}
}

// goSMTP sends one message with Go's net/smtp: STARTTLS verified against
// the CA, then AUTH PLAIN with password.
func goSMTP(t *testing.T, w *writertest.TLSWriter, password, subject, body string) error {
	t.Helper()
	c, err := smtp.Dial(w.SMTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Fatal("STARTTLS not offered")
	}
	if err := c.StartTLS(w.ClientTLS()); err != nil {
		t.Fatalf("net/smtp STARTTLS: %v", err)
	}
	if err := c.Auth(smtp.PlainAuth("", "resend", password, w.Host)); err != nil {
		return err
	}
	msg := "Subject: " + subject + "\r\nFrom: " + sender + "\r\n\r\n" + body + "\r\n"
	if err := c.Mail(sender); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("go@example.com"); err != nil {
		t.Fatal(err)
	}
	wc, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	wc.Write([]byte(msg))
	if err := wc.Close(); err != nil {
		t.Fatalf("net/smtp DATA: %v", err)
	}
	return c.Quit()
}

// plain is AUTH PLAIN's initial response for password.
func plain(password string) string {
	return base64.StdEncoding.EncodeToString([]byte("\x00resend\x00" + password))
}

// TestAuthRefusals: a wrong password is 535 (the plane decides) and the
// mail of that session is not stored, with no matter what client; another
// trial's token is a wrong password; a plain client that does not
// authenticate is served as before; AUTH without TLS is offered on
// loopback, and refused (530, not even advertised) on a listener that is
// not in --smtp-plain-auth-nets, where it works after STARTTLS.
func TestAuthRefusals(t *testing.T) {
	p, id, other := writertest.TwoTrials(t, rpc.ProfileCandidate)
	w := writertest.StartTLS(t, p, id, "fixed", "127.0.0.1")

	t.Run("wrong password", func(t *testing.T) {
		before := writertest.Count(t, p, id)
		for _, pw := range []string{"wrong", other.MailAPIToken, id.ReadCapability, id.BootstrapToken, ""} {
			cl := greet(t, w.SMTPAddr)
			for _, s := range []step{
				{"EHLO client.example", 250, "AUTH PLAIN LOGIN"},
				{"AUTH PLAIN " + plain(pw), 535, "Authentication failed"},
				// A client that ignores the 535 is not served as one that
				// never tried.
				{"MAIL FROM:<" + sender + ">", 530, "Authentication required"},
				{"AUTH PLAIN " + plain(id.MailAPIToken), 235, ""},
				{"MAIL FROM:<" + sender + ">", 250, ""},
				{"QUIT", 221, ""},
			} {
				if code, text := cl.cmd(s.send); code != s.code || !strings.Contains(text, s.text) {
					t.Fatalf("password %.8q: %.40q: %d %q, want %d %q", pw, s.send, code, text, s.code, s.text)
				}
			}
		}
		python(t, "smtplib wrong password", pyMessage("wrong password", "py@example.com", "never stored", w.CAFile)+fmt.Sprintf(`
with smtplib.SMTP("127.0.0.1", %d, timeout=10) as s:
    s.starttls(context=ctx)
    try:
        s.login("resend", "not-the-token")
    except smtplib.SMTPAuthenticationError as e:
        assert e.smtp_code == 535, e
    else:
        raise SystemExit("login succeeded")
    try:
        s.send_message(m)
    except smtplib.SMTPSenderRefused as e:
        assert e.smtp_code == 530, e
    else:
        raise SystemExit("sent after a refused login")
`, w.SMTPPort))
		if err := goSMTP(t, w, other.MailAPIToken, "other trial's token", "never stored"); err == nil || !strings.Contains(err.Error(), "535") {
			t.Fatalf("net/smtp with another trial's token: %v", err)
		}
		if n := writertest.Count(t, p, id); n != before {
			t.Fatalf("%d stored after wrong passwords", n-before)
		}
		if n := writertest.Count(t, p, other); n != 0 {
			t.Fatalf("the other trial received %d", n)
		}
	})

	t.Run("plain client", func(t *testing.T) {
		before := writertest.Count(t, p, id)
		python(t, "smtplib without TLS or AUTH", pyMessage("plain", "py@example.com", "plain still works", w.CAFile)+fmt.Sprintf(`
with smtplib.SMTP("127.0.0.1", %d, timeout=10) as s:
    s.send_message(m)
`, w.SMTPPort))
		// Django with EMAIL_USE_TLS = False and a user and password: AUTH
		// on loopback without TLS.
		python(t, "smtplib login without TLS on loopback", pyMessage("plain auth", "py@example.com", "auth on loopback", w.CAFile)+fmt.Sprintf(`
with smtplib.SMTP("127.0.0.1", %d, timeout=10) as s:
    s.login("resend", %q)
    s.send_message(m)
`, w.SMTPPort, id.MailAPIToken))
		if n := writertest.Count(t, p, id); n != before+2 {
			t.Fatalf("stored %d, want 2", n-before)
		}
	})

	t.Run("not loopback: TLS first", func(t *testing.T) {
		// 127.0.0.2 stands for a network address: only 127.0.0.1 is
		// configured as a place where a password may travel in clear.
		nw := writertest.StartTLS(t, p, id, "fixed", "127.0.0.2", "--smtp-plain-auth-nets", "127.0.0.1/32")
		before := writertest.Count(t, p, id)
		cl := greet(t, nw.SMTPAddr)
		code, ehlo := cl.cmd("EHLO client.example")
		if code != 250 || strings.Contains(ehlo, "AUTH") || !strings.Contains(ehlo, "STARTTLS") {
			t.Fatalf("EHLO on a network listener: %d %q", code, ehlo)
		}
		for _, s := range []step{
			{"AUTH PLAIN " + plain(id.MailAPIToken), 530, "STARTTLS"},
			{"AUTH LOGIN", 530, "STARTTLS"},
		} {
			if code, text := cl.cmd(s.send); code != s.code || !strings.Contains(text, s.text) {
				t.Fatalf("%.40q: %d %q, want %d %q", s.send, code, text, s.code, s.text)
			}
		}
		python(t, "smtplib login before starttls", fmt.Sprintf(`
import smtplib
with smtplib.SMTP("127.0.0.2", %d, timeout=10) as s:
    try:
        s.login("resend", %q)
    except smtplib.SMTPNotSupportedError:
        pass
    else:
        raise SystemExit("AUTH accepted in clear on a network listener")
`, nw.SMTPPort, id.MailAPIToken))
		if err := goSMTP(t, nw, id.MailAPIToken, "network after starttls", "works after STARTTLS"); err != nil {
			t.Fatalf("net/smtp after STARTTLS on the network listener: %v", err)
		}
		if n := writertest.Count(t, p, id); n != before+1 {
			t.Fatalf("stored %d, want 1", n-before)
		}
	})

	t.Run("implicit TLS refuses clear text", func(t *testing.T) {
		c := writertest.Dial(t, w.SMTPTLSAddr)
		c.Write([]byte("EHLO client.example\r\n"))
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		if strings.Contains(string(buf[:n]), "250") {
			t.Fatalf("implicit-TLS listener answered clear text: %q", buf[:n])
		}
		// And a client that does not trust the CA is refused by its own
		// verification, as it should be.
		conn, err := tls.Dial("tcp", w.SMTPTLSAddr, &tls.Config{ServerName: "127.0.0.1"})
		if err == nil {
			conn.Close()
			t.Fatal("the certificate verified without the CA")
		}
	})
}

// TestCommandLimitUnderTLS: the command limit still holds after STARTTLS,
// where the count can no longer see where a reply ends (every write
// counts): a client looping NOOP inside TLS is cut off at or before the
// limit, and one that stays under it is served.
func TestCommandLimitUnderTLS(t *testing.T) {
	p := itest.StartPlane(t)
	id := p.Trial(t, rpc.ProfileCandidate)
	w := writertest.StartTLS(t, p, id, "fixed", "127.0.0.1", "--smtp-max-commands", "20")
	for _, implicit := range []bool{false, true} {
		var c *client
		if implicit {
			conn, err := tls.Dial("tcp", w.SMTPTLSAddr, w.ClientTLS())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			c = &client{t: t, c: conn, r: bufio.NewReader(conn)}
			if code, _ := c.reply(); code != 220 {
				t.Fatalf("implicit TLS greeting %d", code)
			}
		} else {
			c = greet(t, w.SMTPAddr)
			if code, _ := c.cmd("EHLO client.example"); code != 250 {
				t.Fatal("EHLO")
			}
			if code, text := c.cmd("STARTTLS"); code != 220 {
				t.Fatalf("STARTTLS: %d %q", code, text)
			}
			tc := tls.Client(c.c, w.ClientTLS())
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			c = &client{t: t, c: tc, r: bufio.NewReader(tc)}
		}
		if code, _ := c.cmd("EHLO client.example"); code != 250 {
			t.Fatal("EHLO in TLS")
		}
		served := 0
		for range 40 {
			c.send("NOOP")
			code, _ := c.reply()
			if code != 250 {
				break
			}
			served++
		}
		if served >= 20 || served < 5 {
			t.Fatalf("implicit=%t: %d NOOPs served in TLS with a limit of 20", implicit, served)
		}
		t.Logf("implicit=%t: %d NOOPs served before the limit", implicit, served)
	}
}
