package supervisor_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestUpEndToEnd runs `mail-plane up --json` as a user would: the bundle
// names everything; a candidate sends through the writer with its
// environment, the agent reads the mail in the inbox, the evaluator gets
// the code from the gateway; SIGTERM stops everything with exit 0.
func TestUpEndToEnd(t *testing.T) {
	cmd := exec.Command(itest.Bin(t, "mail-plane"), "up", "--json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	up := itest.StartCmd(t, cmd, "mail-plane up")
	line := itest.ReadLine(t, stdout, 30*time.Second)
	var b struct {
		Namespace      string            `json:"namespace"`
		Env            map[string]string `json:"candidate_environment"`
		InboxURL       string            `json:"inbox_url"`
		APIURL         string            `json:"api_url"`
		ReadCapability string            `json:"read_capability"`
		PlaneSocket    string            `json:"plane_socket"`
		DataDir        string            `json:"data_dir"`
	}
	if err := json.Unmarshal([]byte(line), &b); err != nil {
		t.Fatalf("bundle %q: %v\n%s", line, err, up.Output())
	}
	if b.Namespace == "" || b.InboxURL == "" || b.APIURL == "" || len(b.ReadCapability) != 64 || b.PlaneSocket == "" {
		t.Fatalf("bundle incomplete: %s", line)
	}
	// The reference's 8 variables, the SMTP credential a host trial's
	// port requires, the writer's TLS (the CA file, the implicit-TLS
	// port, the HTTPS door and its CA), and the trial's webhook
	// verification material (Resend's, SendGrid's, Mailgun's).
	if len(b.Env) != 17 || b.Env["WEBSITEBENCH_MAIL_FROM"] != rpc.CandidateSender || b.Env["WEBSITEBENCH_SMTP_USERNAME"] != "resend" ||
		!strings.HasPrefix(b.Env["RESEND_WEBHOOK_SECRET"], "whsec_") ||
		b.Env["WEBSITEBENCH_SMTP_PASSWORD"] != b.Env["WEBSITEBENCH_MAIL_API_TOKEN"] ||
		b.Env["WEBSITEBENCH_SMTP_CA_FILE"] == "" || b.Env["WEBSITEBENCH_SMTP_TLS_PORT"] == "" || b.Env["WEBSITEBENCH_MAIL_API_HTTPS_URL"] == "" {
		t.Fatalf("candidate environment: %v", b.Env)
	}
	for k, v := range b.Env {
		if strings.Contains(v, b.ReadCapability) || strings.Contains(v, b.PlaneSocket) {
			t.Fatalf("%s leaks the read capability or the plane socket", k)
		}
	}

	// Candidate: POST /emails with the environment it was given.
	body := `{"from":"` + b.Env["WEBSITEBENCH_MAIL_FROM"] + `","to":"agent@example.com","subject":"Welcome","text":"Your code is 731904. Verify at http://site.example/verify?t=abc"}`
	req, _ := http.NewRequest(http.MethodPost, b.Env["WEBSITEBENCH_MAIL_API_URL"], strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b.Env["WEBSITEBENCH_MAIL_API_TOKEN"])
	req.Header.Set("Content-Type", "application/json")
	resp := do(t, req)
	if resp.code != http.StatusOK || !strings.Contains(resp.body, `"id"`) {
		t.Fatalf("POST /emails: %d %s", resp.code, resp.body)
	}

	// Agent: the bare origin redirects to the inbox, which lists the mail.
	get, _ := http.NewRequest(http.MethodGet, b.InboxURL+"/", nil)
	resp = do(t, get)
	if resp.code != http.StatusOK || !strings.Contains(resp.body, "Welcome") || strings.Contains(resp.body, b.ReadCapability) {
		t.Fatalf("inbox: %d %s", resp.code, resp.body)
	}

	// Evaluator: the latest message's code.
	get, _ = http.NewRequest(http.MethodGet, b.APIURL+"/api/namespaces/"+b.Namespace+"/messages/latest", nil)
	get.Header.Set("Authorization", "Bearer "+b.ReadCapability)
	resp = do(t, get)
	var m struct {
		OTP   string   `json:"otp"`
		Links []string `json:"links"`
	}
	json.Unmarshal([]byte(resp.body), &m)
	if resp.code != http.StatusOK || m.OTP != "731904" {
		t.Fatalf("gateway latest: %d %s", resp.code, resp.body)
	}

	// The evaluator from a shell: mail-plane wait prints the code, and
	// exits 1 when nothing new arrives in time.
	capFile := itest.WriteSecret(t, "capability", b.ReadCapability)
	wait := func(args ...string) (string, int) {
		cmd := exec.Command(itest.Bin(t, "mail-plane"), append([]string{"wait", "--api", b.APIURL, "--namespace", b.Namespace,
			"--capability-file", capFile, "--recipient", "agent@example.com"}, args...)...)
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		return string(out), 0
	}
	if out, code := wait("--timeout", "5s"); out != "731904\n" || code != 0 {
		t.Fatalf("wait: %q exit %d", out, code)
	}
	if out, code := wait("--json", "--timeout", "5s"); code != 0 || !strings.Contains(out, `"otp":"731904"`) {
		t.Fatalf("wait --json: %q exit %d", out, code)
	}
	if out, code := wait("--after", "1", "--timeout", "300ms"); code != 1 || out != "" {
		t.Fatalf("wait past the last message: %q exit %d", out, code)
	}

	if code := up.Stop(t); code != 0 {
		t.Fatalf("up exited %d after SIGTERM:\n%s", code, up.Output())
	}
	// No child survives: every process that was started with the data
	// directory in its command line is gone (a child still running after
	// the bound is one up left behind).
	itest.Eventually(t, "no child left running", itest.Bound, func() bool { return len(processesMentioning(t, b.DataDir)) == 0 })
	if _, err := os.Stat(b.DataDir); !os.IsNotExist(err) {
		t.Fatalf("temporary data directory left behind: %v", err)
	}
}

type answer struct {
	code int
	body string
}

func do(t testing.TB, req *http.Request) answer {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}
}

// processesMentioning lists live processes whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && strings.Contains(string(stat), ") Z ") {
			continue // a zombie is not running
		}
		out = append(out, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}
