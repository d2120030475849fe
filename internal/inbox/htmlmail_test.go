package inbox_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// logoPNG is a 48×48 square, the sign-up mail's inline logo.
func logoPNG(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 48, 48))
	for x := range 48 {
		for y := range 48 {
			img.Set(x, y, color.RGBA{R: 0x0b, G: 0x62, B: 0xd0, A: 0xff})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// signUpMail is a sign-up mail as a real service sends one: a display
// name, a text part and an HTML part in a styled table layout with its
// logo inline (cid:), a big bold code, a "Confirm my account" button, a
// remote tracking image and background, a script and a form.
func signUpMail(t *testing.T, confirm, far string) string {
	html := `<!doctype html><html><head><title>Acme</title><style>
.card{background:#ffffff;border-radius:8px;font-family:Helvetica,Arial,sans-serif;color:#1b1f24}
.code{font-size:36px;font-weight:700;letter-spacing:8px;color:#111}
.btn{background:#16a34a;color:#ffffff;padding:14px 28px;border-radius:6px;text-decoration:none;font-weight:600;display:inline-block}
.hero{background:url(` + far + `/bg.png)}
</style></head><body style="background:#eef1f5;margin:0">
<script>document.title="script ran";fetch("` + far + `/script")</script>
<table role=presentation width="100%" cellpadding=0 cellspacing=0 style="background:#eef1f5;padding:24px 0"><tr><td align=center>
<table role=presentation class=card width=560 cellpadding=24 cellspacing=0>
<tr><td class=hero><img id=logo src="cid:logo@acme.example" width=48 height=48 alt="Acme"> <span style="font-size:22px;font-weight:700;vertical-align:top">Acme</span></td></tr>
<tr><td><h1 style="font-size:22px;margin:0 0 12px">Welcome to Acme!</h1>
<p>Thanks for signing up. Your verification code is:</p>
<p id=code class=code>482913</p>
<p>Or confirm your address with one click:</p>
<p><a id=confirm class=btn href="` + confirm + `">Confirm my account</a></p>
<form action="` + far + `/form" method=post><input name=email value="x"><button id=subscribe>Subscribe to news</button></form>
<p style="color:#57606a;font-size:12px">If you did not sign up, ignore this mail. <a id=privacy href="` + confirm[:strings.Index(confirm, "/confirm")] + `/privacy">Privacy</a></p>
<img id=pixel src="` + far + `/pixel.gif" width=1 height=1 alt="">
</td></tr></table></td></tr></table></body></html>`
	text := "Welcome to Acme!\r\n\r\nYour verification code is: 482913\r\n\r\nConfirm your account: " + confirm + "\r\n"
	logo := base64.StdEncoding.EncodeToString(logoPNG(t))
	return "From: Acme <no-reply@candidate.websitebench.local>\r\nSubject: Confirm your Acme account\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/related; boundary=rel\r\n\r\n" +
		"--rel\r\nContent-Type: multipart/alternative; boundary=alt\r\n\r\n" +
		"--alt\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + text + "\r\n" +
		"--alt\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + html + "\r\n--alt--\r\n" +
		"--rel\r\nContent-Type: image/png\r\nContent-ID: <logo@acme.example>\r\nContent-Disposition: inline; filename=logo.png\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\n" + logo + "\r\n--rel--\r\n"
}

// An agent's browser reads a realistic HTML sign-up mail as a person
// would: the inbox lists newest first with times and unread marks; the
// message shows its HTML as sent (the code big and bold, the button, the
// inline logo) in a sandboxed frame where no script runs, no form posts
// and nothing remote loads; clicking the button leads the top window to
// the site and is recorded as a click; the text is one click away.
func TestBrowserHTMLMail(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	in := startInbox(t, plane, id)
	web, far := newSite(t), newSite(t) // the site the mail links to; anything remote it tries to load
	w := plane.Client(t, id.WriterGrant)
	confirm := web.URL + "/confirm?t=abc&u=1"
	for i := 1; i <= 12; i++ {
		send(t, w, []string{"agent@example.com"}, textMail(fmt.Sprintf("Older message %d", i), "hello\r\n"))
	}
	send(t, w, []string{"agent@example.com"}, signUpMail(t, confirm, far.URL))

	br := itest.StartBrowser(t, 120*time.Second, chromedp.WindowSize(1000, 900),
		// Keep the sandboxed frame in the page's process, where the test's
		// DevTools session can look inside it.
		chromedp.Flag("disable-features", "IsolateSandboxedIframes"))
	ctx := br.Ctx
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) { t.Helper(); br.Do(t, what, steps...) }
	eval := func(expr string) string { t.Helper(); return br.Eval(t, expr) }
	inbox := in.URL + "/inbox/" + in.Token

	// The list: newest first, each with its time, sender and unread mark.
	do("open the inbox", chromedp.Navigate(inbox), chromedp.WaitVisible(chromedp.ID("message-13")))
	order := eval(`[...document.querySelectorAll("article")].map(a => a.id).join(",")`)
	if !strings.HasPrefix(order, "message-13,message-12,") || !strings.HasSuffix(order, ",message-1") {
		t.Fatalf("the inbox lists %s, want newest first", order)
	}
	first := eval(`document.querySelector("article").innerText`)
	if !strings.Contains(first, "Unread") || !strings.Contains(first, "Confirm your Acme account") ||
		!strings.Contains(first, "From Acme <no-reply@candidate.websitebench.local>") || !strings.Contains(first, " UTC") {
		t.Fatalf("the newest message shows as %q", first)
	}
	var times []string
	if err := json.Unmarshal([]byte(eval(`JSON.stringify([...document.querySelectorAll("article time")].map(t => t.dateTime))`)), &times); err != nil || len(times) != 13 {
		t.Fatalf("times %v %v", times, err)
	}
	for i, s := range times {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil || time.Since(tm) > 10*time.Minute || (i > 0 && s > times[i-1]) {
			t.Fatalf("time %d is %q: not a recent time in newest-first order (%v)", i, s, times)
		}
	}
	if n := eval(`String(document.querySelectorAll("article.unread").length)`); n != "13" {
		t.Fatalf("%s unread, want 13", n)
	}

	// The message: its HTML as sent, in a sandboxed frame.
	do("open the message", chromedp.Click(chromedp.CSS(`a[href$="/messages/13"]`)), chromedp.WaitVisible(chromedp.ID("message-html")))
	if v := eval(`(f => f.getAttribute("sandbox"))(document.getElementById("message-html"))`); v != "allow-top-navigation-by-user-activation" {
		t.Fatalf("the frame's sandbox is %q", v)
	}
	frame := br.Frame(t, "/messages/13/html", func(url string) bool { return strings.HasSuffix(url, "/messages/13/html") })
	inFrame := func(expr string) string { t.Helper(); return evalIn(t, br, frame, expr) }
	if got := inFrame(`document.getElementById("code").textContent + "/" + getComputedStyle(document.getElementById("code")).fontWeight + "/" + parseFloat(getComputedStyle(document.getElementById("code")).fontSize)`); got != "482913/700/36" {
		t.Fatalf("the code shows as %q, want 482913, bold, 36px", got)
	}
	if got := inFrame(`(b => b.textContent + "/" + getComputedStyle(b).backgroundColor + "/" + b.target)(document.getElementById("confirm"))`); got != "Confirm my account/rgb(22, 163, 74)/_top" {
		t.Fatalf("the button shows as %q", got)
	}
	if got := inFrame(`(i => i.complete + "/" + i.naturalWidth + "/" + i.src.slice(0, 22))(document.getElementById("logo"))`); got != "true/48/data:image/png;base64," {
		t.Fatalf("the inline logo: %q", got)
	}
	if got := inFrame(`document.scripts.length + "/" + document.forms.length + "/" + document.querySelectorAll("input,button,iframe,link").length + "/" + document.getElementById("pixel").hasAttribute("src")`); got != "0/0/0/false" {
		t.Fatalf("scripts/forms/controls/pixel src: %q", got)
	}
	// A link only the HTML has pings too, after the text's one link.
	privacyPing := inFrame(`document.getElementById("privacy").getAttribute("ping")`)
	if !strings.HasSuffix(privacyPing, "/messages/13/ping/1") {
		t.Fatalf("the HTML-only link pings %q", privacyPing)
	}
	if title := eval(`document.title`); title != "Message" {
		t.Fatalf("the page's title is %q", title)
	}

	screenshot(t, ctx, "inbox-message.png")

	// Click the button as a person does (a real mouse event, so that the
	// frame may lead the top window): the site opens, the click is pinged.
	var box struct{ X, Y float64 }
	rect := eval(`JSON.stringify(document.getElementById("message-html").getBoundingClientRect())`)
	inner := inFrame(`JSON.stringify(document.getElementById("confirm").getBoundingClientRect())`)
	var fr, bt struct{ Left, Top, Width, Height float64 }
	if json.Unmarshal([]byte(rect), &fr) != nil || json.Unmarshal([]byte(inner), &bt) != nil || bt.Width == 0 {
		t.Fatalf("the frame at %s, the button at %s", rect, inner)
	}
	// The frame's border is 1px.
	box.X, box.Y = fr.Left+1+bt.Left+bt.Width/2, fr.Top+1+bt.Top+bt.Height/2
	do("click the button", chromedp.MouseClickXY(box.X, box.Y), chromedp.WaitVisible(chromedp.ID("confirmed")))
	if location, _ := chromedp.Run(ctx, chromedp.Location()); location != confirm {
		t.Fatalf("the button led the top window to %q, want %q", location, confirm)
	}
	for _, r := range web.seen() {
		if r.URL.Path == "/confirm" && r.Header.Get("Referer") != "" {
			t.Fatalf("the site saw a Referer %q", r.Header.Get("Referer"))
		}
	}
	gw := plane.Client(t, plane.GatewayGrant(t))
	waitEvent(t, gw, id, func(e map[string]any) bool {
		return e["action"] == "click" && e["outcome"] == "accepted" && e["host"] == "127.0.0.1" && fmt.Sprint(e["message_ids"]) == "[13]"
	})

	// The HTML-only link's ping, as the browser would send it, is a click
	// on the plane's record, its host read from the stored HTML.
	req, _ := http.NewRequest("POST", in.URL+privacyPing, strings.NewReader("PING"))
	req.Header.Set("Content-Type", "text/ping")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("the HTML-only link's ping: %d", resp.StatusCode)
	}
	waitEvent(t, gw, id, func(e map[string]any) bool {
		return e["action"] == "click" && e["outcome"] == "accepted" && e["host"] == "127.0.0.1" && e["link"] == float64(1)
	})

	// Nothing the mail tried to load or run reached anything.
	if got := far.seen(); len(got) != 0 {
		t.Fatalf("the remote host got %d requests, first %s", len(got), got[0].URL)
	}
	if dialogs := br.Dialogs(); len(dialogs) > 0 {
		t.Fatalf("script ran: dialogs %q", dialogs)
	}

	// Back in the inbox the message is read; its text is one click away.
	do("back to the inbox", chromedp.Navigate(inbox), chromedp.WaitVisible(chromedp.ID("message-13")))
	if got := eval(`document.getElementById("message-13").className + "/" + document.querySelectorAll("article.unread").length`); got != "msg read/12" {
		t.Fatalf("after the open, message 13's class and the unread count: %q", got)
	}
	screenshot(t, ctx, "inbox-list.png")
	do("open its text", chromedp.Navigate(inbox+"/messages/13"), chromedp.WaitVisible(chromedp.ID("message-text-link")),
		chromedp.Click(chromedp.ID("message-text-link")), chromedp.WaitVisible(chromedp.ID("message-body")))
	if body := eval(`document.getElementById("message-body").innerText`); !strings.Contains(body, "482913") || !strings.Contains(body, confirm) {
		t.Fatalf("the text view shows %q", body)
	}
	if got := far.seen(); len(got) != 0 {
		t.Fatalf("the remote host got %s", got[0].URL)
	}
}

// screenshot saves the page as name in the test's artifacts, or in
// $MAILPLANE_SCREENSHOTS (docs/ keeps the ones docs/agent.md shows).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("MAILPLANE_SCREENSHOTS")
	if dir == "" {
		dir = t.ArtifactDir()
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// evalIn evaluates expr in an isolated world of the frame, once its
// document is complete and shows the mail: the world shares the frame's
// document, not its (absent) scripts.
func evalIn(t *testing.T, br *itest.Browser, frame cdp.FrameID, expr string) string {
	t.Helper()
	var out string
	itest.Eventually(t, "the frame's document", itest.Bound, func() bool {
		v, ok := br.EvalIn(frame, `document.readyState === "complete" && document.getElementById("code") ? `+expr+` : ""`)
		out = v
		return ok && v != ""
	})
	return out
}

// waitEvent waits for an event of id's trail that match accepts.
func waitEvent(t *testing.T, gw *rpc.Client, id rpc.Identity, match func(map[string]any) bool) {
	t.Helper()
	itest.Eventually(t, "the event", itest.Bound, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := gw.Events(ctx, &rpc.EventsRequest{Namespace: id.Namespace, Capability: id.ReadCapability})
		if err != nil {
			return false
		}
		for _, raw := range resp.Events {
			var e map[string]any
			if json.Unmarshal(raw, &e) == nil && match(e) {
				return true
			}
		}
		return false
	})
}
