package smtpd_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestFrameworks: the mail settings of the frameworks in README.md's
// "Configure your framework" table, as a site would write them, against a
// TLS writer, each trusting the exported CA through SSL_CERT_FILE (the
// variable up's bundle suggests): Django's SMTP backend with EMAIL_USE_TLS
// and with EMAIL_USE_SSL, Rails' smtp_settings (ActionMailer delivers
// through the mail gem, tested here directly) with enable_starttls_auto
// and with tls, and Laravel's mailer (Symfony Mailer) with smtp:// and
// smtps:// DSNs. Each message is read back. A framework whose runtime is
// not installed (make deps installs them) is skipped loudly, and fails
// under CI.
func TestFrameworks(t *testing.T) {
	p := itest.StartPlane(t, "--quota-messages", "0", "--quota-bytes", "0")
	id := p.Trial(t, rpc.ProfileCandidate)
	w := writertest.StartTLS(t, p, id, "fixed", "127.0.0.1")
	env := append(os.Environ(), "SSL_CERT_FILE="+w.CAFile)
	tok := id.MailAPIToken
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
			{"django tls", "EMAIL_USE_TLS=True", w.SMTPPort},
			{"django ssl", "EMAIL_USE_SSL=True", w.SMTPTLSPort},
		} {
			py := fmt.Sprintf(`
import django
from django.conf import settings
settings.configure(EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
    EMAIL_HOST="localhost", EMAIL_PORT=%d, %s, EMAIL_TIMEOUT=10,
    EMAIL_HOST_USER="resend", EMAIL_HOST_PASSWORD=%q, DEFAULT_FROM_EMAIL=%q)
django.setup()
from django.core.mail import send_mail
assert send_mail(%q, "Your code is 515151.", None, ["dj@example.com"], fail_silently=False) == 1
`, c.port, c.settings, tok, sender, c.subject)
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
			{"rails starttls", "enable_starttls_auto: true", w.SMTPPort},
			{"rails tls", "tls: true", w.SMTPTLSPort},
		} {
			rb := fmt.Sprintf(`
require "mail"
m = Mail.new do
  from %q
  to "rb@example.com"
  subject %q
  body "Your code is 626262."
end
m.delivery_method :smtp, address: "localhost", port: %d, domain: "site.example",
  user_name: "resend", password: %q, authentication: :plain, %s,
  openssl_verify_mode: "peer", open_timeout: 10, read_timeout: 10
m.deliver!
`, sender, c.subject, c.port, tok, c.settings)
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
		for _, c := range []struct{ subject, dsn string }{
			{"laravel tls", fmt.Sprintf("smtp://resend:%s@localhost:%d", tok, w.SMTPPort)},
			{"laravel ssl", fmt.Sprintf("smtps://resend:%s@localhost:%d", tok, w.SMTPTLSPort)},
		} {
			php := fmt.Sprintf(`
require "/usr/share/php/Symfony/Component/Mailer/autoload.php";
require "/usr/share/php/Symfony/Component/Mime/autoload.php";
use Symfony\Component\Mailer\Transport;
use Symfony\Component\Mailer\Mailer;
use Symfony\Component\Mime\Email;
$mailer = new Mailer(Transport::fromDsn(%q));
$mailer->send((new Email())->from(%q)->to("php@example.com")->subject(%q)->text("Your code is 737373."));
`, c.dsn, sender, c.subject)
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
	for _, m := range writertest.Messages(t, p, id) {
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
