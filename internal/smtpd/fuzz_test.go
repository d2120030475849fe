package smtpd_test

import (
	"bytes"
	"errors"
	"net"
	"net/smtp"
	"net/textproto"
	"testing"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// FuzzSMTPData sends arbitrary DATA through a selecting listener, in front
// of a real plane. {NS} and {CAP} in the input stand for the trial's real
// namespace and capability, so the fuzzer can reach a valid selection and
// mutate around it (folding, case, duplicates, MIME). Whatever the input:
// the reply is 250, 550 or 552, a refusal stores nothing, and a 250 stores
// exactly one message in the trial, never in another.
func FuzzSMTPData(f *testing.F) {
	for _, seed := range []string{
		"X-WebsiteBench-Namespace: {NS}\r\nX-WebsiteBench-Capability: {CAP}\r\nSubject: hi\r\n\r\nbody\r\n",
		"X-WebsiteBench-Namespace: {NS}\r\nX-WebsiteBench-Capability:\r\n {CAP}\r\n\r\nfolded\r\n",
		"x-websitebench-namespace:{NS}\nx-websitebench-capability:{CAP}\n\nbare LF\n",
		"X-WebsiteBench-Namespace: {NS}\r\nX-WebsiteBench-Capability: {CAP}\r\nX-WebsiteBench-Capability: wrong\r\n\r\n",
		"X-WebsiteBench-Namespace: {NS}\r\nX-WebsiteBench-Capability: {CAP}\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nX-WebsiteBench-Namespace: other\r\n\r\npart\r\n--b--\r\n",
		"X-WebsiteBench-Namespace: other\r\nX-WebsiteBench-Capability: {CAP}\r\n\r\n",
		"Subject: no selection\r\n\r\n.\r\n..\r\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	p, id, other := writertest.TwoTrials(f, rpc.ProfileSidecar)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	srv := smtpd.New(smtpd.Config{Mode: smtpd.Select}, p.Client(f, id.WriterGrant), zerolog.Nop())
	go srv.Serve(connlimit.Listen(ln, connlimit.Limits{MaxConns: 16, Idle: connlimit.DefaultIdle}))
	f.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.ReplaceAll(data, []byte("{NS}"), []byte(id.Namespace))
		data = bytes.ReplaceAll(data, []byte("{CAP}"), []byte(id.ReadCapability))
		before, beforeOther := writertest.Count(t, p, id), writertest.Count(t, p, other)
		code := deliver(t, addr, data)
		switch code {
		case 250, 550, 552:
		default:
			t.Fatalf("reply %d", code)
		}
		after := writertest.Count(t, p, id)
		if want := before + map[bool]int64{true: 1}[code == 250]; after != want {
			t.Fatalf("reply %d stored %d messages", code, after-before)
		}
		if n := writertest.Count(t, p, other); n != beforeOther {
			t.Fatalf("another trial received %d", n-beforeOther)
		}
	})
}

// deliver runs one SMTP transaction with data as the message and returns
// the final reply code.
func deliver(t *testing.T, addr string, data []byte) int {
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mail("site@reference.example"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("user@example.com"); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	err = w.Close()
	c.Quit()
	var te *textproto.Error
	switch {
	case err == nil:
		return 250
	case errors.As(err, &te):
		return te.Code
	}
	t.Fatalf("DATA: %v", err)
	return 0
}
