package inbox_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/render"
	"github.com/websitebench/mailplane/pkg/rpc"
)

const (
	htmlType = "text/html; charset=utf-8"
	jsonType = "application/json; charset=utf-8"
)

// checkHeaders checks what every inbox answer carries, the redirect
// included (docs/reference.md §13, quirk 24); a message's HTML frame
// carries its own, stricter policy.
func checkHeaders(t *testing.T, ans answer) {
	t.Helper()
	csp := render.AgentSecurityPolicy
	if ans.status == 200 && strings.HasPrefix(ans.body, "<!doctype html><html><head>") {
		csp = render.FrameSecurityPolicy
	}
	for h, want := range map[string]string{
		"Cache-Control":           "no-store",
		"Referrer-Policy":         "no-referrer",
		"Content-Security-Policy": csp,
		"X-Content-Type-Options":  "nosniff",
	} {
		if got := ans.header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if ans.header.Get("Content-Length") == "" && ans.status != 302 {
		t.Errorf("no Content-Length")
	}
}

// notFoundPage is §6.3's "not found" page.
var notFoundPage = string(render.NotFound())

// Every route of the inbox against the real binaries.
func TestRoutes(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	other := plane.Trial(t, rpc.ProfileCandidate)
	in := startInbox(t, plane, id)
	tok := in.Token
	base := "/inbox/" + tok

	if ans := do(t, "GET", in.URL+base); ans.status != 200 || !strings.Contains(ans.body, `<p class=empty id=inbox-empty>No messages yet.`) {
		t.Fatalf("empty inbox: %d %s", ans.status, ans.body)
	}

	w := plane.Client(t, id.WriterGrant)
	long := strings.Repeat("y", 100_000)
	send(t, w, []string{"user@example.com"}, textMail("Welcome", "Your verification code is 246810.\r\nOpen https://site.example/verify?t=abc&u=1 to confirm.\r\n"))
	send(t, w, []string{"user@example.com", "b@example.com"}, textMail("<script>alert(1)</script>", "\"quotes' & <tags> </pre><script>alert(2)</script>\r\n"+long+"\r\n"))
	send(t, w, []string{"user@example.com"}, "Subject: HTML only\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"+
		`<p>Your PIN is <b>1357</b></p><a href="https://site.example/html?x=1&amp;y=2">Verify</a><img src="https://tracker.example/p.gif"><script>alert(3)</script>`)
	send(t, plane.Client(t, other.WriterGrant), []string{"user@example.com"}, textMail("Other trial's mail", "code 1111"))

	type tc struct {
		method, path string
		status       int
		ctype        string
		check        func(t *testing.T, ans answer)
	}
	contains := func(want ...string) func(*testing.T, answer) {
		return func(t *testing.T, ans answer) {
			for _, s := range want {
				if !strings.Contains(ans.body, s) {
					t.Errorf("answer lacks %q:\n%.2000s", s, ans.body)
				}
			}
		}
	}
	isNotFound := func(t *testing.T, ans answer) {
		if ans.body != notFoundPage {
			t.Errorf("not the Not found page: %q", ans.body)
		}
	}
	tokenAt0 := fmt.Sprintf("%%%02X", tok[0]) + tok[1:]
	for _, c := range []tc{
		// GET / reveals no token by default.
		{"GET", "/", 404, htmlType, isNotFound},
		{"GET", "/?next=/elsewhere", 404, htmlType, isNotFound},
		{"GET", "/healthz", 200, jsonType, contains(`{"status":"ok"}`)},
		{"GET", "/inbox", 404, htmlType, isNotFound},
		{"GET", "/api/namespaces/" + id.Namespace + "/messages", 404, htmlType, isNotFound},
		{"GET", "/internal/bootstrap", 404, htmlType, isNotFound},
		{"GET", "/emails", 404, htmlType, isNotFound},
		{"GET", "/inbox/wrong", 404, htmlType, isNotFound},
		{"GET", "/inbox/" + tok[:len(tok)-1], 404, htmlType, isNotFound},
		{"GET", "/inbox/" + tok + "x", 404, htmlType, isNotFound},
		{"GET", "/inbox/" + other.InboxToken, 404, htmlType, isNotFound},
		{"GET", "/inbox/" + id.Namespace, 404, htmlType, isNotFound},
		{"GET", "/inbox/" + id.ReadCapability, 404, htmlType, isNotFound},
		{"GET", "/inbox/%C3%A9", 404, htmlType, isNotFound},
		{"GET", "/inbox//" + tok, 404, htmlType, isNotFound},
		{"GET", "/x/" + tok, 404, htmlType, isNotFound},
		{"GET", "/inbox/" + tokenAt0, 200, htmlType, contains("Welcome")},
		{"GET", base, 200, htmlType, func(t *testing.T, ans answer) {
			contains(
				`<article class="msg unread" id=message-1><h2><span class=badge>Unread</span><a href="`+base+`/messages/1">Welcome</a></h2><p class=meta>From no-reply@candidate.websitebench.local · To user@example.com · <time datetime="`,
				`<a href="`+base+`/messages/2">&lt;script&gt;alert(1)&lt;/script&gt;</a>`,
				`To user@example.com, b@example.com · <time datetime="`,
				`<a href="`+base+`/messages/3">HTML only</a>`,
				`<p><a href="`+base+`" id=inbox-refresh>Refresh</a></p>`,
			)(t, ans)
			if strings.Count(ans.body, "<article") != 3 || strings.Contains(ans.body, "Other trial") {
				t.Errorf("the inbox shows other than its own 3 messages")
			}
			if a, b, c := strings.Index(ans.body, "id=message-3"), strings.Index(ans.body, "id=message-2"), strings.Index(ans.body, "id=message-1"); !(a < b && b < c) {
				t.Errorf("the inbox is not newest first")
			}
		}},
		{"GET", base + "/", 200, htmlType, contains("Welcome")},
		{"GET", base + "/messages/1", 200, htmlType, contains(
			`<h2>Welcome</h2><p class=meta>From no-reply@candidate.websitebench.local · To user@example.com · <time datetime="`,
			`<pre id=message-body>Your verification code is 246810.`+"\r\n"+`Open <a href="https://site.example/verify?t=abc&amp;u=1" ping="`+base+`/messages/1/ping/0" rel="noreferrer noopener">https://site.example/verify?t=abc&amp;u=1</a> to confirm.`,
			`<p><a href="`+base+`" id=inbox-back>Back to inbox</a></p>`,
		)},
		{"GET", base + "/messages/01", 200, htmlType, contains(`<h2>Welcome</h2>`)},
		{"GET", base + "/messages/0000000000000000000000000001", 200, htmlType, contains(`<h2>Welcome</h2>`)},
		{"GET", base + "/messages/2", 200, htmlType, contains(
			`<h2>&lt;script&gt;alert(1)&lt;/script&gt;</h2>`,
			`<pre id=message-body>&quot;quotes&#x27; &amp; &lt;tags&gt; &lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt;`+"\r\n"+long+"\r\n</pre>",
		)},
		// An HTML mail shows its HTML in a sandboxed frame, its text one
		// click away.
		{"GET", base + "/messages/3", 200, htmlType, contains(
			`<p class=views id=message-views>HTML · <a href="`+base+`/messages/3/text" id=message-text-link>Text</a>`,
			`<iframe id=message-html title="The message as sent" sandbox="allow-top-navigation-by-user-activation" referrerpolicy=no-referrer src="`+base+`/messages/3/html"></iframe>`,
		)},
		{"GET", base + "/messages/3/html", 200, htmlType, func(t *testing.T, ans answer) {
			contains(`<p>Your PIN is <b>1357</b></p><a href="https://site.example/html?x=1&amp;y=2" target="_top" rel="noreferrer noopener" ping="`+base+`/messages/3/ping/0">Verify</a>`)(t, ans)
			if strings.Contains(ans.body, "tracker.example") || strings.Contains(ans.body, "alert(3)") || strings.Contains(ans.body, "<script") {
				t.Errorf("the frame brought remote content or script: %s", ans.body)
			}
		}},
		{"GET", base + "/messages/1/html", 404, htmlType, isNotFound},
		{"GET", base + "/messages/1/text", 200, htmlType, contains(`<h2>Welcome</h2>`)},
		{"GET", base + "/messages/3/text", 200, htmlType, func(t *testing.T, ans answer) {
			contains(`<a href="`+base+`/messages/3" id=message-html-link>HTML</a> · Text`, `Your PIN is 1357`, `Verify (<a href="https://site.example/html?x=1&amp;y=2" ping="`+base+`/messages/3/ping/0" rel="noreferrer noopener">https://site.example/html?x=1&amp;y=2</a>)`)(t, ans)
			if strings.Contains(ans.body, "tracker.example") || strings.Contains(ans.body, "alert(3)") || strings.Contains(ans.body, "<img") {
				t.Errorf("HTML-only mail brought remote content or script: %s", ans.body)
			}
		}},
		{"GET", base + "/messages/4", 404, htmlType, isNotFound},
		{"GET", base + "/messages/0", 404, htmlType, isNotFound},
		{"GET", base + "/messages/99999999999999999999999", 404, htmlType, isNotFound},
		{"GET", base + "/messages/abc", 404, htmlType, isNotFound},
		{"GET", base + "/messages/+1", 404, htmlType, isNotFound},
		{"GET", base + "/messages/%201", 404, htmlType, isNotFound},
		{"GET", base + "/messages/1_0", 404, htmlType, isNotFound},
		{"GET", base + "/messages/%D9%A1", 404, htmlType, isNotFound},
		{"GET", base + "/messages/latest", 404, htmlType, isNotFound},
		{"GET", base + "/messages/1/x", 404, htmlType, isNotFound},
		{"GET", base + "/messages", 404, htmlType, isNotFound},
		{"GET", base + "/other", 404, htmlType, isNotFound},
		{"HEAD", base, 200, htmlType, func(t *testing.T, ans answer) {
			if ans.body != "" {
				t.Errorf("HEAD body %q", ans.body)
			}
		}},
		{"POST", "/", 405, htmlType, func(t *testing.T, ans answer) {
			if ans.header.Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow %q", ans.header.Get("Allow"))
			}
		}},
		{"PUT", base, 405, htmlType, nil},
		{"DELETE", base + "/messages/1", 405, htmlType, nil},
		// A ping is a POST of text/ping, to a link of a message.
		{"GET", base + "/messages/1/ping/0", 405, htmlType, func(t *testing.T, ans answer) {
			if ans.header.Get("Allow") != "POST" {
				t.Errorf("Allow %q", ans.header.Get("Allow"))
			}
		}},
		{"POST", base + "/messages/1/ping/0", 415, htmlType, nil},
		// Any other POST is refused before anything is read, as POST / is.
		{"POST", base + "/messages/1/ping/x", 405, htmlType, nil},
		{"POST", base + "/messages/1/ping", 405, htmlType, nil},
		{"POST", "/inbox/" + other.InboxToken + "/messages/1/ping/0", 405, htmlType, nil},
		{"POST", "/mcp/" + other.InboxToken, 405, htmlType, nil},
		{"POST", "/mcp/" + tok + "/x", 405, htmlType, nil},
	} {
		name := strings.NewReplacer(tok[1:len(tok)-1], "{token}", other.InboxToken, "{other token}", id.ReadCapability, "{capability}").Replace(c.path)
		t.Run(c.method+" "+name, func(t *testing.T) {
			ans := do(t, c.method, in.URL+c.path)
			if ans.status != c.status {
				t.Fatalf("status %d, want %d: %.500s", ans.status, c.status, ans.body)
			}
			checkHeaders(t, ans)
			if ct := ans.header.Get("Content-Type"); ct != c.ctype {
				t.Errorf("Content-Type %q, want %q", ct, c.ctype)
			}
			for _, secret := range []string{id.ReadCapability, id.InboxGrant, id.MailAPIToken, `"otp"`} {
				if strings.Contains(ans.body, secret) {
					t.Errorf("the answer holds a secret or an OTP field")
				}
			}
			if c.check != nil {
				c.check(t, ans)
			}
		})
	}
	if strings.Contains(in.Output(), tok) || strings.Contains(in.Output(), id.InboxGrant) {
		t.Errorf("the inbox's log holds its token or grant")
	}
}

// By default GET / reveals nothing, and the token URL works; with
// --root-redirect (the reference's drop-in contract) GET / redirects to
// the token URL, with no-store and no-referrer.
func TestRootRedirect(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	in := startInbox(t, plane, id)
	for _, path := range []string{"/", "", "/?x=1"} {
		ans := do(t, "GET", in.URL+path)
		if ans.status != 404 || ans.body != notFoundPage || ans.header.Get("Location") != "" || strings.Contains(ans.body, in.Token) {
			t.Fatalf("GET %q: %d Location %q", path, ans.status, ans.header.Get("Location"))
		}
		checkHeaders(t, ans)
	}
	if ans := do(t, "GET", in.URL+"/inbox/"+in.Token); ans.status != 200 {
		t.Fatalf("token URL: %d", ans.status)
	}
	redirecting := startInbox(t, plane, id, "--root-redirect")
	for _, path := range []string{"/", "/?next=/elsewhere"} {
		ans := do(t, "GET", redirecting.URL+path)
		if ans.status != 302 || ans.header.Get("Location") != "/inbox/"+in.Token || ans.header.Get("Content-Length") != "0" || ans.body != "" {
			t.Fatalf("GET %q with --root-redirect: %d Location %q body %q", path, ans.status, ans.header.Get("Location"), ans.body)
		}
		checkHeaders(t, ans)
	}
}

// The inbox routes before it reads: during an outage a valid token gets
// 503 {"status":"unavailable"}, a wrong token or a path that is not a page
// still gets Not found. After the plane is back, pages are back. A
// destroyed trial's inbox shows nothing.
func TestOutage(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	in := startInbox(t, plane, id)
	send(t, plane.Client(t, id.WriterGrant), []string{"user@example.com"}, textMail("Before", "code 1234"))
	base := "/inbox/" + in.Token

	plane.Kill()
	for _, c := range []struct {
		path   string
		status int
		body   string
	}{
		{"/healthz", 503, `{"status":"unavailable"}`},
		{base, 503, `{"status":"unavailable"}`},
		{base + "/messages/1", 503, `{"status":"unavailable"}`},
		{"/inbox/wrong", 404, notFoundPage},
		{"/inbox/%C3%A9", 404, notFoundPage},
		{base + "/other", 404, notFoundPage},
		{base + "/messages/x", 404, notFoundPage},
		{base + "/messages/0", 404, notFoundPage},
		{"/", 404, notFoundPage},
	} {
		t.Run(strings.ReplaceAll(c.path, in.Token, "{token}"), func(t *testing.T) {
			ans := do(t, "GET", in.URL+c.path)
			if ans.status != c.status || ans.body != c.body {
				t.Fatalf("during outage: %d %q, want %d %q", ans.status, ans.body, c.status, c.body)
			}
			checkHeaders(t, ans)
			if c.status == 503 && ans.header.Get("Content-Type") != jsonType {
				t.Fatalf("503 Content-Type %q", ans.header.Get("Content-Type"))
			}
		})
	}

	plane.Restart(t)
	itest.WaitHTTP(t, in.URL+"/healthz", 200, in.Proc)
	if ans := do(t, "GET", in.URL+base+"/messages/1"); ans.status != 200 || !strings.Contains(ans.body, "<h2>Before</h2>") {
		t.Fatalf("after restart: %d", ans.status)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := plane.Admin.TrialClose(ctx, id.Namespace); err != nil {
		t.Fatal(err)
	}
	if ans := do(t, "GET", in.URL+base+"/messages/1"); ans.status != 404 || ans.body != notFoundPage {
		t.Fatalf("destroyed trial's message: %d %q", ans.status, ans.body)
	}
	if ans := do(t, "GET", in.URL+base); ans.status != 404 {
		t.Fatalf("destroyed trial's inbox: %d", ans.status)
	}
}

// mail-inbox's command line: configuration errors exit 2 and name no
// secret; SIGTERM stops it with 0.
func TestCommandLine(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	grant := itest.WriteSecret(t, "grant", id.InboxGrant)
	token := itest.WriteSecret(t, "token", id.InboxToken)
	for _, args := range [][]string{
		{"--plane-socket", plane.Socket, "--grant-file", grant, "--listen", "127.0.0.1:0", "--root-redirect"},                                  // a shared inbox has no one token URL
		{"--plane-socket", plane.Socket, "--grant-file", grant, "--token-file", "/nonexistent", "--listen", "127.0.0.1:0"},                     // unreadable token
		{"--plane-socket", plane.Socket, "--grant-file", grant, "--token-file", itest.WriteSecret(t, "t", "short"), "--listen", "127.0.0.1:0"}, // too short
		{"--plane-socket", plane.Socket, "--grant-file", grant, "--token-file", itest.WriteSecret(t, "t", strings.Repeat("a/", 20)), "--listen", "127.0.0.1:0"},
		{"--plane-socket", plane.Socket, "--token-file", token, "--listen", "127.0.0.1:0"},                    // no grant
		{"--plane-socket", plane.Socket, "--grant-file", grant, "--token-file", token, "--listen", "fd:99"},   // no such descriptor
		{"--plane-socket", plane.Socket, "--grant-file", grant, "--token-file", token, "--log-format", "xml"}, // bad log format
		{"--bogus"},
	} {
		p := itest.Start(t, "mail-inbox", args...)
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: still running", args)
		}
		if code := p.Cmd.ProcessState.ExitCode(); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, p.Output())
		}
		if strings.Contains(p.Output(), id.InboxToken) || strings.Contains(p.Output(), id.InboxGrant) {
			t.Errorf("%v: a secret in the output", args)
		}
	}
	in := startInbox(t, plane, id)
	if code := in.Stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	if _, err := http.Get(in.URL + "/healthz"); err == nil {
		t.Fatalf("still answering after it stopped")
	}
}

// The inbox holds at most 16 connections (docs/reference.md §3): one more
// is accepted and closed at once, and a place frees when a connection
// closes. Each connection asks for /healthz: a held one is answered, one
// more is closed unanswered, and a test on a loaded host tells them apart
// by that, not by how soon a close came.
func TestConnectionLimit(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	in := startInbox(t, plane, id)
	addr := strings.TrimPrefix(in.URL, "http://")
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	// held dials and asks: the connection, and whether the inbox answered
	// it (it stays open) or closed it unanswered.
	held := func() (net.Conn, bool) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(itest.Bound))
		line, err := bufio.NewReader(c).ReadString('\n')
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("a connection neither answered nor closed in %v", itest.Bound)
		case err == nil && !strings.HasPrefix(line, "HTTP/1.1 200"):
			t.Fatalf("a held connection answered %q", line)
		}
		return c, err == nil
	}
	for {
		c, ok := held()
		if !ok {
			c.Close()
			break
		}
		open = append(open, c)
		if len(open) > 16 {
			t.Fatalf("%d connections held open, want at most 16", len(open))
		}
	}
	// WaitHTTP's kept-alive connection may hold one place.
	if len(open) < 15 {
		t.Fatalf("only %d connections before one was refused, want 15 or 16", len(open))
	}
	open[0].Close()
	open = open[1:]
	// The inbox sees the close in its own time: until then a new
	// connection is refused.
	itest.Eventually(t, "a place freed", itest.Bound, func() bool {
		c, ok := held()
		if ok {
			open = append(open, c)
		} else {
			c.Close()
		}
		return ok
	})
}

// TestSharedInbox: one inbox with the plane's shared inbox grant serves
// every trial: each token shows its own trial's mail and nothing else, a
// token no trial holds (or another secret in its place) is Not found, and
// GET / reveals nothing.
func TestSharedInbox(t *testing.T) {
	plane := itest.StartPlane(t)
	a, b := plane.Trial(t, rpc.ProfileCandidate), plane.Trial(t, rpc.ProfileCandidate)
	send(t, plane.Client(t, a.WriterGrant), []string{"user@example.com"}, textMail("For A", "a"))
	send(t, plane.Client(t, b.WriterGrant), []string{"user@example.com"}, textMail("For B", "b"))
	in := itest.StartInbox(t, plane, plane.Grant(t, rpc.RoleInbox), "")
	for _, c := range []struct {
		id        rpc.Identity
		mine, not string
	}{{a, "For A", "For B"}, {b, "For B", "For A"}} {
		ans := do(t, "GET", in.URL+"/inbox/"+c.id.InboxToken)
		if ans.status != 200 || !strings.Contains(ans.body, c.mine) || strings.Contains(ans.body, c.not) {
			t.Fatalf("inbox of %s: %d", c.mine, ans.status)
		}
		if ans := do(t, "GET", in.URL+"/inbox/"+c.id.InboxToken+"/messages/1"); ans.status != 200 || !strings.Contains(ans.body, c.mine) {
			t.Fatalf("message 1 of %s: %d", c.mine, ans.status)
		}
		checkHeaders(t, ans)
	}
	for _, path := range []string{"/", "/inbox/" + strings.Repeat("a", 43), "/inbox/" + a.ReadCapability, "/inbox/" + a.MailAPIToken,
		"/inbox/" + a.BootstrapToken, "/inbox/" + a.WriteCapability, "/inbox/" + a.InboxToken + "/messages/2"} {
		if ans := do(t, "GET", in.URL+path); ans.status != 404 || ans.body != notFoundPage {
			t.Fatalf("GET %.20s…: %d", path, ans.status)
		}
	}
	if strings.Contains(in.Output(), a.InboxToken) || strings.Contains(in.Output(), b.InboxToken) {
		t.Errorf("the shared inbox's log holds a token")
	}
}

// TestNewestPage: with more mail than one list answer holds (a page of
// the plane's is 512 messages), the agent's list shows the newest page,
// newest first: the newest message is on it, and the oldest ones that
// fall off are the ones past the page.
func TestNewestPage(t *testing.T) {
	const n, page = 520, 512
	plane := itest.StartPlane(t, "--quota-messages", "0", "--quota-bytes", "0")
	id := plane.Trial(t, rpc.ProfileCandidate)
	w := plane.Client(t, id.WriterGrant)
	subject := func(i int) string { return fmt.Sprintf("mail %04d", i) }
	jobs := make(chan int)
	errs := make(chan error, n)
	for range 8 {
		go func() {
			for i := range jobs {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := w.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"a@example.com"}, Raw: []byte(textMail(subject(i), "x"))})
				cancel()
				errs <- err
			}
		}()
	}
	go func() {
		for i := 1; i <= n; i++ {
			jobs <- i
		}
		close(jobs)
	}()
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	in := startInbox(t, plane, id)
	ans := do(t, "GET", in.URL+"/inbox/"+in.Token)
	if ans.status != 200 {
		t.Fatalf("the inbox: %d", ans.status)
	}
	// The sends ran at once, so ids and subjects need not agree: the
	// page is judged by the messages' ids, newest first.
	msgs, err := plane.Client(t, plane.GatewayGrant(t)).List(context.Background(), &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability, After: n - page})
	if err != nil || len(msgs) != page {
		t.Fatalf("the gateway's list after %d: %d messages, %v", n-page, len(msgs), err)
	}
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- { // newest first
		at := strings.Index(ans.body, ">"+msgs[i].Subject+"<")
		if at < 0 {
			t.Fatalf("message %d (%s) is not on the agent's list", msgs[i].ID, msgs[i].Subject)
		}
		if at < last {
			t.Fatalf("message %d (%s) is listed before a newer one", msgs[i].ID, msgs[i].Subject)
		}
		last = at
	}
	if got := strings.Count(ans.body, ">mail "); got != page {
		t.Errorf("the list shows %d messages, want the page's %d", got, page)
	}
}
