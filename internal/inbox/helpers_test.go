package inbox_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// inbox is a running mail-inbox for one trial.
type inbox struct {
	*itest.Proc
	URL   string // origin, no trailing slash
	Token string
}

// startInbox runs mail-inbox for id with the flags mail-plane up passes,
// on a listening socket handed down as fd 3 as up does.
func startInbox(t testing.TB, plane *itest.Plane, id rpc.Identity, extra ...string) *inbox {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	args := append([]string{"--log-level", "debug", "--log-format", "json",
		"--plane-socket", plane.Socket,
		"--grant-file", itest.WriteSecret(t, "inbox.grant", id.InboxGrant),
		"--token-file", itest.WriteSecret(t, "inbox.token", id.InboxToken),
		"--listen", "fd:3"}, extra...)
	cmd := exec.Command(itest.Bin(t, "mail-inbox"), args...)
	cmd.ExtraFiles = []*os.File{f}
	p := itest.StartCmd(t, cmd, "mail-inbox")
	in := &inbox{Proc: p, URL: "http://" + ln.Addr().String(), Token: id.InboxToken}
	itest.WaitHTTP(t, in.URL+"/healthz", http.StatusOK, p)
	return in
}

// send delivers a message straight into the plane with the trial's writer
// grant, as mail-writer would after accepting it.
func send(t testing.TB, c *rpc.Client, to []string, raw string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: to, Raw: []byte(raw)}); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func textMail(subject, body string) string {
	return "Subject: " + subject + "\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body
}

// answer is one HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

var client = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func do(t testing.TB, method, url string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}
