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
// the candidate's environment of a trial on an `up` stack: host, port,
// WEBSITEBENCH_SMTP_USERNAME and WEBSITEBENCH_SMTP_PASSWORD, against the
// trial's own port (which requires AUTH), each trusting the exported CA
// through SSL_CERT_FILE (the variable up's bundle suggests): Django's SMTP
// backend with EMAIL_USE_TLS and with EMAIL_USE_SSL (on the implicit-TLS
// port), Rails' smtp_settings (ActionMailer delivers through the mail gem,
// tested here directly) with enable_starttls_auto and with tls, and
// Laravel's mailer (Symfony Mailer) with smtp:// and smtps:// DSNs. Each
// message is read back. A framework whose runtime is not installed (make
// deps installs them) is skipped loudly, and fails under CI.
func TestFrameworks(t *testing.T) {
	s := itest.StartUp(t, "--trials", "1", "--quota-messages", "0")
	b := s.Bundle.Trials[0]
	env := append(os.Environ(), "SSL_CERT_FILE="+b.CAFile)
	for k, v := range b.CandidateEnvironment {
		env = append(env, k+"="+v)
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
			subject, settings string
			port              int
		}{
			{"django tls", "EMAIL_USE_TLS=True", b.SMTPPort},
			{"django ssl", "EMAIL_USE_SSL=True", b.SMTPTLSPort},
		} {
			py := fmt.Sprintf(`
import os, django
from django.conf import settings
env = os.environ
settings.configure(EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
    EMAIL_HOST=env["WEBSITEBENCH_SMTP_HOST"], EMAIL_PORT=%d, %s, EMAIL_TIMEOUT=10,
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
		for _, c := range []struct {
			subject, settings string
			port              int
		}{
			{"rails starttls", "enable_starttls_auto: true", b.SMTPPort},
			{"rails tls", "tls: true", b.SMTPTLSPort},
		} {
			rb := fmt.Sprintf(`
require "mail"
m = Mail.new do
  from ENV.fetch("WEBSITEBENCH_SMTP_FROM")
  to "rb@example.com"
  subject %q
  body "Your code is 626262."
end
m.delivery_method :smtp, address: ENV.fetch("WEBSITEBENCH_SMTP_HOST"), port: %d, domain: "site.example",
  user_name: ENV.fetch("WEBSITEBENCH_SMTP_USERNAME"), password: ENV.fetch("WEBSITEBENCH_SMTP_PASSWORD"),
  authentication: :plain, %s, openssl_verify_mode: "peer", open_timeout: 10, read_timeout: 10
m.deliver!
`, c.subject, c.port, c.settings)
			cmd := exec.Command("ruby", "-e", rb)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", c.subject, err, out)
				continue
			}
			want[c.subject] = "Your code is 626262."
		}
	}

	if have("PHP's Symfony Mailer (Laravel's mailer)", "php", "-r", `require "/usr/share/php/Symfony/Component/Mailer/autoload.php";`) {
		for _, c := range []struct {
			subject, scheme string
			port            int
		}{
			{"laravel tls", "smtp", b.SMTPPort},
			{"laravel ssl", "smtps", b.SMTPTLSPort},
		} {
			php := fmt.Sprintf(`
require "/usr/share/php/Symfony/Component/Mailer/autoload.php";
require "/usr/share/php/Symfony/Component/Mime/autoload.php";
use Symfony\Component\Mailer\Transport;
use Symfony\Component\Mailer\Mailer;
use Symfony\Component\Mime\Email;
$dsn = sprintf("%s://%%s:%%s@%%s:%d", rawurlencode(getenv("WEBSITEBENCH_SMTP_USERNAME")),
    rawurlencode(getenv("WEBSITEBENCH_SMTP_PASSWORD")), getenv("WEBSITEBENCH_SMTP_HOST"));
$mailer = new Mailer(Transport::fromDsn($dsn));
$mailer->send((new Email())->from(getenv("WEBSITEBENCH_SMTP_FROM"))->to("php@example.com")->subject(%q)->text("Your code is 737373."));
`, c.scheme, c.port, c.subject)
			cmd := exec.Command("php", "-r", php)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", c.subject, err, out)
				continue
			}
			want[c.subject] = "Your code is 737373."
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
