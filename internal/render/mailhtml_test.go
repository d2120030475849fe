package render

import (
	"strings"
	"testing"
	"time"

	xhtml "golang.org/x/net/html"

	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// sanitized is the HTML part as the frame shows it, without pings.
func sanitized(h string, inline []rpc.InlineImage) string {
	var b strings.Builder
	sanitize(&b, h, nil, newImages(inline))
	return b.String()
}

// What the frame keeps of a sender's HTML, and what it drops.
func TestSanitize(t *testing.T) {
	logo := []rpc.InlineImage{{ContentID: "logo@x", ContentType: "image/PNG", Data: []byte("png")},
		{ContentID: "vector@x", ContentType: "image/svg+xml", Data: []byte("<svg/>")}}
	for _, c := range []struct{ name, in, want string }{
		{"layout and style", `<table width=600 cellpadding=4 style="color:red"><tr><td class=c align=center>Hi <b>you</b></td></tr></table>`,
			`<table width="600" cellpadding="4" style="color:red"><tr><td class="c" align="center">Hi <b>you</b></td></tr></table>`},
		{"document parts", `<!doctype html><html><head><title>T</title><meta http-equiv=refresh content="0;url=https://x/"><style>p{color:red}</style></head><body bgcolor="#eee"><p>x</p></body></html>`,
			`<style>p{color:red}</style><div bgcolor="#eee"><p>x</p></div>`},
		{"script and handlers", `<p onclick="alert(1)">a</p><script>alert(2)</script><img src=x onerror=alert(3)><a href="javascript:alert(4)">j</a>`,
			`<p>a</p><img><a target="_top" rel="noreferrer noopener">j</a>`},
		{"links", `<a href=" https://site.example/c?a=1&amp;b=2 " title=t>Go</a><a href="mailto:x@y.example">m</a><a href="/relative">r</a><a href="data:text/html,x">d</a>`,
			`<a href="https://site.example/c?a=1&amp;b=2" title="t" target="_top" rel="noreferrer noopener">Go</a><a href="mailto:x@y.example" target="_top" rel="noreferrer noopener">m</a><a target="_top" rel="noreferrer noopener">r</a><a target="_top" rel="noreferrer noopener">d</a>`},
		{"images", `<img src="cid:logo@x" alt=L><img src="https://tracker.example/p.gif" width=1><img src="data:image/png;base64,AAAA"><img src="cid:vector@x"><img src="cid:none@x"><img srcset="https://x/a.png 2x">`,
			`<img src="data:image/png;base64,cG5n" alt="L"><img width="1"><img><img><img><img>`},
		{"forms and embeds", `<form action="https://x/f"><input name=a><button>Go</button><textarea>t</textarea><select><option>o</select></form><iframe src="https://x/"></iframe><object data=x><p>in</p></object><svg><a href="https://x/">s</a></svg><svg><svg></svg>still</svg>after`,
			`Goafter`},
		{"css that loads", `<p style="background:URL(https://x/a.png);color:red">a</p><style>@import "https://x/s.css"; p{background-image:image-set("https://x/b.png" 1x)}</style><p style="background:u\72l(https://x/)">b</p>`,
			`<p style="background:blocked-URL(https://x/a.png);color:red">a</p><style>@blocked-import "https://x/s.css"; p{background-image:blocked-image-set("https://x/b.png" 1x)}</style><p>b</p>`},
		{"escaping", `<p title='"><script>'>&lt;b&gt; &amp; "q"</p>`, `<p title="&#34;&gt;&lt;script&gt;">&lt;b&gt; &amp; &#34;q&#34;</p>`},
		{"comments and unknown tags", `<!-- <script>x</script> --><custom-el>text</custom-el><blink>b</blink>`, `textb`},
	} {
		if got := sanitized(c.in, logo); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// An inline image named a hundred times shows until the frame's image
// budget is spent, and no further: the page cannot grow a hundredfold.
func TestFrameImageBudget(t *testing.T) {
	big := rpc.InlineImage{ContentID: "big", ContentType: "image/png", Data: make([]byte, 300<<10)}
	h := strings.Repeat(`<img src="cid:big">`, 100)
	out := sanitized(h, []rpc.InlineImage{big})
	uri := (4*len(big.Data)+2)/3 + len("data:image/png;base64,")
	if n, want := strings.Count(out, `<img src="data:`), limits.FrameImageBytes/uri; n != want {
		t.Errorf("%d images shown, want %d", n, want)
	}
	if len(out) > limits.FrameImageBytes+len(h) {
		t.Errorf("a frame of %d bytes", len(out))
	}
}

// A link of the HTML pings the route of the text's link with its URL;
// one the text lacks pings the route after the text's links (LinkURLs).
func TestFrameDocumentPings(t *testing.T) {
	m := rpc.Message{ID: 7, Text: "Confirm: https://site.example/c?a=1&b=2\nHelp: https://help.example/",
		HTML: `<a href="https://help.example/">help</a><a href="https://site.example/c?a=1&amp;b=2">Confirm</a><a href="https://other.example/">o</a>` +
			`<a title=x href=" https://other.example/ ">again</a><a href="mailto:x@y.example">m</a><a href="/rel">r</a><a href="https://last.example/">l</a>`}
	if got := strings.Join(LinkURLs(m), " "); got != "https://site.example/c?a=1&b=2 https://help.example/ https://other.example/ https://last.example/" {
		t.Errorf("LinkURLs: %s", got)
	}
	got := string(FrameDocument(m, func(i int) string { return PingPath("/inbox/t", m.ID, i) }))
	for _, want := range []string{
		`<a href="https://help.example/" target="_top" rel="noreferrer noopener" ping="/inbox/t/messages/7/ping/1">help</a>`,
		`<a href="https://site.example/c?a=1&amp;b=2" target="_top" rel="noreferrer noopener" ping="/inbox/t/messages/7/ping/0">Confirm</a>`,
		`<a href="https://other.example/" target="_top" rel="noreferrer noopener" ping="/inbox/t/messages/7/ping/2">o</a>`,
		`<a title="x" href="https://other.example/" target="_top" rel="noreferrer noopener" ping="/inbox/t/messages/7/ping/2">again</a>`,
		`<a href="mailto:x@y.example" target="_top" rel="noreferrer noopener">m</a>`,
		`<a href="https://last.example/" target="_top" rel="noreferrer noopener" ping="/inbox/t/messages/7/ping/3">l</a>`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("frame lacks %q:\n%s", want, got)
		}
	}
}

// checkSafe fails unless out, read back as HTML, has only allowed
// elements and attributes, links that lead to http(s) or mailto, images
// from data: URIs of inline parts, and styles that load nothing.
func checkSafe(t *testing.T, in, out string) {
	t.Helper()
	z := xhtml.NewTokenizer(strings.NewReader(out))
	inStyle := false
	for {
		tt := z.Next()
		if tt == xhtml.ErrorToken {
			return
		}
		tok := z.Token()
		switch tt {
		case xhtml.TextToken:
			if inStyle && !cssSafe(tok.Data) {
				t.Fatalf("sanitized(%q): a style that may load: %q", in, tok.Data)
			}
		case xhtml.StartTagToken, xhtml.SelfClosingTagToken:
			inStyle = tok.Data == "style"
			if !kept[tok.Data] && tok.Data != "style" || tok.Data == "body" {
				t.Fatalf("sanitized(%q) kept <%s>: %q", in, tok.Data, out)
			}
			for _, a := range tok.Attr {
				ok := attrs[a.Key] && a.Namespace == ""
				switch {
				case a.Key == "style":
					ok = cssSafe(a.Val)
				case tok.Data == "a" && a.Key == "href":
					ok = linkURL(a.Val) == a.Val && a.Val != ""
				case tok.Data == "a" && (a.Key == "target" || a.Key == "rel" || a.Key == "ping"):
					ok = a.Key != "target" || a.Val == "_top"
				case tok.Data == "img" && a.Key == "src":
					ok = strings.HasPrefix(a.Val, "data:image/png;base64,")
				}
				if !ok {
					t.Fatalf("sanitized(%q) kept %s=%q on <%s>: %q", in, a.Key, a.Val, tok.Data, out)
				}
			}
		case xhtml.EndTagToken:
			inStyle = false
		case xhtml.CommentToken, xhtml.DoctypeToken:
			t.Fatalf("sanitized(%q) kept a comment or doctype: %q", in, out)
		}
	}
}

func cssSafe(s string) bool {
	l := strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
	for _, p := range cssBlocked {
		for i := 0; ; {
			j := strings.Index(l[i:], p)
			if j < 0 {
				break
			}
			if !strings.HasSuffix(l[:i+j], "blocked-") {
				return false
			}
			i += j + len(p)
		}
	}
	return !strings.Contains(s, `\`)
}

// The agent's policies: the page's allows no script and frames only from
// itself; the frame's allows no script, no form and no request but data:
// images and pings, and sandboxes its document without scripts, forms,
// popups or its own origin, as the iframe's attribute does.
func TestAgentPolicies(t *testing.T) {
	for _, c := range []struct {
		name, csp   string
		must, never []string
	}{
		{"page", AgentSecurityPolicy, []string{"default-src 'none'", "style-src 'sha256-", "frame-src 'self'", "img-src 'none'", "form-action 'none'", "frame-ancestors 'none'"},
			[]string{"unsafe", "script-src", "*", "http", "data:"}},
		{"frame", FrameSecurityPolicy, []string{"default-src 'none'", "img-src data:", "form-action 'none'", "base-uri 'none'", "frame-ancestors 'self'", "sandbox allow-top-navigation-by-user-activation"},
			[]string{"script-src", "unsafe-eval", "*", "http", "allow-scripts", "allow-same-origin", "allow-forms", "allow-popups", "frame-src"}},
		{"iframe sandbox", "sandbox " + FrameSandbox, []string{"allow-top-navigation-by-user-activation"},
			[]string{"allow-scripts", "allow-same-origin", "allow-forms", "allow-popups", "allow-top-navigation "}},
	} {
		for _, s := range c.must {
			if !strings.Contains(c.csp, s) {
				t.Errorf("%s: %q lacks %q", c.name, c.csp, s)
			}
		}
		for _, s := range c.never {
			if strings.Contains(c.csp+" ", s) {
				t.Errorf("%s: %q has %q", c.name, c.csp, s)
			}
		}
	}
}

// The agent's list: newest first, each with its time and, until opened,
// its unread mark; its style is the one the policy names.
func TestAgentInbox(t *testing.T) {
	at := time.Date(2026, 12, 6, 1, 2, 3, 0, time.UTC)
	msgs := []rpc.Message{
		{ID: 1, Subject: "old", EnvelopeFrom: "a@x.example", FromName: "Acme", Received: at, Opened: true},
		{ID: 2, Subject: "new", EnvelopeFrom: "a@x.example", Received: at.Add(time.Minute)},
	}
	got := string(AgentInbox(msgs, "/inbox/t"))
	want := `<article class="msg unread" id=message-2><h2><span class=badge>Unread</span><a href="/inbox/t/messages/2">new</a></h2>` +
		`<p class=meta>From a@x.example · To  · <time datetime="2026-12-06T01:03:03Z">Sun, 6 Dec 2026 01:03:03 UTC</time></p></article>` +
		`<article class="msg read" id=message-1><h2><a href="/inbox/t/messages/1">old</a></h2>` +
		`<p class=meta>From Acme &lt;a@x.example&gt; · To  · <time datetime="2026-12-06T01:02:03Z">Sun, 6 Dec 2026 01:02:03 UTC</time></p></article>`
	if !strings.Contains(got, want) {
		t.Errorf("AgentInbox:\n%s\nlacks\n%s", got, want)
	}
	if !strings.Contains(AgentSecurityPolicy, styleHash(agentCSS)) || !strings.Contains(got, "<style>"+agentCSS+"</style>") {
		t.Errorf("the agent's page's style is not the one its policy names")
	}
}
