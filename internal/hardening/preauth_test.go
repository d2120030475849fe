package hardening

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// A stranger gets nothing before it is known: the attacks of the audit
// that found the writer buffering whole bodies, and every door reading
// slow bodies, before any credential was checked.

// preauthRSSBound is how much the writer's memory may grow under 60
// unauthenticated 4 MiB bodies (the bound).
const preauthRSSBound = 64 << 20

// TestPreauthMemory: on a mail-plane up stack, 60 HTTP/1.1 connections
// with random tokens each declare a 4 MiB batch and send all of it but
// its last byte; the HTTPS door refuses HTTP/2 (no h2 in ALPN, so one
// connection holds one request, and 300 streams cannot be opened). The
// writer's RSS grows by at most 64 MB, and trial B's POST /emails answers
// within 2 s throughout. A refused credential whose declared 4 MiB body
// never comes is answered in under 100 ms, with Connection: close and no
// 100 Continue, on every door that reads one.
func TestPreauthMemory(t *testing.T) {
	t.Parallel()
	u := newUpSys(t, "--quota-messages", "0", "--quota-bytes", "0")
	b := openTrial(t, u.sys)
	writer := upChild(t, u, "mail-writer")
	writerAddr := strings.TrimPrefix(u.bundle.WriterURL, "http://")

	// HTTP/2: a client that offers only h2 is refused in the handshake;
	// one that offers both (Go's own, as browsers and SDKs do) speaks HTTP/1.1.
	roots := x509.NewCertPool()
	ca, err := os.ReadFile(b.CAFile)
	if err != nil || !roots.AppendCertsFromPEM(ca) {
		t.Fatalf("the stack's CA %s: %v", b.CAFile, err)
	}
	httpsAddr := strings.TrimPrefix(b.WriterHTTPSURL, "https://")
	for _, offer := range [][]string{{"h2"}, {"h2", "http/1.1"}} {
		c, err := tls.Dial("tcp", httpsAddr, &tls.Config{RootCAs: roots, NextProtos: offer, ServerName: "127.0.0.1"})
		if err != nil && len(offer) == 1 && strings.Contains(err.Error(), "no application protocol") {
			figure(t, "preauth-h2 offer=%v refused=%q", offer, err)
			continue // h2 alone is refused in the handshake
		}
		if err != nil {
			t.Fatalf("TLS to the HTTPS door offering %v: %v", offer, err)
		}
		if p := c.ConnectionState().NegotiatedProtocol; p == "h2" {
			t.Errorf("the HTTPS door offered %v chose h2", offer)
		}
		c.Close()
	}
	h2 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := h2.Get(b.WriterHTTPSURL + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 {
		t.Errorf("a client offering h2 spoke %s to the HTTPS door", resp.Proto)
	}

	// B posts all along, each request on a new connection.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	bPosts := &probe{}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	token := b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"]
	wg.Add(1)
	go bPosts.run(&wg, stop, u.sys.postOp(hc, u.bundle.WriterURL, token, "preauth"))
	itest.Eventually(t, "B's first POST /emails", 30*time.Second, func() bool { return bPosts.n.Load() > 0 })

	mem := watchRSS(t, writer)
	const strangers, declared = 60, 4 << 20
	var attack sync.WaitGroup
	var sentBytes atomic.Int64
	for range strangers {
		attack.Add(1)
		go func() {
			defer attack.Done()
			c, err := net.DialTimeout("tcp", writerAddr, 5*time.Second)
			if err != nil {
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			fmt.Fprintf(c, "POST /emails/batch HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer re_%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n[", randomHex(16), declared)
			chunk := []byte(strings.Repeat(" ", 64<<10))
			for left := declared - 2; left > 0; left -= len(chunk) {
				n, err := c.Write(chunk[:min(len(chunk), left)])
				sentBytes.Add(int64(n))
				if err != nil {
					return // refused and closed: the stranger's body is not read
				}
			}
			// The last byte held back: wait for the server.
			io.Copy(io.Discard, c)
		}()
	}
	// Every stranger's connection is closed: the writer is done with them.
	attack.Wait()
	base, peak := mem.base, mem.peak()
	growth := (peak - base) << 10 // bytes
	figure(t, "preauth-memory strangers=%d declared=%dMiB sent_total=%dMiB writer_rss_base=%dMB peak=%dMB growth=%dMB bound=%dMB",
		strangers, declared>>20, sentBytes.Load()>>20, base>>10, peak>>10, growth>>20, preauthRSSBound>>20)
	if growth > preauthRSSBound {
		t.Errorf("the writer's RSS grew by %d MB under %d unauthenticated 4 MiB bodies (bound %d MB)", growth>>20, strangers, preauthRSSBound>>20)
	}

	// A refused credential whose declared 4 MiB body never comes, on each
	// door whose credential is in the headers.
	gatewayAddr := strings.TrimPrefix(u.bundle.APIURL, "http://")
	doors := []struct{ name, addr, head string }{
		{"writer POST /emails/batch", writerAddr, "POST /emails/batch HTTP/1.1\r\nAuthorization: Bearer re_%s\r\nContent-Type: application/json\r\n"},
		{"writer Postmark", writerAddr, "POST /email HTTP/1.1\r\nX-Postmark-Server-Token: %s\r\nContent-Type: application/json\r\n"},
		{"writer SendGrid", writerAddr, "POST /v3/mail/send HTTP/1.1\r\nAuthorization: Bearer SG.%s\r\nContent-Type: application/json\r\n"},
		{"gateway read", gatewayAddr, "GET /api/namespaces/" + b.Namespace + "/messages HTTP/1.1\r\nAuthorization: Bearer %s\r\n"},
	}
	for _, d := range doors {
		var took []time.Duration
		for range 5 {
			c := dial(t, d.addr)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			start := time.Now()
			fmt.Fprintf(c, d.head+"Host: localhost\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", randomHex(16), declared)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			took = append(took, time.Since(start))
			c.Close()
			if err != nil {
				t.Fatalf("%s: %v", d.name, err)
			}
			resp.Body.Close()
			if (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) || !resp.Close {
				t.Errorf("%s with a wrong credential: %d, close %v; want 401 or 403 and close (no 100 Continue)", d.name, resp.StatusCode, resp.Close)
			}
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		figure(t, "preauth-refusal door=%q median=%v max=%v", d.name, took[len(took)/2], took[len(took)-1])
		if took[len(took)/2] > 100*time.Millisecond {
			t.Errorf("%s: a refused credential was answered after %v (median of 5; bound 100 ms)", d.name, took[len(took)/2])
		}
	}

	close(stop)
	wg.Wait()
	bPosts.check(t, "B's POST /emails under the strangers' bodies")
}

// TestPreauthSlowBodies: a stack whose processes have 600 descriptors (a
// connection cap of 172 each: (600 − 256) / 2), where strangers keep 190
// slow-body requests on one door at a time (random credentials, a body
// declared and trickled a byte a second): the writer's POST /emails, the
// inbox's MCP calls, the gateway's reads (a GET with a Content-Length).
// Trial B's POST /emails, SMTP on its own port, inbox page, MCP call and
// gateway read each answer within 2 s throughout (one whose connection
// was closed to make room before its request was read is sent again,
// once, as a client does: probe.retryUnread). One door at a time:
// every stranger's credential costs its door a call to the plane, which
// at 600 descriptors of its own cannot also hold three full doors' calls
// at once (a deployment gives the plane room for every surface's).
func TestPreauthSlowBodies(t *testing.T) {
	// A timed test on a flood that this process makes on the same cores:
	// on a 2-core host one run in five saw a latency spike or a request
	// closed twice before it was read. make test must answer the same on
	// every clone, so it runs in make hardening-long (and by hand), never
	// under the race detector, whose bookkeeping it would time.
	if !long() {
		t.Skip("a timed flood: MAILPLANE_HARDENING=long (make hardening-long) runs it")
	}
	complexity.SkipUnderRace(t)
	t.Parallel()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no prlimit (util-linux) to start the stack with few descriptors")
	}
	u := newUpSysCmd(t, []string{prlimit, "--nofile=600", "--"}, "--quota-messages", "0", "--quota-bytes", "0")
	b := openTrial(t, u.sys)
	if !u.plane.Proc.WaitOutput(`"max_connections":172`, 10*time.Second) {
		t.Fatalf("no surface says max_connections 172:\n%s", u.plane.Proc.Output())
	}
	host := func(url string) string { return strings.TrimPrefix(url, "http://") }
	const slow = 190
	token := b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"]
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	id := rpc.Identity{Namespace: b.Namespace, ReadCapability: b.ReadCapability}
	ops := []struct {
		name string
		do   func(i int) string
	}{
		{"POST /emails", u.sys.postOp(hc, u.bundle.WriterURL, token, "slow")},
		{"SMTP own port", smtpOp(net.JoinHostPort("127.0.0.1", strconv.Itoa(b.SMTPPort)), token, "slow smtp")},
		{"inbox page", func(int) string {
			a, err := u.sys.request(hc, http.MethodGet, b.InboxURL, "", "", nil)
			if err != nil || a.status != 200 {
				return fmt.Sprintf("%d %v", a.status, err)
			}
			return ""
		}},
		{"inbox MCP", func(int) string {
			a, err := u.sys.request(hc, http.MethodPost, b.InboxMCPURL, "",
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_messages","arguments":{}}}`,
				map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
			if err != nil || a.status != 200 || strings.Contains(a.body, `"isError":true`) {
				return fmt.Sprintf("%d %v %.200s", a.status, err, a.body)
			}
			return ""
		}},
		{"gateway read", func(int) string {
			if a := readOnce(u.bundle.APIURL, id, "0"); a.status != 200 {
				return fmt.Sprintf("%d %s", a.status, a.code)
			}
			return ""
		}},
	}
	for _, d := range []struct{ door, addr, head string }{
		{"the writer", host(u.bundle.WriterURL), "POST /emails HTTP/1.1\r\nAuthorization: Bearer re_%s\r\nContent-Type: application/json\r\n"},
		{"the inbox", host(u.bundle.InboxBaseURL), "POST /mcp/%s HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"},
		{"the gateway", host(u.bundle.APIURL), "GET /api/namespaces/" + b.Namespace + "/messages HTTP/1.1\r\nAuthorization: Bearer %s\r\n"},
	} {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var dialled, sent atomic.Int64
		for range slow {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					slowBody(d.addr, fmt.Sprintf(d.head, randomHex(16)), stop, &sent)
					dialled.Add(1)
				}
			}()
		}
		itest.Eventually(t, "the strangers' requests in place", itest.Bound, func() bool { return sent.Load() >= slow })
		probes := map[string]*probe{}
		var bwg sync.WaitGroup
		bStop := make(chan struct{})
		for _, op := range ops {
			p := &probe{retryUnread: true}
			probes[op.name] = p
			bwg.Add(1)
			go p.run(&bwg, bStop, op.do)
		}
		time.Sleep(4 * time.Second) // B's turn under the flood: the audit's failures lasted 8 s over three doors
		close(bStop)
		bwg.Wait()
		close(stop)
		wg.Wait()
		figure(t, "preauth-slow-bodies %s nofile=600 cap=172 slow=%d stranger_requests=%d", d.door, slow, dialled.Load())
		for _, op := range ops {
			probes[op.name].check(t, "B's "+op.name+" under 190 slow bodies on "+d.door)
		}
	}
}

// slowBody sends head with a declared body of 1,000 bytes (counting it in
// sent), then a byte a second, until the server closes the connection or
// stop.
func slowBody(addr, head string, stop <-chan struct{}, sent *atomic.Int64) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		select {
		case <-stop:
		case <-time.After(100 * time.Millisecond):
		}
		return
	}
	defer c.Close()
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c) // until the server answers and closes, or cuts it
		close(closed)
	}()
	if _, err := io.WriteString(c, head+"Host: localhost\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		return
	}
	sent.Add(1)
	for {
		select {
		case <-stop:
			return
		case <-closed:
			return
		case <-time.After(time.Second):
		}
		if _, err := io.WriteString(c, " "); err != nil {
			return
		}
	}
}

// probe is one of trial B's operations, repeated until stop: how many,
// the slowest, and the first failures.
type probe struct {
	// retryUnread sends an operation again, once, when its first try got
	// no answer at all (its connection closed before any reply: status
	// or SMTP code 0), as a client does with a request the server never
	// read: under a storm of strangers that fill the pool, a new
	// connection may be closed to make room before its first bytes are
	// read (README, "What one trial can take from another"). Counted in
	// retried; the time is both tries'.
	retryUnread bool
	n           atomic.Int64
	worst       atomic.Int64
	failed      atomic.Int64
	retried     atomic.Int64
	mu          sync.Mutex
	errs        []string
}

func (p *probe) run(wg *sync.WaitGroup, stop <-chan struct{}, do func(i int) string) {
	defer wg.Done()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		start := time.Now()
		e := do(i)
		if p.retryUnread && strings.HasPrefix(e, "0 ") {
			p.retried.Add(1)
			e = do(i)
		}
		d := time.Since(start)
		p.n.Add(1)
		raiseTo(&p.worst, int64(d))
		if e != "" {
			p.failed.Add(1)
			p.mu.Lock()
			if len(p.errs) < 3 {
				p.errs = append(p.errs, e)
			}
			p.mu.Unlock()
		}
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *probe) check(t *testing.T, what string) {
	t.Helper()
	worst := time.Duration(p.worst.Load())
	figure(t, "preauth %s: n=%d worst=%v failed=%d retried_unread=%d", what, p.n.Load(), worst.Round(time.Millisecond), p.failed.Load(), p.retried.Load())
	if p.n.Load() == 0 {
		t.Errorf("%s: not one request made", what)
	}
	if worst > fairBound {
		t.Errorf("%s took up to %v (bound %v)", what, worst, fairBound)
	}
	if n := p.failed.Load(); n > 0 {
		p.mu.Lock()
		defer p.mu.Unlock()
		t.Errorf("%s: %d failed: %v", what, n, p.errs)
	}
}

// openTrial opens a candidate trial on u's stack and records its secrets.
func openTrial(t *testing.T, s *sys) rpc.Bundle {
	t.Helper()
	b, err := s.plane.admin.TrialOpen(ctxT(t, time.Minute), &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		t.Fatalf("trial.open: %v", err)
	}
	s.secret(b.Namespace+" mail-API token", b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"])
	s.secret(b.Namespace+" bootstrap token", b.CandidateEnvironment["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"])
	s.secret(b.Namespace+" read capability", b.ReadCapability)
	s.secret(b.Namespace+" inbox token", b.InboxURL[strings.LastIndexByte(b.InboxURL, '/')+1:])
	return b
}

// upChild is the pid of up's child process name (its command name).
func upChild(t *testing.T, u *upSys, name string) int {
	t.Helper()
	for _, pid := range itest.Descendants(t, u.plane.Proc.Cmd.Process.Pid) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == name {
			return pid
		}
	}
	t.Fatalf("no %s under mail-plane up", name)
	return 0
}

// inboxRSSBound is how much the shared inbox's memory may grow under 60
// strangers' declared 4 MiB bodies: it reads none of them.
const inboxRSSBound = 16 << 20

// TestPreauthInbox: on a mail-plane up stack, the shared inbox decides
// the caller from the token in the path before it reads any body. An MCP
// POST and a ping with a wrong token and a declared 4 MiB body that never
// comes are answered in under 100 ms, with Connection: close and no 100
// Continue, exactly as the same request with a malformed token; 60
// strangers each sending all of a 4 MiB body but its last byte leave the
// inbox's RSS where it was; and B's own MCP call still answers.
func TestPreauthInbox(t *testing.T) {
	t.Parallel()
	u := newUpSys(t)
	b := openTrial(t, u.sys)
	inbox := upChild(t, u, "mail-inbox")
	addr := strings.TrimPrefix(u.bundle.InboxBaseURL, "http://")
	const declared = 4 << 20
	doors := []struct{ name, head string }{
		{"inbox MCP", "POST /mcp/%s HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"},
		{"inbox ping", "POST /inbox/%s/messages/1/ping/0 HTTP/1.1\r\nContent-Type: text/ping\r\n"},
	}
	// ask sends d's head with token and a declared body that never comes,
	// and reads the answer.
	ask := func(d string, token string) (status int, body string, closed bool, took time.Duration) {
		c := dial(t, addr)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		fmt.Fprintf(c, d+"Host: localhost\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", token, declared)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		took = time.Since(start)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		defer resp.Body.Close()
		bb, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(bb), resp.Close, took
	}
	for _, d := range doors {
		mStatus, mBody, _, _ := ask(d.head, "not!a~token")
		var took []time.Duration
		for range 5 {
			status, body, closed, d1 := ask(d.head, randomHex(22))
			took = append(took, d1)
			if status != mStatus || body != mBody || !closed || status == http.StatusContinue {
				t.Errorf("%s with a wrong token: %d (close %v), a malformed token: %d; want the same answer, and close", d.name, status, closed, mStatus)
			}
			if status/100 != 4 {
				t.Errorf("%s with a wrong token: %d, want a refusal", d.name, status)
			}
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		figure(t, "preauth-inbox-refusal door=%q status=%d median=%v max=%v", d.name, mStatus, took[len(took)/2], took[len(took)-1])
		if took[len(took)/2] > 100*time.Millisecond {
			t.Errorf("%s: a wrong token was answered after %v (median of 5; bound 100 ms)", d.name, took[len(took)/2])
		}
	}

	// 60 strangers' bodies, sent but for their last byte.
	mem := watchRSS(t, inbox)
	var attack sync.WaitGroup
	var sent, answered atomic.Int64
	for i := range 60 {
		attack.Add(1)
		go func() {
			defer attack.Done()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			fmt.Fprintf(c, doors[i%2].head+"Host: localhost\r\nContent-Length: %d\r\n\r\n", randomHex(22), declared)
			chunk := []byte(strings.Repeat(" ", 64<<10))
			for left := declared - 1; left > 0; left -= len(chunk) {
				n, err := c.Write(chunk[:min(len(chunk), left)])
				sent.Add(int64(n))
				if err != nil {
					break // answered and closed: the body is not read
				}
			}
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil && resp.StatusCode/100 == 4 {
				answered.Add(1)
			}
		}()
	}
	attack.Wait()
	base, peak := mem.base, mem.peak()
	growth := (peak - base) << 10
	figure(t, "preauth-inbox-memory strangers=60 declared=4MiB sent_total=%dMiB refused=%d inbox_rss_base=%dMB peak=%dMB growth=%dMB bound=%dMB",
		sent.Load()>>20, answered.Load(), base>>10, peak>>10, growth>>20, inboxRSSBound>>20)
	if growth > inboxRSSBound {
		t.Errorf("the inbox's RSS grew by %d MB under 60 strangers' 4 MiB bodies (bound %d MB)", growth>>20, inboxRSSBound>>20)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	a, err := u.sys.request(hc, http.MethodPost, b.InboxMCPURL, "",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_messages","arguments":{}}}`,
		map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
	if err != nil || a.status != 200 || strings.Contains(a.body, `"isError":true`) {
		t.Errorf("B's MCP call after the strangers: %d %v %.200s", a.status, err, a.body)
	}
}

// TestPreauthShares: the shared inbox's and the gateway's fair shares are
// the trial's the plane resolved, never a string's. B holds its whole
// share (limits.TrialRequests waits) on each; one more of B's requests is
// 429. Strangers then flood each door, with a different wrong token or
// capability on every request (naming B's namespace, on the gateway):
// each is refused at once and none is ever 429 (a stranger holds no
// share, B's or one of its own), B's share stays full, and once B lets
// mail ends its waits its next request is served.
func TestPreauthShares(t *testing.T) {
	t.Parallel()
	u := newUpSys(t)
	b := openTrial(t, u.sys)
	mcpHeader := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	const mcpList = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_messages","arguments":{}}}`
	gwList := u.bundle.APIURL + "/api/namespaces/" + b.Namespace + "/messages"
	doors := []struct {
		name string
		// hold is one of B's requests that waits; probe one that answers
		// at once; stranger a stranger's, with a wrong credential.
		hold            func(ctx context.Context, after int) (*http.Request, error)
		probe, stranger func(context.Context) (*http.Request, error)
	}{
		{"inbox",
			func(ctx context.Context, after int) (*http.Request, error) {
				return http.NewRequestWithContext(ctx, http.MethodPost, b.InboxMCPURL, strings.NewReader(fmt.Sprintf(
					`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait_for_message","arguments":{"after_id":%d,"timeout_seconds":25}}}`, after)))
			},
			func(ctx context.Context) (*http.Request, error) {
				return http.NewRequestWithContext(ctx, http.MethodPost, b.InboxMCPURL, strings.NewReader(mcpList))
			},
			func(ctx context.Context) (*http.Request, error) {
				return http.NewRequestWithContext(ctx, http.MethodPost, u.bundle.InboxBaseURL+"/mcp/"+randomHex(22), strings.NewReader(mcpList))
			}},
		{"gateway",
			func(ctx context.Context, after int) (*http.Request, error) {
				r, err := http.NewRequestWithContext(ctx, http.MethodGet, gwList+"?wait=40s&after="+strconv.Itoa(after), nil)
				if err == nil {
					r.Header.Set("Authorization", "Bearer "+b.ReadCapability)
				}
				return r, err
			},
			func(ctx context.Context) (*http.Request, error) {
				r, err := http.NewRequestWithContext(ctx, http.MethodGet, gwList, nil)
				if err == nil {
					r.Header.Set("Authorization", "Bearer "+b.ReadCapability)
				}
				return r, err
			},
			func(ctx context.Context) (*http.Request, error) {
				r, err := http.NewRequestWithContext(ctx, http.MethodGet, gwList, nil)
				if err == nil {
					r.Header.Set("Authorization", "Bearer "+randomHex(32))
				}
				return r, err
			}},
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	status := func(mk func(context.Context) (*http.Request, error)) int {
		r, err := mk(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range mcpHeader {
			r.Header.Set(k, v)
		}
		resp, err := hc.Do(r)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	token := b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"]
	for i, d := range doors {
		// B's whole share, waiting for mail after the i it has.
		var cancels []context.CancelFunc
		var held sync.WaitGroup
		for range limits.TrialRequests {
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			held.Add(1)
			go func() {
				defer held.Done()
				// A wait that lost its place to a probe asks again.
				for ctx.Err() == nil {
					r, err := d.hold(ctx, i)
					if err != nil {
						return
					}
					for k, v := range mcpHeader {
						r.Header.Set(k, v)
					}
					resp, err := hc.Do(r)
					if err != nil {
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusTooManyRequests {
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
		}
		itest.Eventually(t, d.name+": B's share full (one more is 429)", 30*time.Second, func() bool { return status(d.probe) == http.StatusTooManyRequests })

		// Strangers, each request with a credential of its own.
		var flood sync.WaitGroup
		var refused, busy, other atomic.Int64
		var slowest atomic.Int64
		for range 32 {
			flood.Add(1)
			go func() {
				defer flood.Done()
				for range 20 {
					start := time.Now()
					switch s := status(d.stranger); {
					case s == http.StatusTooManyRequests:
						busy.Add(1)
					case s/100 == 4:
						refused.Add(1)
					default:
						other.Add(1)
					}
					raiseTo(&slowest, int64(time.Since(start)))
				}
			}()
		}
		flood.Wait()
		stillFull := status(d.probe)
		// B's mail ends its waits (an abandoned MCP wait runs on to its
		// timeout: the SDK does not pass a client's going away on).
		if a, err := u.sys.postEmail(hc, u.bundle.WriterURL, token, "", emailBody(rpc.CandidateSender, "b@example.com", "release "+d.name, "x")); err != nil || a.status != 200 {
			t.Fatalf("B's POST /emails: %d %v", a.status, err)
		}
		itest.Eventually(t, d.name+": B's request served once its waits ended", itest.Bound, func() bool { return status(d.probe) == http.StatusOK })
		for _, c := range cancels {
			c()
		}
		held.Wait()
		figure(t, "preauth-shares door=%s share=%d stranger_requests=%d refused=%d busy=%d other=%d slowest=%v b_probe_during=%d",
			d.name, limits.TrialRequests, refused.Load()+busy.Load()+other.Load(), refused.Load(), busy.Load(), other.Load(),
			time.Duration(slowest.Load()).Round(time.Millisecond), stillFull)
		if busy.Load() > 0 || other.Load() > 0 {
			t.Errorf("%s: strangers' requests: %d refused, %d answered 429 (a share held), %d otherwise; want every one refused as a stranger", d.name, refused.Load(), busy.Load(), other.Load())
		}
		if stillFull != http.StatusTooManyRequests {
			t.Errorf("%s: after the strangers' flood, B's request over its share answered %d, want 429: the share is B's alone", d.name, stillFull)
		}
		if s := time.Duration(slowest.Load()); s > fairBound {
			t.Errorf("%s: a stranger's refusal took %v (bound %v)", d.name, s, fairBound)
		}
	}
}
