package hardening

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// load is a candidate's traffic through a writer while faults are
// injected: HTTP senders that give every message its own Idempotency-Key
// and SMTP senders (every second one also with a Resend-Idempotency-Key
// header), each retrying a message through outages until it is accepted,
// as a well-behaved client does. What was acknowledged is kept,
// to be found afterwards exactly once.
type load struct {
	s     *sys
	url   string // the writer's HTTP base
	smtp  string // the writer's SMTP address
	token string // the mail-API token
	hc    *http.Client

	mu        sync.Mutex
	httpAcked map[string]string // subject → the id POST /emails answered
	smtpAcked map[string]bool
	ambiguous map[string]bool // SMTP subjects that saw a 451 or a lost connection: sent again, maybe twice
	keyed     map[string]bool // SMTP subjects sent with a Resend-Idempotency-Key: never twice
	retries   map[string]int  // subject → attempts after the first
	wrong     []string        // answers that are neither an acceptance nor an outage

	outages atomic.Int64 // 503, 451 and refused connections
	stop    chan struct{}
	wg      sync.WaitGroup
}

// maxAttempts bounds the retries of one message: a fault test that never
// recovers fails instead of hanging.
const maxAttempts = 3000

func startLoad(s *sys, writer *surface, id rpc.Identity, httpSenders, smtpSenders int) *load {
	l := &load{s: s, url: writer.url, smtp: writer.smtp, token: id.MailAPIToken, hc: httpClient(httpSenders),
		httpAcked: map[string]string{}, smtpAcked: map[string]bool{}, ambiguous: map[string]bool{}, keyed: map[string]bool{},
		retries: map[string]int{}, stop: make(chan struct{})}
	for w := range httpSenders {
		l.wg.Add(1)
		go l.httpSender(w)
	}
	for w := range smtpSenders {
		l.wg.Add(1)
		go l.smtpSender(w)
	}
	return l
}

func (l *load) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

func (l *load) fail(format string, args ...any) {
	l.mu.Lock()
	l.wrong = append(l.wrong, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *load) httpSender(w int) {
	defer l.wg.Done()
	for i := 0; !l.stopped(); i++ {
		key := fmt.Sprintf("h%d-%d", w, i)
		subject := "load " + key
		body := emailBody(rpc.CandidateSender, "load@example.com", subject, "body of "+subject)
		for attempt := 0; ; attempt++ {
			if attempt == maxAttempts {
				l.fail("%s: never accepted", subject)
				return
			}
			a, err := l.s.postEmail(l.hc, l.url, l.token, key, body)
			if err == nil && a.status == http.StatusOK {
				var r struct{ ID string }
				json.Unmarshal([]byte(a.body), &r)
				l.mu.Lock()
				l.httpAcked[subject] = r.ID
				l.retries[subject] = attempt
				l.mu.Unlock()
				break
			}
			if err == nil && a.status != http.StatusServiceUnavailable {
				l.fail("%s: answered %d %s", subject, a.status, a.body)
				return
			}
			l.outages.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (l *load) smtpSender(w int) {
	defer l.wg.Done()
	for i := 0; !l.stopped(); i++ {
		subject := fmt.Sprintf("load s%d-%d", w, i)
		data := rawMail(subject, "body of "+subject)
		if w%2 == 1 {
			data = rawMail(subject, "body of "+subject, "Resend-Idempotency-Key: "+subject)
			l.mu.Lock()
			l.keyed[subject] = true
			l.mu.Unlock()
		}
		for attempt := 0; ; attempt++ {
			if attempt == maxAttempts {
				l.fail("%s: never accepted", subject)
				return
			}
			r := l.s.sendSMTP(l.smtp, rpc.CandidateSender, []string{"load@example.com"}, data)
			if r.code == 250 {
				l.mu.Lock()
				l.smtpAcked[subject] = true
				l.retries[subject] = attempt
				l.mu.Unlock()
				break
			}
			if r.code != 451 && r.code != 0 {
				l.fail("%s: answered %d %s", subject, r.code, r.text)
				return
			}
			l.mu.Lock()
			l.ambiguous[subject] = true
			l.mu.Unlock()
			l.outages.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// acked is how many messages were acknowledged so far.
func (l *load) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.httpAcked) + len(l.smtpAcked)
}

// waitAcked waits until n more messages than now were acknowledged.
func (l *load) waitAcked(t testing.TB, n int, d time.Duration) {
	t.Helper()
	target := l.acked() + n
	itest.Eventually(t, fmt.Sprintf("%d acknowledged messages", target), d, func() bool { return l.acked() >= target })
}

// finish stops the senders; each finishes the message it is on.
func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
}

// outcome is what a fault run shows.
type outcome struct {
	acked, lost, duplicates, smtpResent, retried int
	// smtpKeyedAmbiguous are the keyed SMTP messages that were sent again
	// after an ambiguous answer (each still stored once).
	smtpKeyedAmbiguous, smtpKeyedDuplicates int
}

// verify checks the namespace against what was acknowledged: every
// acknowledged message is there with its body; an HTTP message is there
// exactly once, under the id its first acceptance answered, however often
// it was sent; an SMTP message is there once unless it was sent again
// after an ambiguous answer; nothing is there that was never acknowledged.
func (l *load) verify(t testing.TB, msgs []rpc.Message) outcome {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.wrong {
		t.Errorf("load: %s", w)
	}
	byID := map[string]int{}
	count := map[string]int{}
	for _, m := range msgs {
		count[m.Subject]++
		byID[m.UUID]++
		if m.Text != "body of "+m.Subject && m.Text != "body of "+m.Subject+"\r\n" {
			t.Errorf("message %q has body %q", m.Subject, m.Text)
		}
	}
	var o outcome
	for subject, id := range l.httpAcked {
		o.acked++
		switch n := count[subject]; {
		case n == 0:
			o.lost++
			t.Errorf("acknowledged (id %s) but lost: %q", id, subject)
		case n > 1:
			o.duplicates++
			t.Errorf("%q stored %d times under one Idempotency-Key", subject, n)
		case byID[id] != 1:
			t.Errorf("%q is stored, but not under the id %s it was acknowledged with", subject, id)
		}
	}
	for subject := range l.smtpAcked {
		o.acked++
		switch n := count[subject]; {
		case n == 0:
			o.lost++
			t.Errorf("acknowledged with 250 but lost: %q", subject)
		case n > 1 && l.keyed[subject]:
			o.duplicates++
			o.smtpKeyedDuplicates++
			t.Errorf("%q stored %d times under one Resend-Idempotency-Key", subject, n)
		case n > 1 && !l.ambiguous[subject]:
			o.duplicates++
			t.Errorf("%q stored %d times, sent once", subject, n)
		case n > 1:
			o.smtpResent += n - 1
		}
	}
	for subject := range l.keyed {
		if l.ambiguous[subject] && l.smtpAcked[subject] {
			o.smtpKeyedAmbiguous++
		}
	}
	for subject := range count {
		if _, ok := l.httpAcked[subject]; !ok && !l.smtpAcked[subject] {
			t.Errorf("%q is stored but was never acknowledged", subject)
		}
	}
	for _, n := range l.retries {
		if n > 0 {
			o.retried++
		}
	}
	return o
}
