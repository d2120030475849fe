package mailpit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/msgstore"
	"github.com/websitebench/mailplane/internal/msgstore/storetest"
)

// subject runs the conformance suite against the Mailpit srv: its outage
// is Mailpit killed with SIGKILL, its return Mailpit started again on the
// same database and sockets.
func subject(srv *server) storetest.Subject {
	return storetest.Subject{
		Open: func(t *testing.T) msgstore.Store {
			s, err := New(Config{HTTPSocket: srv.HTTP, Log: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Break: func(*testing.T) { srv.kill() },
		Mend:  func(*testing.T) { srv.start() },
	}
}

// The suite against Mailpit as the plane runs it (strict RFC headers).
func TestConformance(t *testing.T) {
	storetest.Run(t, subject(startServer(t)))
}

// The suite against a Mailpit run with its defaults, which rewrites CR CR
// LF as CR LF: the plane's bytes still come back exactly.
func TestConformanceLenientMailpit(t *testing.T) {
	storetest.Run(t, subject(startServer(t, "MP_SMTP_STRICT_RFC_HEADERS=false")))
}

func newStore(t *testing.T, srv *server) *Store {
	t.Helper()
	s, err := New(Config{HTTPSocket: srv.HTTP, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var testEnv = msgstore.Envelope{From: "site@sender.example", To: []string{"user@example.com", "Second@Example.org"}}

func testNS() msgstore.Namespace {
	return msgstore.Namespace{Name: ident.Namespace(), Tag: ident.StorageTag()}
}

func put(t *testing.T, s *Store, ns msgstore.Namespace, env msgstore.Envelope, raw []byte) string {
	t.Helper()
	ref, err := s.Put(context.Background(), ns, env, raw)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return ref
}

// What Mailpit holds, read back through its own API: the sender's From, To,
// Cc, Bcc, X-Tags and X-WebsiteBench-* are gone or replaced, in every MIME
// part; exactly one tag, the namespace's; Mailpit's record agrees.
func TestMailpitHoldsScrubbedMessage(t *testing.T) {
	srv := startServer(t)
	s := newStore(t, srv)
	ns := testNS()
	sent := "From: Spoofed <ceo@bank.example>\r\nTo: victim@example.net\r\nCc: cc@evil.example\r\nBcc: bcc@evil.example\r\n" +
		"X-Tags: evil-tag, " + ident.StorageTag() + "\r\nx-websitebench-namespace: other\r\nX-WebsiteBench-Capability: 0123\r\n" +
		"X-WEBSITEBENCH-Other: x\r\nSubject: scrub check\r\nReply-To: reply@elsewhere.example\r\nX-Other: kept\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\nX-Tags: part-tag\r\n" +
		"X-WebsiteBench-Part: p\r\n\r\nhello\r\n--b--\r\n"
	raw := scrub(t, []byte(sent), testEnv.From, testEnv.To)
	ref := put(t, s, ns, testEnv, raw)
	r, err := parseRef(ref)
	if err != nil {
		t.Fatal(err)
	}

	var rec struct {
		From                struct{ Address string }
		To, Cc, Bcc         []struct{ Address string }
		Tags                []string
		Subject, ReturnPath string
	}
	if code := srv.api(http.MethodGet, "/api/v1/message/"+r.id, "", &rec); code != http.StatusOK {
		t.Fatalf("message record: HTTP %d", code)
	}
	if rec.From.Address != testEnv.From || len(rec.To) != 2 || rec.To[0].Address != testEnv.To[0] || rec.To[1].Address != testEnv.To[1] ||
		len(rec.Cc) != 0 || len(rec.Bcc) != 0 || rec.ReturnPath != testEnv.From || rec.Subject != "scrub check" {
		t.Fatalf("Mailpit's record: %+v", rec)
	}
	if len(rec.Tags) != 1 || rec.Tags[0] != ns.Tag {
		t.Fatalf("tags %v, want exactly the namespace's", rec.Tags)
	}
	var headers map[string][]string
	if code := srv.api(http.MethodGet, "/api/v1/message/"+r.id+"/headers", "", &headers); code != http.StatusOK {
		t.Fatalf("headers: HTTP %d", code)
	}
	for name, values := range headers {
		if strings.HasPrefix(strings.ToLower(name), "x-websitebench-") {
			t.Errorf("Mailpit holds %s: %v", name, values)
		}
	}
	if got := headers["X-Tags"]; len(got) != 1 || got[0] != ns.Tag {
		t.Errorf("X-Tags %v", got)
	}
	// The sender's display name is kept for the agent's inbox (#27); its
	// address is the envelope's, whatever the message claimed.
	if got := headers["From"]; len(got) != 1 {
		t.Errorf("From %v", got)
	} else if a, err := mail.ParseAddress(got[0]); err != nil || a.Address != testEnv.From || a.Name != "Spoofed" {
		t.Errorf("From %v: want the display name with the envelope's address %s", got, testEnv.From)
	}
	if got := headers["To"]; len(got) != 1 || got[0] != strings.Join(testEnv.To, ", ") {
		t.Errorf("To %v", got)
	}
	if len(headers["Cc"]) != 0 || len(headers["Bcc"]) != 0 || headers["X-Other"][0] != "kept" || headers["Reply-To"][0] != "reply@elsewhere.example" {
		t.Errorf("headers %v", headers)
	}
	var held []byte
	srv.api(http.MethodGet, "/api/v1/message/"+r.id+"/raw", "", &held)
	for _, gone := range []string{"evil", "ceo@bank.example", "victim@", "part-tag", "X-WebsiteBench-Part", "x-websitebench-namespace", "0123"} {
		if bytes.Contains(held, []byte(gone)) {
			t.Errorf("Mailpit's raw message still holds %q:\n%s", gone, held)
		}
	}
	// And the plane gets its bytes back exactly.
	if got, err := s.Get(context.Background(), ns, ref, testEnv); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Get: %v\n%q\n%q", err, got, raw)
	}
}

// Mailpit's record is re-checked on every read: a message whose tag was
// removed through Mailpit's API, or read with recipients it was not sent
// to, is not found, whatever the ledger's ref says.
func TestReadRechecksRecord(t *testing.T) {
	srv := startServer(t)
	s := newStore(t, srv)
	ns := testNS()
	raw := scrub(t, []byte("Subject: recheck\r\n\r\nx\r\n"), testEnv.From, testEnv.To)
	ref := put(t, s, ns, testEnv, raw)
	r, _ := parseRef(ref)
	ctx := context.Background()

	// Recipients compare without case, as the plane's filters do.
	lower := msgstore.Envelope{From: testEnv.From, To: []string{"USER@example.com", "second@example.org"}}
	if _, err := s.Get(ctx, ns, ref, lower); err != nil {
		t.Fatalf("Get with the same recipients in other case: %v", err)
	}
	other := msgstore.Envelope{From: testEnv.From, To: []string{"user@example.com", "third@example.org"}}
	if _, err := s.Get(ctx, ns, ref, other); !errors.Is(err, msgstore.ErrNotFound) {
		t.Fatalf("Get with a recipient the message was not sent to: %v", err)
	}
	if _, err := s.Get(ctx, msgstore.Namespace{Name: ns.Name, Tag: ident.StorageTag()}, ref, testEnv); !errors.Is(err, msgstore.ErrNotFound) {
		t.Fatalf("Get with another tag: %v", err)
	}
	// Another sender: our header block names the envelope sender.
	if _, err := s.Get(ctx, ns, ref, msgstore.Envelope{From: "x@y.example", To: testEnv.To}); !errors.Is(err, msgstore.ErrNotFound) {
		t.Fatalf("Get with another sender: %v", err)
	}
	// A ref naming another Mailpit message (same tag, wrong bytes).
	other2 := put(t, s, ns, testEnv, scrub(t, []byte("Subject: other\r\n\r\ny\r\n"), testEnv.From, testEnv.To))
	r2, _ := parseRef(other2)
	forged := r
	forged.id = r2.id
	if _, err := s.Get(ctx, ns, forged.String(), testEnv); !errors.Is(err, msgstore.ErrNotFound) {
		t.Fatalf("Get of a forged ref: %v", err)
	}

	if code := srv.api(http.MethodPut, "/api/v1/tags", fmt.Sprintf(`{"IDs":[%q],"Tags":[]}`, r.id), nil); code != http.StatusOK {
		t.Fatalf("untag: HTTP %d", code)
	}
	if _, err := s.Get(ctx, ns, ref, testEnv); !errors.Is(err, msgstore.ErrNotFound) {
		t.Fatalf("Get of an untagged message: %v", err)
	}
	if code := srv.api(http.MethodPut, "/api/v1/tags", fmt.Sprintf(`{"IDs":[%q],"Tags":[%q]}`, r.id, strings.ToUpper(ns.Tag)), nil); code != http.StatusOK {
		t.Fatalf("retag: HTTP %d", code)
	}
	if got, err := s.Get(ctx, ns, ref, testEnv); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Get after the tag is back (title-cased tags compare equal): %v", err)
	}
	if code := srv.api(http.MethodDelete, "/api/v1/messages", fmt.Sprintf(`{"IDs":[%q]}`, r.id), nil); code != http.StatusOK {
		t.Fatalf("delete: HTTP %d", code)
	}
	if _, err := s.Get(ctx, ns, ref, testEnv); !errors.Is(err, msgstore.ErrNotFound) {
		t.Fatalf("Get of a deleted message: %v", err)
	}
}

// Refusals are decided before anything is written, and are refusals
// (ErrRefused), not outages.
func TestRefusals(t *testing.T) {
	srv := startServer(t, "MP_SMTP_ALLOWED_RECIPIENTS=@example\\.com$", "MP_MAX_MESSAGE_SIZE=1")
	s := newStore(t, srv)
	ns := testNS()
	ctx := context.Background()
	ok := scrub(t, []byte("Subject: ok\r\n\r\nok\r\n"), "a@example.com", []string{"b@example.com"})
	for name, try := range map[string]struct {
		env msgstore.Envelope
		raw []byte
	}{
		"CRLF in recipient":          {msgstore.Envelope{From: "a@example.com", To: []string{"b@example.com>\r\nDATA"}}, ok},
		"CRLF in sender":             {msgstore.Envelope{From: "a@example.com\r\nRSET", To: []string{"b@example.com"}}, ok},
		"no recipient":               {msgstore.Envelope{From: "a@example.com"}, ok},
		"space in recipient":         {msgstore.Envelope{From: "a@example.com", To: []string{"b c@example.com"}}, ok},
		"recipient Mailpit refuses":  {msgstore.Envelope{From: "a@example.com", To: []string{"b@example.com", "c@elsewhere.org"}}, ok},
		"address Mailpit can't read": {msgstore.Envelope{From: "a@example.com", To: []string{"b@@example.com"}}, ok},
		"header Mailpit can't parse": {msgstore.Envelope{From: "a@example.com", To: []string{"b@example.com"}}, []byte(" folded first line\r\nSubject: x\r\n\r\nbody\r\n")},
		"over Mailpit's size":        {msgstore.Envelope{From: "a@example.com", To: []string{"b@example.com"}}, append([]byte("Subject: big\r\n\r\n"), bytes.Repeat([]byte("x"), 1<<20)...)},
	} {
		before := srv.total()
		_, err := s.Put(ctx, ns, try.env, try.raw)
		if !errors.Is(err, msgstore.ErrRefused) {
			t.Errorf("%s: %v; want ErrRefused", name, err)
		}
		if n := srv.total(); n != before {
			t.Errorf("%s: Mailpit holds %d messages, had %d", name, n, before)
		}
	}
	// The store still works, on the sessions it kept.
	ref := put(t, s, ns, msgstore.Envelope{From: "a@example.com", To: []string{"b@example.com"}}, ok)
	if got, err := s.Get(ctx, ns, ref, msgstore.Envelope{From: "a@example.com", To: []string{"b@example.com"}}); err != nil || !bytes.Equal(got, ok) {
		t.Fatalf("Get after refusals: %v", err)
	}
}

// A Mailpit answer over MaxResponseBytes is a failure (an outage), not a
// message: here a 9 MiB message that another client put into the same
// Mailpit, named by a ref.
func TestResponseBound(t *testing.T) {
	srv := startServer(t, "MP_MAX_MESSAGE_SIZE=0")
	s := newStore(t, srv)
	ns := testNS()
	body := append(header(ns.Tag, testEnv.From, "\r\n"), "Subject: huge\r\nTo: user@example.com, Second@Example.org\r\n\r\n"...)
	body = append(body, bytes.Repeat([]byte("0123456789abcde\r\n"), 9<<20/17)...)
	id := srv.sendRaw(testEnv.From, testEnv.To, append(body, ".\r\n"...))
	r := ref{id: id, size: 100}
	_, err := s.Get(context.Background(), ns, r.String(), testEnv)
	if err == nil || errors.Is(err, msgstore.ErrNotFound) || !strings.Contains(err.Error(), "exceeded limit") {
		t.Fatalf("Get of a 9 MiB message: %v; want the response limit", err)
	}
}

// Every call has a deadline: a Mailpit that accepts connections and then
// says nothing (SIGSTOP) fails the call after CallTimeout, as an outage.
func TestCallDeadline(t *testing.T) {
	srv := startServer(t)
	s := newStore(t, srv)
	ns := testNS()
	raw := scrub(t, []byte("Subject: d\r\n\r\nd\r\n"), testEnv.From, testEnv.To)
	ref := put(t, s, ns, testEnv, raw)
	srv.signal(syscall.SIGSTOP)
	defer srv.signal(syscall.SIGCONT)
	itest.WaitStopped(t, srv.cmd.Process.Pid)
	start := time.Now()
	_, err := s.Put(context.Background(), ns, testEnv, raw)
	if took := time.Since(start); err == nil || errors.Is(err, msgstore.ErrRefused) || took < CallTimeout-100*time.Millisecond || took > CallTimeout+itest.Bound {
		t.Fatalf("Put to a stopped Mailpit: %v after %v; want an outage after %v", err, took, CallTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := s.Get(ctx, ns, ref, testEnv); err == nil || errors.Is(err, msgstore.ErrNotFound) || time.Since(start) > itest.Bound {
		t.Fatalf("Get with a 300ms deadline: %v after %v", err, time.Since(start))
	}
	srv.signal(syscall.SIGCONT)
	if got, err := s.Get(context.Background(), ns, ref, testEnv); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Get once Mailpit runs again: %v", err)
	}
}

// Sessions kept from before Mailpit restarted are stale; the next Put
// still succeeds (on a new session), and nothing is stored twice.
func TestStaleSessionAfterRestart(t *testing.T) {
	srv := startServer(t)
	s := newStore(t, srv)
	ns := testNS()
	raw := scrub(t, []byte("Subject: s\r\n\r\ns\r\n"), testEnv.From, testEnv.To)
	put(t, s, ns, testEnv, raw)
	srv.kill()
	srv.start()
	before := srv.total()
	ref := put(t, s, ns, testEnv, raw)
	if n := srv.total(); n != before+1 {
		t.Fatalf("Mailpit holds %d messages after one Put, had %d", n, before)
	}
	if got, err := s.Get(context.Background(), ns, ref, testEnv); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Get: %v", err)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A lenient Mailpit really does rewrite CR CR LF (so the suite above
// exercised the restore path), and the plane still gets its bytes.
func TestLenientMailpitRewrites(t *testing.T) {
	srv := startServer(t, "MP_SMTP_STRICT_RFC_HEADERS=false")
	s := newStore(t, srv)
	ns := testNS()
	raw := scrub(t, []byte("Subject: crcrlf\r\n\r\na\r\r\nb\r\r\r\n"), testEnv.From, testEnv.To)
	ref := put(t, s, ns, testEnv, raw)
	r, _ := parseRef(ref)
	var held []byte
	srv.api(http.MethodGet, "/api/v1/message/"+r.id+"/raw", "", &held)
	if bytes.Contains(held, []byte("a\r\r\n")) || !bytes.Contains(held, []byte("a\r\nb\r\r\n")) {
		t.Fatalf("Mailpit did not rewrite as expected: %q", held)
	}
	if got, err := s.Get(context.Background(), ns, ref, testEnv); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Get: %v\n%q", err, got)
	}
}

// scrub is raw as the plane hands it to a store.
func scrub(t *testing.T, raw []byte, from string, to []string) []byte {
	t.Helper()
	out, err := mailmsg.Scrub(context.Background(), raw, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
