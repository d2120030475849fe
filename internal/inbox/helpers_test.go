package inbox_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// inbox is a running mail-inbox.
type inbox = itest.Surface

// startInbox runs mail-inbox for id (strict mode) with the flags mail-plane
// up passes.
func startInbox(t testing.TB, plane *itest.Plane, id rpc.Identity, extra ...string) *inbox {
	t.Helper()
	return itest.StartInbox(t, plane, id.InboxGrant, id.InboxToken, extra...)
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
