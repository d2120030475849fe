package supervisor_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/smtp"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/mailclient"
)

// tlsCandidate is a framework-shaped candidate in Python: it reads
// nothing but its WEBSITEBENCH_* environment, trusts only the CA file the
// environment names, and sends by smtplib with STARTTLS on the SMTP port,
// by SMTP_SSL on the implicit-TLS port and by POST /emails on the HTTPS
// door. Then, with the system's trust store instead of the CA, it tries
// STARTTLS again: that must fail verification. It prints what happened.
const tlsCandidate = `
import json, os, smtplib, ssl, urllib.request
from email.message import EmailMessage
env = os.environ
out = {}

def mail(subject):
    m = EmailMessage()
    m["From"] = "Acme <%s>" % env["WEBSITEBENCH_SMTP_FROM"]
    m["To"] = "agent@example.com"
    m["Subject"] = subject
    m.set_content("Your code is 424242.")
    return m

ctx = ssl.create_default_context(cafile=env["WEBSITEBENCH_SMTP_CA_FILE"])
host, user, password = env["WEBSITEBENCH_SMTP_HOST"], env["WEBSITEBENCH_SMTP_USERNAME"], env["WEBSITEBENCH_SMTP_PASSWORD"]
with smtplib.SMTP(host, int(env["WEBSITEBENCH_SMTP_PORT"]), timeout=20) as s:
    s.starttls(context=ctx)
    s.login(user, password)
    s.send_message(mail("python starttls"))
with smtplib.SMTP_SSL(host, int(env["WEBSITEBENCH_SMTP_TLS_PORT"]), timeout=20, context=ctx) as s:
    s.login(user, password)
    s.send_message(mail("python implicit tls"))

body = json.dumps({"from": env["WEBSITEBENCH_MAIL_FROM"], "to": "agent@example.com", "subject": "python https",
                   "text": "Your code is 424242."}).encode()
req = urllib.request.Request(env["WEBSITEBENCH_MAIL_API_HTTPS_URL"], data=body, method="POST", headers={
    "Authorization": "Bearer " + env["WEBSITEBENCH_MAIL_API_TOKEN"], "Content-Type": "application/json"})
https = urllib.request.build_opener(urllib.request.ProxyHandler({}),
    urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=env["WEBSITEBENCH_MAIL_API_CA_FILE"])))
with https.open(req, timeout=20) as r:
    out["https"] = r.status

try:
    with smtplib.SMTP(host, int(env["WEBSITEBENCH_SMTP_PORT"]), timeout=20) as s:
        s.starttls(context=ssl.create_default_context())
        out["untrusted"] = "handshake passed"
except ssl.SSLCertVerificationError as e:
    out["untrusted"] = e.verify_message
print(json.dumps(out))
`

// TestTLSFromEnvironment: a candidate configured only from its trial's
// candidate_environment (no bundle field, no SSL_CERT_FILE) verifies the
// writer with the CA file the environment names and sends: Python's
// smtplib (STARTTLS on WEBSITEBENCH_SMTP_PORT, the trial's own port, and
// SMTP_SSL on WEBSITEBENCH_SMTP_TLS_PORT) and urllib on
// WEBSITEBENCH_MAIL_API_HTTPS_URL, and Go's net/smtp with a tls.Config
// from the CA file on both SMTP ports. Without the CA, verification fails.
// Every message arrives in the trial, and only there.
func TestTLSFromEnvironment(t *testing.T) {
	s := itest.StartUp(t, "--trials", "2")
	b, other := s.Bundle.Trials[0], s.Bundle.Trials[1]
	env := b.CandidateEnvironment

	cmd := exec.Command(itest.Require(t, "/usr/bin/python3"), "-c", tlsCandidate)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	var run struct {
		HTTPS     int    `json:"https"`
		Untrusted string `json:"untrusted"`
	}
	if err != nil || json.Unmarshal(out, &run) != nil {
		t.Fatalf("the Python candidate: %v\n%s", err, out)
	}
	if run.HTTPS != 200 || run.Untrusted == "" || run.Untrusted == "handshake passed" {
		t.Fatalf("the Python candidate: HTTPS %d; STARTTLS without the CA: %q", run.HTTPS, run.Untrusted)
	}

	// Go's net/smtp, from the same variables.
	pem, err := os.ReadFile(env["WEBSITEBENCH_SMTP_CA_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("WEBSITEBENCH_SMTP_CA_FILE holds no certificate")
	}
	host := env["WEBSITEBENCH_SMTP_HOST"]
	conf := &tls.Config{RootCAs: roots, ServerName: host}
	send := func(c *smtp.Client, subject string) error {
		defer c.Close()
		if err := c.Auth(smtp.PlainAuth("", env["WEBSITEBENCH_SMTP_USERNAME"], env["WEBSITEBENCH_SMTP_PASSWORD"], host)); err != nil {
			return err
		}
		return itest.Deliver(c, env["WEBSITEBENCH_SMTP_FROM"],
			fmt.Sprintf("From: Acme <%s>\r\nTo: agent@example.com\r\nSubject: %s\r\n\r\nYour code is 424242.\r\n", env["WEBSITEBENCH_SMTP_FROM"], subject))
	}
	c, err := smtp.Dial(net.JoinHostPort(host, env["WEBSITEBENCH_SMTP_PORT"]))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartTLS(conf); err != nil {
		t.Fatalf("net/smtp STARTTLS: %v", err)
	}
	if err := send(c, "go starttls"); err != nil {
		t.Fatalf("net/smtp over STARTTLS: %v", err)
	}
	conn, err := tls.Dial("tcp", net.JoinHostPort(host, env["WEBSITEBENCH_SMTP_TLS_PORT"]), conf)
	if err != nil {
		t.Fatalf("net/smtp implicit TLS: %v", err)
	}
	if c, err = smtp.NewClient(conn, host); err != nil {
		t.Fatal(err)
	}
	if err := send(c, "go implicit tls"); err != nil {
		t.Fatalf("net/smtp over implicit TLS: %v", err)
	}
	if _, err := tls.Dial("tcp", net.JoinHostPort(host, env["WEBSITEBENCH_SMTP_TLS_PORT"]), &tls.Config{ServerName: host}); err == nil {
		t.Fatal("the implicit-TLS port verified against the system's roots alone")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, err := mailclient.New(b.APIURL, b.Namespace, b.ReadCapability).List(ctx, mailclient.Query{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Subject)
	}
	slices.Sort(got)
	if want := []string{"go implicit tls", "go starttls", "python https", "python implicit tls", "python starttls"}; !slices.Equal(got, want) {
		t.Fatalf("the trial holds %q, want %q", got, want)
	}
	if msgs, err := mailclient.New(other.APIURL, other.Namespace, other.ReadCapability).List(ctx, mailclient.Query{}); err != nil || len(msgs) != 0 {
		t.Fatalf("the other trial holds %d messages (%v)", len(msgs), err)
	}
}
