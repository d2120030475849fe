package smtpd_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// acceptAll is a plane that takes every message, so that the time is the
// listener's own.
type acceptAll struct{}

func (acceptAll) Send(context.Context, *rpc.SendRequest) (rpc.SendResponse, error) {
	return rpc.SendResponse{ID: "id", Seq: 1}, nil
}

func (acceptAll) CheckCredential(context.Context, *rpc.CredentialRequest) error { return nil }

// The listener handles a session in time linear in what the client sends:
// many commands, many recipients, long command lines, long DATA of many
// lines, dot-stuffing, and headers folded many times (which a selecting
// listener reads for the namespace and capability). Sessions run through
// the real server over in-memory connections: a TCP socket's buffers made
// the cost of a command change once a session outgrew them, which is the
// kernel's doing, not the listener's. The command and recipient limits
// are lifted so that the work grows with n instead of stopping at them.
func TestSessionLinear(t *testing.T) {
	ln := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := smtpd.New(smtpd.Config{Mode: smtpd.Select, MaxMessageBytes: 1 << 30, MaxRecipients: 1 << 30, MaxCommands: 1 << 30}, acceptAll{}, zerolog.Nop())
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln

	const (
		hello = "EHLO client.example\r\nMAIL FROM:<" + rpc.CandidateSender + ">\r\nRCPT TO:<u@example.com>\r\n"
		data  = "DATA\r\n"
		end   = ".\r\nQUIT\r\n"
	)
	message := func(body func(n int) string) func(int) (string, int) {
		return func(n int) (string, int) { return hello + data + body(n) + end, 1 }
	}
	for _, c := range []struct {
		name    string
		session func(n int) (session string, queued int)
		base    int
	}{
		{"folded header in DATA", message(func(n int) string {
			return "X-WebsiteBench-Namespace: ns\r\nX: a\r\n" + strings.Repeat(" \r\n", n) + "\r\nbody\r\n"
		}), 320_000},
		{"many header fields in DATA", message(func(n int) string { return strings.Repeat("X-A: b\r\n", n) + "\r\nbody\r\n" }), 160_000},
		{"many short lines in DATA", message(func(n int) string { return "Subject: s\r\n\r\n" + strings.Repeat("a\r\n", n) }), 320_000},
		{"dot-stuffed lines in DATA", message(func(n int) string { return "Subject: s\r\n\r\n" + strings.Repeat("..x\r\n", n) }), 320_000},
		{"long lines in DATA", message(func(n int) string { return "Subject: s\r\n\r\n" + strings.Repeat(strings.Repeat("x", 8000)+"\r\n", n) }), 128},
		{"many recipients", func(n int) (string, int) {
			return hello + strings.Repeat("RCPT TO:<u@example.com>\r\n", n) + data + "Subject: s\r\n\r\nb\r\n" + end, 1
		}, 4000},
		{"many commands", func(n int) (string, int) { return hello + strings.Repeat("NOOP\r\n", n) + "QUIT\r\n", 0 }, 8000},
		{"long commands", func(n int) (string, int) {
			return hello + strings.Repeat("NOOP "+strings.Repeat("x", 4000)+"\r\n", n) + "QUIT\r\n", 0
		}, 400},
		{"many messages", func(n int) (string, int) {
			return "EHLO client.example\r\n" + strings.Repeat("MAIL FROM:<"+rpc.CandidateSender+">\r\nRCPT TO:<u@example.com>\r\nDATA\r\nSubject: s\r\n\r\nb\r\n.\r\n", n) + "QUIT\r\n", n
		}, 800},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "smtpd/"+c.name, func(n int) func() {
				session, queued := c.session(n)
				// Once untimed, to check that the session does what it
				// should: every message queued, the session ended by QUIT.
				if got := converse(t, addr, session); bytes.Count(got, []byte("250 2.0.0 OK: queued as id")) != queued || !bytes.Contains(got, []byte("221 ")) {
					t.Fatalf("session of n=%d ended %q", n, tail(got))
				}
				return func() { converse(t, addr, session) }
			}, c.base)
		})
	}
}

// converse sends a whole session at once (pipelined) and returns every
// reply, up to the server's close.
func converse(t *testing.T, ln *pipeListener, session string) []byte {
	c := ln.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	go io.WriteString(c, session)
	replies, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return replies
}

func tail(b []byte) []byte { return b[max(0, len(b)-200):] }

// pipeListener hands the server one end of a net.Pipe per dial.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
