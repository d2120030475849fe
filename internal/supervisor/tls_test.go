package supervisor_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
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

func startUp(t *testing.T, data string, args ...string) (*itest.Proc, upBundle) {
	t.Helper()
	cmd := exec.Command(itest.Bin(t, "mail-plane"), append([]string{"up", "--json", "--data", data}, args...)...)
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
// keeps the CA for a name it permits and mints a new one for another; a
// restart with a --tls-name outside the CA's constraints serves a leaf of
// a new CA, in the same ca_file.
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
	// The CA outlives the stack: issuing another leaf on the same data for
	// a name it was minted for uses it, and the new leaf verifies against
	// the exported certificate.
	dir := t.TempDir()
	cert, leafKey := filepath.Join(dir, "w.pem"), filepath.Join(dir, "w.key")
	issue := func(name string) string {
		out, err := exec.Command(itest.Bin(t, "mail-plane"), "ca", "issue", "--data", data, "--name", name,
			"--cert", cert, "--key", leafKey).CombinedOutput()
		if err != nil {
			t.Fatalf("ca issue: %v\n%s", err, out)
		}
		return string(out)
	}
	issue("localhost")
	again, _ := exec.Command(itest.Bin(t, "mail-plane"), "ca", "export", "--data", data).Output()
	if string(again) != string(caPEM) {
		t.Fatal("ca issue for localhost minted another CA")
	}
	leafFor := func() *x509.Certificate {
		pair, err := tls.LoadX509KeyPair(cert, leafKey)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(pair.Certificate[0])
		return leaf
	}
	if _, err := leafFor().Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost"}); err != nil {
		t.Fatalf("issued leaf: %v", err)
	}
	// A name outside the CA's constraints mints a new CA: the old one
	// (which candidates were told to trust) does not verify the new leaf.
	if out := issue("mail.test"); !strings.Contains(out, "minted a new CA") {
		t.Errorf("ca issue for mail.test: %q; want a note that a new CA was minted", out)
	}
	renewed, _ := exec.Command(itest.Bin(t, "mail-plane"), "ca", "export", "--data", data).Output()
	if string(renewed) == string(caPEM) {
		t.Fatal("ca issue for mail.test kept the CA constrained to other names")
	}
	if _, err := leafFor().Verify(x509.VerifyOptions{Roots: roots, DNSName: "mail.test"}); err == nil {
		t.Fatal("the old CA verifies a leaf of the new one")
	}
	newRoots := x509.NewCertPool()
	newRoots.AppendCertsFromPEM(renewed)
	if _, err := leafFor().Verify(x509.VerifyOptions{Roots: newRoots, DNSName: "mail.test"}); err != nil {
		t.Fatalf("leaf of the new CA: %v", err)
	}

	// The same HTTPS port: a restart hands back the bundles of trials
	// still open as they were.
	_, httpsPort, _ := net.SplitHostPort(strings.TrimPrefix(b.HTTPSURL, "https://"))
	up, b2 := startUp(t, data, "--tls-name", "other.test", "--writer-https-port", httpsPort)
	if !up.WaitOutput("local CA minted anew", itest.Bound) {
		t.Error("the restart did not log that it minted a new CA")
	}
	current, err := os.ReadFile(b2.CAFile)
	if err != nil || b2.CAFile != b.CAFile || string(current) == string(renewed) {
		t.Fatalf("ca_file %s after a restart for other.test: %v (changed: %v)", b2.CAFile, err, string(current) != string(renewed))
	}
	for _, c := range []struct {
		roots []byte
		ok    bool
	}{{current, true}, {caPEM, false}, {renewed, false}} {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(c.roots)
		conn, err := tls.Dial("tcp", strings.TrimPrefix(b2.HTTPSURL, "https://"), &tls.Config{RootCAs: pool, ServerName: "other.test"})
		if err == nil {
			conn.Close()
		}
		if (err == nil) != c.ok {
			t.Errorf("HTTPS as other.test trusting %s CA: %v", map[bool]string{true: "the new", false: "an old"}[c.ok], err)
		}
	}
}
