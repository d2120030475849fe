package writer_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/smtp"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// tally records what the traffic was told.
type tally struct {
	mu    sync.Mutex
	acked map[string]bool // subjects answered 200 / 250
	codes map[string]int  // "http 503", "smtp 451", …
}

func (t *tally) add(subject, answer string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.codes[answer]++
	if ok {
		t.acked[subject] = true
	}
}

func (t *tally) count(answer string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.codes[answer]
}

// TestPlaneOutage kills the plane under HTTP and SMTP traffic. While it is
// down the writer answers 503 mailpit_unavailable and 451, never a policy
// code; when it comes back the writer recovers by itself; every message
// that was acknowledged is held by the plane.
func TestPlaneOutage(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", []string{"--quota-messages", "0", "--quota-bytes", "0"})
	tl := &tally{acked: map[string]bool{}, codes: map[string]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Timeout: 15 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				subject := fmt.Sprintf("http-%d-%d", g, i)
				req, _ := http.NewRequest(http.MethodPost, w.URL+"/emails", strings.NewReader(bodyOf(with("subject", subject))))
				req.Header.Set("Authorization", "Bearer "+id.MailAPIToken)
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					tl.add(subject, "http error "+err.Error(), false)
					continue
				}
				resp.Body.Close()
				tl.add(subject, fmt.Sprintf("http %d", resp.StatusCode), resp.StatusCode == 200)
				if resp.StatusCode != 200 {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				subject := fmt.Sprintf("smtp-%d-%d", g, i)
				err := smtp.SendMail(w.SMTPAddr, nil, rpc.CandidateSender, []string{"u@example.com"},
					[]byte("Subject: "+subject+"\r\n\r\nbody\r\n"))
				var te *textproto.Error
				switch {
				case err == nil:
					tl.add(subject, "smtp 250", true)
				case errors.As(err, &te):
					tl.add(subject, fmt.Sprintf("smtp %d", te.Code), false)
					time.Sleep(5 * time.Millisecond)
				default:
					tl.add(subject, "smtp error "+err.Error(), false)
				}
			}
		}()
	}

	time.Sleep(400 * time.Millisecond)
	p.Kill()
	// While the plane is down: outage answers on every route.
	deadline := time.Now().Add(10 * time.Second)
	for (tl.count("http 503") < 5 || tl.count("smtp 451") < 5) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if a := get(t, w.URL+"/healthz", ""); a.status != 503 || a.body["status"] != "unavailable" {
		t.Errorf("healthz while down: %d %s", a.status, a.raw)
	}
	if a := get(t, w.URL+"/internal/bootstrap", id.BootstrapToken); a.status != 503 || a.code() != "mailpit_unavailable" {
		t.Errorf("bootstrap while down: %d %s", a.status, a.raw)
	}
	if a := postJSON(t, w.URL, id.MailAPIToken, bodyOf(valid()), nil); a.status != 503 || a.code() != "mailpit_unavailable" || a.header.Get("Retry-After") == "" {
		t.Errorf("POST while down: %d %s", a.status, a.raw)
	}
	// A bad request cannot be authenticated while the plane is down.
	if a := postJSON(t, w.URL, "wrong", "{", nil); a.status != 503 {
		t.Errorf("bad request while down: %d %s", a.status, a.raw)
	}
	downHTTP, downSMTP := tl.count("http 503"), tl.count("smtp 451")

	p.Restart(t)
	itest.WaitHTTP(t, w.URL+"/healthz", 200, w.Proc)
	okHTTP, okSMTP := tl.count("http 200"), tl.count("smtp 250")
	deadline = time.Now().Add(10 * time.Second)
	for (tl.count("http 200") < okHTTP+5 || tl.count("smtp 250") < okSMTP+5) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	t.Logf("answers: %v", tl.codes)
	if downHTTP == 0 || downSMTP == 0 {
		t.Errorf("no outage answers while the plane was down (http 503: %d, smtp 451: %d)", downHTTP, downSMTP)
	}
	if tl.count("http 200") < okHTTP+5 || tl.count("smtp 250") < okSMTP+5 {
		t.Errorf("the writer did not recover by itself: %v", tl.codes)
	}
	for answer := range tl.codes {
		switch answer {
		case "http 200", "http 503", "smtp 250", "smtp 451":
		default:
			t.Errorf("answer outside 200/503 and 250/451: %q (%d times)", answer, tl.codes[answer])
		}
	}
	held := map[string]bool{}
	for _, m := range writertest.Messages(t, p, id) {
		held[m.Subject] = true
	}
	for subject := range tl.acked {
		if !held[subject] {
			t.Errorf("acknowledged %s is lost", subject)
		}
	}
	if len(tl.acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}
}
