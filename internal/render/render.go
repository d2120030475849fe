// Package render writes the HTML pages people and agents read mail in:
// the inbox list, one message, and "not found" (docs/reference.md §6.2, §6.3). The
// agent's mail-inbox and the evaluator's /inbox/{ns} view on mail-gateway
// share them.
//
// The gateway's pages are byte-for-byte the reference's, with two
// additions: URLs in a message body are links (rel="noreferrer
// noopener"), and every page goes out with ContentSecurityPolicy, which
// allows no script, no remote or embedded content, and only this
// package's own stylesheet. Everything else a message brings is escaped
// text. The agent's pages read like a mail client's (AgentInbox,
// AgentMessage): newest first, with times and unread marks, and a
// message's HTML part shown as sent in a sandboxed frame of its own,
// sanitized first (mailhtml.go).
package render

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

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
var ContentSecurityPolicy = "default-src 'none'; style-src '" + styleHash(CSS) + "'; connect-src 'self'; " +
	"img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// agentCSS is the agent's pages' stylesheet: the reference's, with the
// inbox list's times and unread marks and the message's frame.
const agentCSS = CSS +
	".unread h2{font-weight:700}.read h2{font-weight:400}" +
	".badge{display:inline-block;background:#0b62d0;color:#fff;border-radius:4px;font-size:11px;font-weight:600;padding:0 6px;margin-right:6px;vertical-align:2px}" +
	"time{white-space:nowrap}" +
	".views{font-size:13px;margin:8px 0 0}" +
	"iframe{display:block;width:100%;height:75vh;border:1px solid #d8dee4;border-radius:6px;background:#fff;margin:12px 0 0}"

// AgentSecurityPolicy goes with the agent's pages: ContentSecurityPolicy,
// with their own stylesheet too and the one frame a message page embeds,
// from the inbox itself (FrameSecurityPolicy is that frame's).
var AgentSecurityPolicy = "default-src 'none'; style-src '" + styleHash(CSS) + "' '" + styleHash(agentCSS) + "'; connect-src 'self'; " +
	"img-src 'none'; frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func styleHash(css string) string {
	h := sha256.Sum256([]byte(css))
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
func Document(title, body string) []byte { return document(title, CSS, body) }

func document(title, css, body string) []byte {
	t := Escape(title)
	var b strings.Builder
	b.Grow(len(css) + len(body) + 256)
	b.WriteString(`<!doctype html><html lang=en><meta charset=utf-8><meta name=viewport content="width=device-width,initial-scale=1"><title>`)
	b.WriteString(t)
	b.WriteString("</title><style>")
	b.WriteString(css)
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
	return Document(TitleInbox, list(msgs, base, false))
}

// AgentInbox is the agent's inbox page, as a mail client shows one:
// msgs (oldest first, as given) newest first, each with its sender's
// name and address, its received time, and "Unread" until the agent
// opens it (rpc.Message.Opened).
func AgentInbox(msgs []rpc.Message, base string) []byte {
	return document(TitleInbox, agentCSS, list(msgs, base, true))
}

// list is an inbox page's body: msgs in their order, each with its id;
// on the agent's page (agent) newest first, each with its unread mark
// and received time.
func list(msgs []rpc.Message, base string, agent bool) string {
	var b strings.Builder
	if len(msgs) == 0 {
		b.WriteString("<p class=empty id=inbox-empty>No messages yet. Mail sent to this mailbox appears here.</p>")
	}
	for i := range msgs {
		m := msgs[i]
		if agent {
			m = msgs[len(msgs)-1-i]
		}
		id := strconv.FormatInt(m.ID, 10)
		switch {
		case !agent:
			b.WriteString(`<article class=msg><h2>`)
		case m.Opened:
			b.WriteString(`<article class="msg read" id=message-` + id + `><h2>`)
		default:
			b.WriteString(`<article class="msg unread" id=message-` + id + `><h2><span class=badge>Unread</span>`)
		}
		b.WriteString(`<a href="`)
		b.WriteString(Escape(messagePath(base, m.ID)))
		b.WriteString(`">`)
		b.WriteString(Escape(m.Subject))
		b.WriteString("</a></h2><p class=meta>")
		meta(&b, m)
		if agent {
			b.WriteString(" · ")
			b.WriteString(received(m))
		} else {
			b.WriteString(" · Message ")
			b.WriteString(id)
		}
		b.WriteString("</p></article>")
	}
	b.WriteString(`<p><a href="`)
	b.WriteString(Escape(base))
	b.WriteString(`" id=inbox-refresh>Refresh</a></p>`)
	return b.String()
}

// TimeLayout is how the agent's pages show a received time (in UTC).
const TimeLayout = "Mon, 2 Jan 2006 15:04:05 UTC"

func received(m rpc.Message) string {
	t := m.Received.UTC()
	return `<time datetime="` + t.Format(time.RFC3339) + `">` + t.Format(TimeLayout) + "</time>"
}

// Message shows one message; base is the inbox page's path.
func Message(m rpc.Message, base string) []byte { return message(m, base, false) }

// AgentMessage is the agent's message page. A message with an HTML part
// shows it as sent, in a sandboxed frame (FrameDocument, at FramePath),
// with its text one click away (TextPath); any other shows its text as
// Message does. Each link of the text also names, in its ping attribute,
// the inbox route that records a click on it (HTML's hyperlink auditing:
// the browser posts to it when the link is followed); the href stays the
// sender's. text asks for the text of a message that has HTML.
func AgentMessage(m rpc.Message, base string, text bool) []byte {
	if m.HTML == "" || text {
		return message(m, base, true)
	}
	var b strings.Builder
	header(&b, m, true)
	b.WriteString(`<p class=views id=message-views>HTML · <a href="`)
	b.WriteString(Escape(TextPath(base, m.ID)))
	b.WriteString(`" id=message-text-link>Text</a> · Remote images are not shown.</p><iframe id=message-html title="The message as sent" sandbox="`)
	b.WriteString(FrameSandbox)
	b.WriteString(`" referrerpolicy=no-referrer src="`)
	b.WriteString(Escape(FramePath(base, m.ID)))
	b.WriteString(`"></iframe></article>`)
	back(&b, base)
	return document(TitleMessage, agentCSS, b.String())
}

// FramePath is the route of message id's HTML frame (FrameDocument), and
// TextPath that of its page showing the text, under base.
func FramePath(base string, id int64) string { return messagePath(base, id) + "/html" }

func TextPath(base string, id int64) string { return messagePath(base, id) + "/text" }

// PingPath is the route a click on link i (from 0, in Links' order) of
// message id is recorded at, under base, the inbox page's path.
func PingPath(base string, id int64, i int) string {
	return messagePath(base, id) + "/ping/" + strconv.Itoa(i)
}

// messagePath is the route of message id's page under base.
func messagePath(base string, id int64) string {
	return base + "/messages/" + strconv.FormatInt(id, 10)
}

// message is the page of a message's text; agent is the agent's, with
// its time, its links pinging, and a link to its HTML if it has one.
func message(m rpc.Message, base string, agent bool) []byte {
	var b strings.Builder
	header(&b, m, agent)
	if agent && m.HTML != "" {
		b.WriteString(`<p class=views id=message-views><a href="`)
		b.WriteString(Escape(messagePath(base, m.ID)))
		b.WriteString(`" id=message-html-link>HTML</a> · Text</p>`)
	}
	b.WriteString("<pre id=message-body>")
	if agent {
		b.WriteString(body(m.Text, func(i int) string { return PingPath(base, m.ID, i) }))
	} else {
		b.WriteString(body(m.Text, nil))
	}
	b.WriteString(`</pre></article>`)
	back(&b, base)
	if agent {
		return document(TitleMessage, agentCSS, b.String())
	}
	return Document(TitleMessage, b.String())
}

// header opens a message's article: its subject, sender and recipients,
// and on the agent's pages its received time.
func header(b *strings.Builder, m rpc.Message, agent bool) {
	b.WriteString("<article class=msg><h2>")
	b.WriteString(Escape(m.Subject))
	b.WriteString("</h2><p class=meta>")
	meta(b, m)
	if agent {
		b.WriteString(" · ")
		b.WriteString(received(m))
	}
	b.WriteString("</p>")
}

// meta names a message's sender and recipients, as every page shows them.
func meta(b *strings.Builder, m rpc.Message) {
	b.WriteString("From ")
	b.WriteString(Escape(mailmsg.ShowSender(m.FromName, m.EnvelopeFrom)))
	b.WriteString(" · To ")
	b.WriteString(Escape(strings.Join(m.Recipients, ", ")))
}

func back(b *strings.Builder, base string) {
	b.WriteString(`<p><a href="`)
	b.WriteString(Escape(base))
	b.WriteString(`" id=inbox-back>Back to inbox</a></p>`)
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
