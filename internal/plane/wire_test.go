package plane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/peercred"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// pipeCall makes one call to s over an in-memory connection from a peer
// every role admits, as the wire carries it, and returns the answer's
// status and body. deadline, if set, is the call's Mailplane-Deadline.
func pipeCall(t testing.TB, s *Server, method, grant string, body []byte, deadline time.Time) (int, []byte) {
	t.Helper()
	client, server := net.Pipe()
	defer client.Close()
	s.serveConn(server, peercred.Cred{}, true)
	req := "POST /" + rpc.Version + "/" + url.PathEscape(method) + " HTTP/1.1\r\nHost: plane\r\nAuthorization: Bearer " + grant +
		"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
	if !deadline.IsZero() {
		req += rpc.DeadlineHeader + ": " + deadline.UTC().Format(time.RFC3339Nano) + "\r\n"
	}
	// Written on its own goroutine: the plane may answer (a refusal)
	// before it reads the body, and a pipe holds nothing.
	go func() {
		client.Write(append([]byte(req+"\r\n"), body...))
	}()
	resp, err := http.ReadResponse(bufio.NewReader(client), nil)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: body: %v", method, err)
	}
	return resp.StatusCode, b
}

// wireHeads are heads the reader takes, refuses, or waits on.
var wireHeads = []string{
	"POST /v1/send HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer mpg_x\r\nContent-Length: 12\r\n\r\n",
	"POST /v1/send HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
	"POST /v1/list?x=1 HTTP/1.1\nMailplane-Deadline: 2030-01-01T00:00:00Z\nExpect: 100-continue\n\n",
	"GET / HTTP/1.1\r\nConnection: Close, Upgrade\r\n\r\n",
	"POST /v1/send HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
	"POST /v1/send HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
	"POST /v1/send HTTP/1.1\r\n folded: x\r\n\r\n",
	"POST /v1/send HTTP/2.0\r\n\r\n",
	"POST /v1/send HTTP/1.1\r\nX: " + strings.Repeat("a", headLineBytes) + "\r\n\r\n",
}

// FuzzHead: whatever the bytes, readHead reads at most maxHeaderBytes of
// them, and either takes a head of the form the plane answers, refuses
// it with a status, or says the bytes ended.
func FuzzHead(f *testing.F) {
	for _, h := range wireHeads {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		var h head
		err := readHead(bufio.NewReaderSize(r, headLineBytes), &h)
		if read := len(b) - r.Len(); read > maxHeaderBytes+headLineBytes {
			t.Fatalf("read %d bytes of a head", read)
		}
		var he *headError
		switch {
		case err == nil:
			if len(h.path) == 0 || h.path[0] != '/' || h.length < -1 || h.length > 999_999_999_999_999_999 {
				t.Fatalf("took %+v", h)
			}
		case errors.As(err, &he):
			if http.StatusText(he.status) == "" || he.err.Code == "" {
				t.Fatalf("refused with %d %+v", he.status, he.err)
			}
		case !errors.Is(err, io.EOF):
			t.Fatalf("error %v", err)
		}
	})
}

// readHead runs in linear time on any head, up to its bound: many short
// headers, a long line, many Connection tokens, a long value it keeps.
func TestReadHeadLinear(t *testing.T) {
	for _, c := range []struct {
		name string
		head func(n int) string
	}{
		{"many headers", func(n int) string { return "POST /v1/send HTTP/1.1\r\n" + strings.Repeat("X-A: b\r\n", n) + "\r\n" }},
		{"connection tokens", func(n int) string {
			return "POST /v1/send HTTP/1.1\r\nConnection: " + strings.Repeat("keep-alive, ", n) + "\r\n\r\n"
		}},
		{"long grant", func(n int) string {
			return "POST /v1/send HTTP/1.1\r\nAuthorization: Bearer " + strings.Repeat("a", 8*n) + "\r\n\r\n"
		}},
		{"long target", func(n int) string { return "POST /" + strings.Repeat("v", 8*n) + " HTTP/1.1\r\n\r\n" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			// At 8n each head still fits its bounds (a line of
			// headLineBytes), so every size times the parse, not a
			// refusal; the reader is made once, so its buffer's cost does
			// not hide the parse's. The repeats put the base run near
			// 10 ms here, far above complexity.MinBase: a raised base
			// would take 8n past the line bound.
			complexity.Linear(t, "head/"+c.name, func(n int) func() {
				b := []byte(c.head(n))
				if len(b) > headLineBytes-64 {
					t.Fatalf("a head of %d bytes at n=%d passes the line bound", len(b), n)
				}
				r := bytes.NewReader(b)
				br := bufio.NewReaderSize(r, headLineBytes)
				return complexity.Repeat(32768, func() {
					var h head
					r.Reset(b)
					br.Reset(r)
					readHead(br, &h)
				})
			}, 40)
		})
	}
}

// TestReadHead: what the reader takes from a head and what it refuses.
func TestReadHead(t *testing.T) {
	for _, c := range []struct {
		head   string
		status int // 0: taken
		check  func(h *head) bool
	}{
		{wireHeads[0], 0, func(h *head) bool {
			return h.post && string(h.path) == "/v1/send" && string(h.grant) == "Bearer mpg_x" && h.length == 12 && !h.close
		}},
		{wireHeads[1], 0, func(h *head) bool { return h.http10 && !h.close && h.length == 0 }},
		{"POST /v1/send HTTP/1.0\r\n\r\n", 0, func(h *head) bool { return h.close && h.length == -1 }},
		{wireHeads[2], 0, func(h *head) bool {
			return string(h.path) == "/v1/list" && string(h.deadline) == "2030-01-01T00:00:00Z" && h.expect
		}},
		{wireHeads[3], 0, func(h *head) bool { return !h.post && h.close }},
		{wireHeads[4], http.StatusLengthRequired, nil},
		{wireHeads[5], http.StatusBadRequest, nil},
		{wireHeads[6], http.StatusBadRequest, nil},
		{wireHeads[7], http.StatusHTTPVersionNotSupported, nil},
		{wireHeads[8], http.StatusRequestHeaderFieldsTooLarge, nil},
		{"POST /v1/send HTTP/1.1\r\n" + strings.Repeat("X-A: "+strings.Repeat("b", 1000)+"\r\n", 17) + "\r\n", http.StatusRequestHeaderFieldsTooLarge, nil},
		{"POST /v1/send HTTP/1.1\r\nContent-Length: -1\r\n\r\n", http.StatusBadRequest, nil},
		{"POST /v1/send HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", http.StatusBadRequest, nil},
		{"POST http://plane/v1/send HTTP/1.1\r\n\r\n", http.StatusBadRequest, nil},
		{"POST /v1/s\x00nd HTTP/1.1\r\n\r\n", http.StatusBadRequest, nil},
		{"POST /v1/send HTTP/1.1\r\nExpect: 200-ok\r\n\r\n", http.StatusExpectationFailed, nil},
		{"POST /v1/send HTTP/1.1\r\nNo colon\r\n\r\n", http.StatusBadRequest, nil},
		{"POST /v1/send HTTP/1.1\r\nContent-Type: a\x17b\r\n\r\n", http.StatusBadRequest, nil},
	} {
		var h head
		err := readHead(bufio.NewReaderSize(strings.NewReader(c.head), headLineBytes), &h)
		var he *headError
		switch {
		case c.status == 0 && err != nil:
			t.Errorf("%q: %v", c.head, err)
		case c.status == 0 && !c.check(&h):
			t.Errorf("%q: read as %+v", c.head, h)
		case c.status != 0 && (!errors.As(err, &he) || he.status != c.status):
			t.Errorf("%q: %v, want %d", c.head, err, c.status)
		}
	}
	var h head
	if err := readHead(bufio.NewReaderSize(strings.NewReader("POST /v1/send HTTP/1.1\r\nHost: p\r\n"), headLineBytes), &h); !errors.Is(err, io.EOF) {
		t.Errorf("a head cut off: %v", err)
	}
}

// TestWaitEndsWithCaller: a waiting call ends when its caller closes its
// connection, not at its wait bound, and Shutdown then has nothing left
// to wait for.
func TestWaitEndsWithCaller(t *testing.T) {
	ctx := context.Background()
	b := NewBroker(openLedger(t), nil, Quotas{}, zerolog.Nop())
	s := NewServer(b, peercred.Policy{}, 0, zerolog.Nop())
	id, g := trialAndGateway(t, b)
	body := `{"namespace":"` + id.Namespace + `","capability":"` + id.ReadCapability + `","wait_ms":60000}`
	client, server := net.Pipe()
	s.serveConn(server, peercred.Cred{}, true)
	go io.WriteString(client, "POST /v1/latest HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer "+g+
		"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	itest.Eventually(t, "the call waiting", itest.Bound, func() bool { return b.wake.asleep.Load() == 1 })
	client.Close()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(sctx); err != nil {
		t.Fatalf("the wait outlived its caller: %v after %v", err, time.Since(start))
	}
}
