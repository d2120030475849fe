package mailpit

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// upBundle is what mail-plane up --json prints.
type upBundle struct {
	Namespace      string            `json:"namespace"`
	Environment    map[string]string `json:"candidate_environment"`
	InboxURL       string            `json:"inbox_url"`
	APIURL         string            `json:"api_url"`
	ReadCapability string            `json:"read_capability"`
	DataDir        string            `json:"data_dir"`
	SMTPPort       int               `json:"smtp_port"`
	WriterURL      string            `json:"writer_url"`
	CAFile         string            `json:"ca_file"`
	InboxBaseURL   string            `json:"inbox_base_url"`
}

func startUp(t *testing.T, args ...string) (*itest.Proc, upBundle) {
	t.Helper()
	cmd := exec.Command(itest.Bin(t, "mail-plane"), append([]string{"--log-level", "warn", "up", "--store", "mailpit", "--json"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := itest.StartCmd(t, cmd, "mail-plane up")
	line := itest.ReadLine(t, stdout, 60*time.Second)
	var b upBundle
	if err := json.Unmarshal([]byte(line), &b); err != nil {
		t.Fatalf("up printed %q: %v\n%s", line, err, p.Output())
	}
	go io.Copy(io.Discard, stdout)
	return p, b
}

// postEmail sends through the writer's POST /emails; it returns the status
// and the error code of the body.
func postEmail(t *testing.T, b upBundle, subject string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"from": rpc.CandidateSender, "to": "agent@example.com", "subject": subject, "text": "code 123456"})
	req, _ := http.NewRequest(http.MethodPost, b.Environment["WEBSITEBENCH_MAIL_API_URL"], strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+b.Environment["WEBSITEBENCH_MAIL_API_TOKEN"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error string }
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error
}

func sendSMTP(b upBundle, subject string) error {
	return itest.SendSMTP(rpc.Bundle{CAFile: b.CAFile}, b.SMTPPort, b.Environment["WEBSITEBENCH_SMTP_PASSWORD"], "Subject: "+subject+"\r\n\r\nvia smtp\r\n")
}

// listAPI reads the namespace through the evaluator's API.
func listAPI(t *testing.T, b upBundle) (int, []string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.APIURL+"/api/namespaces/"+b.Namespace+"/messages", nil)
	req.Header.Set("Authorization", "Bearer "+b.ReadCapability)
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Messages []struct{ Subject string }
	}
	json.NewDecoder(resp.Body).Decode(&list)
	var subjects []string
	for _, m := range list.Messages {
		subjects = append(subjects, m.Subject)
	}
	return resp.StatusCode, subjects
}

func status(url string) int {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// mail-plane up --store mailpit, end to end with the real surfaces, on a
// Mailpit named by socket: mail in by HTTP and SMTP, read by the
// evaluator's API; Mailpit down is 503 / SMTP 451 everywhere, and service
// comes back with it.
func TestUpWithNamedMailpit(t *testing.T) {
	srv := startServer(t)
	p, b := startUp(t, "--mailpit-socket", srv.HTTP)
	if code, e := postEmail(t, b, "by http"); code != http.StatusOK {
		t.Fatalf("POST /emails: %d %s", code, e)
	}
	if err := sendSMTP(b, "by smtp"); err != nil {
		t.Fatalf("SMTP: %v", err)
	}
	if code, subjects := listAPI(t, b); code != http.StatusOK || strings.Join(subjects, ",") != "by http,by smtp" {
		t.Fatalf("API list: %d %v", code, subjects)
	}
	if n := srv.total(); n != 2 {
		t.Fatalf("Mailpit holds %d messages", n)
	}

	srv.kill()
	if code, e := postEmail(t, b, "while down"); code != http.StatusServiceUnavailable {
		t.Fatalf("POST /emails while Mailpit is down: %d %s", code, e)
	}
	if err := sendSMTP(b, "while down"); err == nil || !strings.Contains(err.Error(), "451") {
		t.Fatalf("SMTP while Mailpit is down: %v", err)
	}
	if code, _ := listAPI(t, b); code != http.StatusServiceUnavailable {
		t.Fatalf("API list while Mailpit is down: %d", code)
	}
	for _, u := range []string{b.WriterURL, b.InboxBaseURL, b.APIURL} {
		if code := status(u + "/healthz"); code != http.StatusServiceUnavailable {
			t.Errorf("%s/healthz while Mailpit is down: %d", u, code)
		}
	}

	srv.start()
	itest.WaitHTTP(t, b.WriterURL+"/healthz", http.StatusOK, p)
	if code, e := postEmail(t, b, "after"); code != http.StatusOK {
		t.Fatalf("POST /emails after Mailpit is back: %d %s", code, e)
	}
	if code, subjects := listAPI(t, b); code != http.StatusOK || strings.Join(subjects, ",") != "by http,by smtp,after" {
		t.Fatalf("API list after: %d %v", code, subjects)
	}
	if code := p.Stop(t); code != 0 {
		t.Fatalf("up exited %d", code)
	}
}

// mail-plane up --store mailpit with no Mailpit named: the plane runs its
// own, and it goes when up does.
func TestUpWithOwnMailpit(t *testing.T) {
	p, b := startUp(t, "--mailpit-binary", itest.Mailpit(t))
	if code, e := postEmail(t, b, "own mailpit"); code != http.StatusOK {
		t.Fatalf("POST /emails: %d %s", code, e)
	}
	if code, subjects := listAPI(t, b); code != http.StatusOK || len(subjects) != 1 {
		t.Fatalf("API list: %d %v", code, subjects)
	}
	db := filepath.Join(b.DataDir, "plane", "mailpit", "mailpit.db")
	if n := len(mailpitPIDs(db)); n != 1 {
		t.Fatalf("%d Mailpits on %s", n, db)
	}
	if code := p.Stop(t); code != 0 {
		t.Fatalf("up exited %d", code)
	}
	itest.Eventually(t, "Mailpit to stop with up", itest.Bound, func() bool { return len(mailpitPIDs(db)) == 0 })
}
