package serve_test

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/serve"
)

// parse runs mail-plane serve's flag parsing on args and returns the
// configuration it reads, without starting anything.
func parse(t *testing.T, args []string) serve.Config {
	t.Helper()
	for _, env := range []string{"MAILPLANE_SOCKET", "MAILPLANE_DATA", "MAILPLANE_MAILPIT"} {
		t.Setenv(env, "")
		os.Unsetenv(env)
	}
	var got serve.Config
	cmd := serve.Command()
	cmd.Action = func(c *cli.Context) error { got = serve.ConfigFromFlags(c); return nil }
	app := &cli.App{Name: "mail-plane", Commands: []*cli.Command{cmd}, DisableSliceFlagSeparator: true}
	if err := app.Run(append([]string{"mail-plane", "serve"}, args...)); err != nil {
		t.Fatalf("serve %v: %v", args, err)
	}
	return got
}

// TestConfigRoundTrip: a supervisor's plane child reads exactly the
// configuration its command line was made from, for the defaults and for
// a configuration that sets every field; and every flag of mail-plane
// serve is one Args writes, so a new flag cannot be left out of Config.
func TestConfigRoundTrip(t *testing.T) {
	if got := parse(t, nil); !reflect.DeepEqual(got, serve.Defaults()) {
		t.Fatalf("serve without flags reads\n%+v\nDefaults() is\n%+v", got, serve.Defaults())
	}
	all := serve.Config{Socket: "/run/p/plane.sock", SocketMode: "0600", Data: "/var/lib/p", GrantsDir: "/etc/p",
		AllowUID: []string{"writer=1001,1002", "admin=0"}, AllowGID: []string{"inbox=2001"}, RPCReadTimeout: 7 * time.Second,
		Store: serve.StoreConfig{Kind: "mailpit", DSNFile: "/etc/p/dsn", MailpitSocket: "/run/m/http.sock",
			MailpitSMTPSocket: "/run/m/smtp.sock", MailpitRuntime: "docker", MailpitBinary: "/usr/bin/mailpit",
			MailpitImage: "axllent/mailpit:v1", QuotaMessages: 0, QuotaBytes: 1 << 30, EventBudget: 9, EvidenceRetention: time.Hour},
		Advertise: serve.AdvertiseConfig{Writer: "http://127.0.0.1:1", Inbox: "http://127.0.0.1:2", Gateway: "http://127.0.0.1:3",
			SMTP: "127.0.0.1:4", CAFile: "/d/ca.pem", WriterHTTPS: "https://127.0.0.1:5", SMTPTLSPort: 6}}
	for _, cfg := range []serve.Config{serve.Defaults(), all} {
		if got := parse(t, cfg.Args()); !reflect.DeepEqual(got, cfg) {
			t.Errorf("Args %q read back as\n%+v\nwant\n%+v", cfg.Args(), got, cfg)
		}
	}
	written := map[string]bool{}
	for _, a := range all.Args() {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			written[name] = true
		}
	}
	for _, f := range serve.Command().Flags {
		if name := f.Names()[0]; !written[name] {
			t.Errorf("--%s is a flag of mail-plane serve that Config.Args never writes", name)
		}
	}
}
