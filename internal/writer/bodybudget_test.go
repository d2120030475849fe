package writer_test

import (
	"bufio"
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
	var held []net.Conn
	for range limits.TrialBodyBytes / declared {
		c := writertest.Dial(t, addr)
		c.SetDeadline(time.Now().Add(itest.Bound))
		fmt.Fprintf(c, "POST /emails/batch HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n[", a.MailAPIToken, declared)
		held = append(held, c)
	}
	// The held requests take their bytes once the plane has named their
	// trial: until then a small one may still be served.
	small := bodyOf(valid())
	deadline := time.Now().Add(itest.Bound)
	for {
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
