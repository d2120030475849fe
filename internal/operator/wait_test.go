package operator

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/logging"
)

// mail-plane wait against a stand-in gateway: the code by default, the
// action link with --link, exit 1 when the message has none.
func TestWaitCommand(t *testing.T) {
	const ns = "trial-0123456789abcdef0123456789abcdef"
	answer := ""
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/namespaces/"+ns+"/messages/latest" || r.Header.Get("Authorization") != "Bearer cap" {
			http.Error(w, `{"error":"not_found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer gw.Close()
	capFile := filepath.Join(t.TempDir(), "capability")
	if err := os.WriteFile(capFile, []byte("cap\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout := os.Stdout
		os.Stdout = w
		code := cliapp.Run(&cli.App{Name: "mail-plane", Flags: logging.Flags, Commands: []*cli.Command{WaitCommand()}}, append([]string{"mail-plane", "wait", "--api", gw.URL, "--namespace", ns,
			"--capability-file", capFile, "--recipient", "user@example.com", "--timeout", "5s"}, args...))
		os.Stdout = stdout
		w.Close()
		out, _ := io.ReadAll(r)
		return string(out), code
	}

	answer = `{"action_link":"https://site.example/verify?t=1&u=2","attachments":[],"codes":["884213"],"envelope_from":"s@example.com",` +
		`"id":1,"links":["https://site.example/verify?t=1&u=2"],"namespace":"` + ns + `","otp":"884213","recipients":["user@example.com"],"subject":"s","text":"t"}`
	if out, code := run(); out != "884213\n" || code != 0 {
		t.Errorf("wait: %q exit %d", out, code)
	}
	if out, code := run("--link"); out != "https://site.example/verify?t=1&u=2\n" || code != 0 {
		t.Errorf("wait --link: %q exit %d", out, code)
	}
	if out, code := run("--json"); !strings.Contains(out, `"action_link":"https://site.example/verify?t=1&u=2"`) || code != 0 {
		t.Errorf("wait --json: %q exit %d", out, code)
	}
	answer = `{"action_link":null,"attachments":[],"codes":[],"envelope_from":"s@example.com","id":2,"links":[],"namespace":"` + ns +
		`","otp":null,"recipients":["user@example.com"],"subject":"s","text":"t"}`
	if out, code := run("--link"); out != "" || code != 1 {
		t.Errorf("wait --link on a message without one: %q exit %d", out, code)
	}
	if out, code := run(); out != "" || code != 1 {
		t.Errorf("wait on a message without a code: %q exit %d", out, code)
	}
}
