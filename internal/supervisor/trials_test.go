package supervisor_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/rpc"

	_ "modernc.org/sqlite" // reads the plane's database to count what it keeps
)

// episode is what a harness does with one trial's bundle.
type episode struct{ b rpc.Bundle }

func (e episode) post(t testing.TB, subject string) int {
	t.Helper()
	env := e.b.CandidateEnvironment
	body := fmt.Sprintf(`{"from":%q,"to":"agent@example.com","subject":%q,"text":"Your code is 424242"}`, env["WEBSITEBENCH_MAIL_FROM"], subject)
	return e.postWith(t, env["WEBSITEBENCH_MAIL_API_TOKEN"], body)
}

func (e episode) postWith(t testing.TB, token, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_URL"], strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	return do(t, req).code
}

// smtpTo sends one message with net/smtp to port, with AUTH as the
// bundle's WEBSITEBENCH_SMTP_USERNAME/PASSWORD say, as a candidate
// configured with the bundle would.
func smtpTo(b rpc.Bundle, port int, subject string) error {
	return itest.SendSMTP(b, port, b.CandidateEnvironment[wbenv.SMTPPassword], "Subject: "+subject+"\r\n\r\nhello\r\n")
}

// subjects lists the evaluator's view of the trial, with the capability.
func (e episode) subjects(t testing.TB, capability string) (int, []string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.b.APIURL+"/api/namespaces/"+e.b.Namespace+"/messages", nil)
	req.Header.Set("Authorization", "Bearer "+capability)
	resp := do(t, req)
	var l struct {
		Messages []struct{ Subject string } `json:"messages"`
	}
	json.Unmarshal([]byte(resp.body), &l)
	var out []string
	for _, m := range l.Messages {
		out = append(out, m.Subject)
	}
	return resp.code, out
}

func (e episode) inbox(t testing.TB, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp := do(t, req)
	return resp.code, resp.body
}

// TestManyTrialsOneStack opens 1,000 trials on one `up` stack: the number
// of processes does not change; 20 sampled trials each send by HTTP and by
// SMTP on their own port (AUTH with the bundle's credential) and read back exactly their own mail
// through the gateway and the shared inbox, and by SMTP AUTH with their
// mail-API token on the shared port; every credential of one is refused
// on another.
func TestManyTrialsOneStack(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 100
	}
	s := itest.StartUp(t, "--trials", "0", "--quota-messages", "0")
	if s.Bundle.Bundle != nil || s.Bundle.Trials == nil || len(s.Bundle.Trials) != 0 {
		t.Fatalf("--trials 0 opened a trial: %+v", s.Bundle)
	}
	before := s.Processes(t)
	admin := s.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	trials := make([]rpc.Bundle, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range trials {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			b, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{})
			trials[i] = b
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("trial.open: %v", err)
		}
	}
	if after := s.Processes(t); after != before {
		t.Fatalf("%d processes with no trial, %d with %d", before, after, n)
	}
	ports := map[int]bool{}
	for _, b := range trials {
		if b.SMTPPort == 0 || ports[b.SMTPPort] || b.SMTPPort == s.Bundle.SharedSMTPPort {
			t.Fatalf("trial %s has SMTP port %d (shared %d), not one of its own", b.Namespace, b.SMTPPort, s.Bundle.SharedSMTPPort)
		}
		ports[b.SMTPPort] = true
	}
	all, err := admin.AllTrials(ctx)
	if err != nil || len(all) != n {
		t.Fatalf("trial list: %d trials, %v", len(all), err)
	}

	sample := make([]episode, 20)
	for i := range sample {
		sample[i] = episode{trials[i*(n/len(sample))]}
	}
	for i, e := range sample {
		if code := e.post(t, "http "+e.b.Namespace); code != http.StatusOK {
			t.Fatalf("trial %d: POST /emails %d", i, code)
		}
		if err := smtpTo(e.b, e.b.SMTPPort, "smtp "+e.b.Namespace); err != nil {
			t.Fatalf("trial %d: SMTP on its own port: %v", i, err)
		}
		token := e.b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"]
		if err := itest.SendSMTP(e.b, s.Bundle.SharedSMTPPort, token, "Subject: auth "+e.b.Namespace+"\r\n\r\nhello\r\n"); err != nil {
			t.Fatalf("trial %d: SMTP AUTH on the shared port: %v", i, err)
		}
	}
	// Plain SMTP on the shared port names no trial: refused at MAIL, before
	// any data is sent, never stored.
	if err := itest.SendSMTP(sample[0].b, s.Bundle.SharedSMTPPort, "", "Subject: nobody's\r\n\r\nhello\r\n"); err == nil || !strings.Contains(err.Error(), "530") {
		t.Fatalf("plain SMTP on the shared port: %v, want 530", err)
	}
	c, err := smtp.Dial("127.0.0.1:" + strconv.Itoa(s.Bundle.SharedSMTPPort))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Mail(rpc.CandidateSender); err == nil || !strings.Contains(err.Error(), "530") {
		t.Fatalf("MAIL without AUTH on the shared port: %v, want 530", err)
	}
	c.Close()
	for i, e := range sample {
		code, subjects := e.subjects(t, e.b.ReadCapability)
		want := []string{"http " + e.b.Namespace, "smtp " + e.b.Namespace, "auth " + e.b.Namespace}
		if code != http.StatusOK || strings.Join(subjects, "|") != strings.Join(want, "|") {
			t.Fatalf("trial %d reads %d %q, want %q", i, code, subjects, want)
		}
		code, page := e.inbox(t, e.b.InboxURL)
		if code != http.StatusOK || !strings.Contains(page, "http "+e.b.Namespace) || !strings.Contains(page, "smtp "+e.b.Namespace) {
			t.Fatalf("trial %d's inbox: %d", i, code)
		}
		other := sample[(i+1)%len(sample)]
		if strings.Contains(page, other.b.Namespace) {
			t.Fatalf("trial %d's inbox shows trial %d's mail", i, (i+1)%len(sample))
		}
		// Every credential of the other trial, on this one.
		if code, _ := e.subjects(t, other.b.ReadCapability); code != http.StatusForbidden {
			t.Fatalf("trial %d read with another trial's capability: %d", i, code)
		}
		for _, cred := range []string{other.b.ReadCapability, other.b.CandidateEnvironment["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"], other.b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"]} {
			if code, _ := e.inbox(t, s.Bundle.InboxBaseURL+"/inbox/"+cred); code != http.StatusNotFound {
				t.Fatalf("an inbox page for another credential: %d", code)
			}
		}
	}
	// A trial's mail-API token writes into its own trial only.
	first, second := sample[0], sample[1]
	body := fmt.Sprintf(`{"from":%q,"to":"agent@example.com","subject":"cross","text":"x"}`, rpc.CandidateSender)
	if code := second.postWith(t, first.b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"], body); code != http.StatusOK {
		t.Fatalf("POST with trial 0's token: %d", code)
	}
	if _, subjects := second.subjects(t, second.b.ReadCapability); strings.Contains(strings.Join(subjects, "|"), "cross") {
		t.Fatalf("trial 1 holds a message sent with trial 0's token")
	}
	if _, subjects := first.subjects(t, first.b.ReadCapability); !strings.Contains(strings.Join(subjects, "|"), "cross") {
		t.Fatalf("trial 0 lacks the message sent with its token")
	}
}

// TestCloseAndTTL: once a trial is closed, or its TTL has passed, every
// credential of it is refused, its port is closed, and its messages are
// gone from the store; readers waiting on it wake refused, not with mail.
func TestCloseAndTTL(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { closeAndTTL(t, "sqlite") })
	t.Run("mailpit", func(t *testing.T) {
		itest.Require(t, os.Getenv("MAILPLANE_MAILPIT"))
		closeAndTTL(t, "mailpit")
	})
}

func closeAndTTL(t *testing.T, store string) {
	s := itest.StartUp(t, "--trials", "0", "--store", store)
	admin := s.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(ttl time.Duration) episode {
		b, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{TTLMillis: ttl.Milliseconds()})
		if err != nil {
			t.Fatal(err)
		}
		return episode{b}
	}
	closed, expiring, kept := open(0), open(1500*time.Millisecond), open(0)
	for _, e := range []episode{closed, expiring, kept} {
		if code := e.post(t, "before"); code != http.StatusOK {
			t.Fatalf("POST: %d", code)
		}
		if err := smtpTo(e.b, e.b.SMTPPort, "before smtp"); err != nil {
			t.Fatal(err)
		}
	}

	// Readers waiting on the trial when it closes.
	type answer struct {
		code int
		body string
	}
	waiters := make(chan answer, 4)
	for range 4 {
		go func() {
			req, _ := http.NewRequest(http.MethodGet, closed.b.APIURL+"/api/namespaces/"+closed.b.Namespace+"/messages?after=2&wait=60s", nil)
			req.Header.Set("Authorization", "Bearer "+closed.b.ReadCapability)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				waiters <- answer{-1, err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			waiters <- answer{resp.StatusCode, string(b)}
		}()
	}
	s.WaitParked(t, "mail", 4)
	if err := admin.TrialClose(ctx, closed.b.Namespace); err != nil {
		t.Fatal(err)
	}
	// The close wakes them: they answer well inside their 60 s wait.
	timeout := time.After(itest.Bound)
	for range 4 {
		select {
		case a := <-waiters:
			if a.code != http.StatusForbidden || strings.Contains(a.body, "before") {
				t.Fatalf("a wait on the closing trial answered %d %s", a.code, a.body)
			}
		case <-timeout:
			t.Fatalf("waiters not woken within %v of the close", itest.Bound)
		}
	}

	refused := func(e episode, why string) {
		t.Helper()
		if code, _ := e.subjects(t, e.b.ReadCapability); code != http.StatusForbidden {
			t.Errorf("%s: gateway read %d", why, code)
		}
		if code, _ := e.inbox(t, e.b.InboxURL); code != http.StatusNotFound {
			t.Errorf("%s: inbox %d", why, code)
		}
		if code := e.post(t, "after"); code != http.StatusUnauthorized {
			t.Errorf("%s: POST /emails %d", why, code)
		}
		req, _ := http.NewRequest(http.MethodGet, e.b.CandidateEnvironment["WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL"], nil)
		req.Header.Set("Authorization", "Bearer "+e.b.CandidateEnvironment["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"])
		if code := do(t, req).code; code != http.StatusForbidden {
			t.Errorf("%s: bootstrap %d", why, code)
		}
		if err := smtpTo(e.b, e.b.SMTPPort, "after smtp"); err == nil {
			t.Errorf("%s: SMTP on its port still delivers", why)
		}
	}
	refused(closed, "closed")

	// The TTL: refused from its expiry on, and closed by the plane.
	if !s.WaitOutput(`"how":"expired"`, itest.Bound) {
		t.Fatalf("the plane did not close the expired trial:\n%s", s.Output())
	}
	refused(expiring, "expired")

	// Gone from the store: the kept trial's two messages are all it holds.
	all, err := admin.AllTrials(ctx)
	if err != nil || len(all) != 1 || all[0].Namespace != kept.b.Namespace || all[0].Messages != 2 {
		t.Fatalf("open trials after close and expiry: %+v %v", all, err)
	}
	if code, subjects := kept.subjects(t, kept.b.ReadCapability); code != http.StatusOK || len(subjects) != 2 {
		t.Fatalf("the kept trial: %d %q", code, subjects)
	}
	if got := storedMessages(t, s, store); got != 2 {
		t.Fatalf("the %s store holds %d messages, want the kept trial's 2", store, got)
	}
}

// storedMessages counts the bodies the store holds, whoever they belong
// to: the SQLite store's (a send's in its message's row, others in the
// bodies table), or Mailpit's own count.
func storedMessages(t *testing.T, s *itest.Stack, store string) int {
	t.Helper()
	if store == "sqlite" {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(s.Bundle.DataDir, "plane", "mailplane.db")+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var bodies, indexed int
		if err := db.QueryRow(`SELECT (SELECT COUNT(*) FROM bodies) + (SELECT COUNT(*) FROM messages WHERE body IS NOT NULL), (SELECT COUNT(*) FROM messages)`).Scan(&bodies, &indexed); err != nil {
			t.Fatal(err)
		}
		if bodies != indexed {
			t.Fatalf("%d bodies but %d index entries", bodies, indexed)
		}
		return bodies
	}
	m := regexp.MustCompile(`"http_socket":"([^"]+)"`).FindStringSubmatch(s.Output())
	if m == nil {
		t.Fatalf("no Mailpit socket in the plane's log")
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", m[1])
	}}}
	resp, err := hc.Get("http://mailpit/api/v1/messages?limit=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Total int `json:"total"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list.Total
}

// TestUpRestart: `up --data DIR` started again on the same DIR comes back
// with every trial that was open, on the same shared and per-trial ports,
// with the same credentials and mail; a start that fails (a port taken)
// changes nothing, and the next start works.
func TestUpRestart(t *testing.T) {
	data := itest.ShortTempDir(t)
	first := itest.StartUp(t, "--data", data)
	admin := first.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opened, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	trials := []episode{{first.Bundle.Trials[0]}, {opened}}
	for _, e := range trials {
		if code := e.post(t, "before http"); code != http.StatusOK {
			t.Fatalf("POST: %d", code)
		}
		if err := smtpTo(e.b, e.b.SMTPPort, "before smtp"); err != nil {
			t.Fatal(err)
		}
	}
	if code := first.Stop(t); code != 0 {
		t.Fatalf("up exited %d on SIGTERM", code)
	}

	// A start that cannot bind its writer port fails, and leaves the
	// data as it was.
	squat, err := net.Listen("tcp", strings.TrimPrefix(first.Bundle.WriterURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	failed := itest.Start(t, "mail-plane", "up", "--json", "--data", data)
	select {
	case <-failed.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("up did not fail with its port taken")
	}
	if code := failed.Cmd.ProcessState.ExitCode(); code == 0 {
		t.Fatalf("up with its port taken exited 0:\n%s", failed.Output())
	}
	squat.Close()

	again := itest.StartUp(t, "--data", data)
	if again.Bundle.Namespace != first.Bundle.Namespace || again.Bundle.WriterURL != first.Bundle.WriterURL ||
		again.Bundle.APIURL != first.Bundle.APIURL || again.Bundle.SharedSMTPPort != first.Bundle.SharedSMTPPort {
		t.Fatalf("after a restart: %+v\nbefore: %+v", again.Bundle, first.Bundle)
	}
	// The TLS doors the kept bundles name are the ones served again: a
	// bundle never advertises a port the stack no longer holds.
	if again.Bundle.SMTPTLSPort != first.Bundle.SMTPTLSPort || again.Bundle.WriterHTTPSURL != first.Bundle.WriterHTTPSURL {
		t.Fatalf("TLS doors after a restart: %d %s, before: %d %s", again.Bundle.SMTPTLSPort, again.Bundle.WriterHTTPSURL,
			first.Bundle.SMTPTLSPort, first.Bundle.WriterHTTPSURL)
	}
	for _, addr := range []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(again.Bundle.SMTPTLSPort)), strings.TrimPrefix(again.Bundle.WriterHTTPSURL, "https://")} {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("the bundle's TLS door %s after a restart: %v", addr, err)
		}
		c.Close()
	}
	all, err := again.Admin(t).AllTrials(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("trials after restart: %+v %v", all, err)
	}
	for _, e := range trials {
		if code := e.post(t, "after http"); code != http.StatusOK {
			t.Fatalf("POST after restart: %d", code)
		}
		if err := smtpTo(e.b, e.b.SMTPPort, "after smtp"); err != nil {
			t.Fatalf("SMTP on the trial's own port after restart: %v", err)
		}
		code, subjects := e.subjects(t, e.b.ReadCapability)
		if code != http.StatusOK || strings.Join(subjects, "|") != "before http|before smtp|after http|after smtp" {
			t.Fatalf("trial %s after restart: %d %q", e.b.Namespace, code, subjects)
		}
		if code, page := e.inbox(t, e.b.InboxURL); code != http.StatusOK || !strings.Contains(page, "before smtp") {
			t.Fatalf("inbox after restart: %d", code)
		}
	}
}
