package smtpd_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// heldPlane holds every send for port until release closes, telling
// entered of each; sends for other ports it takes at once. It stands for
// a plane that is slow for one trial, which a real one cannot be made to
// be on cue.
type heldPlane struct {
	port    int
	door    string // if set, only the sends of this door are held
	entered chan struct{}
	release chan struct{}
}

func (p heldPlane) Send(ctx context.Context, req *rpc.SendRequest) (rpc.SendResponse, error) {
	if req.Port == p.port && (p.door == "" || req.Door == p.door) {
		p.entered <- struct{}{}
		<-p.release
	}
	return rpc.SendResponse{ID: "id", Seq: 1}, nil
}

func (heldPlane) CheckCredential(context.Context, *rpc.CredentialRequest) error { return nil }

// serveOn runs srv on a new loopback listener and returns its address.
func serveOn(t *testing.T, srv *smtpd.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// transact runs one transaction up to the end of DATA and returns the
// reply's code and text, without waiting for it when wait is false.
func transact(t *testing.T, addr string, wait bool) (*client, int, string) {
	t.Helper()
	c := greet(t, addr)
	for _, line := range []string{"EHLO client.example", "MAIL FROM:<" + sender + ">", "RCPT TO:<u@example.com>"} {
		if code, text := c.cmd(line); code != 250 {
			t.Fatalf("%s: %d %q", line, code, text)
		}
	}
	if code, text := c.cmd("DATA"); code != 354 {
		t.Fatalf("DATA: %d %q", code, text)
	}
	c.send("Subject: s\r\n\r\nbody\r\n.")
	if !wait {
		return c, 0, ""
	}
	code, text := c.reply()
	return c, code, text
}

// shareWait is the tests' bound on a DATA's wait for its trial's share
// (limits.TrialSendWait in a writer): each DATA refused for its share
// costs a test this much.
const shareWait = 2 * time.Second

// TestTrialSends: a trial (here: its own port) with limits.TrialSends
// messages in flight to the plane has one more DATA wait for a share:
// answered 452 4.3.2 without reaching the plane when none frees within
// the bound, while another trial on the same writer is served at once;
// delivered as soon as one of its sends is answered; and once all are,
// the trial sends again.
func TestTrialSends(t *testing.T) {
	shares := connlimit.NewShares(limits.TrialSends)
	plane := heldPlane{entered: make(chan struct{}, limits.TrialSends+1), release: make(chan struct{})}
	// Two trial ports of one writer, sharing its shares.
	a := smtpd.New(smtpd.Config{Shares: shares, ShareWait: shareWait}, &plane, zerolog.Nop())
	b := smtpd.New(smtpd.Config{Shares: shares, ShareWait: shareWait}, &plane, zerolog.Nop())
	addrA, addrB := serveOn(t, a), serveOn(t, b)
	_, portA, err := net.SplitHostPort(addrA)
	if err != nil {
		t.Fatal(err)
	}
	if plane.port, err = strconv.Atoi(portA); err != nil {
		t.Fatal(err)
	}

	held := make([]*client, 0, limits.TrialSends)
	for range limits.TrialSends {
		c, _, _ := transact(t, addrA, false)
		held = append(held, c)
	}
	for range limits.TrialSends {
		select {
		case <-plane.entered:
		case <-time.After(itest.Bound):
			t.Fatal("the held sends did not reach the plane")
		}
	}
	// The held sends are answered only after release: a send over the
	// share waits its bound in vain.
	if _, code, text := transact(t, addrA, true); code != 452 || !strings.Contains(text, "4.3.2") {
		t.Fatalf("a send over the trial's share: %d %q, want 452 4.3.2", code, text)
	}
	if len(plane.entered) != 0 {
		t.Fatal("a send over the share reached the plane")
	}
	if _, code, text := transact(t, addrB, true); code != 250 {
		t.Fatalf("another trial while the first is at its share: %d %q", code, text)
	}
	// One more waits; one held send answered gives it the share.
	queued, _, _ := transact(t, addrA, false)
	plane.release <- struct{}{}
	select {
	case <-plane.entered:
	case <-time.After(itest.Bound):
		t.Fatal("the send that waited for a share did not reach the plane when one freed")
	}
	close(plane.release)
	for _, c := range append(held, queued) {
		if code, text := c.reply(); code != 250 {
			t.Fatalf("a held send: %d %q", code, text)
		}
	}
	if _, code, text := transact(t, addrA, true); code != 250 {
		t.Fatalf("the trial after its sends were answered: %d %q", code, text)
	}
}

// TestDoorShares: two trials' netns doors on the same port number (here
// 127.0.0.1 and 127.0.0.2, as two namespaces' loopbacks would be) have a
// share each: one door at its share leaves the other served.
func TestDoorShares(t *testing.T) {
	shares := connlimit.NewShares(limits.TrialSends)
	plane := heldPlane{door: "a", entered: make(chan struct{}, limits.TrialSends+1), release: make(chan struct{})}
	a := smtpd.New(smtpd.Config{Shares: shares, Door: "a", ShareWait: shareWait}, &plane, zerolog.Nop())
	b := smtpd.New(smtpd.Config{Shares: shares, Door: "b", ShareWait: shareWait}, &plane, zerolog.Nop())
	addrA := serveOn(t, a)
	_, port, _ := net.SplitHostPort(addrA)
	lnB, err := net.Listen("tcp", "127.0.0.2:"+port)
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	go b.Serve(lnB)
	t.Cleanup(func() { b.Close() })
	if plane.port, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	for range limits.TrialSends {
		transact(t, addrA, false)
	}
	for range limits.TrialSends {
		select {
		case <-plane.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the held sends did not reach the plane")
		}
	}
	if _, code, text := transact(t, addrA, true); code != 452 {
		t.Fatalf("door a over its share: %d %q, want 452", code, text)
	}
	if _, code, text := transact(t, lnB.Addr().String(), true); code != 250 {
		t.Fatalf("door b on the same port while door a is at its share: %d %q, want 250", code, text)
	}
	close(plane.release)
}

// countingPlane counts the sends that reach it and accepts them.
type countingPlane struct{ sends atomic.Int64 }

func (p *countingPlane) Send(context.Context, *rpc.SendRequest) (rpc.SendResponse, error) {
	p.sends.Add(1)
	return rpc.SendResponse{ID: "id", Seq: 1}, nil
}

func (*countingPlane) CheckCredential(context.Context, *rpc.CredentialRequest) error { return nil }

// TestTrialReceiving: a trial's share is taken when DATA starts, before
// its body is read: with limits.TrialSends bodies of the trial still
// arriving, one more DATA waits in vain and is answered 452 4.3.2 at its
// end, never reaching the plane, while another trial is served; once the
// bodies end, they are delivered, and the trial may send again.
func TestTrialReceiving(t *testing.T) {
	shares := connlimit.NewShares(limits.TrialSends)
	var plane countingPlane
	a := smtpd.New(smtpd.Config{Shares: shares, ShareWait: shareWait}, &plane, zerolog.Nop())
	b := smtpd.New(smtpd.Config{Shares: shares, ShareWait: shareWait}, &plane, zerolog.Nop())
	addrA, addrB := serveOn(t, a), serveOn(t, b)
	start := func(addr string) *client {
		c := greet(t, addr)
		for _, line := range []string{"EHLO client.example", "MAIL FROM:<" + sender + ">", "RCPT TO:<u@example.com>"} {
			if code, text := c.cmd(line); code != 250 {
				t.Fatalf("%s: %d %q", line, code, text)
			}
		}
		if code, text := c.cmd("DATA"); code != 354 {
			t.Fatalf("DATA: %d %q", code, text)
		}
		c.send("Subject: s\r\n\r\n" + strings.Repeat(strings.Repeat("x", 78)+"\r\n", 800) + "end")
		return c
	}
	receiving := make([]*client, 0, limits.TrialSends)
	for range limits.TrialSends {
		receiving = append(receiving, start(addrA))
	}
	// The share is taken by the session's goroutine after 354: wait until
	// all of them hold it, seen as one more DATA refused.
	deadline := time.Now().Add(itest.Bound)
	for {
		c := start(addrA)
		c.send(".")
		code, text := c.reply()
		c.c.Close()
		if code == 452 && strings.Contains(text, "4.3.2") {
			break
		}
		if code != 250 || time.Now().After(deadline) {
			t.Fatalf("one more DATA while %d bodies arrive: %d %q, want 452 4.3.2", limits.TrialSends, code, text)
		}
		// Delivered: one of the bodies had not yet taken its share.
	}
	before := plane.sends.Load()
	c := start(addrA)
	c.send(".")
	if code, text := c.reply(); code != 452 || !strings.Contains(text, "4.3.2") {
		t.Fatalf("one more DATA over the trial's share: %d %q, want 452 4.3.2", code, text)
	}
	if plane.sends.Load() != before {
		t.Fatal("a DATA over the share reached the plane")
	}
	other := start(addrB)
	other.send(".")
	if code, text := other.reply(); code != 250 {
		t.Fatalf("another trial while the first has its share arriving: %d %q", code, text)
	}
	for _, c := range receiving {
		c.send(".")
		if code, text := c.reply(); code != 250 {
			t.Fatalf("a body that arrived in its share: %d %q", code, text)
		}
	}
	again := start(addrA)
	again.send(".")
	if code, text := again.reply(); code != 250 {
		t.Fatalf("the trial after its bodies were delivered: %d %q", code, text)
	}
}
