package hardening

import (
	"bufio"
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

	"github.com/websitebench/mailplane/internal/itest"
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
	go bPosts.run(&wg, stop, func(i int) string {
		a, err := u.sys.postEmail(hc, u.bundle.WriterURL, token, "", emailBody(rpc.CandidateSender, "b@example.com", "preauth "+strconv.Itoa(i), "x"))
		if err != nil || a.status != 200 {
			return fmt.Sprintf("POST /emails: %d %v", a.status, err)
		}
		return ""
	})
	waitFor(t, "B's first POST /emails", 30*time.Second, func() bool { return bPosts.n.Load() > 0 })

	base := rss(writer)
	peak := base
	var sampling sync.WaitGroup
	sampled := make(chan struct{})
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		for {
			peak = max(peak, rss(writer))
			select {
			case <-sampled:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
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
	attack.Wait()
	// The writer's memory after the attack, once more.
	time.Sleep(200 * time.Millisecond)
	close(sampled)
	sampling.Wait()
	growth := (peak - base) << 10 // kB
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
// slow-body requests on each door (random credentials, a body declared
// and trickled a byte a second): the writer's POST /emails, the inbox's
// MCP calls and the gateway's reads (a GET with a Content-Length). Trial
// B's POST /emails, SMTP on its own port, inbox page, MCP call and
// gateway read each answer within 2 s throughout.
func TestPreauthSlowBodies(t *testing.T) {
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
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const slow = 190
	var dialled atomic.Int64
	for _, d := range []struct{ addr, head string }{
		{host(u.bundle.WriterURL), "POST /emails HTTP/1.1\r\nAuthorization: Bearer re_%s\r\nContent-Type: application/json\r\n"},
		{host(u.bundle.InboxBaseURL), "POST /mcp/%s HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"},
		{host(u.bundle.APIURL), "GET /api/namespaces/" + b.Namespace + "/messages HTTP/1.1\r\nAuthorization: Bearer %s\r\n"},
	} {
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
					slowBody(d.addr, fmt.Sprintf(d.head, randomHex(16)), stop)
					dialled.Add(1)
				}
			}()
		}
	}
	time.Sleep(time.Second) // the strangers' requests in place

	token := b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"]
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	id := rpc.Identity{Namespace: b.Namespace, ReadCapability: b.ReadCapability}
	ops := []struct {
		name string
		do   func(i int) string
	}{
		{"POST /emails", func(i int) string {
			a, err := u.sys.postEmail(hc, u.bundle.WriterURL, token, "", emailBody(rpc.CandidateSender, "b@example.com", "slow "+strconv.Itoa(i), "x"))
			if err != nil || a.status != 200 {
				return fmt.Sprintf("%d %v", a.status, err)
			}
			return ""
		}},
		{"SMTP own port", func(i int) string {
			if r := sendSMTPAuth(net.JoinHostPort("127.0.0.1", strconv.Itoa(b.SMTPPort)), token, rpc.CandidateSender, "b@example.com", rawMail("slow smtp "+strconv.Itoa(i), "x")); r.code != 250 {
				return fmt.Sprintf("%d %v", r.code, r.err)
			}
			return ""
		}},
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
	probes := map[string]*probe{}
	var bwg sync.WaitGroup
	bStop := make(chan struct{})
	for _, op := range ops {
		p := &probe{}
		probes[op.name] = p
		bwg.Add(1)
		go p.run(&bwg, bStop, op.do)
	}
	time.Sleep(8 * time.Second) // the audit's failures lasted 8 s
	close(bStop)
	bwg.Wait()
	close(stop)
	wg.Wait()
	figure(t, "preauth-slow-bodies nofile=600 cap=172 slow_per_door=%d stranger_requests=%d", slow, dialled.Load())
	for _, op := range ops {
		probes[op.name].check(t, "B's "+op.name+" under 190 slow bodies per door")
	}
}

// slowBody sends head with a declared body of 1,000 bytes, then a byte a
// second, until the server closes the connection or stop.
func slowBody(addr, head string, stop <-chan struct{}) {
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
	n      atomic.Int64
	worst  atomic.Int64
	failed atomic.Int64
	mu     sync.Mutex
	errs   []string
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
		d := time.Since(start)
		p.n.Add(1)
		if int64(d) > p.worst.Load() {
			p.worst.Store(int64(d))
		}
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
	figure(t, "preauth %s: n=%d worst=%v failed=%d", what, p.n.Load(), worst.Round(time.Millisecond), p.failed.Load())
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
