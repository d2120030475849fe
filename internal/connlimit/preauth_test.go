package connlimit

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestPreauth: the budget holds its bytes and its count; a release frees
// its reservation once; a body that does not fit closes the oldest
// bodies' connections to make room, and one larger than the whole budget
// is refused.
func TestPreauth(t *testing.T) {
	conns := make([]*pipeConn, 4)
	ctxs := make([]context.Context, 4)
	for i := range conns {
		conns[i] = &pipeConn{}
		ctxs[i] = HTTPConnContext(context.Background(), conns[i])
	}
	p := NewPreauth(10, 2)
	r0, ok0 := p.Take(ctxs[0], 6)
	r1, ok1 := p.Take(ctxs[1], 4)
	if !ok0 || !ok1 || conns[0].closed || conns[1].closed {
		t.Fatalf("takes of 6 and 4 of 10: %v %v", ok0, ok1)
	}
	// Full by count and bytes: the oldest (6 bytes) makes room for 5.
	_, ok2 := p.Take(ctxs[2], 5)
	if !ok2 || !conns[0].closed || conns[1].closed {
		t.Fatalf("a take over a full budget: %v; oldest closed %v, next closed %v; want true, true, false", ok2, conns[0].closed, conns[1].closed)
	}
	r0() // released after its eviction: frees nothing twice
	r1()
	r1()
	if _, ok := p.Take(ctxs[3], 5); !ok || conns[2].closed {
		t.Fatalf("a take beside one of 5: %v, closed %v; want true, false", ok, conns[2].closed)
	}
	if _, ok := p.Take(ctxs[3], 11); ok {
		t.Fatal("a body larger than the budget was taken")
	}
	if _, ok := p.Take(context.Background(), 1); !ok || !conns[2].closed {
		t.Fatalf("a take over a full count: %v, oldest closed %v", ok, conns[2].closed)
	}
}

// pipeConn is a net.Conn that only notes its Close.
type pipeConn struct {
	net.Conn
	closed bool
}

func (c *pipeConn) Close() error { c.closed = true; return nil }

// TestGuardClosesUnread: a request answered before its declared body
// arrived is answered at once with Connection: close, its
// Expect: 100-continue gets no 100, and the connection is closed soon
// after, also for a small body that never comes (the server here has no
// read timeout of its own).
func TestGuardClosesUnread(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ConnState: HTTPConnState(), ConnContext: HTTPConnContext, Handler: GuardHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))}
	go srv.Serve(Listen(ln, Limits{Pool: NewPool(4)}))
	t.Cleanup(func() { srv.Close() })
	for _, length := range []int{4 << 20, 100} {
		c := dial(t, ln.Addr().String())
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", length)
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Fatalf("length %d: answer %d, close %v; want 401 and close", length, resp.StatusCode, resp.Close)
		}
		resp.Body.Close()
		if _, err := br.ReadByte(); isTimeout(err) {
			t.Fatalf("length %d: the connection was not closed after the answer", length)
		}
	}
}
