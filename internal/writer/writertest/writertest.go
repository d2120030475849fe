// Package writertest runs a real mail-writer in front of a real plane for
// the tests of packages writer and smtpd: both binaries as processes, on
// real sockets.
package writertest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Writer is a running mail-writer.
type Writer = itest.Surface

// Start runs mail-writer for trial id on plane, in mode (fixed or select),
// with extra flags, and waits until it is healthy.
func Start(t testing.TB, plane *itest.Plane, id rpc.Identity, mode string, extra ...string) *Writer {
	t.Helper()
	return itest.StartWriter(t, plane, id.WriterGrant, mode, extra...)
}

// Setup is the usual start of a test: a plane with extra flags, a trial of
// profile, and a writer for it in mode.
func Setup(t testing.TB, profile, mode string, planeFlags []string, writerFlags ...string) (*itest.Plane, rpc.Identity, *Writer) {
	t.Helper()
	p := itest.StartPlane(t, planeFlags...)
	id := p.Trial(t, profile)
	return p, id, Start(t, p, id, mode, writerFlags...)
}

// Messages reads all of the trial's messages through the plane as the
// evaluator does (a gateway grant and the read capability), oldest first,
// a page at a time.
func Messages(t testing.TB, p *itest.Plane, id rpc.Identity) []rpc.Message {
	t.Helper()
	c := p.Client(t, p.GatewayGrant(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var all []rpc.Message
	for {
		req := &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability}
		if len(all) > 0 {
			req.After = all[len(all)-1].ID
		}
		page, err := c.List(ctx, req)
		if err != nil {
			t.Fatalf("list %s: %v", id.Namespace, err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
	}
}

// Count is how many messages the trial's namespace holds, from the plane's
// trial list (no message is loaded).
func Count(t testing.TB, p *itest.Plane, id rpc.Identity) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	trials, err := p.Admin.AllTrials(ctx)
	if err != nil {
		t.Fatalf("trial list: %v", err)
	}
	for _, tr := range trials {
		for _, ns := range tr.Namespaces {
			if ns == id.Namespace {
				return tr.Messages
			}
		}
	}
	t.Fatalf("trial %s not listed", id.Namespace)
	return 0
}

// Dial opens a TCP connection to addr, closed at cleanup.
func Dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TwoTrials starts a plane without quotas and two trials of profile: the
// one a test writes into, and another that must stay untouched.
func TwoTrials(t testing.TB, profile string) (*itest.Plane, rpc.Identity, rpc.Identity) {
	t.Helper()
	p := itest.StartPlane(t, "--quota-messages", "0", "--quota-bytes", "0")
	return p, p.Trial(t, profile), p.Trial(t, profile)
}

// Exchange sends input to addr all at once and half-closes, as a client
// that says everything before it listens; the server's answer is read from
// the returned connection, which gives up after d.
func Exchange(t testing.TB, addr string, input []byte, d time.Duration) net.Conn {
	t.Helper()
	c := Dial(t, addr)
	c.SetDeadline(time.Now().Add(d))
	go func() {
		c.Write(input)
		c.(*net.TCPConn).CloseWrite()
	}()
	return c
}
