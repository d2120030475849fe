package smtpd_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// replyLine is a well-formed SMTP reply line.
var replyLine = regexp.MustCompile(`^[2-5][0-9][0-9]([ -].*)?\r\n$`)

// FuzzSMTPSession sends an arbitrary client side of a whole session
// (commands, pipelining, DATA, dot-stuffing, garbage) to a fixed listener
// in front of a real plane, then half-closes. Whatever the bytes: the
// session ends, every reply line is well formed, the trial stores exactly
// as many messages as the listener answered "queued", and the other trial
// stores none.
func FuzzSMTPSession(f *testing.F) {
	const from = "MAIL FROM:<" + rpc.CandidateSender + ">\r\n"
	for _, seed := range []string{
		"EHLO x\r\n" + from + "RCPT TO:<a@example.com>\r\nDATA\r\nSubject: hi\r\n\r\nbody\r\n.\r\nQUIT\r\n",
		"HELO x\r\n" + from + "RCPT TO:<a@example.com>\r\nRCPT TO:<b@example.com>\r\nDATA\r\n..dot\r\n.\r\n" + from + "RCPT TO:<c@example.com>\r\nDATA\r\nx\r\n.\r\n",
		"EHLO x\r\n" + from + "DATA\r\nx\r\n.\r\n",
		"EHLO x\r\nRSET\r\nNOOP\r\nVRFY a\r\nHELP\r\nSTARTTLS\r\nAUTH PLAIN AGF\r\n" + from + "RCPT TO:<a@example.com>\r\nBDAT 5 LAST\r\nhello",
		"EHLO x\r\n" + from + "RCPT TO:<a@example.com>\r\nDATA\r\nno end",
		"EHLO x\r\nMAIL FROM:<evil@example.com>\r\nRCPT TO:<a@example.com>\r\nDATA\r\nx\r\n.\r\n",
		"EHLO x\r\n" + from + "RCPT TO:<a@example.com>\nDATA\nbare LF\n.\n",
		"EHLO x\r\n" + from + "RCPT TO:<a\r\nb@example.com>\r\n\x00\xff\r\n",
		"\r\n\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	p, id, other := writertest.TwoTrials(f, rpc.ProfileCandidate)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	// A low command limit, so that the fuzzer reaches it.
	srv := smtpd.New(smtpd.Config{Mode: smtpd.Fixed, MaxCommands: 32}, p.Client(f, id.WriterGrant), zerolog.Nop())
	go srv.Serve(connlimit.Listen(ln, connlimit.Limits{MaxConns: 16, Idle: 2 * time.Second, Lifetime: 10 * time.Second}))
	f.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	f.Fuzz(func(t *testing.T, session []byte) {
		before, beforeOther := writertest.Count(t, p, id), writertest.Count(t, p, other)
		c := writertest.Exchange(t, addr, session, 15*time.Second)
		queued := 0
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err == io.EOF && line == "" {
				break
			}
			if err != nil && !isReset(err) {
				t.Fatalf("session did not end: %v", err)
			}
			if err != nil {
				break
			}
			if !replyLine.MatchString(line) {
				t.Fatalf("malformed reply line %q", line)
			}
			if bytes.HasPrefix([]byte(line), []byte("250 2.0.0 OK: queued as ")) {
				queued++
			}
		}
		if got := writertest.Count(t, p, id) - before; got != int64(queued) {
			t.Fatalf("%d messages stored, %d answered queued", got, queued)
		}
		if n := writertest.Count(t, p, other); n != beforeOther {
			t.Fatalf("the other trial received %d", n-beforeOther)
		}
	})
}

// isReset: the server closed while the client still had bytes unread by
// it (a session over the command limit, or past a line too long).
func isReset(err error) bool {
	var op *net.OpError
	ok := false
	if e, is := err.(*net.OpError); is {
		op, ok = e, true
	}
	return ok && op.Op == "read"
}
