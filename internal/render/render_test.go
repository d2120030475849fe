package render

import (
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// page is the reference's template (docs/reference.md §6.2), typed out by
// hand rather than built from this package's constants, so that a change
// to either shows.
func page(title, body string) string {
	return `<!doctype html><html lang=en><meta charset=utf-8><meta name=viewport content="width=device-width,initial-scale=1"><title>` + title +
		`</title><style>body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24}header{background:#fff;border-bottom:1px solid #d8dee4;padding:16px 24px}h1{font-size:20px;margin:0}main{max-width:52rem;margin:0 auto;padding:24px}a{color:#0b62d0}.msg{background:#fff;border:1px solid #d8dee4;border-radius:8px;padding:12px 16px;margin-bottom:12px}.msg h2{font-size:16px;margin:0 0 4px}.meta{color:#57606a;font-size:13px;margin:0}.empty{color:#57606a}pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;border-radius:6px;padding:12px;margin:12px 0 0}</style><header><h1>` +
		title + `</h1></header><main>` + body + `</main></html>`
}

// The sender shows with its display name, and a name that could pass for
// an address after the real address.
func TestSenderShown(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"Équipe Acme", "From Équipe Acme &lt;x@y.example&gt; ·"},
		{"support@acme.example", "From x@y.example (name: &quot;support@acme.example&quot;) ·"},
	} {
		m := rpc.Message{ID: 1, Subject: "s", EnvelopeFrom: "x@y.example", FromName: c.name, Recipients: []string{"a@example.com"}}
		for _, p := range [][]byte{Inbox([]rpc.Message{m}, "/b"), Message(m, "/b")} {
			if !strings.Contains(string(p), c.want) {
				t.Errorf("%q: page lacks %q:\n%s", c.name, c.want, p)
			}
		}
	}
}

func TestPagesAreTheReferences(t *testing.T) {
	msgs := []rpc.Message{
		{ID: 1, Subject: "Welcome", EnvelopeFrom: "no-reply@candidate.websitebench.local", Recipients: []string{"a@example.com"}},
		{ID: 2, Subject: `Tom & "Jerry" <b>'hi'</b>`, EnvelopeFrom: "x@y.example", Recipients: []string{"a@example.com", "b@example.com"}, Text: "line 1\r\nline <2> & 'three'\r\n"},
	}
	base := "/inbox/tok_en-43"
	for _, tc := range []struct {
		name      string
		got, want string
	}{
		{"empty inbox", string(Inbox(nil, base)), page("Inbox",
			`<p class=empty id=inbox-empty>No messages yet. Mail sent to this mailbox appears here.</p><p><a href="/inbox/tok_en-43" id=inbox-refresh>Refresh</a></p>`)},
		{"inbox", string(Inbox(msgs, base)), page("Inbox",
			`<article class=msg><h2><a href="/inbox/tok_en-43/messages/1">Welcome</a></h2><p class=meta>From no-reply@candidate.websitebench.local · To a@example.com · Message 1</p></article>`+
				`<article class=msg><h2><a href="/inbox/tok_en-43/messages/2">Tom &amp; &quot;Jerry&quot; &lt;b&gt;&#x27;hi&#x27;&lt;/b&gt;</a></h2><p class=meta>From x@y.example · To a@example.com, b@example.com · Message 2</p></article>`+
				`<p><a href="/inbox/tok_en-43" id=inbox-refresh>Refresh</a></p>`)},
		{"message", string(Message(msgs[1], base)), page("Message",
			`<article class=msg><h2>Tom &amp; &quot;Jerry&quot; &lt;b&gt;&#x27;hi&#x27;&lt;/b&gt;</h2><p class=meta>From x@y.example · To a@example.com, b@example.com</p>`+
				"<pre id=message-body>line 1\r\nline &lt;2&gt; &amp; &#x27;three&#x27;\r\n</pre></article>"+
				`<p><a href="/inbox/tok_en-43" id=inbox-back>Back to inbox</a></p>`)},
		{"not found", string(NotFound()), page("Not found", "<p>No such page.</p>")},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestBodyLinks(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"Open https://site.example/v?a=1&b=2 now.",
			`Open <a href="https://site.example/v?a=1&amp;b=2" rel="noreferrer noopener">https://site.example/v?a=1&amp;b=2</a> now.`},
		{`x "https://q.example/a"><script>alert(1)</script>`,
			`x &quot;<a href="https://q.example/a" rel="noreferrer noopener">https://q.example/a</a>&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;`},
		{"javascript:alert(1) and data:text/html,<b>x</b>",
			`javascript:alert(1) and data:text/html,&lt;b&gt;x&lt;/b&gt;`},
		{"</pre><script>alert(1)</script>", `&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;`},
	} {
		if got := Body(tc.text); got != tc.want {
			t.Errorf("Body(%q)\n got %q\nwant %q", tc.text, got, tc.want)
		}
	}
}

func TestContentSecurityPolicy(t *testing.T) {
	csp := ContentSecurityPolicy
	for _, must := range []string{"default-src 'none'", "style-src 'sha256-", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, must) {
			t.Errorf("CSP %q lacks %q", csp, must)
		}
	}
	for _, never := range []string{"unsafe", "script-src", "*", "http"} {
		if strings.Contains(csp, never) {
			t.Errorf("CSP %q contains %q", csp, never)
		}
	}
}

// ourTag is the only markup Body may produce.
var ourTag = regexp.MustCompile(`<a href="[^"<>]*" rel="noreferrer noopener">|</a>`)

// FuzzBody checks that whatever a message says, Body's only markup is its
// own links, and that the text reads back unchanged.
func FuzzBody(f *testing.F) {
	for _, s := range []string{
		"plain", "<script>alert(1)</script>", `"https://q.example/a"><img src=x onerror=alert(1)>`,
		"a https://x.example/1?a=<b>&c='d' b", "&amp; &#x27; &lt;", "(https://w.example/A_(b))",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		out := Body(text)
		rest := ourTag.ReplaceAllString(out, "")
		if strings.ContainsAny(rest, "<>\"'") {
			t.Fatalf("Body(%q) = %q: markup or quotes outside our links", text, out)
		}
		links := ourTag.FindAllString(out, -1)
		for i := 0; i+1 < len(links); i += 2 {
			if links[i] == "</a>" || links[i+1] != "</a>" {
				t.Fatalf("Body(%q) = %q: unbalanced links", text, out)
			}
		}
		// The visible text is the original: drop our tags, unescape.
		if got := html.UnescapeString(rest); got != text {
			t.Fatalf("Body(%q) reads back as %q", text, got)
		}
	})
}
