package smtpd_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/mailclient"
)

// TestFrameworks: the mail settings of the frameworks in docs/candidate.md's
// "Configure your framework" table, as a site would write them, read from
// nothing but the candidate's environment of a trial on an `up` stack
// (no SSL_CERT_FILE, no field of the bundle): host, WEBSITEBENCH_SMTP_PORT
// (the trial's own port, which requires AUTH) for STARTTLS and
// WEBSITEBENCH_SMTP_TLS_PORT for implicit TLS, WEBSITEBENCH_SMTP_USERNAME
// and WEBSITEBENCH_SMTP_PASSWORD, and WEBSITEBENCH_SMTP_CA_FILE as the
// one CA trusted: Django's SMTP backend with EMAIL_USE_TLS and with
// EMAIL_USE_SSL (Django 3.2, Debian's, does not verify; 4.2+ does, with
// docs/candidate.md's ssl_context), Rails' smtp_settings (ActionMailer
// delivers through the mail gem, tested here directly) with
// enable_starttls_auto and with tls, and Laravel's mailer (Symfony Mailer)
// with smtp:// and smtps:// DSNs. Each message is read back. Rails' and
// Symfony's settings without the CA file must fail to verify and store
// nothing: they do verify. A framework whose runtime is not installed
// (make deps installs them) is skipped loudly, and fails under CI.
func TestFrameworks(t *testing.T) {
	s := itest.StartUp(t, "--trials", "1", "--quota-messages", "0")
	b := s.Bundle.Trials[0]
	env := []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	for k, v := range b.CandidateEnvironment {
		env = append(env, k+"="+v)
	}
	// refused runs a framework's settings without the CA file: the
	// handshake must fail verification.
	refused := func(name string, cmd *exec.Cmd, verify string) {
		t.Helper()
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), verify) {
			t.Errorf("%s without the CA file: %v, want a verification failure (%q)\n%s", name, err, verify, out)
		}
	}
	want := map[string]string{}

	have := func(name string, check ...string) bool {
		if err := exec.Command(check[0], check[1:]...).Run(); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed (%v); run make deps", name, err)
			}
			t.Logf("!!! %s is not installed (make deps installs it): NOT tested !!!", name)
			return false
		}
		return true
	}

	if have("Django", "/usr/bin/python3", "-c", "import django") {
		for _, c := range []struct {
			subject, settings, port string
		}{
			{"django tls", "EMAIL_USE_TLS=True", "WEBSITEBENCH_SMTP_PORT"},
			{"django ssl", "EMAIL_USE_SSL=True", "WEBSITEBENCH_SMTP_TLS_PORT"},
		} {
			py := fmt.Sprintf(`
import os, django
from django.conf import settings
env = os.environ
settings.configure(EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
    EMAIL_HOST=env["WEBSITEBENCH_SMTP_HOST"], EMAIL_PORT=int(env[%q]), %s, EMAIL_TIMEOUT=10,
    EMAIL_HOST_USER=env["WEBSITEBENCH_SMTP_USERNAME"], EMAIL_HOST_PASSWORD=env["WEBSITEBENCH_SMTP_PASSWORD"],
    DEFAULT_FROM_EMAIL=env["WEBSITEBENCH_SMTP_FROM"])
django.setup()
from django.core.mail import send_mail
assert send_mail(%q, "Your code is 515151.", None, ["dj@example.com"], fail_silently=False) == 1
`, c.port, c.settings, c.subject)
			cmd := exec.Command("/usr/bin/python3", "-c", py)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", c.subject, err, out)
				continue
			}
			want[c.subject] = "Your code is 515151."
		}
	}

	if have("Ruby's mail gem (Rails' ActionMailer)", "ruby", "-e", `require "mail"`) {
		rails := func(subject, settings, port, ca string) *exec.Cmd {
			return exec.Command("ruby", "-e", fmt.Sprintf(`
require "mail"
m = Mail.new do
  from ENV.fetch("WEBSITEBENCH_SMTP_FROM")
  to "rb@example.com"
  subject %q
  body "Your code is 626262."
end
m.delivery_method :smtp, address: ENV.fetch("WEBSITEBENCH_SMTP_HOST"), port: ENV.fetch(%q).to_i, domain: "site.example",
  user_name: ENV.fetch("WEBSITEBENCH_SMTP_USERNAME"), password: ENV.fetch("WEBSITEBENCH_SMTP_PASSWORD"),
  authentication: :plain, %s, openssl_verify_mode: "peer", %s open_timeout: 10, read_timeout: 10
m.deliver!
`, subject, port, settings, ca))
		}
		for _, c := range []struct {
			subject, settings, port string
		}{
			{"rails starttls", "enable_starttls_auto: true", "WEBSITEBENCH_SMTP_PORT"},
			{"rails tls", "tls: true", "WEBSITEBENCH_SMTP_TLS_PORT"},
		} {
			cmd := rails(c.subject, c.settings, c.port, `ca_file: ENV.fetch("WEBSITEBENCH_SMTP_CA_FILE"),`)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", c.subject, err, out)
				continue
			}
			want[c.subject] = "Your code is 626262."
			refused(c.subject, rails(c.subject+" unverified", c.settings, c.port, ""), "certificate verify failed")
		}
	}

	if have("PHP's Symfony Mailer (Laravel's mailer)", "php", "-r", `require "/usr/share/php/Symfony/Component/Mailer/autoload.php";`) {
		laravel := func(subject, scheme, port, ca string) *exec.Cmd {
			return exec.Command("php", "-r", fmt.Sprintf(`
require "/usr/share/php/Symfony/Component/Mailer/autoload.php";
require "/usr/share/php/Symfony/Component/Mime/autoload.php";
use Symfony\Component\Mailer\Transport;
use Symfony\Component\Mailer\Mailer;
use Symfony\Component\Mime\Email;
$dsn = sprintf("%s://%%s:%%s@%%s:%%s", rawurlencode(getenv("WEBSITEBENCH_SMTP_USERNAME")),
    rawurlencode(getenv("WEBSITEBENCH_SMTP_PASSWORD")), getenv("WEBSITEBENCH_SMTP_HOST"), getenv(%q));
$transport = Transport::fromDsn($dsn);
%s
(new Mailer($transport))->send((new Email())->from(getenv("WEBSITEBENCH_SMTP_FROM"))->to("php@example.com")->subject(%q)->text("Your code is 737373."));
`, scheme, port, ca, subject))
		}
		for _, c := range []struct {
			subject, scheme, port string
		}{
			{"laravel tls", "smtp", "WEBSITEBENCH_SMTP_PORT"},
			{"laravel ssl", "smtps", "WEBSITEBENCH_SMTP_TLS_PORT"},
		} {
			cmd := laravel(c.subject, c.scheme, c.port, `$transport->getStream()->setStreamOptions(["ssl" => ["cafile" => getenv("WEBSITEBENCH_SMTP_CA_FILE")]]);`)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", c.subject, err, out)
				continue
			}
			want[c.subject] = "Your code is 737373."
			refused(c.subject, laravel(c.subject+" unverified", c.scheme, c.port, ""), "certificate verify failed")
		}
	}

	got := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, err := mailclient.New(b.APIURL, b.Namespace, b.ReadCapability).List(ctx, mailclient.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		got[m.Subject] = strings.TrimRight(m.Text, "\r\n")
	}
	for subject, text := range want {
		if got[subject] != text {
			t.Errorf("%s: stored %q, want %q", subject, got[subject], text)
		}
	}
	if len(got) != len(want) {
		t.Errorf("stored %v, want %v", got, want)
	}
}
