package writer_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestTrialBodyBytes: a trial whose requests declare limits.TrialBodyBytes
// of bodies not yet sent has its next request answered 429 at once, in
// each API's shape, before its body is read; once one held request ends,
// the trial is served again. (Another trial beside it on a shared writer:
// internal/hardening, TestFairSharesMemory.)
func TestTrialBodyBytes(t *testing.T) {
	_, a, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", []string{"--quota-messages", "0", "--quota-bytes", "0"})
	addr := strings.TrimPrefix(w.URL, "http://")
	const declared = 4 * limits.MessageBytes // a batch's largest body
	hold := func() net.Conn {
		c := writertest.Dial(t, addr)
		c.SetDeadline(time.Now().Add(itest.Bound))
		fmt.Fprintf(c, "POST /emails/batch HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n[", a.MailAPIToken, declared)
		return c
	}
	held := make([]net.Conn, limits.TrialBodyBytes/declared)
	for i := range held {
		held[i] = hold()
	}
	// A held request takes its bytes once the plane has named its trial:
	// until then a small one may still be served, and a small one in
	// flight may make the last held one 429 (it is held again).
	small := bodyOf(valid())
	deadline := time.Now().Add(itest.Bound)
	for {
		for i, c := range held {
			if answered(c) {
				c.Close()
				held[i] = hold()
			}
		}
		ans := postJSON(t, w.URL, a.MailAPIToken, small, nil)
		if ans.status == http.StatusTooManyRequests {
			if ans.code() != "trial_busy" {
				t.Fatalf("over the trial's body bytes: %d %s, want 429 trial_busy", ans.status, ans.raw)
			}
			break
		}
		if ans.status != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("with %d bytes of bodies held: %d %s, want 429 trial_busy", limits.TrialBodyBytes, ans.status, ans.raw)
		}
	}
	// Postmark's shape, with a body declared and never sent: answered at once.
	c := writertest.Dial(t, addr)
	c.SetDeadline(time.Now().Add(itest.Bound))
	fmt.Fprintf(c, "POST /email HTTP/1.1\r\nHost: localhost\r\nX-Postmark-Server-Token: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", a.MailAPIToken)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("Postmark over the trial's body bytes: %v", err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(raw), `"ErrorCode":429`) {
		t.Fatalf("Postmark over the trial's body bytes: %d %s, want 429 with ErrorCode 429", resp.StatusCode, raw)
	}
	held[0].Close()
	itest.Eventually(t, "the trial served once a held request ended", itest.Bound, func() bool {
		return postJSON(t, w.URL, a.MailAPIToken, small, nil).status == http.StatusOK
	})
	for _, c := range held[1:] {
		c.Close()
	}
}

// answered reports whether the server has answered (or closed) c.
func answered(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	defer c.SetReadDeadline(time.Now().Add(itest.Bound))
	var b [1]byte
	n, err := c.Read(b[:])
	var ne net.Error
	return n > 0 || err != nil && !(errors.As(err, &ne) && ne.Timeout())
}
