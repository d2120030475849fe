package wbenv

import (
	"strings"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

func TestCandidate(t *testing.T) {
	id := rpc.Identity{Namespace: "trial-x", MailAPIToken: "api", BootstrapToken: "boot", ReadCapability: "readcap"}
	env := Candidate(LocalURL(8030), "127.0.0.1", 2525, id.MailAPIToken, id.BootstrapToken)
	want := map[string]string{
		"WEBSITEBENCH_MAIL_API_URL":            "http://127.0.0.1:8030/emails",
		"WEBSITEBENCH_MAIL_API_TOKEN":          "api",
		"WEBSITEBENCH_MAIL_FROM":               "no-reply@candidate.websitebench.local",
		"WEBSITEBENCH_SMTP_HOST":               "127.0.0.1",
		"WEBSITEBENCH_SMTP_PORT":               "2525",
		"WEBSITEBENCH_SMTP_FROM":               "no-reply@candidate.websitebench.local",
		"WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL":   "http://127.0.0.1:8030/internal/bootstrap",
		"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN": "boot",
	}
	if len(env) != len(want) {
		t.Fatalf("got %d names", len(env))
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if err := Check(env, "/run/mailplane/plane.sock", "readcap"); err != nil {
		t.Fatalf("clean environment refused: %v", err)
	}
	for _, c := range []struct {
		key, value, want string
	}{
		{"EXTRA", "x", "unknown names: EXTRA"},
		{"WEBSITEBENCH_MAILPIT_HTTP_SOCKET", "/tmp/x", "exposed the mail plane's sockets"},
		{"MAILPLANE_SOCKET", "/tmp/x", "exposed the mail plane's sockets"},
		{"WEBSITEBENCH_SMTP_HOST", "/run/websitebench-mailpit/http.sock", "exposed a socket or secret"},
		{"WEBSITEBENCH_MAIL_API_URL", "http://x/run/mailplane/plane.sock", "exposed a socket or secret"},
		{"WEBSITEBENCH_MAIL_API_TOKEN", "readcap", "exposed a socket or secret"},
	} {
		bad := map[string]string{}
		for k, v := range env {
			bad[k] = v
		}
		bad[c.key] = c.value
		err := Check(bad, "/run/mailplane/plane.sock", "readcap")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s: %v", c.key, c.value, err)
		}
	}
}

func TestAuthoring(t *testing.T) {
	id := rpc.Identity{Namespace: "trial-x", ReadCapability: "cap", BootstrapToken: "boot"}
	env := Authoring(id, "http://127.0.0.1:8025", "127.0.0.1", 1025)
	if len(env) != 12 || env["WEBSITEBENCH_MAILBOX_CREDENTIAL"] != "cap" || env["WEBSITEBENCH_MAIL_API_TOKEN"] != "boot" ||
		env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL"] != "http://127.0.0.1:8025/internal/bootstrap" || env["WEBSITEBENCH_MAILBOX_ALLOWLIST"] != "" {
		t.Fatalf("got %v", env)
	}
}

// TestWithSMTPAuth: a host trial's environment names the SMTP credential
// its port requires (user "resend", the mail-API token), and the leak
// check accepts it.
func TestWithSMTPAuth(t *testing.T) {
	env := WithSMTPAuth(Candidate(LocalURL(8030), "127.0.0.1", 2525, "api", "boot"))
	if len(env) != 10 || env["WEBSITEBENCH_SMTP_USERNAME"] != "resend" || env["WEBSITEBENCH_SMTP_PASSWORD"] != "api" {
		t.Fatalf("got %v", env)
	}
	if err := Check(env, "/run/mailplane/plane.sock", "readcap"); err != nil {
		t.Fatalf("the SMTP credential refused: %v", err)
	}
	env["WEBSITEBENCH_SMTP_PASSWORD"] = "readcap"
	if err := Check(env, "/run/mailplane/plane.sock", "readcap"); err == nil {
		t.Fatal("a read capability as the SMTP password passed the leak check")
	}
}

// TestWithTLS: a writer that serves TLS adds the CA file, the implicit-TLS
// port and the HTTPS door's POST /emails to the environment, each only
// when served, and the leak check accepts them; without a CA nothing is
// added.
func TestWithTLS(t *testing.T) {
	env := WithTLS(WithSMTPAuth(Candidate(LocalURL(8030), "127.0.0.1", 2525, "api", "boot")), "/data/ca.pem", 4650, "https://127.0.0.1:8443")
	want := map[string]string{
		"WEBSITEBENCH_SMTP_CA_FILE":       "/data/ca.pem",
		"WEBSITEBENCH_SMTP_TLS_PORT":      "4650",
		"WEBSITEBENCH_MAIL_API_HTTPS_URL": "https://127.0.0.1:8443/emails",
		"WEBSITEBENCH_MAIL_API_CA_FILE":   "/data/ca.pem",
	}
	if len(env) != 14 {
		t.Fatalf("got %d names: %v", len(env), env)
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if err := Check(env, "/data/plane/plane.sock", "readcap"); err != nil {
		t.Fatalf("the TLS names refused: %v", err)
	}

	door := WithTLS(Candidate(LocalURL(8030), "127.0.0.1", 2525, "api", "boot"), "/data/ca.pem", 4650, "")
	if len(door) != 10 || door["WEBSITEBENCH_SMTP_TLS_PORT"] != "4650" || door["WEBSITEBENCH_MAIL_API_HTTPS_URL"] != "" {
		t.Fatalf("no HTTPS door: %v", door)
	}
	if plain := WithTLS(Candidate(LocalURL(8030), "127.0.0.1", 2525, "api", "boot"), "", 4650, "https://x"); len(plain) != 8 {
		t.Fatalf("no CA: %v", plain)
	}
}
