package inboximap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// inNetns runs testdata/client.py in mode inside network namespace name
// (ip netns exec), with acct, and decodes its last line into out; it
// answers whether the client ran to its end.
func inNetns(t *testing.T, name, mode string, acct rpc.InboxIMAP, out any) bool {
	t.Helper()
	arg, err := json.Marshal(acct)
	if err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(itest.Require(t, "ip"), "netns", "exec", name, itest.Require(t, "/usr/bin/python3"),
		"testdata/client.py", mode, string(arg)).CombinedOutput()
	if err != nil {
		t.Logf("imaplib %s in %s: %v\n%s", mode, name, err, b)
		return false
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], out); err != nil {
		t.Fatalf("imaplib %s in %s: %v\n%s", mode, name, err, b)
	}
	return true
}

// pageInNetns GETs url with Python's urllib inside network namespace name
// and answers the status and the body.
func pageInNetns(t *testing.T, name, url string) (int, string) {
	t.Helper()
	const script = `import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=30)
    code, body = r.status, r.read()
except urllib.error.HTTPError as e:
    code, body = e.code, e.read()
sys.stdout.write(str(code) + "\n" + body.decode("utf-8", "replace"))
`
	out, err := exec.Command(itest.Require(t, "ip"), "netns", "exec", name, itest.Require(t, "/usr/bin/python3"), "-c", script, url).CombinedOutput()
	if err != nil {
		t.Fatalf("urllib in %s: %v\n%s", name, err, out)
	}
	status, body, _ := strings.Cut(string(out), "\n")
	code, _ := strconv.Atoi(status)
	return code, body
}

// TestIMAPAgentNetns opens a trial with agent_netns on a real stack and
// reads its mail with Python's imaplib inside that namespace, with plain
// LOGIN (no TLS): the kernel separates there; the inbox page is served
// there too. Another trial's token is refused at those doors, the host's ports still take no LOGIN before TLS,
// a restart of the stack binds the door again at its port, and closing the
// trial closes the door.
func TestIMAPAgentNetns(t *testing.T) {
	name, path := itest.Netns(t, "agent")
	data := t.TempDir()
	s := itest.StartUp(t, "--data", data, "--trials", "1")
	other := s.Bundle.Trials[0]
	admin := s.Admin(t)
	ctx := context.Background()

	if _, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{AgentNetns: "/nonexistent/netns"}); rpc.CodeOf(err) != rpc.CodeBadRequest {
		t.Fatalf("agent_netns naming no namespace: %v, want %s", err, rpc.CodeBadRequest)
	}
	a, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{AgentNetns: path})
	if err != nil {
		t.Fatal(err)
	}
	acct := a.InboxIMAP
	if acct == nil || acct.Host != rpc.NetnsDoorHost || acct.Port == 0 || acct.TLSPort != 0 || acct.CAFile != "" ||
		!acct.PlainLogin || acct.Password == "" || acct.Username != a.Namespace {
		t.Fatalf("the agent_netns trial's inbox_imap: %+v", acct)
	}
	send(t, a, "Welcome to A", "Your code is 424242.", "")
	send(t, other, "Welcome to the other", "Not for A.", "")

	var r struct {
		read
		Capabilities []string `json:"capabilities"`
	}
	if !inNetns(t, name, "door", *acct, &r) {
		t.Fatal("imaplib inside the agent's namespace failed")
	}
	if slices.Contains(r.Capabilities, "LOGINDISABLED") || slices.Contains(r.Capabilities, "STARTTLS") {
		t.Errorf("the door's capabilities: %q, want LOGIN without TLS and no STARTTLS", r.Capabilities)
	}
	if r.Login[0] != "OK" || r.Select[0] != "OK" || len(r.Messages) != 1 {
		t.Fatalf("A's mailbox at its door: %+v", r)
	}
	if raw := r.Messages[0].Raw; !strings.Contains(raw, "Subject: Welcome to A") || !strings.Contains(raw, "Your code is 424242.") ||
		strings.Contains(raw, "Not for A") {
		t.Errorf("the message read at the door:\n%s", raw)
	}
	if got := opens(trail(t, admin, a.Namespace), "imap"); !slices.Contains(got, 1) {
		t.Errorf("A's trail's opens at door imap: %v, want message 1", got)
	}

	// The inbox page at the door in the namespace.
	if !strings.HasPrefix(a.InboxURL, "http://"+rpc.NetnsDoorHost+":") || !strings.HasSuffix(a.InboxURL, "/inbox/"+acct.Password) ||
		!strings.HasPrefix(a.InboxMCPURL, "http://"+rpc.NetnsDoorHost+":") {
		t.Errorf("the agent_netns trial's inbox_url %q, inbox_mcp_url %q", a.InboxURL, a.InboxMCPURL)
	}
	if code, body := pageInNetns(t, name, a.InboxURL); code != 200 || !strings.Contains(body, "Welcome to A") || strings.Contains(body, "Welcome to the other") {
		t.Errorf("A's inbox page at its door: %d\n%s", code, body)
	}
	otherPage := strings.TrimSuffix(a.InboxURL, acct.Password) + other.InboxIMAP.Password
	if code, body := pageInNetns(t, name, otherPage); code != 404 || strings.Contains(body, "Welcome to the other") {
		t.Errorf("another trial's inbox page at A's door: %d, want 404\n%s", code, body)
	}

	// The other trial's token, valid on the host's ports, opens nothing here.
	wrong := *acct
	wrong.Username, wrong.Password = other.InboxIMAP.Username, other.InboxIMAP.Password
	var login struct {
		Login []any `json:"login"`
	}
	if !inNetns(t, name, "door-login", wrong, &login) {
		t.Fatal("imaplib inside the agent's namespace failed")
	}
	if login.Login[0] != "error" || !strings.Contains(fmt.Sprint(login.Login[1]), "Invalid credentials") {
		t.Errorf("another trial's token at A's door: %v, want a failed login", login.Login)
	}

	// On the host, the stack's ports still refuse LOGIN before TLS.
	var plain struct {
		Capabilities []string `json:"capabilities"`
		Login        []any    `json:"login"`
	}
	python(t, "plain-login", other.InboxIMAP, &plain)
	if !slices.Contains(plain.Capabilities, "LOGINDISABLED") || plain.Login[0] == "OK" {
		t.Errorf("LOGIN before TLS on the host: %+v", plain)
	}

	// The ledger keeps the door: up started again binds it again, at its
	// port, and the agent logs in as before.
	if code := s.Stop(t); code != 0 {
		t.Fatalf("mail-plane up exited %d", code)
	}
	s = itest.StartUp(t, "--data", data)
	admin = s.Admin(t)
	if !inNetns(t, name, "door", *acct, &r) || r.Login[0] != "OK" || len(r.Messages) != 1 {
		t.Fatalf("A's mailbox at its door after a restart: %+v", r)
	}

	// Closing the trial closes its door.
	if err := admin.TrialClose(ctx, a.Namespace); err != nil {
		t.Fatal(err)
	}
	itest.Eventually(t, "the closed trial's door refuses connections", 10*time.Second, func() bool {
		return !inNetns(t, name, "door-login", *acct, &login)
	})
}
