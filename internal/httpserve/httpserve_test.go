package httpserve

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
)

// serve runs Serve on a loopback port with h and l until the returned
// stop is called; stop returns Serve's error.
func serve(t *testing.T, h http.Handler, l Limits) (addr string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, ln, h, l, zerolog.Nop()) }()
	var once bool
	var serr error
	stop = func() error {
		if !once {
			once = true
			cancel()
			select {
			case serr = <-errc:
			case <-time.After(2 * shutdownTimeout):
				t.Fatal("Serve did not return after its context ended")
			}
		}
		return serr
	}
	t.Cleanup(func() { stop() })
	return ln.Addr().String(), stop
}

// TestServeStops: Serve answers until its context ends, then returns nil
// and the port no longer answers.
func TestServeStops(t *testing.T) {
	addr, stop := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), Limits{})
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("before the stop: %d %q", resp.StatusCode, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve after the stop: %v, want nil", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("the port still accepts after the stop")
	}
}

// TestCutOnStop: with CutOnStop a request in flight sees its context end
// when the server stops (the gateway's waiting reads end at once);
// without it, the request runs on to its answer.
func TestCutOnStop(t *testing.T) {
	for _, cut := range []bool{true, false} {
		t.Run(fmt.Sprintf("cut=%v", cut), func(t *testing.T) {
			started, release := make(chan struct{}), make(chan struct{})
			cancelled := make(chan bool, 1)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(started)
				select {
				case <-r.Context().Done():
					cancelled <- true
				case <-release:
					cancelled <- false
					io.WriteString(w, "finished")
				}
			})
			addr, stop := serve(t, h, Limits{CutOnStop: cut})
			answer := make(chan string, 1)
			go func() {
				resp, err := http.Get("http://" + addr + "/wait")
				if err != nil {
					answer <- "error: " + err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				answer <- string(b)
			}()
			<-started
			stopping := time.Now()
			stopped := make(chan error, 1)
			go func() { stopped <- stop() }()
			if !cut {
				// Once the server stops taking connections, the request
				// still in flight is let finish, and is answered.
				for deadline := time.Now().Add(shutdownTimeout); ; time.Sleep(10 * time.Millisecond) {
					c, err := net.DialTimeout("tcp", addr, time.Second)
					if err != nil {
						break
					}
					c.Close()
					if time.Now().After(deadline) {
						t.Fatal("the listener still accepts while the server stops")
					}
				}
				close(release)
				if got := <-answer; got != "finished" {
					t.Fatalf("the request in flight got %q, want it finished", got)
				}
			}
			if got := <-cancelled; got != cut {
				t.Fatalf("the request's context ended: %v, want %v", got, cut)
			}
			// Cut at the stop, not by the drain's end (shutdownTimeout),
			// which closes every connection whatever CutOnStop says.
			if took := time.Since(stopping); cut && took >= shutdownTimeout-500*time.Millisecond {
				t.Fatalf("the request was cut %v after the stop: by the drain's end, not at once", took)
			}
			if err := <-stopped; err != nil {
				t.Fatalf("Serve: %v", err)
			}
		})
	}
}

// TestHeaderTimeout: a client that trickles its header is cut at
// HeaderTimeout, before any handler runs.
func TestHeaderTimeout(t *testing.T) {
	ran := make(chan struct{}, 1)
	addr, _ := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran <- struct{}{} }),
		Limits{HeaderTimeout: 300 * time.Millisecond, ReadTimeout: time.Minute})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n")
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	start := time.Now()
	_, err = io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was still open after %v", time.Since(start))
	}
	select {
	case <-ran:
		t.Fatal("the handler ran for a request whose header never ended")
	default:
	}
}

// TestConnCap: over Conns.MaxConns a connection is accepted and closed
// at once; the ones under it are served.
func TestConnCap(t *testing.T) {
	addr, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		Limits{Conns: connlimit.Limits{MaxConns: 1}, IdleTimeout: time.Minute})
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	br := bufio.NewReader(first)
	io.WriteString(first, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	first.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the first connection: %v %v", resp, err)
	}
	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	second.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := second.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("the connection over the cap read %d bytes, %v; want it closed", n, err)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection over the cap was left open")
	}
}

// TestHTTP1Only: a TLS server built with HTTP1 offers no h2: a client
// that speaks only h2 fails its handshake, one that offers both speaks
// HTTP/1.1.
func TestHTTP1Only(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	srv.Config.Protocols = HTTP1()
	srv.EnableHTTP2 = false
	srv.StartTLS()
	defer srv.Close()
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	if _, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}}); err == nil {
		t.Fatal("an h2-only client completed its handshake")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "HTTP/1.1" {
		t.Fatalf("a client offering h2 and HTTP/1.1 spoke %q", b)
	}
}

// TestHosts: a Host naming anything but localhost, an IP literal or an
// allowed name is answered 421 with a fixed text, and the handler never
// runs; allowed ones reach it.
func TestHosts(t *testing.T) {
	hs := Hosts{"mail.example", "Inbox.Example"}
	for _, c := range []struct {
		host string
		ok   bool
	}{
		{"localhost", true}, {"LOCALHOST:8025", true}, {"127.0.0.1:8025", true}, {"[::1]:8025", true}, {"10.1.2.3", true},
		{"mail.example", true}, {"mail.example.:80", true}, {"inbox.example", true},
		{"evil.example", false}, {"mail.example.evil", false}, {"localhost.evil", false}, {"", false},
	} {
		ran := false
		h := hs.Check(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = c.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if ran != c.ok {
			t.Errorf("Host %q: handler ran %v, want %v", c.host, ran, c.ok)
		}
		if !c.ok && (w.Code != http.StatusMisdirectedRequest || !strings.HasPrefix(w.Body.String(), "Misdirected request")) {
			t.Errorf("Host %q: %d %q, want 421 and the fixed text", c.host, w.Code, w.Body.String())
		}
	}
	if !(Hosts{"*"}).allows("anything.example") {
		t.Error(`"*" refused a name`)
	}
}
