package faults_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/smtp"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resend/resend-go/v3"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The faults of a trial's schedule, end to end: mail-plane up, a trial
// opened with a schedule over the admin RPC, the candidate's real clients
// (the Resend Go SDK over HTTP, net/smtp with STARTTLS and AUTH), and the
// evaluator's Go client on the gateway.

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// open opens a trial with schedule on the stack.
func open(t *testing.T, admin *rpc.Client, schedule string) rpc.Bundle {
	t.Helper()
	b, err := admin.TrialOpen(ctx(t), &rpc.TrialOpenRequest{Faults: json.RawMessage(schedule)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func resendOf(t *testing.T, b rpc.Bundle) *resend.Client {
	t.Helper()
	c := resend.NewClient(b.CandidateEnvironment[wbenv.MailAPIToken])
	base, err := url.Parse(b.WriterURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	c.BaseURL = base
	return c
}

func email(subject string) *resend.SendEmailRequest {
	return &resend.SendEmailRequest{From: rpc.CandidateSender, To: []string{"agent@example.com"}, Subject: subject, Text: "Your code is 123456."}
}

// sendSMTP sends one message to the trial's own port as a candidate does
// (STARTTLS against the bundle's CA, AUTH with its token) and returns the
// error of the first step that failed.
func sendSMTP(b rpc.Bundle, subject string) error {
	_, err := sendSMTPConn(b, subject)
	return err
}

func sendSMTPConn(b rpc.Bundle, subject string) (*smtp.Client, error) {
	pem, err := os.ReadFile(b.CAFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c, err := smtp.Dial("127.0.0.1:" + strconv.Itoa(b.SMTPPort))
	if err != nil {
		return nil, err
	}
	if err := c.StartTLS(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}); err != nil {
		return c, err
	}
	if err := c.Auth(smtp.PlainAuth("", "resend", b.CandidateEnvironment[wbenv.MailAPIToken], "127.0.0.1")); err != nil {
		return c, err
	}
	if err := c.Mail(rpc.CandidateSender); err != nil {
		return c, err
	}
	if err := c.Rcpt("agent@example.com"); err != nil {
		return c, err
	}
	w, err := c.Data()
	if err != nil {
		return c, err
	}
	if _, err := w.Write([]byte("Subject: " + subject + "\r\n\r\nYour code is 654321.\r\n")); err != nil {
		return c, err
	}
	return c, w.Close()
}

func reader(b rpc.Bundle) *mailclient.Client {
	return mailclient.New(b.APIURL, b.Namespace, b.ReadCapability)
}

func list(t *testing.T, b rpc.Bundle) []mailclient.Message {
	t.Helper()
	ms, err := reader(b).List(ctx(t), mailclient.Query{})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func smtpCode(err error) int {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

// TestFaults runs on each message store: the embedded one, and a Mailpit
// the plane starts (whose writes come before the ledger's transaction).
func TestFaults(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { faultsOn(t, itest.StartUp(t, "--trials", "0")) })
	t.Run("mailpit", func(t *testing.T) {
		mp := cmp.Or(os.Getenv("MAILPLANE_MAILPIT"), "mailpit")
		if p := itest.Optional(t, mp); p != "" {
			faultsOn(t, itest.StartUp(t, "--trials", "0", "--store", "mailpit", "--mailpit-binary", p))
		}
	})
}

func faultsOn(t *testing.T, s *itest.Stack) {
	admin := s.Admin(t)

	t.Run("HTTPRefuse429", func(t *testing.T) {
		b := open(t, admin, `[{"door": "http", "first": 2, "do": "refuse", "status": 429, "retry_after": 2}]`)
		c := resendOf(t, b)
		for i := 1; i <= 2; i++ {
			_, err := c.Emails.SendWithContext(ctx(t), email("try "+strconv.Itoa(i)))
			var rl *resend.RateLimitError
			if !errors.As(err, &rl) || rl.RetryAfter != "2" {
				t.Fatalf("send %d: %v, want 429 with Retry-After: 2", i, err)
			}
		}
		sent, err := c.Emails.SendWithContext(ctx(t), email("try 3"))
		if err != nil || sent.Id == "" {
			t.Fatalf("send 3: %+v %v", sent, err)
		}
		if ms := list(t, b); len(ms) != 1 || ms[0].Subject != "try 3" {
			t.Fatalf("stored %+v, want only the third", ms)
		}
		checkTrail(t, s, admin, b, []string{"refuse", "refuse"})
	})

	t.Run("SMTPRefuse451Then250", func(t *testing.T) {
		b := open(t, admin, `[{"door": "smtp", "first": 1, "do": "refuse", "smtp_code": 451}]`)
		err := sendSMTP(b, "first")
		if smtpCode(err) != 451 || !strings.HasPrefix(err.(*textproto.Error).Msg, "4.3.0 ") {
			t.Fatalf("first: %v, want 451 4.3.0", err)
		}
		if err := sendSMTP(b, "second"); err != nil {
			t.Fatalf("second: %v, want 250", err)
		}
		if ms := list(t, b); len(ms) != 1 || ms[0].Subject != "second" {
			t.Fatalf("stored %+v", ms)
		}
		checkTrail(t, s, admin, b, []string{"refuse"})
	})

	t.Run("SMTP421Closes", func(t *testing.T) {
		b := open(t, admin, `[{"door": "smtp", "sends": [1], "do": "refuse", "smtp_code": 421}]`)
		c, err := sendSMTPConn(b, "first")
		if smtpCode(err) != 421 || !strings.HasPrefix(err.(*textproto.Error).Msg, "4.3.2 ") {
			t.Fatalf("first: %v, want 421 4.3.2", err)
		}
		if err := c.Noop(); err == nil {
			t.Fatal("the connection is still open after the 421")
		}
		c.Close()
	})

	t.Run("Timeout", func(t *testing.T) {
		b := open(t, admin, `[{"door": "http", "first": 1, "do": "timeout", "seconds": 2},
			{"door": "smtp", "first": 1, "do": "timeout", "seconds": 2}]`)
		start := time.Now()
		_, err := resendOf(t, b).Emails.SendWithContext(ctx(t), email("held"))
		if held := time.Since(start); err == nil || held < 2*time.Second || held > 2*time.Second+itest.Bound {
			t.Fatalf("http: %v after %v, want the connection dropped after 2s", err, held)
		}
		start = time.Now()
		err = sendSMTP(b, "held")
		if held := time.Since(start); err == nil || smtpCode(err) != 0 || held < 2*time.Second || held > 2*time.Second+itest.Bound {
			t.Fatalf("smtp: %v after %v, want the connection dropped after 2s without a reply", err, held)
		}
		if ms := list(t, b); len(ms) != 0 {
			t.Fatalf("stored %+v", ms)
		}
		checkTrail(t, s, admin, b, []string{"timeout", "timeout"})
	})

	t.Run("Delay", func(t *testing.T) {
		b := open(t, admin, `[{"first": 1, "do": "delay", "seconds": 3}]`)
		r := reader(b)
		type waited struct {
			m   mailclient.Message
			at  time.Time
			err error
		}
		woke := make(chan waited, 1)
		go func() { // a wait that starts before the send
			m, err := r.Wait(ctx(t), "", 0)
			woke <- waited{m, time.Now(), err}
		}()
		s.WaitParked(t, "mail", 1) // the wait is held at the plane before the send
		sent := time.Now()
		id, err := resendOf(t, b).Emails.SendWithContext(ctx(t), email("late"))
		if err != nil || id.Id == "" {
			t.Fatalf("send: %+v %v", id, err)
		}
		// Until shortly before its time, neither the list nor latest shows it.
		for time.Since(sent) < 2500*time.Millisecond {
			if ms := list(t, b); len(ms) != 0 && time.Since(sent) < 3*time.Second {
				t.Fatalf("listed %v after the send: %+v", time.Since(sent), ms)
			}
			if _, err := r.Latest(ctx(t), mailclient.Query{}); !mailclient.IsNotFound(err) && time.Since(sent) < 3*time.Second {
				t.Fatalf("latest %v after the send: %v", time.Since(sent), err)
			}
			time.Sleep(250 * time.Millisecond)
		}
		w := <-woke
		if w.err != nil || w.m.Subject != "late" || w.m.Fault != "delay" {
			t.Fatalf("wait: %+v %v", w.m, w.err)
		}
		// Not before its time; and woken when it is shown, not at the end
		// of its own 60 s context: the bound is generous.
		if after := w.at.Sub(sent); after < 3*time.Second || after > 3*time.Second+itest.Bound {
			t.Fatalf("the wait woke %v after the send, want about 3s", after)
		}
		checkTrail(t, s, admin, b, []string{"delay"})
	})

	t.Run("Duplicate", func(t *testing.T) {
		b := open(t, admin, `[{"door": "smtp", "first": 1, "do": "duplicate", "copies": 2}]`)
		if err := sendSMTP(b, "twice"); err != nil {
			t.Fatal(err)
		}
		ms := list(t, b)
		if len(ms) != 2 || ms[0].ID == ms[1].ID || ms[0].Fault != "duplicate" || ms[1].Fault != "duplicate" || ms[1].Subject != "twice" {
			t.Fatalf("stored %+v, want two copies with their own ids", ms)
		}
		// The agent's inbox shows both, and nothing of the fault.
		page := inbox(t, b)
		if strings.Count(page, "twice") < 2 || strings.Contains(strings.ToLower(page), "duplicate") {
			t.Fatalf("the inbox page: %s", page)
		}
		checkTrail(t, s, admin, b, []string{"duplicate"})
	})

	t.Run("Drop", func(t *testing.T) {
		b := open(t, admin, `[{"sends": [1], "do": "drop"}, {"sends": [2], "do": "delay", "seconds": 1}]`)
		c := resendOf(t, b)
		for _, subject := range []string{"lost", "late"} {
			if id, err := c.Emails.SendWithContext(ctx(t), email(subject)); err != nil || id.Id == "" {
				t.Fatalf("%s: %+v %v", subject, id, err)
			}
		}
		if _, err := reader(b).Wait(ctx(t), "", 0); err != nil {
			t.Fatal(err)
		}
		if ms := list(t, b); len(ms) != 1 || ms[0].Subject != "late" {
			t.Fatalf("after the other rule's delay: %+v, want only the delayed one", ms)
		}
		checkTrail(t, s, admin, b, []string{"drop", "delay"})
	})

	t.Run("OtherTrialUntouched", func(t *testing.T) {
		a := open(t, admin, `[{"first": 100, "do": "refuse", "status": 503, "smtp_code": 554}]`)
		b := open(t, admin, ``)
		if _, err := resendOf(t, a).Emails.SendWithContext(ctx(t), email("a")); err == nil {
			t.Fatal("trial A's send was not refused")
		}
		if smtpCode(sendSMTP(a, "a")) != 554 {
			t.Fatal("trial A's SMTP send was not refused")
		}
		if _, err := resendOf(t, b).Emails.SendWithContext(ctx(t), email("b")); err != nil {
			t.Fatal(err)
		}
		if err := sendSMTP(b, "b"); err != nil {
			t.Fatal(err)
		}
		if ms := list(t, b); len(ms) != 2 {
			t.Fatalf("trial B stored %+v", ms)
		}
		checkTrail(t, s, admin, b, nil)
	})

	t.Run("InvalidRefusedWhole", func(t *testing.T) {
		before, err := admin.AllTrials(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		bad := `[{"first": 1, "do": "drop"}, {"first": 1, "do": "refuse", "status": 404}]`
		_, err = admin.TrialOpen(ctx(t), &rpc.TrialOpenRequest{Faults: json.RawMessage(bad)})
		if rpc.CodeOf(err) != rpc.CodeInvalidFaults || !strings.Contains(err.Error(), "rule 1") {
			t.Fatalf("open: %v, want invalid_faults naming rule 1", err)
		}
		after, err := admin.AllTrials(ctx(t))
		if err != nil || len(after) != len(before) {
			t.Fatalf("a trial was opened: %d then %d (%v)", len(before), len(after), err)
		}
		good := `[{"door": "http", "sends": [1], "do": "drop"}]`
		b := open(t, admin, good)
		if err := admin.TrialFaults(ctx(t), b.Namespace, json.RawMessage(bad)); rpc.CodeOf(err) != rpc.CodeInvalidFaults {
			t.Fatalf("trial.faults: %v", err)
		}
		info, err := admin.TrialInfo(ctx(t), b.Namespace)
		if err != nil || !jsonEqual(info.Faults, good) {
			t.Fatalf("the schedule changed: %s %v", info.Faults, err)
		}
	})

	t.Run("CLI", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "faults.json")
		if err := os.WriteFile(file, []byte(`[{"door": "http", "first": 1, "do": "refuse", "status": 503}]`), 0o644); err != nil {
			t.Fatal(err)
		}
		out := cli(t, s, nil, "trial", "open", "--json", "--faults", file)
		var b rpc.Bundle
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if _, err := resendOf(t, b).Emails.SendWithContext(ctx(t), email("x")); err == nil || !strings.Contains(err.Error(), "unavailable") {
			t.Fatalf("send: %v, want the 503", err)
		}
		if info := cli(t, s, nil, "trial", "info", b.Namespace); !strings.Contains(string(info), "(1 injected)") {
			t.Fatalf("info: %s", info)
		}
		cli(t, s, strings.NewReader(`[]`), "trial", "faults", "--file", "-", b.Namespace)
		if _, err := resendOf(t, b).Emails.SendWithContext(ctx(t), email("y")); err != nil {
			t.Fatalf("after clearing: %v", err)
		}
		if list := cli(t, s, nil, "trial", "list"); !strings.Contains(string(list), "0 rules, 1 injected") {
			t.Fatalf("list: %s", list)
		}
	})

	t.Run("Batch", func(t *testing.T) {
		b := open(t, admin, `[{"door": "http", "sends": [2], "do": "refuse", "status": 429, "retry_after": 1}]`)
		_, err := resendOf(t, b).Batch.SendWithContext(ctx(t), []*resend.SendEmailRequest{email("one"), email("two"), email("three")})
		var rl *resend.RateLimitError
		if !errors.As(err, &rl) || rl.RetryAfter != "1" {
			t.Fatalf("batch: %v, want its second email's 429", err)
		}
		if ms := list(t, b); len(ms) != 1 || ms[0].Subject != "one" {
			t.Fatalf("stored %+v, want the email before the refusal", ms)
		}
	})
}

// cli runs mail-plane against the stack's plane and returns its output.
func cli(t *testing.T, s *itest.Stack, stdin *strings.Reader, args ...string) []byte {
	t.Helper()
	if args[1] != "verify" {
		args = append(args[:2:2], append([]string{"--socket", s.Bundle.PlaneSocket, "--grant-file", s.Bundle.AdminGrantFile}, args[2:]...)...)
	}
	cmd := exec.Command(itest.Bin(t, "mail-plane"), args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mail-plane %v: %v %s", args, err, stderr.String())
	}
	return out
}

// inbox is the agent's inbox page of b.
func inbox(t *testing.T, b rpc.Bundle) string {
	t.Helper()
	resp, err := http.Get(b.InboxURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("inbox: %d %v", resp.StatusCode, err)
	}
	return string(page)
}

func jsonEqual(a json.RawMessage, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && string(must(json.Marshal(x))) == string(must(json.Marshal(y)))
}

func must(b []byte, _ error) []byte { return b }

// checkTrail exports b's trail with the real CLI, verifies it against the
// plane's key, and checks that it holds exactly one event per injected
// fault (dos, in order), as many as trial info counts.
func checkTrail(t *testing.T, s *itest.Stack, admin *rpc.Client, b rpc.Bundle, dos []string) {
	t.Helper()
	trail := cli(t, s, nil, "evidence", "export", b.Namespace)
	file := filepath.Join(t.TempDir(), "trail.jsonl")
	if err := os.WriteFile(file, trail, 0o600); err != nil {
		t.Fatal(err)
	}
	cli(t, s, nil, "evidence", "verify", "--key", b.EvidencePublicKey, file)
	var got []string
	for _, line := range bytes.Split(bytes.TrimSpace(trail), []byte("\n")) {
		if evidence.IsHead(line) {
			continue
		}
		e, err := evidence.Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		if e.Fault != nil {
			got = append(got, e.Fault.Do)
			if e.Fault.Do == "delay" && e.Fault.VisibleAt == "" {
				t.Errorf("a delay's event without its visible time: %s", line)
			}
		}
	}
	if strings.Join(got, " ") != strings.Join(dos, " ") {
		t.Fatalf("fault events %v, want %v\n%s", got, dos, trail)
	}
	info, err := admin.TrialInfo(ctx(t), b.Namespace)
	if err != nil || info.FaultsInjected != int64(len(dos)) {
		t.Fatalf("trial info counts %d injected (%v), want %d", info.FaultsInjected, err, len(dos))
	}
}

// TestFaultsDelaySurvivesRestart: a message delayed when the stack stops
// is shown on time after it starts again on the same data, and a wait
// that starts after the restart wakes for it.
func TestFaultsDelaySurvivesRestart(t *testing.T) {
	data := itest.ShortTempDir(t)
	first := itest.StartUp(t, "--data", data, "--trials", "0")
	b := open(t, first.Admin(t), `[{"first": 1, "do": "delay", "seconds": 4}]`)
	sent := time.Now()
	if id, err := resendOf(t, b).Emails.SendWithContext(ctx(t), email("across a restart")); err != nil || id.Id == "" {
		t.Fatalf("send: %+v %v", id, err)
	}
	if code := first.Stop(t); code != 0 {
		t.Fatalf("up exited %d on SIGTERM", code)
	}
	again := itest.StartUp(t, "--data", data, "--trials", "0")
	up := time.Now()
	b.APIURL = again.Bundle.APIURL
	if ms := list(t, b); len(ms) != 0 && time.Since(sent) < 4*time.Second {
		t.Fatalf("listed before its time: %+v", ms)
	}
	m, err := reader(b).Wait(ctx(t), "", 0)
	at := time.Now()
	if err != nil || m.Subject != "across a restart" || m.Fault != "delay" {
		t.Fatalf("wait: %+v %v", m, err)
	}
	due := sent.Add(4 * time.Second)
	if at.Before(due) {
		t.Fatalf("shown %v before its time", due.Sub(at))
	}
	// Woken when it is shown, not at the end of the wait's own 60 s
	// context: the bound is generous.
	if late := at.Sub(later(due, up)); late > itest.Bound {
		t.Fatalf("shown %v late (due %v after the send; the stack was back %v after it)", late, 4*time.Second, up.Sub(sent))
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
