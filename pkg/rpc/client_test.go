package rpc_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// fakePlane is a net/http server on a Unix socket, as the plane's is,
// counting the connections open on it.
type fakePlane struct {
	socket string
	srv    *http.Server
	open   atomic.Int64
	most   atomic.Int64
	dialed atomic.Int64
}

func startFake(t *testing.T, socket string, h http.HandlerFunc) *fakePlane {
	t.Helper()
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePlane{socket: socket}
	f.srv = &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			f.dialed.Add(1)
			n := f.open.Add(1)
			for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
			}
		case http.StateClosed, http.StateHijacked:
			f.open.Add(-1)
		}
	}}
	go f.srv.Serve(ln)
	t.Cleanup(func() { f.srv.Close() })
	return f
}

func health(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"role":"writer","store":"ok"}`))
}

// TestClientKeepsConnections: calls one after the other share one
// connection, each one's request as the plane reads it (method, path,
// grant, deadline, body); a plane restarted on the same socket is
// reached again at the next call, over a new connection.
func TestClientKeepsConnections(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "plane.sock")
	var seen []string
	var mu sync.Mutex
	f := startFake(t, socket, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, dlErr := time.Parse(time.RFC3339Nano, r.Header.Get(rpc.DeadlineHeader))
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Content-Type")+" "+
			string(body)+" "+map[bool]string{true: "deadline", false: "no deadline"}[dlErr == nil])
		mu.Unlock()
		health(w, r)
	})
	c := rpc.NewClient(socket, "mpg_test")
	t.Cleanup(c.Close)
	ctx := context.Background()
	for range 3 {
		if h, err := c.Health(ctx); err != nil || h.Store != "ok" {
			t.Fatalf("health: %+v, %v", h, err)
		}
	}
	if _, err := c.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: "a@b.c", To: []string{"d@e.f"}, Raw: []byte("Subject: x\r\n\r\ny")}); err != nil {
		t.Fatal(err)
	}
	if n := f.dialed.Load(); n != 1 {
		t.Errorf("4 calls dialed %d connections, want 1", n)
	}
	want := []string{
		`POST /v1/health Bearer mpg_test application/json {} deadline`,
		`POST /v1/health Bearer mpg_test application/json {} deadline`,
		`POST /v1/health Bearer mpg_test application/json {} deadline`,
		`POST /v1/send Bearer mpg_test ` + rpc.SendContentType + ` {"via":"smtp","from":"a@b.c","to":["d@e.f"]}` + "\nSubject: x\r\n\r\ny deadline",
	}
	// seen is read under its lock: the handler's goroutine wrote it, and
	// an answer read over a socket is no ordering the memory model knows.
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the plane read\n%q\nwant\n%q", got, want)
	}

	f.srv.Close()
	startFake(t, socket, health)
	if _, err := c.Health(ctx); err != nil {
		t.Errorf("after the plane's restart: %v", err)
	}
}

// TestClientEarlyAnswer: a plane that answers without reading a large
// request (as it refuses one over rpc.MaxRequestBytes) is heard, not
// taken for an outage.
func TestClientEarlyAnswer(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "plane.sock")
	startFake(t, socket, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		w.Write([]byte(`{"code":"frame_too_large","class":"refused","message":"m"}`))
	})
	c := rpc.NewClient(socket, "mpg_test")
	t.Cleanup(c.Close)
	_, err := c.Send(context.Background(), &rpc.SendRequest{Via: rpc.ViaSMTP, Raw: make([]byte, 2*rpc.MaxRequestBytes)})
	if rpc.CodeOf(err) != rpc.CodeFrameTooLarge {
		t.Errorf("a frame refused before it was read: %v, want %s", err, rpc.CodeFrameTooLarge)
	}
}

// TestClientEnds: a call past its deadline is deadline_exceeded; a
// cancelled one ends at once, and the plane sees its caller go away.
func TestClientEnds(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "plane.sock")
	in, gone := make(chan struct{}), make(chan struct{})
	startFake(t, socket, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/"+rpc.MethodList {
			in <- struct{}{}
			defer func() { gone <- struct{}{} }()
		}
		<-r.Context().Done()
	})
	c := rpc.NewClient(socket, "mpg_test")
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Health(ctx); rpc.CodeOf(err) != rpc.CodeDeadlineExceeded || rpc.ClassOf(err) != rpc.Outage {
		t.Errorf("past its deadline: %v, want %s", err, rpc.CodeDeadlineExceeded)
	}
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Call(ctx, rpc.MethodList, &rpc.ReadRequest{}, nil) }()
	<-in
	cancel()
	if err := <-done; rpc.ClassOf(err) != rpc.Outage {
		t.Errorf("cancelled: %v, want an outage", err)
	}
	<-gone
}

// TestClientConnsBound: a client of NewClientConns(…, 2) never holds more
// than 2 connections, however many calls it makes at once; they wait.
func TestClientConnsBound(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "plane.sock")
	release := make(chan struct{})
	var in atomic.Int64
	f := startFake(t, socket, func(w http.ResponseWriter, r *http.Request) {
		if in.Add(1) == 2 {
			close(release)
		}
		<-release
		health(w, r)
	})
	c := rpc.NewClientConns(socket, "mpg_test", 2)
	t.Cleanup(c.Close)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := c.Health(context.Background())
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if m := f.most.Load(); m > 2 {
		t.Errorf("%d connections open at once, want at most 2", m)
	}
}

// TestClientRefusesBrokenGrant: a grant with a line break would end the
// request's head early (another header, or a second request, after it),
// so the call fails before it dials, and its error does not carry it.
func TestClientRefusesBrokenGrant(t *testing.T) {
	f := startFake(t, filepath.Join(t.TempDir(), "p.sock"), health)
	c := rpc.NewClient(f.socket, "grant\r\nX-Injected: 1")
	defer c.Close()
	_, err := c.Health(context.Background())
	if err == nil || strings.Contains(err.Error(), "Injected") {
		t.Fatalf("Health with a broken grant: %v", err)
	}
	if n := f.dialed.Load(); n != 0 {
		t.Fatalf("the plane was dialled %d times", n)
	}
}
