// Package render writes the HTML pages people and agents read mail in:
// the inbox list, one message, and "not found" (docs/reference.md §6.2, §6.3). The
// agent's mail-inbox and the evaluator's /inbox/{ns} view on mail-gateway
// share them.
//
// Pages are byte-for-byte the reference's, with two additions: URLs in a
// message body are links (rel="noreferrer noopener"), and every page goes
// out with ContentSecurityPolicy, which allows no script, no remote or
// embedded content, and only this package's own stylesheet. Everything
// else a message brings is escaped text.
package render

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/otp/urls"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// CSS is the stylesheet of every page, verbatim from §6.2.
const CSS = "body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24}" +
	"header{background:#fff;border-bottom:1px solid #d8dee4;padding:16px 24px}" +
	"h1{font-size:20px;margin:0}" +
	"main{max-width:52rem;margin:0 auto;padding:24px}" +
	"a{color:#0b62d0}" +
	".msg{background:#fff;border:1px solid #d8dee4;border-radius:8px;padding:12px 16px;margin-bottom:12px}" +
	".msg h2{font-size:16px;margin:0 0 4px}" +
	".meta{color:#57606a;font-size:13px;margin:0}" +
	".empty{color:#57606a}" +
	"pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;border-radius:6px;padding:12px;margin:12px 0 0}"

// ContentSecurityPolicy goes with every page: nothing may load or run
// except the inline stylesheet above, named by its hash; no form may post,
// no frame may embed the page, and no <base> may redirect its links. The
// one connection a page may make is a link's ping to its own origin
// (AgentMessage), which browsers check against connect-src.
var ContentSecurityPolicy = "default-src 'none'; style-src '" + styleHash() + "'; connect-src 'self'; " +
	"img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func styleHash() string {
	h := sha256.Sum256([]byte(CSS))
	return "sha256-" + base64.StdEncoding.EncodeToString(h[:])
}

// Titles of the pages.
const (
	TitleInbox    = "Inbox"
	TitleMessage  = "Message"
	TitleNotFound = "Not found"
)

// escaper is Python's html.escape(quote=True), which the reference uses:
// the exact entities matter for byte-exact pages.
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#x27;")

// Escape makes s safe as HTML text and as a quoted attribute value.
func Escape(s string) string { return escaper.Replace(s) }

// Document is one self-contained page; body must already be HTML.
func Document(title, body string) []byte {
	t := Escape(title)
	var b strings.Builder
	b.Grow(len(CSS) + len(body) + 256)
	b.WriteString(`<!doctype html><html lang=en><meta charset=utf-8><meta name=viewport content="width=device-width,initial-scale=1"><title>`)
	b.WriteString(t)
	b.WriteString("</title><style>")
	b.WriteString(CSS)
	b.WriteString("</style><header><h1>")
	b.WriteString(t)
	b.WriteString("</h1></header><main>")
	b.WriteString(body)
	b.WriteString("</main></html>")
	return []byte(b.String())
}

// NotFound is the page of every path that is not a page.
func NotFound() []byte { return Document(TitleNotFound, "<p>No such page.</p>") }

// Notice is a page with one sentence, for answers §6 does not describe
// (an unsupported method).
func Notice(title, sentence string) []byte {
	return Document(title, "<p>"+Escape(sentence)+"</p>")
}

// Inbox lists msgs (oldest first, as given) under base, the path of the
// inbox page; message links are base/messages/{id}.
func Inbox(msgs []rpc.Message, base string) []byte {
	var b strings.Builder
	if len(msgs) == 0 {
		b.WriteString("<p class=empty id=inbox-empty>No messages yet. Mail sent to this mailbox appears here.</p>")
	}
	for _, m := range msgs {
		id := strconv.FormatInt(m.ID, 10)
		b.WriteString(`<article class=msg><h2><a href="`)
		b.WriteString(Escape(base))
		b.WriteString("/messages/")
		b.WriteString(id)
		b.WriteString(`">`)
		b.WriteString(Escape(m.Subject))
		b.WriteString("</a></h2><p class=meta>From ")
		b.WriteString(Escape(mailmsg.ShowSender(m.FromName, m.EnvelopeFrom)))
		b.WriteString(" · To ")
		b.WriteString(Escape(strings.Join(m.Recipients, ", ")))
		b.WriteString(" · Message ")
		b.WriteString(id)
		b.WriteString("</p></article>")
	}
	b.WriteString(`<p><a href="`)
	b.WriteString(Escape(base))
	b.WriteString(`" id=inbox-refresh>Refresh</a></p>`)
	return Document(TitleInbox, b.String())
}

// Message shows one message; base is the inbox page's path.
func Message(m rpc.Message, base string) []byte { return message(m, base, false) }

// AgentMessage is the agent's message page: Message, where each link of
// the body also names, in its ping attribute, the inbox route that
// records a click on it (HTML's hyperlink auditing: the browser posts to
// it when the link is followed). The href stays the sender's.
func AgentMessage(m rpc.Message, base string) []byte { return message(m, base, true) }

// PingPath is the route a click on link i (from 0, in Links' order) of
// message id is recorded at, under base, the inbox page's path.
func PingPath(base string, id int64, i int) string {
	return base + "/messages/" + strconv.FormatInt(id, 10) + "/ping/" + strconv.Itoa(i)
}

func message(m rpc.Message, base string, ping bool) []byte {
	var b strings.Builder
	b.WriteString("<article class=msg><h2>")
	b.WriteString(Escape(m.Subject))
	b.WriteString("</h2><p class=meta>From ")
	b.WriteString(Escape(mailmsg.ShowSender(m.FromName, m.EnvelopeFrom)))
	b.WriteString(" · To ")
	b.WriteString(Escape(strings.Join(m.Recipients, ", ")))
	b.WriteString("</p><pre id=message-body>")
	if ping {
		b.WriteString(body(m.Text, func(i int) string { return PingPath(base, m.ID, i) }))
	} else {
		b.WriteString(body(m.Text, nil))
	}
	b.WriteString(`</pre></article><p><a href="`)
	b.WriteString(Escape(base))
	b.WriteString(`" id=inbox-back>Back to inbox</a></p>`)
	return Document(TitleMessage, b.String())
}

// Link is one link of a message as the inbox shows it: its text and the
// URL it leads to (for a text body, the URL is its own text).
type Link struct {
	Text string `json:"text"`
	URL  string `json:"url"`
}

// Links are the links of a message's text, in the order Body makes them.
func Links(text string) []Link {
	spans := urls.Spans(text)
	out := make([]Link, 0, len(spans))
	for _, s := range spans {
		u := text[s.Start:s.End]
		out = append(out, Link{Text: u, URL: u})
	}
	return out
}

// Body is a message's text as HTML: escaped, with each http(s) URL a link
// that sends no referrer and gives the opened page no handle on this one.
func Body(text string) string { return body(text, nil) }

// body is Body, with link i pinging ping(i) when ping is set.
func body(text string, ping func(i int) string) string {
	var b strings.Builder
	b.Grow(len(text) + len(text)/8)
	pos := 0
	for i, s := range urls.Spans(text) {
		b.WriteString(Escape(text[pos:s.Start]))
		u := Escape(text[s.Start:s.End])
		b.WriteString(`<a href="`)
		b.WriteString(u)
		if ping != nil {
			b.WriteString(`" ping="`)
			b.WriteString(Escape(ping(i)))
		}
		b.WriteString(`" rel="noreferrer noopener">`)
		b.WriteString(u)
		b.WriteString("</a>")
		pos = s.End
	}
	b.WriteString(Escape(text[pos:]))
	return b.String()
}
