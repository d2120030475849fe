package connlimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
)

// TestPoolShedsQuietest: two listeners share one cap; a connection over it
// is served, and the connection that has been quiet longest is closed to
// make room, wherever it was accepted.
func TestPoolShedsQuietest(t *testing.T) {
	p := NewPool(3)
	shed := make(chan struct{}, 10)
	_, addr1 := serve(t, Limits{Pool: p, OnShed: func() { shed <- struct{}{} }})
	_, addr2 := serve(t, Limits{Pool: p})
	oldest := dial(t, addr1)
	if !echo(oldest) {
		t.Fatal("first connection does not answer")
	}
	time.Sleep(20 * time.Millisecond)
	b, c := dial(t, addr2), dial(t, addr1)
	if !echo(b) || !echo(c) {
		t.Fatal("connections within the cap do not answer")
	}
	itest.Eventually(t, "three in the pool", itest.Bound, func() bool { return p.Open() == 3 })
	d := dial(t, addr2)
	if !echo(d) {
		t.Fatal("a connection over the cap is not served")
	}
	select {
	case <-shed:
	case <-time.After(3 * time.Second):
		t.Fatal("the shed connection's listener was not told")
	}
	if echo(oldest) {
		t.Fatal("the quietest connection is still open")
	}
	for _, c := range []net.Conn{b, c, d} {
		if !echo(c) {
			t.Fatal("a connection other than the quietest was closed")
		}
	}
	if p.Open() != 3 || p.Shed() != 1 {
		t.Fatalf("pool: %d open, %d shed; want 3, 1", p.Open(), p.Shed())
	}
}

// TestPoolKeepsBusy: a connection answering a request is never closed to
// make room, however quiet; with every place busy, a new connection is
// closed at once, and a place freed is taken again.
func TestPoolKeepsBusy(t *testing.T) {
	p := NewPool(2)
	// Busy from the first byte on: a request in progress.
	_, addr := serveWith(t, Limits{Pool: p}, func(c net.Conn) {
		b := make([]byte, 1)
		if _, err := c.Read(b); err != nil {
			return
		}
		MarkBusy(c, true)
		c.Write(b)
		io.Copy(c, c)
	})
	a, b := dial(t, addr), dial(t, addr)
	if !echo(a) || !echo(b) {
		t.Fatal("connections within the cap do not answer")
	}
	c := dial(t, addr)
	if echo(c) {
		t.Fatal("a connection over a cap of busy ones answers")
	}
	if !echo(a) || !echo(b) {
		t.Fatal("a busy connection was closed to make room")
	}
	a.Close()
	itest.Eventually(t, "a freed place", itest.Bound, func() bool { return p.Open() == 1 })
	if d := dial(t, addr); !echo(d) {
		t.Fatal("a freed place is not reused")
	}
}

// TestHTTPConnState: a request without a body marks its connection busy
// while it is answered, and only then.
func TestHTTPConnState(t *testing.T) {
	p := NewPool(1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started, finish := make(chan struct{}), make(chan struct{})
	srv := &http.Server{ConnState: HTTPConnState(), ConnContext: HTTPConnContext, Handler: GuardHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-finish
		}
	}))}
	go srv.Serve(Listen(ln, Limits{Pool: p}))
	t.Cleanup(func() { srv.Close() })
	url := "http://" + ln.Addr().String()
	slow := make(chan error, 1)
	go func() {
		resp, err := http.Get(url + "/slow")
		if err == nil {
			resp.Body.Close()
		}
		slow <- err
	}()
	<-started
	// The one place is busy: a new connection is closed, the request in
	// flight goes on.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 3 * time.Second}
	if resp, err := hc.Get(url + "/"); err == nil {
		resp.Body.Close()
		t.Fatal("a connection over a cap of one busy connection was served")
	}
	close(finish)
	if err := <-slow; err != nil {
		t.Fatalf("the busy request: %v", err)
	}
	// Idle now (kept alive by the default client): it makes room. The
	// server marks it idle after the client has its answer, so wait for
	// that first.
	itest.Eventually(t, "the answered connection idle", itest.Bound, func() bool { return p.busyConns() == 0 })
	resp, err := hc.Get(url + "/")
	if err != nil {
		t.Fatalf("a connection over a cap of one idle connection: %v", err)
	}
	resp.Body.Close()
}

// TestShares: a credential has its share in flight and no more; a release
// frees one place, once; other credentials are not affected.
func TestShares(t *testing.T) {
	s := NewShares(2)
	r1, ok1 := s.Take("a")
	_, ok2 := s.Take("a")
	if _, ok := s.Take("a"); !ok1 || !ok2 || ok {
		t.Fatalf("takes of a: %v %v, then %v; want true true false", ok1, ok2, ok)
	}
	if _, ok := s.Take("b"); !ok {
		t.Fatal("b refused while a is at its share")
	}
	r1()
	r1()
	if _, ok := s.Take("a"); !ok {
		t.Fatal("a released place is not taken again")
	}
	if _, ok := s.Take("a"); ok {
		t.Fatal("a second release of one take freed a second place")
	}
}

// TestSharesN: a share of bytes takes bodies of any size up to what is
// left of it, never one larger than the share; a release gives back what
// its take counted, once; other keys are not affected.
func TestSharesN(t *testing.T) {
	s := NewShares(10)
	r6, ok := s.TakeN("a", 6)
	if !ok {
		t.Fatal("6 of 10 refused")
	}
	if _, ok := s.TakeN("a", 5); ok {
		t.Fatal("5 more taken with 4 left")
	}
	r4, ok := s.TakeN("a", 4)
	if !ok {
		t.Fatal("the 4 left refused")
	}
	if _, ok := s.TakeN("b", 10); !ok {
		t.Fatal("b refused while a has its share")
	}
	if _, ok := s.TakeN("c", 11); ok {
		t.Fatal("more than the whole share taken")
	}
	if _, ok := s.TakeN("c", -1); ok {
		t.Fatal("a negative size taken")
	}
	r6()
	r6()
	if _, ok := s.TakeN("a", 7); ok {
		t.Fatal("a second release of one take gave back its bytes again")
	}
	if _, ok := s.TakeN("a", 6); !ok {
		t.Fatal("released bytes not taken again")
	}
	r4()
	if _, ok := s.TakeN("a", 5); ok {
		t.Fatal("took 5 with 6 of 10 held")
	}
}

// TestProcessCap: the cap fits the descriptors (two per connection) and
// is never below the reference's.
func TestProcessCap(t *testing.T) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	n := ProcessCap()
	if n < DefaultMaxConns || uint64(2*n) > max(r.Cur, 2*DefaultMaxConns) {
		t.Fatalf("ProcessCap %d with RLIMIT_NOFILE %d", n, r.Cur)
	}
	t.Logf("ProcessCap %d with RLIMIT_NOFILE %d", n, r.Cur)
}

// busyConns is how many of the pool's connections are answering a request.
func (p *Pool) busyConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if c.busy.Load() > 0 {
			n++
		}
	}
	return n
}

// strangersReading is how many of the pool's connections are reading a
// body whose caller is unknown.
func (p *Pool) strangersReading() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if c.stranger.Load() == strangerReading {
			n++
		}
	}
	return n
}

// TestUnknownCallerEvictable: a connection whose request body is still
// arriving, from a caller the handler has not accepted, makes room like
// an idle one; once the handler knows the caller (Known), it is kept.
func TestUnknownCallerEvictable(t *testing.T) {
	p := NewPool(1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reading := make(chan struct{}, 1) // the handler is reading a slow request's body
	srv := &http.Server{ConnState: HTTPConnState(), ConnContext: HTTPConnContext, Handler: GuardHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "good" {
			Known(r.Context())
		}
		if r.Method == http.MethodPost {
			reading <- struct{}{}
		}
		io.ReadAll(r.Body)
	}))}
	go srv.Serve(Listen(ln, Limits{Pool: p}))
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 3 * time.Second}
	for _, c := range []struct {
		auth    string
		evicted bool
	}{{"stranger", true}, {"good", false}} {
		slow := dial(t, addr)
		fmt.Fprintf(slow, "POST / HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Length: 10\r\n\r\nx", c.auth)
		itest.Eventually(t, "the slow request read", itest.Bound, func() bool { return p.Open() == 1 && (c.auth != "good" || p.busyConns() == 1) })
		select { // the slow request is in the handler, waiting for its body
		case <-reading:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the slow request never reached the handler", c.auth)
		}
		resp, err := hc.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		if served := err == nil; served != c.evicted {
			t.Fatalf("%s: a new connection served %v (%v), want %v", c.auth, served, err, c.evicted)
		}
		slow.SetReadDeadline(time.Now().Add(time.Second))
		_, rerr := slow.Read(make([]byte, 1))
		if closed := rerr != nil && !isTimeout(rerr); closed != c.evicted {
			t.Fatalf("%s: slow connection closed %v (%v), want %v", c.auth, closed, rerr, c.evicted)
		}
		slow.Close()
		itest.Eventually(t, "the pool empty", itest.Bound, func() bool { return p.Open() == 0 })
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestStrangerFirst: under a full pool, a connection reading a stranger's
// body makes room before an idle connection quiet for longer.
func TestStrangerFirst(t *testing.T) {
	p := NewPool(2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ConnState: HTTPConnState(), ConnContext: HTTPConnContext, Handler: GuardHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
	}))}
	go srv.Serve(Listen(ln, Limits{Pool: p}))
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	idle := dial(t, addr)
	if status := rawGet(idle); status != 200 {
		t.Fatalf("the idle connection's request: %d", status)
	}
	time.Sleep(100 * time.Millisecond)
	stranger := dial(t, addr)
	fmt.Fprintf(stranger, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nx")
	// The stranger's request is in the handler, its connection ranked.
	itest.Eventually(t, "both in the pool, the stranger's reading", itest.Bound, func() bool { return p.Open() == 2 && p.strangersReading() == 1 })
	if status := rawGet(dial(t, addr)); status != 200 {
		t.Fatalf("a new connection over the full pool: %d", status)
	}
	stranger.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := stranger.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("the stranger's connection: %v, want closed", err)
	}
	if status := rawGet(idle); status != 200 {
		t.Fatalf("the idle connection after a stranger made room: %d, want still served", status)
	}
}

// rawGet sends GET / on c and returns the answer's status (0 if none).
func rawGet(c net.Conn) int {
	c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
