package apiroute

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// seen is what a surface behind the router received.
type seen struct {
	Surface, Method, URI, Body string
	Header                     http.Header
	ContentLength              int64
}

// surface is a real HTTP server standing for the writer or the gateway:
// it records each request and answers with its name, a header and status
// 299, so that the client can tell who answered and that the answer came
// back unchanged.
func surface(t *testing.T, name string, got chan<- seen) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{Surface: name, Method: r.Method, URI: r.RequestURI, Body: string(b), Header: r.Header.Clone(), ContentLength: r.ContentLength}
		w.Header().Set("X-Surface", name)
		w.WriteHeader(299)
		fmt.Fprintf(w, "answer of the %s", name)
	}))
	t.Cleanup(s.Close)
	return s
}

// serve runs the router on a real listener until the test ends, and
// returns its address.
func serve(t *testing.T, writerURL, gatewayURL string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, writerURL, gatewayURL, zerolog.Nop()) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the router did not stop when its context ended")
		}
	})
	return ln.Addr().String()
}

func next(t *testing.T, got <-chan seen) seen {
	t.Helper()
	select {
	case s := <-got:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no surface received the request")
		return seen{}
	}
}

// Writes go to the writer, everything else to the gateway, with the
// request and the answer as they were: nothing added, nothing kept.
func TestRoutes(t *testing.T) {
	got := make(chan seen, 1)
	writer, gateway := surface(t, "writer", got), surface(t, "gateway", got)
	addr := serve(t, writer.URL, gateway.URL)
	for _, c := range []struct{ method, uri, body, want string }{
		{"POST", "/emails", `{"from":"a@b.example"}`, "writer"},
		{"POST", "/emails?x=1", `{}`, "writer"},
		{"GET", "/emails", "", "writer"}, // the writer answers 405 itself
		{"POST", "/internal/bootstrap", "", "writer"},
		{"GET", "/internal/bootstrap", "", "writer"},
		{"GET", "/emails/1", "", "gateway"},
		{"POST", "/emails/", `{}`, "gateway"},
		{"GET", "/", "", "gateway"},
		{"GET", "/api/v1/messages?limit=5", "", "gateway"},
		{"POST", "/internal/bootstrap/x", "", "gateway"},
	} {
		req, err := http.NewRequest(c.method, "http://"+addr+c.uri, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer re_candidate")
		req.Header.Set("X-Forwarded-For", "203.0.113.9") // a client's claim, not the router's
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.uri, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s := next(t, got)
		if s.Surface != c.want || resp.Header.Get("X-Surface") != c.want {
			t.Errorf("%s %s went to the %s (answered by %q); want the %s", c.method, c.uri, s.Surface, resp.Header.Get("X-Surface"), c.want)
		}
		if s.Method != c.method || s.URI != c.uri || s.Body != c.body || s.Header.Get("Authorization") != "Bearer re_candidate" {
			t.Errorf("%s %s arrived as %s %s, body %q, authorization %q", c.method, c.uri, s.Method, s.URI, s.Body, s.Header.Get("Authorization"))
		}
		if xff := s.Header.Values("X-Forwarded-For"); len(xff) != 0 {
			t.Errorf("%s %s: the surface was told X-Forwarded-For %q", c.method, c.uri, xff)
		}
		if resp.StatusCode != 299 || string(body) != "answer of the "+c.want {
			t.Errorf("%s %s: the client got %d %q", c.method, c.uri, resp.StatusCode, body)
		}
	}
}

// A POST with neither Content-Length nor chunked framing reaches the
// writer exactly so, not with a Content-Length: 0 a proxy would add, and
// the writer's answer comes back.
func TestUnframedPost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	head := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		var h strings.Builder
		for {
			line, err := r.ReadString('\n')
			h.WriteString(line)
			if err != nil || line == "\r\n" {
				break
			}
		}
		head <- h.String()
		io.WriteString(c, "HTTP/1.1 411 Length Required\r\nContent-Type: application/json\r\nContent-Length: 9\r\nConnection: close\r\n\r\n{\"e\":411}")
	}()
	gateway := surface(t, "gateway", make(chan seen, 1))
	addr := serve(t, "http://"+ln.Addr().String(), gateway.URL)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "POST /emails HTTP/1.1\r\nHost: api.example\r\nAuthorization: Bearer re_x\r\nContent-Type: application/json\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusLengthRequired || string(body) != `{"e":411}` {
		t.Fatalf("the client got %d %q; want the writer's 411", resp.StatusCode, body)
	}
	var h string
	select {
	case h = <-head:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer received nothing")
	}
	lower := strings.ToLower(h)
	if strings.Contains(lower, "content-length") || strings.Contains(lower, "transfer-encoding") {
		t.Fatalf("the writer was given framing the client did not send:\n%s", h)
	}
	if !strings.HasPrefix(h, "POST /emails HTTP/1.1\r\n") || !strings.Contains(h, "Authorization: Bearer re_x\r\n") {
		t.Fatalf("the writer got another request:\n%s", h)
	}
}

// A write runs to its answer when its client half-closes after sending
// it: the client going quiet is not an outage.
func TestWriteOutlivesHalfClose(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	writer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		arrived <- struct{}{}
		<-release
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"id":"stored"}`)
	}))
	defer writer.Close()
	var once sync.Once
	defer once.Do(func() { close(release) })
	gateway := surface(t, "gateway", make(chan seen, 1))
	addr := serve(t, writer.URL, gateway.URL)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "POST /emails HTTP/1.1\r\nHost: api.example\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the write never reached the writer")
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The router's server takes the half-close for the client gone: a
	// router that let that cancel the write answers now, an outage,
	// before the writer has answered.
	one := make([]byte, 1)
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var ne net.Error
	if n, err := c.Read(one); n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("an answer before the writer gave one: %d %v", n, err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	once.Do(func() { close(release) })
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer after the half-close: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != `{"id":"stored"}` {
		t.Fatalf("after the half-close the client got %d %q; want the writer's 200", resp.StatusCode, body)
	}
}

// A surface that does not answer is an outage: 503 with the reference's
// body, for a write and for a read, never a refusal.
func TestSurfaceDown(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + dead.Addr().String()
	dead.Close()
	addr := serve(t, down, down)
	for _, r := range []struct{ method, uri, body string }{
		{"POST", "/emails", "{}"}, {"GET", "/api/v1/messages", ""},
	} {
		req, _ := http.NewRequest(r.method, "http://"+addr+r.uri, strings.NewReader(r.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Name       string `json:"name"`
			StatusCode int    `json:"statusCode"`
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || err != nil || e.StatusCode != http.StatusServiceUnavailable || e.Name == "" {
			t.Errorf("%s %s with its surface down: %d %+v %v; want 503 with the outage's body", r.method, r.uri, resp.StatusCode, e, err)
		}
	}
}
