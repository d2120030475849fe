package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
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
	s.send(t, id, email{To: []string{"ann@example.com"}, Subject: "Your sign-in code",
		HTML: `<h1 id=greeting>Welcome, Ann</h1><p>Your verification code is <b>482913</b>.</p>`})
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
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}

	// Without the grant: the sign-in form, and no trial.
	do("open the console", chromedp.Navigate(s.console.URL+"/trials/"+id.Namespace), chromedp.WaitVisible(chromedp.ID("grant")))
	if body := eval(`document.body.innerText`); strings.Contains(body, "Welcome") || strings.Contains(body, "writer-http") || strings.Contains(body, id.Namespace) {
		t.Fatalf("the sign-in page shows trial data: %q", body)
	}
	do("sign in", chromedp.SendKeys(chromedp.ID("grant"), s.admin), chromedp.Submit(chromedp.ID("grant")),
		chromedp.WaitVisible(chromedp.CSS(".timeline")))
	if c := eval(`document.cookie`); c != "" {
		t.Fatalf("the session cookie is readable by script: %q", c)
	}
	do("the trials page", chromedp.Navigate(s.console.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`a[href="/trials/`+id.Namespace+`"]`)))
	do("open the trial", chromedp.Click(chromedp.CSS(`a[href="/trials/`+id.Namespace+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#m2 iframe")))

	// The mail: its code and its timeline in the page, its HTML in a
	// sandboxed frame with no permission at all.
	if text := eval(`document.querySelector("main").innerText`); !strings.Contains(text, "482913") || !strings.Contains(text, "writer-http") {
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
	frames := waitFrames(t, ctx, 2)
	greeting := inFrame(t, ctx, frames, "/messages/1/html", `document.getElementById("greeting") ? document.getElementById("greeting").textContent : ""`)
	if greeting != "Welcome, Ann" {
		t.Fatalf("the mail's HTML did not render in its frame: %q", greeting)
	}
	if ran := inFrame(t, ctx, frames, "/messages/2/html", `(document.getElementById("hostile") ? "rendered" : "absent") + "/" + (document.body.dataset.ran || "no script")`); ran != "rendered/no script" {
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
	refused := false
	problems := br.Log()
	for _, p := range problems {
		if strings.Contains(p, far.URL+"/pixel") && strings.Contains(p, "Content Security Policy") {
			refused = true
		}
	}
	if !refused {
		t.Fatalf("the browser did not report the frame's CSP refusing the pixel; it reported:\n%s", strings.Join(problems, "\n"))
	}
}

// waitFrames waits until the page has n child frames, and returns them.
func waitFrames(t *testing.T, ctx context.Context, n int) []*page.FrameTree {
	t.Helper()
	var kids []*page.FrameTree
	waitFor(t, fmt.Sprintf("%d frames", n), 30*time.Second, func() bool {
		tree, err := chromedp.Call(ctx, page.GetFrameTree, cdp.Empty{})
		if err != nil || tree.FrameTree == nil {
			return false
		}
		kids = tree.FrameTree.ChildFrames
		return len(kids) >= n
	})
	return kids
}

// inFrame evaluates expr in an isolated world of the frame whose URL ends
// with suffix: it shares the frame's document, not its (absent) scripts.
func inFrame(t *testing.T, ctx context.Context, frames []*page.FrameTree, suffix, expr string) string {
	t.Helper()
	for _, f := range frames {
		if !strings.HasSuffix(f.Frame.URL, suffix) {
			continue
		}
		var out string
		waitFor(t, "the frame's document", 30*time.Second, func() bool {
			world, err := chromedp.Call(ctx, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: f.Frame.ID})
			if err != nil {
				return false
			}
			yes := true
			res, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{Expression: expr, ContextID: world.ExecutionContextID, ReturnByValue: &yes})
			if err != nil || res.Result == nil {
				return false
			}
			out = strings.Trim(string(res.Result.Value), `"`)
			return out != "" && !strings.HasPrefix(out, "absent")
		})
		return out
	}
	t.Fatalf("no frame ends with %s", suffix)
	return ""
}
