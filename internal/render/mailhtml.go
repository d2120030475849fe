package render

import (
	"encoding/base64"
	"html"
	"strings"

	xhtml "golang.org/x/net/html"

	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// A message's HTML part is shown as its sender made it, in a frame of
// its own (FrameDocument) that the browser sandboxes twice (the iframe's
// sandbox attribute and FrameSecurityPolicy's sandbox directive) and that
// is cleaned here first, so that neither the sandbox nor the policy is
// the only wall: only an allowlist of elements and attributes is kept,
// every URL that could load something is dropped (remote images stay
// blocked) except a cid: image, which becomes a data: URI of the message's
// own inline part, and every link opens in the top window, with no
// referrer, pinging the inbox like the text's links.
//
// The HTML is read with golang.org/x/net/html's tokenizer, one pass, each
// token handled in constant time beyond its own length: linear in the
// part (TestSanitizeLinear, FuzzSanitize).

// FrameSecurityPolicy goes with a frame document: no script, no form, no
// frame, no request but its own data: images and the pings of its links;
// inline styles are the sender's. frame-ancestors lets only the inbox's
// own message page show it.
const FrameSecurityPolicy = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'self'; sandbox allow-top-navigation-by-user-activation"

// FrameSandbox is the iframe's sandbox attribute: scripts, forms, popups
// and its own origin stay off; a link the agent clicks may lead the top
// window.
const FrameSandbox = "allow-top-navigation-by-user-activation"

// FrameDocument is the frame's page: the message's HTML part, sanitized,
// in a document of its own. ping(i) is the ping route of the text's link i
// (Links): an HTML link whose URL is one of the text's pings it.
func FrameDocument(m rpc.Message, ping func(i int) string) []byte {
	var b strings.Builder
	b.Grow(len(m.HTML) + 256)
	b.WriteString(`<!doctype html><html><head><meta charset=utf-8><meta name=referrer content=no-referrer></head><body style="margin:0">`)
	sanitize(&b, m.HTML, pinger(m, ping), newImages(m.Inline))
	b.WriteString("</body></html>")
	return []byte(b.String())
}

// pinger maps an HTML link's URL to its ping route: the route of its
// index in LinkURLs, the link the plane records a click on.
func pinger(m rpc.Message, ping func(i int) string) func(string) string {
	if ping == nil {
		return nil
	}
	index := map[string]int{}
	for i, u := range LinkURLs(m) {
		if _, ok := index[u]; !ok {
			index[u] = i
		}
	}
	return func(u string) string {
		if i, ok := index[u]; ok {
			return ping(i)
		}
		return ""
	}
}

// LinkURLs are the links a click may be recorded on, by index: the
// text's (Links, so a text link keeps its index), then each http(s) link
// of the HTML part whose URL the text has not, in the HTML's order, once.
// The plane reads a click's link from the stored message with it.
func LinkURLs(m rpc.Message) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range Links(m.Text) {
		out = append(out, l.URL)
		seen[l.URL] = true
	}
	if m.HTML == "" {
		return out
	}
	z := xhtml.NewTokenizer(strings.NewReader(m.HTML))
	for {
		tt := z.Next()
		if tt == kindEnd {
			return out
		}
		if tt != kindStart && tt != kindSelfClosing {
			continue
		}
		name, more := z.TagName()
		if string(name) != "a" {
			continue
		}
		u := ""
		for more && u == "" {
			var k, v []byte
			k, v, more = z.TagAttr()
			if string(k) == "href" {
				u = linkURL(string(v))
			}
		}
		if !seen[u] && isHTTP(u) {
			out = append(out, u)
			seen[u] = true
		}
	}
}

// kept are the elements kept with their content (body becomes a div, so
// that its colours stay); void ones are written without an end tag.
var kept = set("a abbr address article b bdi bdo big blockquote body br caption center cite code col colgroup dd del dfn " +
	"div dl dt em figcaption figure font footer h1 h2 h3 h4 h5 h6 header hr i img ins kbd li main mark nav ol p pre q s " +
	"samp section small span strike strong sub sup table tbody td tfoot th thead tr tt u ul var wbr")

var void = set("br col hr img wbr")

// dropped are the elements dropped with everything in them: what runs,
// embeds, asks for input or is not the body. Any other element (html,
// head, form, button, label, meta, link…) loses its tag, keeps its text.
var dropped = set("applet audio canvas embed frame frameset iframe math noembed noframes noscript object plaintext " +
	"script select svg template textarea title video xmp")

// attrs are the attributes kept on any kept element; a, img and style
// are checked apart.
var attrs = set("align alt bgcolor border cellpadding cellspacing class color colspan dir face headers height hspace id " +
	"lang nowrap role rowspan scope size span start summary title type valign vspace width")

// The tokenizer's kinds of token, by names that say what they are.
const (
	kindEnd         = xhtml.ErrorToken // the end of the input (or a read error, which a string has not)
	kindText        = xhtml.TextToken
	kindStart       = xhtml.StartTagToken
	kindSelfClosing = xhtml.SelfClosingTagToken
	kindEndTag      = xhtml.EndTagToken
)

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

func sanitize(b *strings.Builder, h string, ping func(string) string, inline *images) {
	z := xhtml.NewTokenizer(strings.NewReader(h))
	skip, depth := "", 0 // the dropped element being skipped, and how deep in it
	inStyle := false
	for {
		tt := z.Next()
		if tt == kindEnd {
			return
		}
		tok := z.Token()
		if skip != "" {
			switch {
			case tt == kindStart && tok.Data == skip:
				depth++
			case tt == kindEndTag && tok.Data == skip:
				if depth--; depth == 0 {
					skip = ""
				}
			}
			continue
		}
		switch tt {
		case kindText:
			if inStyle {
				b.WriteString(cleanCSS(tok.Data))
			} else {
				b.WriteString(html.EscapeString(tok.Data))
			}
		case kindStart, kindSelfClosing:
			switch {
			case dropped[tok.Data]:
				if tt == kindStart {
					skip, depth = tok.Data, 1
				}
			case tok.Data == "style":
				// Its text is raw: the tokenizer ends it at the first
				// </style, which cleanCSS cannot write back.
				inStyle = tt == kindStart
				if inStyle {
					b.WriteString("<style>")
				}
			case kept[tok.Data]:
				startTag(b, tok, ping, inline)
			}
		case kindEndTag:
			switch {
			case tok.Data == "style" && inStyle:
				inStyle = false
				b.WriteString("</style>")
			case kept[tok.Data] && !void[tok.Data]:
				b.WriteString("</")
				b.WriteString(tagName(tok.Data))
				b.WriteString(">")
			}
		}
	}
}

func tagName(name string) string {
	if name == "body" {
		return "div"
	}
	return name
}

// startTag writes a kept element's start tag with its allowed attributes.
func startTag(b *strings.Builder, tok xhtml.Token, ping func(string) string, inline *images) {
	b.WriteString("<")
	b.WriteString(tagName(tok.Data))
	for _, a := range tok.Attr {
		if a.Namespace != "" {
			continue
		}
		v := a.Val
		switch {
		case a.Key == "style":
			if v = cleanCSS(v); v == "" {
				continue
			}
		case tok.Data == "a" && a.Key == "href":
			if v = linkURL(v); v == "" {
				continue
			}
		case tok.Data == "img" && a.Key == "src":
			if v = inline.url(v); v == "" {
				continue
			}
		case !attrs[a.Key]:
			continue
		}
		attr(b, a.Key, v)
	}
	if tok.Data == "a" {
		// Every link leads the top window, with no referrer and no handle
		// on the inbox; one the text has too pings the inbox.
		attr(b, "target", "_top")
		attr(b, "rel", "noreferrer noopener")
		if href := hrefOf(tok); ping != nil && href != "" {
			if p := ping(href); p != "" {
				attr(b, "ping", p)
			}
		}
	}
	b.WriteString(">")
}

func hrefOf(tok xhtml.Token) string {
	for _, a := range tok.Attr {
		if a.Key == "href" && a.Namespace == "" {
			return linkURL(a.Val)
		}
	}
	return ""
}

func attr(b *strings.Builder, key, val string) {
	b.WriteString(" ")
	b.WriteString(key)
	b.WriteString(`="`)
	b.WriteString(html.EscapeString(val))
	b.WriteString(`"`)
}

// linkURL is an href as the frame keeps it: an absolute http, https or
// mailto URL, else nothing.
func linkURL(v string) string {
	v = strings.TrimSpace(v)
	if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return ""
	}
	if isHTTP(v) || hasPrefixFold(v, "mailto:") {
		return v
	}
	return ""
}

// isHTTP reports whether u is an http or https URL (schemes are ASCII
// case-insensitive).
func isHTTP(u string) bool { return hasPrefixFold(u, "https://") || hasPrefixFold(u, "http://") }

// shown are the inline image types a frame shows (as data: URIs):
// raster formats only.
var shown = set("image/png image/jpeg image/gif image/webp")

// images are a message's inline images of a shown type by Content-ID
// (the first of each), and the bytes a frame may still spend on their
// data: URIs (limits.FrameImageBytes). A URI is built when an img first
// names it and fits the budget: an image no img names, or one too large
// to show, is never encoded.
type images struct {
	parts  map[string]rpc.InlineImage
	uris   map[string]string
	budget int
}

func newImages(inline []rpc.InlineImage) *images {
	im := &images{parts: map[string]rpc.InlineImage{}, uris: map[string]string{}, budget: limits.FrameImageBytes}
	for _, p := range inline {
		if _, dup := im.parts[p.ContentID]; !dup && shown[strings.ToLower(p.ContentType)] {
			im.parts[p.ContentID] = p
		}
	}
	return im
}

// url is an img src as the frame keeps it: cid:x becomes the data: URI
// of the inline part with Content-ID x while the budget lasts; anything
// else (a remote image, the sender's own data: URI) is dropped.
func (im *images) url(v string) string {
	v = strings.TrimSpace(v)
	if len(v) < 4 || !strings.EqualFold(v[:4], "cid:") {
		return ""
	}
	p, ok := im.parts[v[4:]]
	if !ok {
		return ""
	}
	prefix := "data:" + strings.ToLower(p.ContentType) + ";base64,"
	n := len(prefix) + base64.StdEncoding.EncodedLen(len(p.Data))
	if n > im.budget {
		return ""
	}
	im.budget -= n
	u, ok := im.uris[v[4:]]
	if !ok {
		u = prefix + base64.StdEncoding.EncodeToString(p.Data)
		im.uris[v[4:]] = u
	}
	return u
}

// cssBlocked are what, in a style, could make a request or run
// something; each is made an unknown name, which the browser ignores.
var cssBlocked = []string{"url(", "image(", "image-set(", "cross-fade(", "element(", "src(", "@import", "@font-face",
	"expression(", "behavior", "-moz-binding"}

// cleanCSS makes a style unable to load anything. A backslash (a CSS
// escape can spell url( so that no search finds it) drops the whole
// style. CSS names are ASCII case-insensitive, and so is the search.
func cleanCSS(s string) string {
	if strings.ContainsRune(s, '\\') {
		return ""
	}
	var b strings.Builder
	from := 0 // s up to from is written
	for i := 0; i < len(s); i++ {
		for _, p := range cssBlocked {
			if hasPrefixFold(s[i:], p) {
				at := 0
				if p[0] == '@' {
					at = 1 // "@blocked-import": an unknown at-rule, which the browser skips alone
				}
				b.WriteString(s[from : i+at])
				b.WriteString("blocked-")
				from = i + at
				break
			}
		}
	}
	if b.Len() == 0 {
		return s
	}
	b.WriteString(s[from:])
	return b.String()
}

// hasPrefixFold reports whether s begins with p, a lowercase ASCII
// word, in any ASCII case.
func hasPrefixFold(s, p string) bool {
	if len(s) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != p[i] {
			return false
		}
	}
	return true
}
