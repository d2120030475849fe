package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// messageKeys are exactly the keys of a message: docs/reference.md §4.2's plus
// the action link, codes and links, the sender's display name, the HTML
// part and the received time.
var messageKeys = []string{"action_link", "attachments", "codes", "envelope_from", "from_name", "html", "id", "links", "namespace", "otp", "received_at",
	"recipients", "subject", "text"}

// errorKeys are exactly the keys of every error.
var errorKeys = []string{"error", "message", "name", "statusCode"}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Every route of the gateway, against the real binaries: the plane, and
// mail-gateway as a separate process, with mail delivered through the
// plane by a writer grant.
func TestRoutes(t *testing.T) {
	plane := itest.StartPlane(t)
	a := plane.Trial(t, rpc.ProfileCandidate)
	b := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	s := newSender(t, plane, a)
	s.send(t, []string{"alice@example.com"}, "Welcome", "Your verification code is 246810.\r\nOpen https://site.example/verify?t=abc&u=1 to confirm.\r\n")
	s.send(t, []string{"bob@example.com"}, "<script>alert(1)</script>", "\"quotes' & <tags> </pre><script>alert(2)</script>\r\n")
	s.send(t, []string{"Alice@Example.com", "carol@example.com"}, "Second", "order 2024-01-02, PIN 7391\r\n")
	newSender(t, plane, b).send(t, []string{"alice@example.com"}, "Other trial", "code 1111\r\n")

	capA := "Bearer " + a.ReadCapability
	type tc struct {
		name   string
		method string
		path   string // appended to gw.URL
		auth   string
		status int
		code   string // "error" of a JSON error answer
		check  func(t *testing.T, ans answer)
	}
	ids := func(want ...float64) func(*testing.T, answer) {
		return func(t *testing.T, ans answer) {
			var got []float64
			for _, m := range ans.json(t)["messages"].([]any) {
				msg := m.(map[string]any)
				if k := keys(msg); !slices.Equal(k, messageKeys) {
					t.Fatalf("message keys %v, want %v", k, messageKeys)
				}
				got = append(got, msg["id"].(float64))
			}
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("ids %v, want %v", got, want)
			}
		}
	}
	one := func(id float64, subject string) func(*testing.T, answer) {
		return func(t *testing.T, ans answer) {
			m := ans.json(t)
			if k := keys(m); !slices.Equal(k, messageKeys) {
				t.Fatalf("message keys %v, want %v", k, messageKeys)
			}
			if m["id"] != id || m["subject"] != subject || m["namespace"] != a.Namespace {
				t.Fatalf("got id %v subject %q namespace %v, want %v %q %s", m["id"], m["subject"], m["namespace"], id, subject, a.Namespace)
			}
		}
	}
	ns := a.Namespace
	for _, c := range []tc{
		{name: "healthz", path: "/healthz", status: 200, check: func(t *testing.T, ans answer) {
			if ans.body != `{"status":"ok"}` {
				t.Fatalf("body %q", ans.body)
			}
		}},
		{name: "root", path: "/", status: 404, code: "not_found"},
		{name: "bootstrap is not here", path: "/internal/bootstrap", auth: capA, status: 404, code: "not_found"},
		{name: "namespace without messages", path: "/api/namespaces/" + ns, auth: capA, status: 404, code: "not_found"},
		{name: "list", path: "/api/namespaces/" + ns + "/messages", auth: capA, status: 200, check: ids(1, 2, 3)},
		{name: "list, trailing slash", path: "/api/namespaces/" + ns + "/messages/", auth: capA, status: 200, check: ids(1, 2, 3)},
		{name: "list, percent-encoded namespace", path: "/api/namespaces/tri%61l-" + ns[len("trial-"):] + "/messages", auth: capA, status: 200, check: ids(1, 2, 3)},
		{name: "recipient filter", path: "/api/namespaces/" + ns + "/messages?recipient=alice@example.com", auth: capA, status: 200, check: ids(1, 3)},
		{name: "recipient filter ignores case", path: "/api/namespaces/" + ns + "/messages?recipient=ALICE%40EXAMPLE.COM", auth: capA, status: 200, check: ids(1, 3)},
		{name: "empty recipient is no filter", path: "/api/namespaces/" + ns + "/messages?recipient=&recipient=bob@example.com", auth: capA, status: 200, check: ids(2)},
		{name: "recipient never delivered to", path: "/api/namespaces/" + ns + "/messages?recipient=nobody@example.com", auth: capA, status: 403, code: "recipient_forbidden"},
		{name: "after", path: "/api/namespaces/" + ns + "/messages?after=2", auth: capA, status: 200, check: ids(3)},
		{name: "after the last", path: "/api/namespaces/" + ns + "/messages?after=3", auth: capA, status: 200, check: ids()},
		{name: "latest", path: "/api/namespaces/" + ns + "/messages/latest", auth: capA, status: 200, check: one(3, "Second")},
		{name: "latest to bob", path: "/api/namespaces/" + ns + "/messages/latest?recipient=bob@example.com", auth: capA, status: 200, check: one(2, "<script>alert(1)</script>")},
		{name: "latest after the last", path: "/api/namespaces/" + ns + "/messages/latest?after=3", auth: capA, status: 404, code: "message_not_found"},
		{name: "one message", path: "/api/namespaces/" + ns + "/messages/1", auth: capA, status: 200, check: one(1, "Welcome")},
		{name: "leading zeros", path: "/api/namespaces/" + ns + "/messages/002", auth: capA, status: 200, check: one(2, "<script>alert(1)</script>")},
		{name: "unknown id", path: "/api/namespaces/" + ns + "/messages/99", auth: capA, status: 404, code: "message_not_found"},
		{name: "id zero", path: "/api/namespaces/" + ns + "/messages/0", auth: capA, status: 404, code: "message_not_found"},
		{name: "id too large", path: "/api/namespaces/" + ns + "/messages/99999999999999999999999", auth: capA, status: 404, code: "message_not_found"},
		{name: "not an id", path: "/api/namespaces/" + ns + "/messages/foo", auth: capA, status: 404, code: "not_found"},
		{name: "signed id", path: "/api/namespaces/" + ns + "/messages/+1", auth: capA, status: 404, code: "not_found"},
		{name: "deeper", path: "/api/namespaces/" + ns + "/messages/1/x", auth: capA, status: 404, code: "not_found"},
		{name: "latest deeper", path: "/api/namespaces/" + ns + "/messages/latest/x", auth: capA, status: 404, code: "not_found"},
		{name: "invalid namespace", path: "/api/namespaces/bad%20ns/messages", auth: capA, status: 400, code: "invalid_namespace"},
		{name: "namespace too long", path: "/api/namespaces/" + strings.Repeat("n", 161) + "/messages", auth: capA, status: 400, code: "invalid_namespace"},
		{name: "invalid namespace before credential", path: "/api/namespaces/bad!/messages", status: 400, code: "invalid_namespace"},
		{name: "no credential", path: "/api/namespaces/" + ns + "/messages", status: 403, code: "forbidden"},
		{name: "wrong capability", path: "/api/namespaces/" + ns + "/messages", auth: "Bearer " + strings.Repeat("0", 64), status: 403, code: "forbidden"},
		{name: "other trial's capability", path: "/api/namespaces/" + ns + "/messages", auth: "Bearer " + b.ReadCapability, status: 403, code: "forbidden"},
		{name: "bootstrap token", path: "/api/namespaces/" + ns + "/messages", auth: "Bearer " + a.BootstrapToken, status: 403, code: "forbidden"},
		{name: "mail-API token", path: "/api/namespaces/" + ns + "/messages/latest", auth: "Bearer " + a.MailAPIToken, status: 403, code: "forbidden"},
		{name: "lower-case bearer", path: "/api/namespaces/" + ns + "/messages", auth: "bearer " + a.ReadCapability, status: 403, code: "forbidden"},
		{name: "two spaces", path: "/api/namespaces/" + ns + "/messages", auth: "Bearer  " + a.ReadCapability, status: 403, code: "forbidden"},
		{name: "bare capability", path: "/api/namespaces/" + ns + "/messages", auth: a.ReadCapability, status: 403, code: "forbidden"},
		{name: "non-ASCII credential", path: "/api/namespaces/" + ns + "/messages", auth: "Bearer \xc3\xa9" + a.ReadCapability, status: 403, code: "forbidden"},
		{name: "unknown namespace", path: "/api/namespaces/trial-00000000000000000000000000000000/messages", auth: capA, status: 403, code: "forbidden"},
		{name: "wait not a duration", path: "/api/namespaces/" + ns + "/messages?wait=soon", auth: capA, status: 400, code: "invalid_wait"},
		{name: "wait over 60s", path: "/api/namespaces/" + ns + "/messages/latest?wait=61s", auth: capA, status: 400, code: "invalid_wait"},
		{name: "wait over 60 seconds", path: "/api/namespaces/" + ns + "/messages/latest?wait=60.5", auth: capA, status: 400, code: "invalid_wait"},
		{name: "wait negative", path: "/api/namespaces/" + ns + "/messages?wait=-1s", auth: capA, status: 400, code: "invalid_wait"},
		{name: "wait exponent", path: "/api/namespaces/" + ns + "/messages?wait=1e3", auth: capA, status: 400, code: "invalid_wait"},
		{name: "after not an id", path: "/api/namespaces/" + ns + "/messages?after=x", auth: capA, status: 400, code: "invalid_after"},
		{name: "after negative", path: "/api/namespaces/" + ns + "/messages/latest?after=-1", auth: capA, status: 400, code: "invalid_after"},
		{name: "wait with a match answers at once", path: "/api/namespaces/" + ns + "/messages/latest?wait=30s", auth: capA, status: 200, check: one(3, "Second")},
		{name: "POST", method: http.MethodPost, path: "/api/namespaces/" + ns + "/messages", auth: capA, status: 405, code: "method_not_allowed", check: func(t *testing.T, ans answer) {
			if ans.header.Get("Allow") != "GET, HEAD" {
				t.Fatalf("Allow %q", ans.header.Get("Allow"))
			}
		}},
		{name: "DELETE", method: http.MethodDelete, path: "/api/namespaces/" + ns + "/messages/1", auth: capA, status: 405, code: "method_not_allowed"},
		{name: "POST /emails is the writer's", method: http.MethodPost, path: "/emails", auth: capA, status: 405, code: "method_not_allowed"},
		{name: "HEAD healthz", method: http.MethodHead, path: "/healthz", status: 200, check: func(t *testing.T, ans answer) {
			if ans.body != "" {
				t.Fatalf("HEAD body %q", ans.body)
			}
		}},
		{name: "HTML inbox", path: "/inbox/" + ns, auth: capA, status: 200, check: func(t *testing.T, ans answer) {
			for _, want := range []string{
				`<a href="/inbox/` + ns + `/messages/1">Welcome</a>`,
				`<a href="/inbox/` + ns + `/messages/2">&lt;script&gt;alert(1)&lt;/script&gt;</a>`,
				`<a href="/inbox/` + ns + `" id=inbox-refresh>Refresh</a>`,
			} {
				if !strings.Contains(ans.body, want) {
					t.Fatalf("inbox page lacks %q:\n%s", want, ans.body)
				}
			}
			if strings.Contains(ans.body, "<script>") || strings.Contains(ans.body, "246810") {
				t.Fatalf("inbox page shows a script or a code:\n%s", ans.body)
			}
		}},
		{name: "HTML message link works", path: "/inbox/" + ns + "/messages/2", auth: capA, status: 200, check: func(t *testing.T, ans answer) {
			want := `<pre id=message-body>&quot;quotes&#x27; &amp; &lt;tags&gt; &lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt;` + "\r\n</pre>"
			if !strings.Contains(ans.body, want) || strings.Contains(ans.body, "<script>") {
				t.Fatalf("message page lacks %q or has a script:\n%s", want, ans.body)
			}
		}},
		{name: "HTML message body links", path: "/inbox/" + ns + "/messages/1", auth: capA, status: 200, check: func(t *testing.T, ans answer) {
			want := `<a href="https://site.example/verify?t=abc&amp;u=1" rel="noreferrer noopener">https://site.example/verify?t=abc&amp;u=1</a>`
			if !strings.Contains(ans.body, want) {
				t.Fatalf("message page lacks %q:\n%s", want, ans.body)
			}
		}},
		{name: "HTML unknown message", path: "/inbox/" + ns + "/messages/99", auth: capA, status: 404, code: "message_not_found"},
		{name: "HTML wrong capability", path: "/inbox/" + ns, auth: "Bearer " + b.ReadCapability, status: 403, code: "forbidden"},
		{name: "HTML message wrong capability", path: "/inbox/" + ns + "/messages/1", status: 403, code: "forbidden"},
		{name: "HTML invalid namespace", path: "/inbox/bad%20ns", auth: capA, status: 400, code: "invalid_namespace"},
		{name: "HTML deeper", path: "/inbox/" + ns + "/other", auth: capA, status: 404, code: "not_found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				method = http.MethodGet
			}
			ans := do(t, method, gw.URL+c.path, c.auth)
			if ans.status != c.status {
				t.Fatalf("status %d, want %d: %s", ans.status, c.status, ans.body)
			}
			switch {
			case strings.HasPrefix(c.path, "/inbox/") && c.status == 200:
				for h, want := range map[string]string{
					"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
				} {
					if got := ans.header.Get(h); got != want {
						t.Errorf("%s: %q, want %q", h, got, want)
					}
				}
				if csp := ans.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
					t.Errorf("Content-Security-Policy %q", csp)
				}
			case method != http.MethodHead:
				if ct := ans.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
			}
			if c.code != "" {
				e := ans.json(t)
				if k := keys(e); !slices.Equal(k, errorKeys) {
					t.Fatalf("error keys %v, want %v", k, errorKeys)
				}
				if e["error"] != c.code || e["statusCode"] != float64(c.status) || e["name"] == "" || e["message"] == "" {
					t.Fatalf("error %v, want code %q status %d", e, c.code, c.status)
				}
				if strings.Contains(ans.body, a.ReadCapability) || strings.Contains(ans.body, b.ReadCapability) {
					t.Fatalf("an error body holds a capability: %s", ans.body)
				}
			}
			if c.check != nil {
				c.check(t, ans)
			}
		})
	}
	if out := gw.Output(); strings.Contains(out, a.ReadCapability) || strings.Contains(out, b.ReadCapability) || strings.Contains(out, plane.GatewayGrant(t)) {
		t.Fatalf("the gateway's log holds a secret")
	}
}

// The message object: §4.2's values, the code and links found in it, the
// sender's display name, the HTML part as sent and when it arrived.
func TestMessageJSON(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	s := newSender(t, plane, id)
	long := strings.Repeat("x", 200_000)
	before := time.Now().Truncate(time.Millisecond) // the ledger keeps milliseconds
	s.sendRaw(t, []string{"user@example.com", "second@example.com"}, "From: =?utf-8?q?Acme_B=C3=BCro?= <"+rpc.CandidateSender+">\r\nSubject: API hello\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n\r\nOrder 88776655 shipped 2024-01-02.\r\nYour code is 246810.\r\nhttps://site.example/a?b=1&c=2 <b>&</b>\r\n"+long+"\r\n")
	const html = `<p>Your PIN is <b>1357</b></p><a href="https://site.example/html?x=1&amp;y=2">Verify</a><script>alert(1)</script>`
	s.sendRaw(t, []string{"user@example.com"}, "Subject: HTML only\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"+html)
	s.send(t, []string{"user@example.com"}, "No code", "١٢٣٤ and 2024-01-02 and +1 555 010 0100")

	ans := get(t, gw.URL+"/api/namespaces/"+id.Namespace+"/messages", id.ReadCapability)
	if ans.status != 200 {
		t.Fatalf("status %d: %s", ans.status, ans.body)
	}
	if !strings.Contains(ans.body, `"subject":"API hello"`) || !strings.Contains(ans.body, `<b>&</b>`) {
		t.Fatalf("JSON is not written as the reference writes it (raw <, >, &):\n%.300s", ans.body)
	}
	var list struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(ans.body), &list); err != nil || len(list.Messages) != 3 {
		t.Fatalf("list: %v, %d messages", err, len(list.Messages))
	}
	str := func(m map[string]json.RawMessage, k string) string { return string(m[k]) }
	m := list.Messages[0]
	for k, want := range map[string]string{
		"action_link":   `null`,
		"attachments":   `[]`,
		"codes":         `["246810"]`,
		"envelope_from": `"no-reply@candidate.websitebench.local"`,
		"from_name":     `"Acme Büro"`,
		"html":          `""`,
		"id":            `1`,
		"links":         `["https://site.example/a?b=1&c=2"]`,
		"namespace":     `"` + id.Namespace + `"`,
		"otp":           `"246810"`,
		"recipients":    `["user@example.com","second@example.com"]`,
		"subject":       `"API hello"`,
	} {
		if got := str(m, k); got != want {
			t.Errorf("message 1 %s = %s, want %s", k, got, want)
		}
	}
	var text string
	json.Unmarshal(m["text"], &text)
	if !strings.HasPrefix(text, "Order 88776655") || !strings.Contains(text, long) || !strings.HasSuffix(text, long+"\r\n") {
		t.Errorf("text is not returned as sent (%d bytes)", len(text))
	}
	after := time.Now()
	for i, m := range list.Messages {
		var at string
		json.Unmarshal(m["received_at"], &at)
		got, err := time.Parse(time.RFC3339, at)
		if err != nil || !strings.HasSuffix(at, "Z") || got.Before(before) || got.After(after) {
			t.Errorf("message %d received_at %s (%v): want RFC 3339 in UTC between %s and %s", i+1, m["received_at"], err, before, after)
		}
	}
	h := list.Messages[1]
	var gotHTML string
	if json.Unmarshal(h["html"], &gotHTML); gotHTML != html || str(h, "from_name") != `""` {
		t.Errorf("HTML-only message: html %s, from_name %s; want the HTML as sent and no name", h["html"], h["from_name"])
	}
	if str(h, "otp") != `"1357"` || str(h, "links") != `["https://site.example/html?x=1&y=2"]` || str(h, "action_link") != `"https://site.example/html?x=1&y=2"` {
		t.Errorf("HTML-only message: otp %s links %s action_link %s", str(h, "otp"), str(h, "links"), str(h, "action_link"))
	}
	json.Unmarshal(h["text"], &text)
	if !strings.Contains(text, "Your PIN is 1357") || strings.Contains(text, "alert") {
		t.Errorf("HTML-only message text %q is not its derived text", text)
	}
	n := list.Messages[2]
	if str(n, "otp") != "null" || str(n, "codes") != "[]" || str(n, "links") != "[]" || str(n, "action_link") != "null" {
		t.Errorf("no-code message: otp %s codes %s links %s action_link %s", str(n, "otp"), str(n, "codes"), str(n, "links"), str(n, "action_link"))
	}
}

// During an outage every read is 503 mailpit_unavailable and /healthz is
// 503; checks that need no plane still answer as before; after a restart
// everything answers again.
func TestOutage(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	api := gw.URL + "/api/namespaces/" + id.Namespace + "/messages"
	newSender(t, plane, id).send(t, []string{"user@example.com"}, "Before", "code 1234")

	plane.Kill()
	for _, c := range []struct {
		url, auth string
		status    int
		code      string
	}{
		{gw.URL + "/healthz", "", 503, ""},
		{api, "Bearer " + id.ReadCapability, 503, "mailpit_unavailable"},
		{api + "/latest", "Bearer " + id.ReadCapability, 503, "mailpit_unavailable"},
		{api + "/latest?wait=5s", "Bearer " + id.ReadCapability, 503, "mailpit_unavailable"},
		{api + "/1", "Bearer " + id.ReadCapability, 503, "mailpit_unavailable"},
		{api + "?recipient=user@example.com", "Bearer " + id.ReadCapability, 503, "mailpit_unavailable"},
		{gw.URL + "/inbox/" + id.Namespace, "Bearer " + id.ReadCapability, 503, "mailpit_unavailable"},
		// Answered before the plane would be asked.
		{api, "", 403, "forbidden"},
		{gw.URL + "/api/namespaces/bad!/messages", "Bearer " + id.ReadCapability, 400, "invalid_namespace"},
		{api + "?wait=forever", "Bearer " + id.ReadCapability, 400, "invalid_wait"},
		{api + "/foo", "Bearer " + id.ReadCapability, 404, "not_found"},
	} {
		ans := do(t, http.MethodGet, c.url, c.auth)
		if ans.status != c.status {
			t.Errorf("%s during outage: %d, want %d: %s", c.url, ans.status, c.status, ans.body)
			continue
		}
		if c.code == "" {
			if ans.body != `{"status":"unavailable"}` {
				t.Errorf("healthz body %q", ans.body)
			}
			continue
		}
		if got := ans.json(t)["error"]; got != c.code {
			t.Errorf("%s during outage: error %v, want %s", c.url, got, c.code)
		}
		if c.status == 503 && ans.header.Get("Retry-After") == "" {
			t.Errorf("503 without Retry-After")
		}
	}

	plane.Restart(t)
	itest.WaitHTTP(t, gw.URL+"/healthz", 200, gw.Proc)
	if ans := get(t, api+"/latest", id.ReadCapability); ans.status != 200 || ans.json(t)["subject"] != "Before" {
		t.Fatalf("after restart: %d %s", ans.status, ans.body)
	}
}

// mail-gateway's command line: configuration errors exit 2, SIGTERM stops
// it with 0, even while a request is waiting for mail.
func TestCommandLine(t *testing.T) {
	plane := itest.StartPlane(t)
	for _, args := range [][]string{
		{"--plane-socket", plane.Socket, "--listen", "127.0.0.1:0"},                                               // no grant
		{"--plane-socket", plane.Socket, "--grant-file", "/nonexistent/grant", "--listen", "127.0.0.1:0"},         // unreadable grant
		{"--plane-socket", plane.Socket, "--grant-file", itest.WriteSecret(t, "g", "x"), "--listen", "nonsense"},  // bad listen spec
		{"--plane-socket", plane.Socket, "--grant-file", itest.WriteSecret(t, "g", "x"), "--log-level", "chatty"}, // bad log level
		{"--no-such-flag"},
	} {
		p := itest.Start(t, "mail-gateway", args...)
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: still running", args)
		}
		if code := p.Cmd.ProcessState.ExitCode(); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, p.Output())
		}
	}

	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	done := make(chan answer, 1)
	go func() {
		ans, err := try(http.MethodGet, gw.URL+"/api/namespaces/"+id.Namespace+"/messages/latest?wait=60s", "Bearer "+id.ReadCapability)
		if err != nil {
			ans.body = err.Error()
		}
		done <- ans
	}()
	plane.WaitParked(t, "mail", 1)
	// Stop's bound (itest.Bound) is well inside the request's 60 s wait:
	// the gateway cut the wait short rather than waiting it out.
	if code := gw.Stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	select {
	case ans := <-done:
		if ans.status != 503 {
			t.Fatalf("the waiting request got %d, want 503 (try again): %s", ans.status, ans.body)
		}
	case <-time.After(itest.Bound):
		t.Fatal("the waiting request never got an answer")
	}
}
