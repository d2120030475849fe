package hardening

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// A trial's own known callers can make the writer hold only its share of
// bodies: the attack that opened DATA sessions on a trial's own port,
// and HTTP requests with its own token, each sending a large body it
// never finished, and grew the shared writer's memory by gigabytes.

// trialMemRSSBound is how much the writer's memory may grow under one
// trial's held bodies (the bound).
const trialMemRSSBound = 64 << 20

// TestFairSharesMemory: on a mail-plane up stack, trial A, with its own
// token, opens 200 SMTP sessions on its own port that each AUTH, start
// DATA and send ~1 MiB without ending it, and 100 HTTP/1.1 requests to
// the shared HTTP door that each declare a 4 MiB batch and send all of it
// but its last byte. The writer's RSS grows by at most 64 MB; no more
// than limits.TrialSends of A's DATAs are delivered when they end, the
// others, having waited limits.TrialSendWait for a share in vain, are
// answered 452 4.3.2; no more than TrialBodyBytes/4 MiB of
// A's requests are held, the others are answered 429; trial B's POST
// /emails and SMTP on its own port each answer within 2 s throughout.
//
// Not parallel: its 570 MiB of traffic would slow the other tests' trial
// B past their bound.
func TestFairSharesMemory(t *testing.T) {
	// Its 2 s bound is for the stack, not for the race detector's
	// bookkeeping of the 570 MiB this process sends (B's SMTP send took
	// 1.67 s and once 2.02 s under -race, 0.35-1.22 s without). make unit
	// runs it again without -race (-run TestFairShares), on its own.
	complexity.SkipUnderRace(t)
	u := newUpSys(t, "--quota-messages", "0", "--quota-bytes", "0")
	a, b := openTrial(t, u.sys), openTrial(t, u.sys)
	writer := upChild(t, u, "mail-writer")
	writerAddr := strings.TrimPrefix(u.bundle.WriterURL, "http://")
	_, port, _ := net.SplitHostPort(writerAddr)
	writerPort, _ := strconv.Atoi(port)
	tokenA, tokenB := a.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"], b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"]

	// B posts and sends all along, each on a new connection.
	stopB := make(chan struct{})
	var bwg sync.WaitGroup
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	bPosts, bSends := &probe{}, &probe{}
	bwg.Add(2)
	go bPosts.run(&bwg, stopB, u.sys.postOp(hc, u.bundle.WriterURL, tokenB, "trialmem"))
	go bSends.run(&bwg, stopB, smtpOp(net.JoinHostPort("127.0.0.1", strconv.Itoa(b.SMTPPort)), tokenB, "trialmem smtp"))
	itest.Eventually(t, "B's first POST /emails and SMTP send", 30*time.Second, func() bool { return bPosts.n.Load() > 0 && bSends.n.Load() > 0 })

	mem := watchRSS(t, writer)

	const sessions, requests, declared = 200, 100, 4 << 20
	finish := make(chan struct{}) // the SMTP sessions end their DATA, the HTTP requests are dropped
	var attack, sent sync.WaitGroup
	smtpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(a.SMTPPort))
	body := "Subject: hold\r\n\r\n" + strings.Repeat(strings.Repeat("x", 78)+"\r\n", (limits.MessageBytes-32<<10)/80)
	var sentBytes atomic.Int64
	replies := make(chan smtpResult, sessions)
	for range sessions {
		attack.Add(1)
		sent.Add(1)
		go func() {
			defer attack.Done()
			replies <- holdData(smtpAddr, tokenA, body, &sentBytes, sent.Done, finish)
		}()
	}
	statuses := make(chan string, requests)
	for range requests {
		attack.Add(1)
		sent.Add(1)
		go func() {
			defer attack.Done()
			statuses <- holdRequest(writerAddr, tokenA, declared, &sentBytes, sent.Done, finish)
		}()
	}
	allSent := make(chan struct{})
	go func() { sent.Wait(); close(allSent) }()
	select {
	case <-allSent:
	case <-time.After(20 * time.Second):
		t.Error("A's sessions and requests had not sent their bodies after 20 s")
	}
	// The bodies are all held at once when the writer has read what the
	// sockets still hold (what is left is a keep-alive line, or one of
	// B's requests).
	itest.Eventually(t, "the writer reading what A's sockets hold", itest.Bound, func() bool {
		return unreadOn(t, writerPort, a.SMTPPort) < 4<<10
	})
	// B, while the writer holds them all: as many answers on a slow host
	// as on a fast one.
	posts, sends := bPosts.n.Load(), bSends.n.Load()
	itest.Eventually(t, "5 more of B's POST /emails and SMTP sends under A's held bodies", itest.Bound, func() bool {
		return bPosts.n.Load() >= posts+5 && bSends.n.Load() >= sends+5
	})
	close(finish)
	attack.Wait()
	close(stopB)
	bwg.Wait()

	base, peak := mem.base, mem.peak()
	growth := (peak - base) << 10 // bytes
	figure(t, "trial-memory sessions=%d requests=%d declared=%dMiB sent_total=%dMiB writer_rss_base=%dMB peak=%dMB growth=%dMB bound=%dMB",
		sessions, requests, declared>>20, sentBytes.Load()>>20, base>>10, peak>>10, growth>>20, trialMemRSSBound>>20)
	if growth > trialMemRSSBound {
		t.Errorf("the writer's RSS grew by %d MB under one trial's held bodies (bound %d MB)", growth>>20, trialMemRSSBound>>20)
	}

	close(replies)
	codes := map[string]int{}
	for r := range replies {
		switch {
		case r.code == 250:
			codes["250"]++
		case r.code == 452 && strings.HasPrefix(r.text, "4.3.2 "):
			codes["452 4.3.2"]++
		default:
			codes[fmt.Sprintf("%d %q %v", r.code, r.text, r.err)]++
		}
	}
	figure(t, "trial-memory smtp replies=%v", codes)
	if codes["250"] > limits.TrialSends || codes["250"]+codes["452 4.3.2"] != sessions {
		t.Errorf("A's %d DATAs at once: %v; want at most %d delivered, the others 452 4.3.2", sessions, codes, limits.TrialSends)
	}
	close(statuses)
	answers := map[string]int{}
	for s := range statuses {
		answers[s]++
	}
	figure(t, "trial-memory http answers=%v", answers)
	if held := answers["held"]; held > limits.TrialBodyBytes/declared || answers["429 rate_limit_exceeded"] == 0 {
		t.Errorf("A's %d requests of 4 MiB at once: %v; want at most %d held, the others 429", requests, answers, limits.TrialBodyBytes/declared)
	}
	bPosts.check(t, "B's POST /emails under A's held bodies")
	bSends.check(t, "B's SMTP send under A's held bodies")
}

// holdData runs one SMTP session on addr that authenticates with token,
// starts DATA and sends body, calls sent, then keeps the session alive a
// line a second without ending the body until finish; then it ends the
// body and returns the reply.
func holdData(addr, token, body string, sentBytes *atomic.Int64, sent func(), finish <-chan struct{}) smtpResult {
	var once sync.Once
	defer once.Do(sent)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return smtpResult{err: err}
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReader(c)
	reply := func() (int, string, error) {
		var text []string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return 0, strings.Join(text, "\n"), err
			}
			line = strings.TrimRight(line, "\r\n")
			if len(line) < 4 {
				return 0, line, fmt.Errorf("short reply %q", line)
			}
			text = append(text, line[4:])
			if line[3] == ' ' {
				code, _ := strconv.Atoi(line[:3])
				return code, strings.Join(text, "\n"), nil
			}
		}
	}
	if code, text, err := reply(); code != 220 {
		return smtpResult{code: code, text: "greeting: " + text, err: err}
	}
	plain := base64.StdEncoding.EncodeToString([]byte("\x00resend\x00" + token))
	for _, step := range []struct {
		line string
		want int
	}{
		{"EHLO attacker.example", 250}, {"AUTH PLAIN " + plain, 235},
		{"MAIL FROM:<" + rpc.CandidateSender + ">", 250}, {"RCPT TO:<a@example.com>", 250}, {"DATA", 354},
	} {
		fmt.Fprintf(c, "%s\r\n", step.line)
		if code, text, err := reply(); code != step.want {
			return smtpResult{code: code, text: strings.Fields(step.line)[0] + ": " + text, err: err}
		}
	}
	n, err := io.WriteString(c, body)
	sentBytes.Add(int64(n))
	if err != nil {
		return smtpResult{err: err}
	}
	once.Do(sent)
	for {
		select {
		case <-finish:
			io.WriteString(c, ".\r\n")
			code, text, err := reply()
			return smtpResult{code: code, text: text, err: err}
		case <-time.After(time.Second):
			if _, err := io.WriteString(c, "y\r\n"); err != nil {
				return smtpResult{err: err}
			}
		}
	}
}

// holdRequest sends one POST /emails/batch to addr with token that
// declares size bytes and sends all but the last, calls sent, and returns
// the answer's status and error name, or "held" if none came before
// finish.
func holdRequest(addr, token string, size int, sentBytes *atomic.Int64, sent func(), finish <-chan struct{}) string {
	var once sync.Once
	defer once.Do(sent)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	fmt.Fprintf(c, "POST /emails/batch HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n[", token, size)
	chunk := []byte(strings.Repeat(" ", 64<<10))
	for left := size - 2; left > 0; left -= len(chunk) {
		n, err := c.Write(chunk[:min(len(chunk), left)])
		sentBytes.Add(int64(n))
		if err != nil {
			break // answered and closed: read the answer
		}
	}
	once.Do(sent)
	answered := make(chan string, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			answered <- "no answer: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		name := "?"
		if i := strings.Index(string(b), `"name":"`); i >= 0 {
			name, _, _ = strings.Cut(string(b[i+len(`"name":"`):]), `"`)
		}
		answered <- strconv.Itoa(resp.StatusCode) + " " + name
	}()
	select {
	case s := <-answered:
		return s
	case <-finish:
		select {
		case s := <-answered:
			return s
		default:
			return "held"
		}
	}
}
