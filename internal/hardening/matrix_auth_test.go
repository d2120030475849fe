package hardening

import (
	"fmt"
	"net"
	"net/http"
	"net/smtp"
	"time"
)

// authCell is one cell of the isolation matrix for the writer's doors
// that take the mail credential in a new place: POST /emails/batch (a
// batch of one email, under the Bearer c) and SMTP AUTH (c as the
// password, on loopback where AUTH needs no TLS). A success is judged by
// where the mail went (checkDestinations); a refusal is a 4xx or an SMTP
// 5xx.
func (w *world) authCell(r route, in instance, dest int, c cred, subject string) (bool, string) {
	t := w.t
	if r.kind == "/emails/batch" {
		auth := ""
		if c.value != "" {
			auth = "Bearer " + c.value
		}
		body := "[" + emailBody(senderOf(w.profile), "cell@example.com", subject, "x") + "]"
		a, err := w.sys.request(w.hc, http.MethodPost, in.url+"/emails/batch", auth, body, map[string]string{"Content-Type": "application/json"})
		if err != nil {
			t.Fatalf("POST /emails/batch: %v", err)
		}
		if a.status == 200 {
			return dest >= 0, a.body
		}
		if a.status < 400 || a.status >= 500 {
			t.Errorf("writer /emails/batch of the %s: refused with %d, want a 4xx: %s", in.name, a.status, a.body)
		}
		return false, fmt.Sprintf("%d %s", a.status, a.body)
	}
	res := sendSMTPAuth(in.smtp, c.value, senderOf(w.profile), "cell@example.com", rawMail(subject, "x"))
	if res.code == 250 {
		return dest >= 0, ""
	}
	w.sys.saw(c.value+" "+subject, fmt.Sprint(res.code, " ", res.text, " ", res.err))
	if res.code < 500 {
		t.Errorf("writer smtp auth of the %s: refused with %d %v, want a 5xx", in.name, res.code, res.err)
	}
	return false, fmt.Sprint(res.code, res.err)
}

// sendSMTPAuth sends one message after AUTH PLAIN with password.
func sendSMTPAuth(addr, password, from, to string, data []byte) smtpResult {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return smtpResult{err: err}
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	host, _, _ := net.SplitHostPort(addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return result(err)
	}
	defer c.Close()
	if err := c.Auth(smtp.PlainAuth("", "resend", password, host)); err != nil {
		return result(err)
	}
	if err := c.Mail(from); err != nil {
		return result(err)
	}
	if err := c.Rcpt(to); err != nil {
		return result(err)
	}
	wc, err := c.Data()
	if err != nil {
		return result(err)
	}
	if _, err := wc.Write(data); err != nil {
		return result(err)
	}
	if err := wc.Close(); err != nil {
		return result(err)
	}
	c.Quit()
	return smtpResult{code: 250}
}
