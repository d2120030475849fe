package operator

import (
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/urfave/cli/v2"
	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/credfiles"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// mail-plane env candidate for a strict-mode writer: with --ca-file the
// environment names the CA and the TLS ports the writer serves, without
// it none of them; a TLS port without the CA is a usage error.
func TestEnvCandidateTLS(t *testing.T) {
	dir := t.TempDir()
	id := rpc.Identity{Namespace: "trial-0123456789abcdef0123456789abcdef", MailAPIToken: "api-token", BootstrapToken: "boot-token", ReadCapability: "read-cap"}
	if err := credfiles.WriteIdentity(dir, id); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (map[string]string, int) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout := os.Stdout
		os.Stdout = w
		code := cliapp.Run(&cli.App{Name: "mail-plane", Flags: logging.Flags, Commands: []*cli.Command{EnvCommand()}},
			append([]string{"mail-plane", "env", "candidate", "--json", "--trial-dir", dir, "--writer-port", "8030", "--smtp-port", "2525",
				"--socket", "/run/mailplane/plane.sock"}, args...))
		os.Stdout = stdout
		w.Close()
		out, _ := io.ReadAll(r)
		var env map[string]string
		if code == 0 {
			if err := json.Unmarshal(out, &env); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
		}
		return env, code
	}
	env, code := run("--ca-file", "/srv/ca.pem", "--smtp-tls-port", "4650", "--https-port", "8443")
	for k, v := range map[string]string{
		"WEBSITEBENCH_SMTP_PORT":          "2525",
		"WEBSITEBENCH_SMTP_CA_FILE":       "/srv/ca.pem",
		"WEBSITEBENCH_SMTP_TLS_PORT":      "4650",
		"WEBSITEBENCH_MAIL_API_HTTPS_URL": "https://127.0.0.1:8443/emails",
		"WEBSITEBENCH_MAIL_API_CA_FILE":   "/srv/ca.pem",
	} {
		if code != 0 || env[k] != v {
			t.Errorf("exit %d, %s = %q, want %q", code, k, env[k], v)
		}
	}
	if env, code := run(); code != 0 || len(env) != 8 || env["WEBSITEBENCH_SMTP_CA_FILE"] != "" {
		t.Errorf("without TLS: exit %d, %v", code, env)
	}
	if _, code := run("--smtp-tls-port", "4650"); code != cliapp.ExitUsage {
		t.Errorf("a TLS port without --ca-file: exit %d", code)
	}
}
