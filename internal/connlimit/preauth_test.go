package connlimit

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestPreauth: the budget holds its bytes and its count, and a release
// frees its reservation once.
func TestPreauth(t *testing.T) {
	p := NewPreauth(10, 2)
	r1, ok1 := p.Take(6)
	if _, ok := p.Take(5); !ok1 || ok {
		t.Fatalf("takes of 6 then 5 of 10: %v, %v; want true, false", ok1, ok)
	}
	r2, ok2 := p.Take(4)
	if _, ok := p.Take(0); !ok2 || ok {
		t.Fatalf("a third take over a count of 2: %v, %v", ok2, ok)
	}
	r1()
	r1()
	if _, ok := p.Take(6); !ok {
		t.Fatal("a released reservation is not taken again")
	}
	if _, ok := p.Take(1); ok {
		t.Fatal("a second release of one take freed it twice")
	}
	r2()
}

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
