package supervisor_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/itest"
)

// A token with every kind of character the reference allows ("any
// characters", at least 32).
const sidecarToken = "tok+/=_-.~!$&'()*,;:@%20 x0123456789abcdefXYZ"

func sidecarCmd(t *testing.T, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(itest.Bin(t, "mail-plane"), append([]string{"sidecar"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// TestSidecarStartupRefusals: the reference's start-up errors, verbatim,
// with its exit codes.
func TestSidecarStartupRefusals(t *testing.T) {
	cases := []struct {
		env    []string
		args   []string
		code   int
		stderr string
	}{
		{[]string{"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN="}, nil, 1, "WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN must be at least 32 characters\n"},
		{[]string{"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN=" + strings.Repeat("x", 31)}, nil, 1, "WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN must be at least 32 characters\n"},
		{[]string{"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN=" + sidecarToken, "WEBSITEBENCH_MAILPIT_HTTP_SOCKET=/nonexistent/http.sock"}, nil, 1,
			"Mailpit is not ready on its configured HTTP socket; refusing an in-memory production mailbox\n"},
		{[]string{"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN=" + sidecarToken, "WEBSITEBENCH_MAILPIT_HTTP_SOCKET= "}, []string{"--require-mailpit"}, 1,
			"WEBSITEBENCH_MAILPIT_HTTP_SOCKET is not configured; refusing an in-memory production mailbox\n"},
		{[]string{"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN=" + sidecarToken}, []string{"--smtp-port", "x"}, 2, ""},
	}
	for _, c := range cases {
		cmd := sidecarCmd(t, c.env, c.args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != c.code {
			t.Errorf("%v %v: %v, want exit %d", c.env, c.args, err, c.code)
		}
		if c.stderr != "" && stderr.String() != c.stderr {
			t.Errorf("%v: stderr %q, want %q", c.env, stderr.String(), c.stderr)
		}
	}
}

// TestSidecar runs the drop-in with the reference's flags and checks its
// ports, its routes through our split, and that the four processes behind
// it each hold only their own secrets.
func TestSidecar(t *testing.T) {
	smtpPort, apiPort, inboxPort := itest.FreePort(t), itest.FreePort(t), itest.FreePort(t)
	cmd := sidecarCmd(t, []string{"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN=" + sidecarToken, "WEBSITEBENCH_MAILBOX_SMTP_ADVERTISE_HOST=mail.test"},
		"--smtp-port", strconv.Itoa(smtpPort), "--http-port", strconv.Itoa(apiPort), "--inbox-port", strconv.Itoa(inboxPort))
	stdout, _ := cmd.StdoutPipe()
	sc := itest.StartCmd(t, cmd, "mail-plane sidecar")
	if line := itest.ReadLine(t, stdout, 30*time.Second); line != fmt.Sprintf("inbox listening on 127.0.0.1:%d\n", inboxPort) {
		t.Fatalf("stdout %q\n%s", line, sc.Output())
	}
	api := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	get := func(url, bearer string) answer {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		return do(t, req)
	}

	// Bootstrap: the reference's contract — the read capability, the bound
	// SMTP port, the advertised host.
	a := get(api+"/internal/bootstrap?x=1", sidecarToken)
	var boot struct {
		Capability, Namespace, SMTPHost string
		SMTPPort                        int
	}
	var raw map[string]any
	json.Unmarshal([]byte(a.body), &raw)
	boot.Capability, _ = raw["capability"].(string)
	boot.Namespace, _ = raw["namespace"].(string)
	boot.SMTPHost, _ = raw["smtp_host"].(string)
	if p, ok := raw["smtp_port"].(float64); ok {
		boot.SMTPPort = int(p)
	}
	if a.code != 200 || len(boot.Capability) != 64 || !strings.HasPrefix(boot.Namespace, "trial-") || boot.SMTPHost != "mail.test" || boot.SMTPPort != smtpPort {
		t.Fatalf("bootstrap: %d %s", a.code, a.body)
	}
	if a := get(api+"/internal/bootstrap", boot.Capability); a.code != 403 {
		t.Fatalf("bootstrap with the capability: %d", a.code)
	}

	// POST /emails takes the bootstrap token, not the capability.
	post := func(bearer string) answer {
		req, _ := http.NewRequest(http.MethodPost, api+"/emails", strings.NewReader(`{"from":"site@reference.example","to":"api@example.com","subject":"API hello","text":"Your code is 246810."}`))
		req.Header.Set("Authorization", "Bearer "+bearer)
		req.Header.Set("Content-Type", "application/json")
		return do(t, req)
	}
	if a := post(sidecarToken); a.code != 200 {
		t.Fatalf("POST /emails: %d %s", a.code, a.body)
	}
	if a := post(boot.Capability); a.code != 401 {
		t.Fatalf("POST /emails with the capability: %d %s", a.code, a.body)
	}

	// SMTP selects the namespace by header, with the capability folded
	// the way Python's email package folds it.
	msg := "From: site@reference.example\r\nTo: smtp@example.com\r\nSubject: SMTP hello\r\n" +
		"X-WebsiteBench-Namespace: " + boot.Namespace + "\r\nX-WebsiteBench-Capability:\r\n " + boot.Capability + "\r\n\r\ncode 1357\r\n"
	if err := smtp.SendMail(fmt.Sprintf("127.0.0.1:%d", smtpPort), nil, "site@reference.example", []string{"smtp@example.com"}, []byte(msg)); err != nil {
		t.Fatalf("SMTP: %v", err)
	}
	wrong := strings.Replace(msg, boot.Capability, strings.Repeat("0", 64), 1)
	if err := smtp.SendMail(fmt.Sprintf("127.0.0.1:%d", smtpPort), nil, "site@reference.example", []string{"smtp@example.com"}, []byte(wrong)); err == nil || !strings.Contains(err.Error(), "550") {
		t.Fatalf("SMTP with a wrong capability: %v", err)
	}

	// Reads through the API port reach the gateway.
	a = get(api+"/api/namespaces/"+boot.Namespace+"/messages", boot.Capability)
	if a.code != 200 || !strings.Contains(a.body, "API hello") || !strings.Contains(a.body, "SMTP hello") {
		t.Fatalf("messages: %d %s", a.code, a.body)
	}
	if a := get(api+"/api/namespaces/"+boot.Namespace+"/messages", sidecarToken); a.code != 403 {
		t.Fatalf("messages with the bootstrap token: %d", a.code)
	}
	if a := get(api+"/inbox/"+boot.Namespace, boot.Capability); a.code != 200 || !strings.Contains(a.body, "SMTP hello") {
		t.Fatalf("API inbox view: %d", a.code)
	}
	if a := get(api+"/healthz", ""); a.code != 200 {
		t.Fatalf("healthz: %d", a.code)
	}
	if a := get(api+"/", ""); a.code != 404 {
		t.Fatalf("/: %d", a.code)
	}
	// The agent's inbox, with no credential.
	if a := get(fmt.Sprintf("http://127.0.0.1:%d/", inboxPort), ""); a.code != 200 || !strings.Contains(a.body, "API hello") || strings.Contains(a.body, "246810\"") {
		t.Fatalf("inbox: %d %s", a.code, a.body)
	}

	// Five processes behind the drop-in, each holding only its own secrets.
	children := map[string]int{}
	for _, pid := range childPIDs(t, sc.Cmd.Process.Pid) {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		name := filepath.Base(exe)
		if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(cmdline), "\x00route\x00") {
			name += " route"
		}
		children[name] = pid
	}
	for _, name := range []string{"mail-plane", "mail-plane route", "mail-writer", "mail-gateway", "mail-inbox"} {
		if children[name] == 0 {
			t.Fatalf("no %s among the children: %v", name, children)
		}
	}
	for _, name := range []string{"mail-writer", "mail-inbox"} {
		if where := holds(t, children[name], boot.Capability); where != "" {
			t.Errorf("%s holds the read capability in %s", name, where)
		}
	}
	if where := holds(t, children["mail-inbox"], sidecarToken); where != "" {
		t.Errorf("mail-inbox holds the bootstrap token in %s", where)
	}
	// The API port, the candidate's untrusted HTTP, is served by the
	// router alone, which holds no grant; the sidecar, which holds the
	// admin grant, does not have it open.
	if !listensOn(t, children["mail-plane route"], apiPort) || listensOn(t, sc.Cmd.Process.Pid, apiPort) {
		t.Errorf("the API port %d is not the router's alone", apiPort)
	}
	if where := holds(t, children["mail-plane route"], ident.GrantPrefix); where != "" {
		t.Errorf("the API router holds a grant in %s", where)
	}

	// A POST with no framing (its body to EOF, then a half-close) is an
	// input error in the writer's check order, never an outage.
	for _, c := range []struct {
		token, want string
	}{{sidecarToken, "411 content_length_required"}, {"wrong", "401 unauthorized"}} {
		got := halfClosedPost(t, apiPort, c.token)
		if !strings.Contains(got, `"statusCode":`+c.want[:3]) || !strings.Contains(got, `"error":"`+c.want[4:]+`"`) {
			t.Errorf("unframed POST with token %q: %.300s, want %s", c.token, got, c.want)
		}
	}

	if code := sc.Stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}

// childPIDs lists the direct children of pid.
func childPIDs(t *testing.T, pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// listensOn reports whether process pid has the TCP socket listening on
// port open.
func listensOn(t *testing.T, pid, port int) bool {
	t.Helper()
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(table)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// local address, state 0A (LISTEN), inode
			if len(f) > 9 && strings.HasSuffix(f[1], fmt.Sprintf(":%04X", port)) && f[3] == "0A" {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		t.Fatalf("nothing listens on port %d", port)
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && inodes[target] {
			return true
		}
	}
	return false
}

// holds reports where process pid keeps secret: its environment, its
// command line, or a regular file it has open.
func holds(t *testing.T, pid int, secret string) string {
	for _, f := range []string{"environ", "cmdline"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			return f
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil || !strings.HasPrefix(target, "/") {
			continue
		}
		if b, err := os.ReadFile(target); err == nil && strings.Contains(string(b), secret) {
			return target
		}
	}
	return ""
}

// halfClosedPost sends POST /emails with no Content-Length and a body to
// EOF, half-closes, and returns the raw answer.
func halfClosedPost(t *testing.T, port int, token string) string {
	t.Helper()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(c, "POST /emails HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"from\":\"a@example.com\"}", token)
	c.(*net.TCPConn).CloseWrite()
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestAuthoringRotation: the authoring gateway prints the capture's
// environment; after `trial rotate`, mail lands in the new namespace, and
// the old one is sealed and still readable by the evaluator.
func TestAuthoringRotation(t *testing.T) {
	data := itest.ShortTempDir(t)
	apiPort, smtpPort := itest.FreePort(t), itest.FreePort(t)
	cmd := sidecarCmd(t, []string{"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN=" + sidecarToken},
		"--profile", "authoring", "--namespace", "capture-1", "--data", data,
		"--http-port", strconv.Itoa(apiPort), "--smtp-port", strconv.Itoa(smtpPort))
	stdout, _ := cmd.StdoutPipe()
	sc := itest.StartCmd(t, cmd, "mail-plane sidecar --profile authoring")
	var env map[string]string
	if line := itest.ReadLine(t, stdout, 30*time.Second); json.Unmarshal([]byte(line), &env) != nil || len(env) != 12 {
		t.Fatalf("authoring environment: %q\n%s", line, sc.Output())
	}
	if env["WEBSITEBENCH_MAILBOX_NAMESPACE"] != "capture-1" || env["WEBSITEBENCH_MAIL_API_TOKEN"] != sidecarToken ||
		env["WEBSITEBENCH_SMTP_PORT"] != strconv.Itoa(smtpPort) || env["WEBSITEBENCH_MAILBOX_URL"] != fmt.Sprintf("http://127.0.0.1:%d", apiPort) {
		t.Fatalf("authoring environment: %v", env)
	}
	oldCap := env["WEBSITEBENCH_MAILBOX_CREDENTIAL"]
	sendSMTP := func(subject string) error {
		msg := "Subject: " + subject + "\r\nX-WebsiteBench-Namespace: capture-1\r\nX-WebsiteBench-Capability: " + oldCap + "\r\n\r\nbody\r\n"
		return smtp.SendMail(fmt.Sprintf("127.0.0.1:%d", smtpPort), nil, "site@reference.example", []string{"user@example.com"}, []byte(msg))
	}
	if err := sendSMTP("before"); err != nil {
		t.Fatal(err)
	}

	rotate := exec.Command(itest.Bin(t, "mail-plane"), "trial", "rotate", "--new-namespace", "capture-2", "--json",
		"--socket", filepath.Join(data, "run", "plane.sock"), "--grant-file", filepath.Join(data, "plane", "admin.grant"), "capture-1")
	out, err := rotate.Output()
	var rot struct {
		Namespace      string `json:"namespace"`
		ReadCapability string `json:"read_capability"`
		Sealed         string `json:"sealed"`
	}
	if err != nil || json.Unmarshal(out, &rot) != nil || rot.Namespace != "capture-2" || rot.Sealed != "capture-1" {
		t.Fatalf("rotate: %v %s", err, out)
	}
	// The SMTP listener is now fixed to capture-2, whatever the headers say.
	if err := sendSMTP("after"); err != nil {
		t.Fatal(err)
	}
	api := env["WEBSITEBENCH_MAILBOX_URL"]
	list := func(ns, capability string) answer {
		req, _ := http.NewRequest(http.MethodGet, api+"/api/namespaces/"+ns+"/messages", nil)
		req.Header.Set("Authorization", "Bearer "+capability)
		return do(t, req)
	}
	if a := list("capture-2", rot.ReadCapability); a.code != 200 || !strings.Contains(a.body, `"subject":"after"`) || strings.Contains(a.body, `"before"`) {
		t.Fatalf("new namespace: %d %s", a.code, a.body)
	}
	if a := list("capture-1", oldCap); a.code != 200 || !strings.Contains(a.body, `"subject":"before"`) || strings.Contains(a.body, `"after"`) {
		t.Fatalf("old namespace: %d %s", a.code, a.body)
	}
	// Bootstrap now names the new namespace, behind the same token.
	req, _ := http.NewRequest(http.MethodGet, env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL"], nil)
	req.Header.Set("Authorization", "Bearer "+sidecarToken)
	if a := do(t, req); a.code != 200 || !strings.Contains(a.body, `"namespace":"capture-2"`) || !strings.Contains(a.body, rot.ReadCapability) {
		t.Fatalf("bootstrap after rotate: %d %s", a.code, a.body)
	}
	if code := sc.Stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
