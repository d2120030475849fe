package supervisor_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// upBundle is the part of up's JSON line the TLS test reads.
type upBundle struct {
	Env         map[string]string `json:"candidate_environment"`
	CAFile      string            `json:"ca_file"`
	SMTPTLSPort int               `json:"smtp_tls_port"`
	HTTPSURL    string            `json:"writer_https_url"`
	APIURL      string            `json:"api_url"`
	Namespace   string            `json:"namespace"`
	ReadCap     string            `json:"read_capability"`
}

func startUp(t *testing.T, data string) (*itest.Proc, upBundle) {
	t.Helper()
	cmd := exec.Command(itest.Bin(t, "mail-plane"), "up", "--json", "--data", data)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	up := itest.StartCmd(t, cmd, "mail-plane up")
	line := itest.ReadLine(t, stdout, 30*time.Second)
	var b upBundle
	if err := json.Unmarshal([]byte(line), &b); err != nil {
		t.Fatalf("bundle %q: %v\n%s", line, err, up.Output())
	}
	return up, b
}

// TestUpTLS: mail-plane up mints a CA in the plane's data directory (its
// key 0600, and nowhere else), names its certificate in the bundle as
// ca_file and the implicit-TLS port as smtp_tls_port; `ca export` prints
// the same certificate; a candidate that trusts only that certificate
// sends by SMTP_SSL with AUTH and by HTTPS; `ca issue` on the same data
// keeps the CA.
func TestUpTLS(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	up, b := startUp(t, data)
	if b.CAFile == "" || b.SMTPTLSPort == 0 || !strings.HasPrefix(b.HTTPSURL, "https://") {
		t.Fatalf("bundle without TLS: %+v", b)
	}
	caPEM, err := os.ReadFile(b.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	exported, err := exec.Command(itest.Bin(t, "mail-plane"), "ca", "export", "--data", data).Output()
	if err != nil || string(exported) != string(caPEM) {
		t.Fatalf("ca export: %v\n%s", err, exported)
	}
	keyFile := filepath.Join(data, "plane", "ca", "ca.key")
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v %v", fi, err)
	}
	key, _ := os.ReadFile(keyFile)
	filepath.Walk(data, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || path == keyFile || fi.Size() > 1<<20 {
			return nil
		}
		if b, _ := os.ReadFile(path); strings.Contains(string(b), strings.TrimSpace(string(key))) {
			t.Errorf("the CA key is also in %s", path)
		}
		return nil
	})

	token := b.Env["WEBSITEBENCH_MAIL_API_TOKEN"]
	py := fmt.Sprintf(`
import smtplib, ssl
from email.message import EmailMessage
m = EmailMessage()
m["From"] = %q
m["To"] = "agent@example.com"
m["Subject"] = "over SMTP_SSL"
m.set_content("Your code is 271828.")
ctx = ssl.create_default_context(cafile=%q)
with smtplib.SMTP_SSL("127.0.0.1", %d, timeout=10, context=ctx) as s:
    s.login("resend", %q)
    s.send_message(m)
`, rpc.CandidateSender, b.CAFile, b.SMTPTLSPort, token)
	if out, err := exec.Command("python3", "-c", py).CombinedOutput(); err != nil {
		t.Fatalf("SMTP_SSL: %v\n%s", err, out)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(exported)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	req, _ := http.NewRequest(http.MethodPost, b.HTTPSURL+"/emails", strings.NewReader(
		`{"from":"`+rpc.CandidateSender+`","to":"agent@example.com","subject":"over HTTPS","text":"hello"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("HTTPS POST /emails: %d", resp.StatusCode)
	}

	req, _ = http.NewRequest(http.MethodGet, b.APIURL+"/api/namespaces/"+b.Namespace+"/messages", nil)
	req.Header.Set("Authorization", "Bearer "+b.ReadCap)
	got := do(t, req)
	if got.code != 200 || !strings.Contains(got.body, "over SMTP_SSL") || !strings.Contains(got.body, "over HTTPS") {
		t.Fatalf("gateway: %d %s", got.code, got.body)
	}

	if code := up.Stop(t); code != 0 {
		t.Fatalf("up exited %d", code)
	}
	// The CA outlives the stack: issuing another leaf on the same data
	// uses it, and the new leaf verifies against the exported certificate.
	dir := t.TempDir()
	cert, leafKey := filepath.Join(dir, "w.pem"), filepath.Join(dir, "w.key")
	if out, err := exec.Command(itest.Bin(t, "mail-plane"), "ca", "issue", "--data", data, "--name", "mail.test",
		"--cert", cert, "--key", leafKey).CombinedOutput(); err != nil {
		t.Fatalf("ca issue: %v\n%s", err, out)
	}
	again, _ := exec.Command(itest.Bin(t, "mail-plane"), "ca", "export", "--data", data).Output()
	if string(again) != string(caPEM) {
		t.Fatal("ca issue minted another CA")
	}
	pair, err := tls.LoadX509KeyPair(cert, leafKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "mail.test"}); err != nil {
		t.Fatalf("issued leaf: %v", err)
	}
}
