package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/websitebench/mailplane/internal/console"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Without the admin grant the console answers 401 and shows nothing of
// any trial, on every route; every other credential a party holds (the
// candidate's, the agent's, the evaluator's, every surface's grant, the
// console's own) is refused the same way. The admin grant, as a Bearer
// or through the sign-in form's session, opens it. The session is a
// capability in the path, never a cookie (no answer sets one, and a
// cookie is no credential); a forged or ended capability opens nothing
// and is not echoed; a message's frame URL opens that message only; a
// form posted from another origin, another port of the same host
// included, is refused.
func TestAccess(t *testing.T) {
	s := startStack(t)
	id := s.plane.Trial(t, rpc.ProfileCandidate)
	if st := s.send(t, id, email{To: []string{"user@example.com"}, Subject: "Welcome aboard", Text: "Your code is 482913."}); st != http.StatusOK {
		t.Fatalf("send: %d", st)
	}
	secrets := s.secrets(t, id)
	routes := []string{"/", "/?ns=" + id.Namespace, "/trials/" + id.Namespace, "/trials/" + id.Namespace + "/messages/1/html",
		"/metrics", "/live", "/live?trial=" + id.Namespace}
	refused := map[string]string{"no credential": ""}
	for name, v := range secrets {
		if name != "admin grant" {
			refused[name] = v
		}
	}
	for who, cred := range refused {
		for _, path := range routes {
			if cred != "" && (strings.Contains(path, "?") || strings.HasSuffix(path, "html")) {
				continue // every route without one; the main ones with every other
			}
			a := s.get(t, path, cred, "Accept", "text/html")
			if a.status != http.StatusUnauthorized {
				t.Fatalf("%s on %s: %d, want 401", who, path, a.status)
			}
			if strings.Contains(a.body, id.Namespace) && !strings.Contains(a.body, "next") || strings.Contains(a.body, "Welcome aboard") {
				t.Fatalf("%s on %s: the answer shows trial data:\n%s", who, path, a.body)
			}
			noSecret(t, who+" on "+path, a.body, secrets)
		}
	}
	// A capability that no sign-in opened is no credential, and the 401
	// does not echo it; nor is the old cookie.
	forged := strings.Repeat("A", 43)
	for _, path := range []string{"/s/" + forged + "/", "/s/" + forged + "/trials/" + id.Namespace} {
		if a := s.get(t, path, "", "Accept", "text/html"); a.status != http.StatusUnauthorized || strings.Contains(a.body, forged) {
			t.Fatalf("a forged session on %s: %d", path, a.status)
		}
	}

	for _, path := range []string{"/", "/?ns=" + id.Namespace, "/trials/" + id.Namespace, "/metrics"} {
		a := s.get(t, path, s.admin)
		if a.status != http.StatusOK {
			t.Fatalf("admin on %s: %d\n%s", path, a.status, a.body)
		}
		noSecret(t, "admin on "+path, a.body, secrets)
	}

	// The sign-in form: a wrong grant, then the admin's from another
	// site and from another port of this host, then from the console.
	if a := s.login(t, s.plane.Grant(t, rpc.RoleGateway), s.console.URL); a.status != http.StatusUnauthorized || a.header.Get("Location") != "" {
		t.Fatalf("sign-in with the gateway grant: %d %q", a.status, a.header.Get("Location"))
	}
	for _, from := range [][2]string{{"http://evil.example", ""}, {"http://127.0.0.1:1", ""}, {"http://127.0.0.1:1", "same-site"},
		{"null", "same-site"}, {"null", "cross-site"}, {"https://" + strings.TrimPrefix(s.console.URL, "http://"), ""}, {s.console.URL, "same-site"}} {
		if a := s.login(t, s.admin, from[0], "Sec-Fetch-Site", from[1]); a.status != http.StatusForbidden || a.header.Get("Location") != "" {
			t.Fatalf("sign-in posted from %v: %d %q", from, a.status, a.header.Get("Location"))
		}
	}
	base := s.signIn(t)
	capability := strings.TrimPrefix(base, "/s/")
	noSecret(t, "the session's path", base, secrets)
	if a := s.get(t, "/", "", "Cookie", "mailplane_console="+capability); a.status != http.StatusUnauthorized {
		t.Fatalf("the capability as a cookie: %d", a.status)
	}
	page := s.get(t, base+"/trials/"+id.Namespace, "")
	if page.status != http.StatusOK || !strings.Contains(page.body, "Welcome aboard") || page.header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("the session's trial page: %d %q", page.status, page.header.Get("Referrer-Policy"))
	}
	noSecret(t, "the session's trial page", page.body, secrets)
	// Every link of the page stays in the session, or is its frame.
	for _, m := range regexp.MustCompile(`(?:href|action|src|data-live)="([^"]*)"`).FindAllStringSubmatch(page.body, -1) {
		if u := strings.ReplaceAll(m[1], "&amp;", "&"); !strings.HasPrefix(u, base+"/") && !strings.HasPrefix(u, "/frames/") && u != "/console.css" && u != "/console.js" {
			t.Errorf("the session's page links to %q", u)
		}
	}

	// A frame's URL carries no capability and opens its message only.
	s.send(t, id, email{To: []string{"user@example.com"}, Subject: "HTML", HTML: "<p id=x>framed</p>"})
	page = s.get(t, base+"/trials/"+id.Namespace, "")
	src := regexp.MustCompile(`<iframe sandbox[^>]* src="(/frames/[^"]+)"`).FindStringSubmatch(page.body)
	if src == nil || strings.Contains(src[1], capability) || !strings.Contains(src[1], "/"+id.Namespace+"/2/") {
		t.Fatalf("the frame's URL: %v", src)
	}
	if a := s.get(t, src[1], ""); a.status != http.StatusOK || !strings.Contains(a.body, "framed") || a.header.Get("Content-Security-Policy") != console.MailContentSecurityPolicy {
		t.Fatalf("the frame: %d %q", a.status, a.body)
	}
	flipped := []byte(src[1])
	flipped[len(flipped)-1] ^= 1 // another letter of base64url
	for _, other := range []string{strings.Replace(src[1], "/2/", "/1/", 1), string(flipped), src[1] + "/x"} {
		if a := s.get(t, other, ""); a.status != http.StatusNotFound || strings.Contains(a.body, "framed") || strings.Contains(a.body, "482913") {
			t.Fatalf("an altered frame URL %s: %d", other, a.status)
		}
	}
	if a := s.get(t, base+"/trials/"+id.Namespace+"/messages/2/html", ""); a.status != http.StatusNotFound {
		t.Fatalf("a session's frame under its capability: %d", a.status)
	}

	// Signing out: not from another origin, nor by a link; then the
	// capability and its frames open nothing.
	logout := func(origin string) answer {
		req, _ := http.NewRequest(http.MethodPost, s.console.URL+base+"/logout", nil)
		req.Header.Set("Origin", origin)
		return do(t, req)
	}
	if a := logout("http://127.0.0.1:1"); a.status != http.StatusForbidden {
		t.Fatalf("sign-out posted from another port: %d", a.status)
	}
	if a := s.get(t, base+"/logout", ""); a.status != http.StatusMethodNotAllowed {
		t.Fatalf("sign-out by GET: %d", a.status)
	}
	if a := s.get(t, base+"/", ""); a.status != http.StatusOK {
		t.Fatalf("the session after refused sign-outs: %d", a.status)
	}
	if a := logout(s.console.URL); a.status != http.StatusSeeOther || a.header.Get("Location") != "/login" {
		t.Fatalf("sign-out: %d %q", a.status, a.header.Get("Location"))
	}
	for _, path := range []string{base + "/", src[1]} {
		if a := s.get(t, path, ""); a.status == http.StatusOK {
			t.Fatalf("%s after sign-out: %d", path, a.status)
		}
	}
}

// The trials page lists the trial with its counts and filters it; the
// trial's page shows its mail (text, codes, headers, the HTML in a
// sandboxed frame) and its trail; the frame's document carries a CSP
// that runs no script and loads nothing; a closed trial stays listed, its
// trail kept. No secret appears on any page.
func TestPages(t *testing.T) {
	s := startStack(t)
	a, b := s.plane.Trial(t, rpc.ProfileCandidate), s.plane.Trial(t, rpc.ProfileCandidate)
	s.send(t, a, email{To: []string{"ann@example.com"}, Subject: "Your sign-in code", Text: "Your verification code is 482913."})
	s.send(t, a, email{To: []string{"ann@example.com"}, Subject: "Hostile", HTML: `<p id=x>hi</p><script>alert(1)</script><img src="http://203.0.113.1/pixel">`})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// a's next send is refused by a fault of the schedule set now.
	if err := s.plane.Admin.TrialFaults(ctx, a.Namespace, json.RawMessage(`[{"door": "http", "sends": [1], "do": "refuse", "status": 429}]`)); err != nil {
		t.Fatal(err)
	}
	if st := s.send(t, a, email{To: []string{"ann@example.com"}, Subject: "Third", Text: "x"}); st != http.StatusTooManyRequests {
		t.Fatalf("the faulted send: %d", st)
	}
	s.send(t, b, email{To: []string{"bob@example.com"}, Subject: "Reset your password", Text: "Reset: https://site.example/reset?t=1"})
	if st := s.send(t, b, email{From: "intruder@example.com", To: []string{"bob@example.com"}, Subject: "x", Text: "x"}); st < 400 {
		t.Fatalf("a send from a sender the trial does not allow: %d", st)
	}
	secrets := s.secrets(t, a, b)

	list := s.get(t, "/", s.admin)
	for _, want := range []string{a.Namespace, b.Namespace, "open trials", "store"} {
		if !strings.Contains(list.body, want) {
			t.Fatalf("the trials page lacks %q:\n%s", want, list.body)
		}
	}
	// a's row: 2 messages, 1 refusal (the fault's), 1 fault.
	row := list.body[strings.Index(list.body, `href="/trials/`+a.Namespace+`"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `<td class="n">2</td><td class="n">1</td><td class="n">1</td>`) {
		t.Fatalf("a's row: %s", row)
	}
	if csp := list.header.Get("Content-Security-Policy"); csp != console.ContentSecurityPolicy {
		t.Fatalf("trials page CSP %q", csp)
	}
	for q, want := range map[string]string{"?rcpt=BOB@example.com": b.Namespace, "?subject=sign-in": a.Namespace, "?ns=" + b.Namespace[2:]: b.Namespace} {
		other := a.Namespace
		if want == a.Namespace {
			other = b.Namespace
		}
		p := s.get(t, "/"+q, s.admin)
		if !strings.Contains(p.body, want) || strings.Contains(p.body, other) {
			t.Fatalf("filter %s: want only %s", q, want)
		}
	}

	page := s.get(t, "/trials/"+a.Namespace, s.admin)
	for _, want := range []string{"Your sign-in code", "482913", `<iframe sandbox title="HTML part of message 2" src="/trials/` + a.Namespace + `/messages/2/html"`,
		"Subject", "accepted", "writer-http", "send"} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("the trial's page lacks %q:\n%s", want, page.body)
		}
	}
	if strings.Contains(page.body, "<script>alert") {
		t.Fatal("the hostile HTML is inline in the console's own page")
	}
	if p := s.get(t, "/trials/"+b.Namespace, s.admin); !strings.Contains(p.body, "tried to send a message: refused (invalid envelope).") {
		t.Fatalf("the refused send is not on b's timeline:\n%s", p.body)
	}
	frame := s.get(t, "/trials/"+a.Namespace+"/messages/2/html", s.admin)
	if frame.status != http.StatusOK || !strings.Contains(frame.body, "<script>alert(1)</script>") {
		t.Fatalf("the frame's document: %d %q", frame.status, frame.body)
	}
	if csp := frame.header.Get("Content-Security-Policy"); csp != console.MailContentSecurityPolicy || !strings.HasPrefix(csp, "sandbox;") {
		t.Fatalf("the frame's CSP %q", csp)
	}
	if s.get(t, "/trials/"+a.Namespace+"/messages/1/html", s.admin).status != http.StatusNotFound {
		t.Fatal("a text-only message has an HTML document")
	}

	if err := s.plane.Admin.TrialClose(ctx, b.Namespace); err != nil {
		t.Fatal(err)
	}
	list = s.get(t, "/", s.admin)
	if !strings.Contains(list.body, `<tr class="closed`) || !strings.Contains(list.body, b.Namespace) {
		t.Fatalf("the closed trial is not listed as closed:\n%s", list.body)
	}
	closed := s.get(t, "/trials/"+b.Namespace, s.admin)
	if closed.status != http.StatusOK || !strings.Contains(closed.body, "close") || strings.Contains(closed.body, "Reset your password") {
		t.Fatalf("the closed trial's page: %d\n%s", closed.status, closed.body)
	}
	for _, p := range []answer{list, page, frame, closed} {
		noSecret(t, "a page", p.body, secrets)
	}
	for _, path := range []string{"/trials/nosuchtrial", "/live?trial=nosuchtrial", "/live?trial=trial-" + strings.Repeat("0", 32)} {
		if a := s.get(t, path, s.admin); a.status != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", path, a.status)
		}
	}
}

// A live stream sends an event when a message arrives in its trial.
func TestLive(t *testing.T) {
	s := startStack(t)
	id := s.plane.Trial(t, rpc.ProfileCandidate)
	page := s.get(t, "/trials/"+id.Namespace, s.admin)
	start := strings.Index(page.body, `data-live="`)
	if start < 0 {
		t.Fatalf("the page names no stream:\n%s", page.body)
	}
	live := strings.ReplaceAll(page.body[start+len(`data-live="`):], "&amp;", "&")
	live = live[:strings.IndexByte(live, '"')]
	req, _ := http.NewRequest(http.MethodGet, s.console.URL+live, nil)
	req.Header.Set("Authorization", "Bearer "+s.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s.send(t, id, email{To: []string{"u@example.com"}, Subject: "Live", Text: "now"})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended without an event")
			}
			if l == "data: changed" {
				return
			}
		case <-timeout:
			t.Fatal("no event within 30s of the send")
		}
	}
}

// /metrics parses as the Prometheus text format, and its counters move
// with a scripted trial: its sends by door and outcome, its reads, the
// trials opened.
func TestMetrics(t *testing.T) {
	s := startStack(t)
	before := s.metrics(t)
	id := s.plane.Trial(t, rpc.ProfileCandidate)
	for i := range 3 {
		if st := s.send(t, id, email{To: []string{"u@example.com"}, Subject: "n" + string(rune('0'+i)), Text: "x"}); st != http.StatusOK {
			t.Fatalf("send: %d", st)
		}
	}
	s.send(t, id, email{From: "intruder@example.com", To: []string{"u@example.com"}, Subject: "x", Text: "x"})
	if st := s.send(t, id, email{To: []string{"u@example.com"}}); st != http.StatusUnprocessableEntity && st != http.StatusBadRequest {
		t.Fatalf("a send without subject or body: %d", st) // the writer refuses it; the plane counts it refused
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gw := s.plane.Client(t, s.plane.Grant(t, rpc.RoleGateway))
	if _, err := gw.List(ctx, &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability}); err != nil {
		t.Fatal(err)
	}
	// Reads that wait for the next message, woken by its commit: a send
	// may come before its read waits, so rounds go on until one is woken.
	rounds := 0
	for seq := int64(3); value(s.metrics(t), "mailplane_wait_wakeup_seconds", nil) == 0 && rounds < 20; seq++ {
		rounds++
		waited := make(chan error, 1)
		go func() {
			_, err := gw.List(ctx, &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability, After: seq, WaitMillis: 8000})
			waited <- err
		}()
		if st := s.send(t, id, email{To: []string{"u@example.com"}, Subject: "wake", Text: "x"}); st != http.StatusOK {
			t.Fatalf("send: %d", st)
		}
		if err := <-waited; err != nil {
			t.Fatal(err)
		}
	}
	after := s.metrics(t)
	for _, c := range []struct {
		name   string
		labels map[string]string
		moved  float64
	}{
		{"mailplane_sends_total", map[string]string{"door": "writer-http", "outcome": "accepted"}, 3 + float64(rounds)},
		{"mailplane_sends_total", map[string]string{"door": "writer-http", "outcome": "refused"}, 2},
		{"mailplane_reads_total", map[string]string{"door": "gateway", "outcome": "accepted"}, 1 + float64(rounds)},
		{"mailplane_trials_opened_total", nil, 1},
	} {
		if d := value(after, c.name, c.labels) - value(before, c.name, c.labels); d != c.moved {
			t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, d, c.moved)
		}
	}
	if value(after, "mailplane_trials_open", nil) < 1 || value(after, "mailplane_store_up", nil) != 1 {
		t.Errorf("gauges: open %v, store up %v", value(after, "mailplane_trials_open", nil), value(after, "mailplane_store_up", nil))
	}
	if n := after["mailplane_call_seconds"]; n == nil || n.GetType() != dto.MetricType_HISTOGRAM {
		t.Error("no latency histogram")
	}
	if w := after["mailplane_wait_wakeup_seconds"]; w == nil || len(w.GetMetric()) != 1 || w.GetMetric()[0].GetHistogram().GetSampleCount() < 1 {
		t.Errorf("no waiting read's wake-up was timed in %d rounds: %v", rounds, w)
	}
}

func (s *stack) metrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	a := s.get(t, "/metrics", s.admin)
	if a.status != http.StatusOK {
		t.Fatalf("/metrics: %d %s", a.status, a.body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(a.body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, a.body)
	}
	return fams
}

// value is the value of the series of family name with labels (a
// counter's, a gauge's; a histogram's count), 0 if there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
				continue next
			}
		}
		if m.Counter != nil {
			return m.GetCounter().GetValue()
		}
		if m.Histogram != nil {
			return float64(m.GetHistogram().GetSampleCount())
		}
		return m.GetGauge().GetValue()
	}
	return 0
}

// mail-plane up starts the console beside the surfaces, on loopback, and
// prints its console_url; it shows up's trial to the admin grant only.
func TestUp(t *testing.T) {
	up := itest.StartUp(t, "--trials", "1")
	b := up.Bundle
	if !strings.HasPrefix(b.ConsoleURL, "http://127.0.0.1:") {
		t.Fatalf("console_url %q", b.ConsoleURL)
	}
	admin, err := rpc.ReadSecretFile(b.AdminGrantFile)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{console: &itest.Surface{URL: b.ConsoleURL}, admin: admin}
	if a := s.get(t, "/healthz", ""); a.status != http.StatusOK || a.body != "{\"status\":\"ok\"}\n" {
		t.Fatalf("/healthz: %d %q", a.status, a.body)
	}
	if a := s.get(t, "/", ""); a.status != http.StatusUnauthorized || strings.Contains(a.body, b.Namespace) {
		t.Fatalf("without the grant: %d", a.status)
	}
	if a := s.get(t, "/", b.ReadCapability); a.status != http.StatusUnauthorized {
		t.Fatalf("with the evaluator's capability: %d", a.status)
	}
	if a := s.get(t, "/", admin); a.status != http.StatusOK || !strings.Contains(a.body, b.Namespace) {
		t.Fatalf("with the admin grant: %d", a.status)
	}
}

// The sign-in form returns to the console's own pages only.
func TestSafeNext(t *testing.T) {
	s := startStack(t)
	for next, want := range map[string]string{
		"/": "/", "/?ns=abc&page=2": "/?ns=abc&page=2", "/trials/trial-" + strings.Repeat("0", 32): "/trials/trial-" + strings.Repeat("0", 32),
		"//evil.example/": "/", "https://evil.example/": "/", "/https://site.example/verify?token=x": "/", "/login": "/",
		"/trials/../metrics": "/", "/\\evil.example": "/",
	} {
		req, _ := http.NewRequest(http.MethodPost, s.console.URL+"/login", strings.NewReader(url.Values{"grant": {s.admin}, "next": {next}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.console.URL)
		a := do(t, req)
		loc := a.header.Get("Location")
		if len(loc) > len("/s/")+43 && strings.HasPrefix(loc, "/s/") {
			loc = loc[len("/s/")+43:]
		}
		if a.status != http.StatusSeeOther || loc != want {
			t.Errorf("next %q: %d to %q, want %q", next, a.status, a.header.Get("Location"), want)
		}
	}
}

// A trial's page, from a real run: its mail newest first, each with the
// sender's display name; its trail newest first, each event a sentence
// (the agent's open of a message that does not exist reads "The agent
// tried to open message 7: not found", never "open accepted not_found").
func TestTrialPage(t *testing.T) {
	s := startStack(t)
	id := s.plane.Trial(t, rpc.ProfileCandidate)
	for _, subject := range []string{"First", "Second", "Third"} {
		if st := s.send(t, id, email{From: "Acme Support <" + rpc.CandidateSender + ">", To: []string{"ann@example.com"}, Subject: subject, Text: subject}); st != http.StatusOK {
			t.Fatalf("send %s: %d", subject, st)
		}
	}
	if st := s.send(t, id, email{From: "intruder@example.com", To: []string{"ann@example.com"}, Subject: "x", Text: "x"}); st < 400 {
		t.Fatalf("a send from another sender: %d", st)
	}
	if st := s.send(t, id, email{From: `"ceo@bank.example" <` + rpc.CandidateSender + ">", To: []string{"ann@example.com"}, Subject: "Fourth", Text: "x"}); st != http.StatusOK {
		t.Fatalf("send with an address for a name: %d", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agent := s.plane.Client(t, s.plane.Grant(t, rpc.RoleInbox))
	if _, err := agent.Get(ctx, &rpc.ReadRequest{Namespace: id.Namespace, InboxToken: id.InboxToken, ID: 7}); rpc.CodeOf(err) != rpc.CodeNotFound {
		t.Fatalf("the agent's open of message 7: %v", err)
	}
	if _, err := agent.Get(ctx, &rpc.ReadRequest{Namespace: id.Namespace, InboxToken: id.InboxToken, ID: 2}); err != nil {
		t.Fatal(err)
	}
	gw := s.plane.Client(t, s.plane.Grant(t, rpc.RoleGateway))
	if _, err := gw.List(ctx, &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability}); err != nil {
		t.Fatal(err)
	}

	page := s.get(t, "/trials/"+id.Namespace, s.admin)
	if page.status != http.StatusOK {
		t.Fatalf("the trial's page: %d", page.status)
	}
	at := func(what string) int {
		t.Helper()
		i := strings.Index(page.body, what)
		if i < 0 {
			t.Fatalf("the trial's page lacks %q:\n%s", what, page.body)
		}
		return i
	}
	if !(at(`id="m4"`) < at(`id="m3"`) && at(`id="m3"`) < at(`id="m2"`) && at(`id="m2"`) < at(`id="m1"`)) {
		t.Error("the mail is not newest first")
	}
	if n := strings.Count(page.body, `<b class="sender">Acme Support &lt;`+rpc.CandidateSender+`&gt;</b>`); n != 3 {
		t.Errorf("the display name is shown on %d messages of 3", n)
	}
	if !strings.Contains(page.body, `<b class="sender">`+rpc.CandidateSender+` (name: &#34;ceo@bank.example&#34;)</b>`) {
		t.Error("a display name shaped like an address is not shown after the real address")
	}
	sentences := []string{
		"The evaluator listed the mail: messages 1, 2, 3, 4.",
		"The agent opened message 2.",
		"The agent tried to open message 7: not found.",
		"The candidate&#39;s site sent message 4 to ann@example.com.",
		"The candidate&#39;s site tried to send a message: refused (invalid envelope).",
		"The candidate&#39;s site sent message 3 to ann@example.com.",
		"The candidate&#39;s site sent message 1 to ann@example.com.",
		"The trial was opened.",
	}
	for i := 1; i < len(sentences); i++ {
		if at(sentences[i-1]) > at(sentences[i]) {
			t.Errorf("the trail is not newest first: %q after %q", sentences[i-1], sentences[i])
		}
	}
	for _, raw := range []string{"open accepted not_found", "<b>open</b>", "not_found</code>"} {
		if strings.Contains(page.body, raw) {
			t.Errorf("the trail shows %q", raw)
		}
	}
}

// A page's live stream that ends because the browser left, as it does
// whenever a page closes or moves on, logs nothing at INFO or above, in
// the console or the plane (their real output, read as JSON lines).
func TestLiveQuiet(t *testing.T) {
	s := startStack(t)
	id := s.plane.Trial(t, rpc.ProfileCandidate)
	cut := func() int {
		return len(logLines(s.plane.Output(), func(m map[string]any) bool {
			return m["method"] == "console.wait" && m["code"] == rpc.CodeDeadlineExceeded
		}))
	}
	// Streams that the browser leaves while their plane call waits: the
	// call starts half a second (minGap) after the stream's first answer,
	// so each leaves once the plane counts it parked, until the plane has
	// logged three waits cut short (it logs a call as it ends).
	deadline := time.Now().Add(60 * time.Second)
	for cut() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the plane logged %d waits cut short in 60s:\n%s", cut(), s.plane.Output())
		}
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.console.URL+"/live?trial="+id.Namespace+"&v=999999", nil)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the stream: %d %v", resp.StatusCode, err)
		}
		before := cut()
		s.plane.WaitParked(t, "trail", 1) // its plane call waits
		cancel()
		resp.Body.Close()
		// Its cut call is logged soon; a stream left before its call
		// began leaves no line, and the loop makes another.
		for end := time.Now().Add(5 * time.Second); cut() == before && time.Now().Before(end); {
			time.Sleep(50 * time.Millisecond)
		}
	}
	for name, out := range map[string]string{"mail-plane": s.plane.Output(), "mail-console": s.console.Output()} {
		loud := logLines(out, func(m map[string]any) bool {
			return m["level"] != "debug" && m["message"] != "console listening" && m["message"] != "plane listening" && m["message"] != "trial created"
		})
		if len(loud) > 0 {
			t.Errorf("%s logged at INFO or above:\n%s", name, strings.Join(loud, "\n"))
		}
	}
}

// logLines are the JSON lines of a process's output that match.
func logLines(out string, match func(map[string]any) bool) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && match(m) {
			lines = append(lines, l)
		}
	}
	return lines
}
