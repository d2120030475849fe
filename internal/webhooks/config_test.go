package webhooks

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/redact"
	"github.com/websitebench/mailplane/pkg/rpc"
)

func TestParse(t *testing.T) {
	stored, err := Parse([]rpc.Webhook{
		{Provider: Resend, URL: "http://127.0.0.1:9000/hooks/resend", RetrySeconds: []int{1, 5}},
		{Provider: Postmark, URL: "https://user:pass@site.example/pm"},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := Load(stored)
	if err != nil || len(hs) != 2 {
		t.Fatalf("Load: %v %v", hs, err)
	}
	if got := hs[0].RetrySeconds; len(got) != 2 || got[0] != 1 || got[1] != 5 {
		t.Errorf("resend retries %v, want [1 5]", got)
	}
	if len(hs[1].RetrySeconds) != len(DefaultRetries[Postmark]) {
		t.Errorf("postmark retries %v, want the provider's own", hs[1].RetrySeconds)
	}
	if shown := Shown(hs)[1].URL; strings.Contains(shown, "pass") {
		t.Errorf("Shown kept the credentials: %s", shown)
	}
	if s, err := Parse(nil); s != "" || err != nil {
		t.Errorf("Parse(nil) = %q, %v; want none", s, err)
	}
}

func TestParseRefuses(t *testing.T) {
	many := make([]rpc.Webhook, limits.Webhooks+1)
	for i := range many {
		many[i] = rpc.Webhook{Provider: Resend, URL: "http://a.example/"}
	}
	for _, c := range []struct {
		name string
		in   []rpc.Webhook
		want string
	}{
		{"provider", []rpc.Webhook{{Provider: "ses", URL: "http://a.example/"}}, "webhooks[0]: provider must be one of resend, sendgrid, mailgun, postmark"},
		{"scheme", []rpc.Webhook{{Provider: Resend, URL: "ftp://secretuser:secretpass@a.example/"}}, "webhooks[0]: url must be http:// or https://"},
		{"relative", []rpc.Webhook{{Provider: Resend, URL: "/hooks"}}, "webhooks[0]: url must be http:// or https://"},
		{"host", []rpc.Webhook{{Provider: Resend, URL: "http:///x"}}, "webhooks[0]: url must name a host"},
		{"empty", []rpc.Webhook{{Provider: Mailgun}}, "webhooks[0]: url is required"},
		{"fragment", []rpc.Webhook{{Provider: Resend, URL: "http://a.example/#x"}}, "webhooks[0]: url must have no fragment"},
		{"control", []rpc.Webhook{{Provider: Resend, URL: "http://a.example/\x7f"}}, "webhooks[0]: url does not parse"},
		{"long", []rpc.Webhook{{Provider: Resend, URL: "http://a.example/" + strings.Repeat("a", limits.WebhookURLBytes)}}, "webhooks[0]: url is longer than 2048 bytes"},
		{"retry", []rpc.Webhook{{Provider: Resend, URL: "http://a.example/"}, {Provider: SendGrid, URL: "http://a.example/", RetrySeconds: []int{-1}}}, "webhooks[1]: each retry_seconds must be from 0 to 86400"},
		{"retries", []rpc.Webhook{{Provider: Resend, URL: "http://a.example/", RetrySeconds: make([]int, limits.WebhookRetries+1)}}, "webhooks[0]: at most 16 retry_seconds"},
		{"many", many, "at most 8 webhooks per trial"},
	} {
		_, err := Parse(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error quotes the URL: %v", c.name, err)
		}
	}
}

func TestDerive(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	a, a2, b := Derive(key, []byte("digest a")), Derive(key, []byte("digest a")), Derive(key, []byte("digest b"))
	if a.ResendSecret != a2.ResendSecret || a.MailgunKey != a2.MailgunKey || a.SendGridPublicKey() != a2.SendGridPublicKey() {
		t.Fatal("the same trial got different keys")
	}
	if a.ResendSecret == b.ResendSecret || a.MailgunKey == b.MailgunKey || a.SendGridPublicKey() == b.SendGridPublicKey() {
		t.Fatal("two trials share a key")
	}
	if other := Derive([]byte("another plane key, 32 bytes long"), []byte("digest a")); other.ResendSecret == a.ResendSecret {
		t.Fatal("the plane's key does not enter the trial's keys")
	}
	if !strings.HasPrefix(a.ResendSecret, SecretPrefix) {
		t.Errorf("resend secret %q lacks whsec_", a.ResendSecret)
	}
	if k, err := resendKey(a.ResendSecret); err != nil || len(k) != 32 {
		t.Errorf("resend key: %d bytes, %v", len(k), err)
	}
	der, err := base64.StdEncoding.DecodeString(a.SendGridPublicKey())
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.(*ecdsa.PublicKey).Equal(&a.SendGrid.PublicKey) {
		t.Error("the public key is not the signing key's")
	}
	// Every secret handed to a candidate is one the redaction point knows.
	for _, s := range []string{a.ResendSecret, a.MailgunKey} {
		if got := redact.Text("x " + s + " y"); got != "x "+redact.Marker+" y" {
			t.Errorf("redact.Text left %q", got)
		}
	}
}
