package supervisor_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// hostileBound is how long a stack may take to answer the mail below:
// generous (itest.Bound), so that a loaded machine does not fail it. A
// parser that hangs on this mail fails it; that each parser of it is
// linear is what the complexity tests say (Test…Linear beside the parsers:
// the folded header in internal/mailmsg, internal/smtpd and internal/plane,
// the "xhttp://" run in internal/otp/urls), which measure growth, not a
// wall-clock time.
const hostileBound = itest.Bound

// TestHostileMailAgainstUp sends, as any candidate could, mail built to
// make a parser quadratic, and checks the stack answers it, and the
// namespace's reads, without an outage and without hanging.
func TestHostileMailAgainstUp(t *testing.T) {
	s := itest.StartUp(t)
	e := episode{s.Bundle.Trials[0]}

	// 75,000 folded header lines of " \r\n": 300 KB, answered by policy or
	// accepted, never 451, and quickly.
	folded := "Subject: x\r\nX-Fold: a\r\n" + strings.Repeat(" \r\n", 75000) + "\r\nbody\r\n"
	start := time.Now()
	err := itest.SendSMTP(e.b, e.b.SMTPPort, e.b.CandidateEnvironment["WEBSITEBENCH_SMTP_PASSWORD"], folded)
	took := time.Since(start)
	if err != nil && strings.Contains(err.Error(), "451") {
		t.Fatalf("folded header: an outage answer after %v: %v", took, err)
	}
	if took > hostileBound {
		t.Fatalf("folded header answered after %v (%v)", took, err)
	}
	t.Logf("folded header: %v after %v", err, took)
	timedList := func(what string) {
		t.Helper()
		start := time.Now()
		code, _ := e.subjects(t, e.b.ReadCapability)
		if code != http.StatusOK || time.Since(start) > hostileBound {
			t.Fatalf("%s: the namespace's list answered %d after %v", what, code, time.Since(start))
		}
	}
	timedList("after the folded header")

	// 700 KB of "xhttp://": stored, then latest and the agent's page.
	body := fmt.Sprintf(`{"from":%q,"to":"agent@example.com","subject":"links","text":%q}`, rpc.CandidateSender, strings.Repeat("xhttp://", 700<<10/8))
	if code := e.postWith(t, e.b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"], body); code != http.StatusOK {
		t.Fatalf("700 KB text: POST /emails %d", code)
	}
	start = time.Now()
	req, _ := http.NewRequest(http.MethodGet, e.b.APIURL+"/api/namespaces/"+e.b.Namespace+"/messages/latest", nil)
	req.Header.Set("Authorization", "Bearer "+e.b.ReadCapability)
	if a := do(t, req); a.code != http.StatusOK || time.Since(start) > hostileBound {
		t.Fatalf("latest: %d after %v", a.code, time.Since(start))
	}
	start = time.Now()
	code, page := e.inbox(t, e.b.InboxURL)
	if code != http.StatusOK || !strings.Contains(page, "links") || time.Since(start) > hostileBound {
		t.Fatalf("inbox: %d after %v", code, time.Since(start))
	}
	id := strings.Index(page, "/messages/")
	if id < 0 {
		t.Fatal("no message link on the inbox page")
	}
	link := page[id : id+len("/messages/")+1]
	start = time.Now()
	if code, _ := e.inbox(t, e.b.InboxURL+link); code != http.StatusOK || time.Since(start) > hostileBound {
		t.Fatalf("the message page: %d after %v", code, time.Since(start))
	}
	timedList("after the long text")

	// The inbox's root reveals no token.
	code, page = e.inbox(t, s.Bundle.InboxBaseURL+"/")
	if code != http.StatusNotFound || strings.Contains(page, "/inbox/") {
		t.Fatalf("GET / on the inbox: %d %.200s", code, page)
	}
}
