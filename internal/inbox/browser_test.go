package inbox_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// chromium returns the headless browser to drive (`make deps` installs
// Debian's chromium): required under CI, elsewhere skipped loudly.
// site stands for the website a message links to: a real HTTP server on
// loopback that records every request it gets.
type site struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
}

func newSite(t *testing.T) *site {
	s := &site{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Clone(context.Background()))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><title>Confirmed</title><p id=confirmed>confirmed</p>")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) seen() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.requests...)
}

// An agent's browser opens the inbox's token URL it was handed (the bare
// origin shows nothing), sees mail arrive after Refresh, opens it, reads the code out of the
// page's text and clicks the link in the body. A subject that is a script
// tag shows as text and runs nothing; nothing remote loads; the page's own
// style applies under its Content-Security-Policy.
func TestBrowser(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	in := startInbox(t, plane, id)
	web := newSite(t)
	w := plane.Client(t, id.WriterGrant)

	br := itest.StartBrowser(t, 90*time.Second)
	ctx := br.Ctx
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	str := func(what string, a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(ctx, a)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	count := func(expr string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return n
	}

	// The bare origin leads nowhere; the token URL shows the empty inbox.
	do("open the origin", chromedp.Navigate(in.URL+"/"))
	if location := str("location", chromedp.Location()); location != in.URL+"/" {
		t.Fatalf("the origin led to %q", location)
	}
	if body := str("origin page", chromedp.Evaluate[string](`document.body.innerText`)); !strings.Contains(body, "Not found") || strings.Contains(body, in.Token) {
		t.Fatalf("the origin shows %q", body)
	}
	do("open the inbox", chromedp.Navigate(in.URL+"/inbox/"+in.Token), chromedp.WaitVisible(chromedp.ID("inbox-empty")))
	background := str("style", chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	if background != "rgb(246, 247, 249)" {
		t.Fatalf("the page's style did not apply under its CSP: body background %q", background)
	}

	// Mail arrives; Refresh shows it.
	link := web.URL + "/confirm?t=abc&u=1"
	send(t, w, []string{"agent@example.com"}, textMail("Your sign-in code",
		"Hello,\r\n\r\nYour verification code is 482913.\r\n\r\nOr confirm here: "+link+"\r\n"))
	send(t, w, []string{"agent@example.com"}, textMail("<script>alert(1)</script>",
		`<img src="`+web.URL+`/pixel"><script>alert(2)</script><a href="javascript:alert(3)">x</a>`+"\r\n"))
	do("refresh", chromedp.Click(chromedp.ID("inbox-refresh")), chromedp.WaitVisible(chromedp.CSS(`a[href$="/messages/2"]`)))
	hostileSubject := str("subject", chromedp.Text(chromedp.CSS(`a[href$="/messages/2"]`)))
	if hostileSubject != "<script>alert(1)</script>" {
		t.Fatalf("hostile subject shows as %q", hostileSubject)
	}
	if n := count(`document.scripts.length + document.images.length`); n != 0 {
		t.Fatalf("the inbox page has %d scripts or images", n)
	}

	// Open the message and read the code the way a person would.
	do("open the message", chromedp.Click(chromedp.CSS(`a[href$="/messages/1"]`)), chromedp.WaitVisible(chromedp.ID("message-body")))
	body := str("body", chromedp.Text(chromedp.ID("message-body")))
	if code := regexp.MustCompile(`\b\d{6}\b`).FindString(body); code != "482913" {
		t.Fatalf("read code %q out of %q", code, body)
	}

	// Click the link in the body: it leads to the site, with no referrer.
	do("follow the link", chromedp.Click(chromedp.CSS("#message-body a")), chromedp.WaitVisible(chromedp.ID("confirmed")))
	if location := str("location", chromedp.Location()); location != link {
		t.Fatalf("the link led to %q, want %q", location, link)
	}
	var confirm *http.Request
	for _, r := range web.seen() {
		if r.URL.Path == "/confirm" {
			confirm = r
		}
	}
	if confirm == nil || confirm.URL.RawQuery != "t=abc&u=1" {
		t.Fatalf("the site never saw the confirmation request: %v", web.seen())
	}
	if ref := confirm.Header.Get("Referer"); ref != "" {
		t.Fatalf("the site saw a Referer %q: the inbox URL leaked", ref)
	}

	// The hostile message: its HTML is text, nothing loads or runs.
	do("open the hostile message", chromedp.Navigate(in.URL+"/inbox/"+in.Token+"/messages/2"), chromedp.WaitVisible(chromedp.ID("message-body")))
	hostileBody := str("hostile body", chromedp.Text(chromedp.ID("message-body")))
	if !strings.Contains(hostileBody, `<img src="`+web.URL+`/pixel"><script>alert(2)</script>`) {
		t.Fatalf("hostile body shows as %q", hostileBody)
	}
	if n := count(`document.scripts.length + document.images.length + document.querySelectorAll('a[href^="javascript"], #message-body a:not([rel="noreferrer noopener"])').length`); n != 0 {
		t.Fatalf("the hostile message has %d scripts, images or script links", n)
	}
	// Its one URL is a plain link, which nothing follows by itself.
	if n := count(`document.querySelectorAll('#message-body a[href="` + web.URL + `/pixel"]').length`); n != 1 {
		t.Fatalf("the URL in the hostile body is not a link (%d)", n)
	}
	do("linger", chromedp.Sleep(300*time.Millisecond))
	for _, r := range web.seen() {
		// The site's own page may fetch its favicon; nothing else may come.
		if r.URL.Path != "/confirm" && r.URL.Path != "/favicon.ico" {
			t.Fatalf("the page loaded %s from the site", r.URL)
		}
	}
	if dialogs := br.Dialogs(); len(dialogs) > 0 {
		t.Fatalf("script ran: dialogs %q", dialogs)
	}
	// Browser warnings and errors: a CSP violation is one.
	for _, p := range br.Log(cdplog.EntryLevelError, cdplog.EntryLevelWarning) {
		if strings.Contains(p, "Content Security Policy") || strings.Contains(p, "Refused") {
			t.Fatalf("the browser reported: %s", p)
		}
	}
}
