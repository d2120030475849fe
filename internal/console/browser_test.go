package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// remote stands for anything a hostile mail may try to load: a real HTTP
// server on loopback that records every request.
type remote struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRemote(t *testing.T) *remote {
	r := &remote{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.URL.Path)
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *remote) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// An operator's browser signs in with the admin grant through the form,
// opens a trial from the trials page and sees its mail (the HTML part
// rendered in a sandboxed frame, the text, the code) and its timeline; a
// message sent while the page is open appears without a reload. A hostile
// HTML mail runs no script and loads nothing remote: the frame has the
// sandbox attribute with no permission, its document's CSP refuses the
// loads (the browser reports it), and the remote server sees nothing. The
// page is legible in light and dark mode; a screenshot of the trial is
// saved in the test's artifacts.
func TestBrowser(t *testing.T) {
	s := startStack(t)
	id := s.plane.Trial(t, rpc.ProfileCandidate)
	far := newRemote(t)
	s.send(t, id, email{From: "Acme <" + rpc.CandidateSender + ">", To: []string{"ann@example.com"}, Subject: "Your sign-in code",
		HTML: `<h1 id=greeting>Welcome, Ann</h1><p>Your verification code is <b>482913</b>.</p>`})
	s.send(t, id, email{From: "intruder@example.com", To: []string{"ann@example.com"}, Subject: "x", Text: "x"})
	s.send(t, id, email{To: []string{"ann@example.com"}, Subject: "Hostile", HTML: `<p id=hostile>look</p>` +
		`<script>document.body.dataset.ran="1";alert(1);fetch("` + far.URL + `/fetch")</script>` +
		`<img src="` + far.URL + `/pixel"><link rel=stylesheet href="` + far.URL + `/css"><script src="` + far.URL + `/js"></script>` +
		`<iframe src="` + far.URL + `/frame"></iframe><div style="background:url(` + far.URL + `/bg)">x</div>` +
		`<a href="javascript:alert(2)" id=jslink>x</a><form action="` + far.URL + `/form"><button id=go>go</button></form>`})

	br := itest.StartBrowser(t, 120*time.Second,
		chromedp.WindowSize(1280, 1400),
		// Keep the sandboxed frame in the page's process, where the test's
		// DevTools session can look inside it.
		chromedp.Flag("disable-features", "IsolateSandboxedIframes"),
	)
	ctx := br.Ctx
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) { t.Helper(); br.Do(t, what, steps...) }
	eval := func(expr string) string { t.Helper(); return br.Eval(t, expr) }

	// Without the grant: the sign-in form, and no trial.
	do("open the console", chromedp.Navigate(s.console.URL+"/trials/"+id.Namespace), chromedp.WaitVisible(chromedp.ID("grant")))
	if body := eval(`document.body.innerText`); strings.Contains(body, "Welcome") || strings.Contains(body, "writer-http") || strings.Contains(body, id.Namespace) {
		t.Fatalf("the sign-in page shows trial data: %q", body)
	}
	do("sign in", chromedp.SendKeys(chromedp.ID("grant"), s.admin), chromedp.Submit(chromedp.ID("grant")),
		chromedp.WaitVisible(chromedp.CSS(".timeline")))
	base := sessionBase(t, eval(`location.pathname`))
	do("the trials page", chromedp.Click(chromedp.CSS("a.brand")), chromedp.WaitVisible(chromedp.CSS(`a[href="`+base+`/trials/`+id.Namespace+`"]`)))
	do("open the trial", chromedp.Click(chromedp.CSS(`a[href="`+base+`/trials/`+id.Namespace+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#m2 iframe")))

	// The mail: its code and its timeline in the page, its HTML in a
	// sandboxed frame with no permission at all.
	if text := eval(`document.querySelector("main").innerText`); !strings.Contains(text, "482913") || !strings.Contains(text, "writer-http") ||
		!strings.Contains(text, "from Acme <"+rpc.CandidateSender+">") || !strings.Contains(text, "The candidate's site tried to send a message: refused (invalid envelope).") {
		t.Fatalf("the trial's page shows %q", text)
	}
	if n := eval(`String(document.querySelectorAll(".timeline li").length)`); n == "0" {
		t.Fatal("the timeline is empty")
	}
	for _, m := range []string{"#m1", "#m2"} {
		if v := eval(`(f => f.hasAttribute("sandbox") + "/" + f.sandbox.length)(document.querySelector("` + m + ` iframe"))`); v != "true/0" {
			t.Fatalf("%s's frame: sandbox %s", m, v)
		}
	}
	greeting := inFrame(t, br, "/"+id.Namespace+"/1/", `document.getElementById("greeting") ? document.getElementById("greeting").textContent : ""`)
	if greeting != "Welcome, Ann" {
		t.Fatalf("the mail's HTML did not render in its frame: %q", greeting)
	}
	if ran := inFrame(t, br, "/"+id.Namespace+"/2/", `(document.getElementById("hostile") ? "rendered" : "absent") + "/" + (document.body.dataset.ran || "no script")`); ran != "rendered/no script" {
		t.Fatalf("the hostile mail's frame: %q", ran)
	}

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.ArtifactDir(), "console-trial.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the trial's page: %s", path)

	// A message sent while the page is open appears without a reload.
	eval(`window.notReloaded = "yes"; "ok"`)
	s.send(t, id, email{To: []string{"ann@example.com"}, Subject: "Arrived live", Text: "fresh code 771204"})
	do("the live message", chromedp.WaitVisible(chromedp.ID("m3")))
	if v := eval(`window.notReloaded + "/" + document.querySelector("#m3").innerText.includes("771204")`); v != "yes/true" {
		t.Fatalf("the live message: %q", v)
	}

	// Light and dark.
	light := eval(`getComputedStyle(document.body).backgroundColor`)
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	if dark := eval(`getComputedStyle(document.body).backgroundColor`); light != "rgb(246, 247, 249)" || dark != "rgb(13, 17, 23)" {
		t.Fatalf("background light %q, dark %q", light, dark)
	}

	do("linger", chromedp.Sleep(300*time.Millisecond))
	if seen := far.requests(); len(seen) > 0 {
		t.Fatalf("the hostile mail loaded %v from a remote server", seen)
	}
	if dialogs := br.Dialogs(); len(dialogs) > 0 {
		t.Fatalf("script ran: dialogs %q", dialogs)
	}
	// The browser reports the refusal in its own time.
	refusal := func() bool {
		return slices.ContainsFunc(br.Log(), func(p string) bool {
			return strings.Contains(p, far.URL+"/pixel") && strings.Contains(p, "Content Security Policy")
		})
	}
	for deadline := time.Now().Add(itest.Bound); !refusal(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the browser did not report the frame's CSP refusing the pixel; it reported:\n%s", strings.Join(br.Log(), "\n"))
		}
	}
}

// inFrame evaluates expr in an isolated world of the page's frame whose
// URL holds part, once it has one and expr finds what it looks for (a
// value that is not "" and not "absent…").
func inFrame(t *testing.T, br *itest.Browser, part, expr string) string {
	t.Helper()
	var out string
	itest.Eventually(t, "a frame from "+part, itest.Bound, func() bool {
		frame := br.Frame(t, "from "+part, func(url string) bool { return strings.Contains(url, part) })
		v, ok := br.EvalIn(frame, expr)
		out = v
		return ok && v != "" && !strings.HasPrefix(v, "absent")
	})
	return out
}

// sessionBase is the session's base path, /s/<capability>, of a page's
// path in it.
func sessionBase(t *testing.T, path string) string {
	t.Helper()
	if len(path) < len("/s/")+43 || !strings.HasPrefix(path, "/s/") {
		t.Fatalf("signed in, the browser is at %q, not in a session", path)
	}
	return path[:len("/s/")+43]
}

// site is a candidate's web site on another port of 127.0.0.1, the same
// site to a browser as the console: it serves the pages it is given and
// records every request it receives, with every header.
type site struct {
	*httptest.Server
	mu    sync.Mutex
	pages map[string]string
	seen  []*http.Request
}

func newSite(t *testing.T) *site {
	s := &site{pages: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, req.Clone(context.Background()))
		body, ok := s.pages[req.URL.Path]
		s.mu.Unlock()
		if ok {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(body))
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) serve(path, body string) {
	s.mu.Lock()
	s.pages[path] = body
	s.mu.Unlock()
}

func (s *site) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

func (s *site) saw(path string) bool {
	return slices.ContainsFunc(s.requests(), func(r *http.Request) bool { return r.URL.Path == path })
}

// After the operator signs in and browses the console in Chromium, the
// same browser opens a candidate's pages on another port of 127.0.0.1,
// and clicks a link in a mail (whose document and link ask for the full
// URL as Referer). That site receives no console credential: no cookie,
// no capability in any header, URL or Referer, in the requests its pages
// make back to it too. The console sets no cookie (every response header
// Chromium received is checked, and its cookie jar is empty). A form the
// candidate's page posts to the console, signing out with the capability
// (as if it had leaked) or signing in, is refused, and the session still
// works.
func TestBrowserOtherPort(t *testing.T) {
	s := startStack(t)
	id := s.plane.Trial(t, rpc.ProfileCandidate)
	cand := newSite(t)
	s.send(t, id, email{To: []string{"ann@example.com"}, Subject: "Visit us",
		HTML: `<meta name="referrer" content="unsafe-url"><p><a id=out href="` + cand.URL + `/from-mail" referrerpolicy="unsafe-url">our site</a></p>`})

	br := itest.StartBrowser(t, 120*time.Second, chromedp.WindowSize(1280, 1400), chromedp.Flag("disable-features", "IsolateSandboxedIframes"))
	ctx := br.Ctx
	var mu sync.Mutex
	var responses int
	var setCookie []string
	headers := chromedp.Events(ctx, network.ResponseReceivedExtraInfo)
	go func() {
		for ev, err := range headers {
			if err != nil {
				return
			}
			mu.Lock()
			responses++
			for k, v := range ev.Headers {
				if strings.EqualFold(k, "Set-Cookie") {
					setCookie = append(setCookie, fmt.Sprint(v))
				}
			}
			mu.Unlock()
		}
	}()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) { t.Helper(); br.Do(t, what, steps...) }
	eval := func(expr string) string { t.Helper(); return br.Eval(t, expr) }

	do("sign in", chromedp.Navigate(s.console.URL+"/"), chromedp.WaitVisible(chromedp.ID("grant")),
		chromedp.SendKeys(chromedp.ID("grant"), s.admin), chromedp.Submit(chromedp.ID("grant")),
		chromedp.WaitVisible(chromedp.CSS("table.trials")))
	base := sessionBase(t, eval(`location.pathname`))
	capability := strings.TrimPrefix(base, "/s/")
	do("open the trial", chromedp.Click(chromedp.CSS(`a[href="`+base+`/trials/`+id.Namespace+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#m1 iframe")))
	// The operator clicks the link, a real click at its place in the
	// frame: the console's frame-src keeps the frame on the console.
	link := inFrame(t, br, "/"+id.Namespace+"/1/",
		`(a => a ? (r => r.left + r.width / 2 + " " + (r.top + r.height / 2))(a.getBoundingClientRect()) : "")(document.getElementById("out"))`)
	frame := eval(`(f => (f.getBoundingClientRect().left + f.clientLeft) + " " + (f.getBoundingClientRect().top + f.clientTop))(document.querySelector("#m1 iframe"))`)
	var lx, ly, fx, fy float64
	if _, err := fmt.Sscan(link+" "+frame, &lx, &ly, &fx, &fy); err != nil {
		t.Fatalf("the link at %q in the frame at %q: %v", link, frame, err)
	}
	do("click the mail's link", chromedp.MouseClickXY(fx+lx, fy+ly))
	itest.Eventually(t, "the console's CSP keeps the framed link on the console", itest.Bound, func() bool {
		return slices.ContainsFunc(br.Log(), func(l string) bool { return strings.Contains(l, "frame-src") && strings.Contains(l, cand.URL) })
	})
	// The frame's document opened as a page of its own (as "Open frame in
	// new tab" does): there the link leaves, with the Referer it asks for.
	src := eval(`document.querySelector("#m1 iframe").src`)
	do("open the frame's document", chromedp.Navigate(src), chromedp.WaitVisible(chromedp.ID("out")), chromedp.Click(chromedp.ID("out")))
	itest.Eventually(t, "the mail's link, clicked, reaches the candidate's site", itest.Bound, func() bool { return cand.saw("/from-mail") })

	// The candidate's page, loading from its own origin and asking the
	// console for a page with whatever credentials the browser holds.
	cand.serve("/", `<!doctype html><title>candidate</title><link rel=stylesheet href="/css"><img src="/img"><iframe src="/frame"></iframe>
<script>fetch("/fetch", {credentials: "include"}); navigator.sendBeacon("/beacon", "x");
fetch("`+s.console.URL+`/", {credentials: "include", mode: "no-cors"}).catch(() => {}).finally(() => fetch("/done"));</script>`)
	do("the candidate's page", chromedp.Navigate(cand.URL+"/"))
	for _, p := range []string{"/css", "/img", "/frame", "/fetch", "/beacon", "/done"} {
		itest.Eventually(t, "the candidate's page asks its site for "+p, itest.Bound, func() bool { return cand.saw(p) })
	}

	// Cross-site forms to the console: sign out (with the capability, as
	// if it had leaked), sign in.
	cand.serve("/signout", `<!doctype html><form id=f method=post action="`+s.console.URL+base+`/logout"></form><script>f.submit()</script>`)
	cand.serve("/signin", `<!doctype html><form id=f method=post action="`+s.console.URL+`/login"><input name=grant value="`+s.admin+`"><input name=next value="/"></form><script>f.submit()</script>`)
	for _, p := range []string{"/signout", "/signin"} {
		do("post "+p+" from the candidate's page", chromedp.Navigate(cand.URL+p))
		itest.Eventually(t, p+" answered by the console", itest.Bound, func() bool {
			v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.origin + " " + document.title`))
			return err == nil && strings.HasPrefix(v, s.console.URL+" ")
		})
		if v := eval(`document.title + " / " + document.body.innerText`); !strings.HasPrefix(v, "Forbidden") || !strings.Contains(v, "another site") {
			t.Fatalf("%s from another port: %q", p, v)
		}
	}
	do("the session still works", chromedp.Navigate(s.console.URL+base+"/"), chromedp.WaitVisible(chromedp.CSS(`a[href="`+base+`/trials/`+id.Namespace+`"]`)))

	reqs := cand.requests()
	for _, r := range reqs {
		if len(r.Header.Values("Cookie")) > 0 {
			t.Errorf("the candidate's site received a cookie on %s: %q", r.URL.Path, r.Header.Values("Cookie"))
		}
		seen := r.URL.String()
		for k, vs := range r.Header {
			seen += "\n" + k + ": " + strings.Join(vs, ", ")
		}
		if strings.Contains(seen, capability) || strings.Contains(seen, "/s/") || strings.Contains(seen, s.admin) {
			t.Errorf("the candidate's site received the console's credential on %s:\n%s", r.URL.Path, seen)
		}
		if r.URL.Path == "/from-mail" {
			t.Logf("the click in the mail came with Referer %q", r.Header.Get("Referer"))
		}
	}
	cookies, err := chromedp.Call(ctx, storage.GetCookies, storage.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(setCookie) > 0 || len(cookies.Cookies) > 0 {
		t.Fatalf("a cookie was set: %q; the browser holds %d", setCookie, len(cookies.Cookies))
	}
	if responses < 10 || len(reqs) < 10 {
		t.Fatalf("only %d responses seen, %d requests at the candidate's site", responses, len(reqs))
	}
	t.Logf("%d requests at the candidate's site, %d responses checked for Set-Cookie", len(reqs), responses)
}
