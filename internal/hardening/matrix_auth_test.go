package hardening

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/smtp"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/pkg/rpc"
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

// authPortCells are the cells of SMTP ports that require AUTH, on the
// shared writer of an up stack: a client without a credential sees the
// same greeting, EHLO reply and 530 to MAIL, byte for byte, on every
// trial's port as on the shared port, so no port tells whose it is; and
// on each trial's port the third failed AUTH is answered 421 and the
// session closed, so a fourth attempt (here with the trial's own token)
// finds it closed. Another trial's token on a trial's port is a cell of
// the surface matrix ("smtp auth" on "shared writer on A's port").
func (w *world) authPortCells() {
	if w.mode != sharedMode {
		return
	}
	part := "auth/" + w.mode
	var ref string
	for _, in := range w.instances {
		if !in.shared || in.smtpMode != smtpd.Fixed || in.smtp == "" {
			continue
		}
		got := plainExchange(in.smtp)
		if in.owner < 0 {
			ref = got
			w.cell(part, "MAIL without AUTH on the "+in.name+" is 530", true, strings.HasSuffix(got, "\n530 5.7.0 Authentication required\r\n"), got)
			continue
		}
		w.cell(part, "MAIL without AUTH on the "+in.name+" answers as on the shared port", true, ref != "" && got == ref, got)
		own := w.ids[in.owner].MailAPIToken
		w.cell(part, "the third failed AUTH on the "+in.name+" closes the session", true, lockedOut(in.smtp, own), "")
	}
}

// plainExchange is what a client without a credential reads from addr:
// the greeting, EHLO's reply and MAIL's reply, as sent.
func plainExchange(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	out := readSMTPReply(r)
	fmt.Fprint(c, "EHLO cell.example\r\n")
	out += readSMTPReply(r)
	fmt.Fprintf(c, "MAIL FROM:<%s>\r\n", rpc.CandidateSender)
	return out + readSMTPReply(r)
}

// lockedOut reports whether three wrong AUTHs on addr are answered 535,
// 535 and 421, and the fourth, with the right password, finds the
// session closed.
func lockedOut(addr, password string) bool {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	readSMTPReply(r)
	fmt.Fprint(c, "EHLO cell.example\r\n")
	readSMTPReply(r)
	auth := func(pw string) string {
		fmt.Fprint(c, "AUTH PLAIN "+base64.StdEncoding.EncodeToString([]byte("\x00resend\x00"+pw))+"\r\n")
		return readSMTPReply(r)
	}
	for i, want := range []string{"535 ", "535 ", "421 "} {
		if !strings.HasPrefix(auth(fmt.Sprint("wrong-", i)), want) {
			return false
		}
	}
	return auth(password) == ""
}

// readSMTPReply reads one reply, all its lines ("" once closed).
func readSMTPReply(r *bufio.Reader) string {
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil || len(line) < 4 || line[3] == ' ' {
			return b.String()
		}
	}
}
