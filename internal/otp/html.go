package otp

import (
	"html"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/otp/urls"
)

// doc is one part of a message as a reader sees it: its visible text, where
// that text is emphasized, the short table cells, and the links.
//
// In the text of an HTML part a block element ends a line ('\n') and a
// table cell begins with a tab, so that "Code:" and "731904" in two cells
// of one row stand on one line, and digits in separate cells stay apart.
type doc struct {
	text    string
	emph    []span // emphasized runs, in order, not overlapping
	cells   []span // table cells whose text is short and holds no other cell, in order
	anchors []anchor
	html    bool
	spans   []urls.Span // the URLs of text, once found
	found   bool
}

// urlSpans returns the URLs of the doc's text, finding them once.
func (d *doc) urlSpans() []urls.Span {
	if !d.found {
		d.found = true
		// Most text holds no URL at all; the finder need not read it.
		if strings.Contains(d.text, "://") {
			d.spans = urls.Spans(d.text)
		}
	}
	return d.spans
}

// span is a byte range of doc.text with what marks it.
type span struct {
	start, end int
	flags      emph
}

// emph is how a piece of HTML text is set apart.
type emph uint8

const (
	emBold   emph = 1 << iota // <b>, <strong>, font-weight 600 and more
	emLarge                   // a font of 18px or more, <h1>, <h2>, <big>
	emSpaced                  // letter-spacing
	emMono                    // <code>, <kbd>, a monospace font
)

// anchor is one <a href> of an HTML part.
type anchor struct {
	href       string
	start, end int  // its text in doc.text
	button     bool // styled as a button, or alone in a coloured cell
	image      bool // holds an image
}

// Limits of the HTML reader: how deep it tracks open elements, and how long
// a cell may be to count as holding one value.
const (
	maxDepth   = 256
	maxAnchors = 1024
	shortCell  = 40
)

// element is an open element of the HTML reader.
type element struct {
	name   string
	flags  emph
	cell   int // for <td> and <th>: where its text begins; else -1
	bg     bool
	anchor int // index into anchors for <a href>; else -1
}

// textDoc is a plain text part (or a subject).
func textDoc(s string) doc { return doc{text: s} }

// htmlDoc reads an HTML part once, left to right: the cost is linear in its
// length. It is no validating parser; it reads what a mail client would
// show, well enough to weigh codes and links: scripts, styles, the head and
// comments are skipped, entities decoded, white space collapsed.
func htmlDoc(h string) doc {
	r := htmlReader{src: h}
	r.run()
	return doc{text: string(r.out), emph: r.emph, cells: r.cells, anchors: r.anchors, html: true}
}

type htmlReader struct {
	src     string
	out     []byte
	stack   []element
	emph    []span
	cells   []span
	anchors []anchor
	pre     int // depth of <pre>
}

func (r *htmlReader) run() {
	h := r.src
	for i := 0; i < len(h); {
		if h[i] != '<' {
			j := strings.IndexByte(h[i:], '<')
			if j < 0 {
				j = len(h) - i
			}
			r.text(h[i : i+j])
			i += j
			continue
		}
		i = r.tag(i)
	}
	// Whatever is still open ends with the document, as in a browser.
	for len(r.stack) > 0 {
		e := r.stack[len(r.stack)-1]
		r.stack = r.stack[:len(r.stack)-1]
		r.ended(e)
	}
}

// tag reads the markup at h[i] (a '<') and returns where reading goes on.
func (r *htmlReader) tag(i int) int {
	h := r.src
	if strings.HasPrefix(h[i:], "<!--") {
		if k := strings.Index(h[i+4:], "-->"); k >= 0 {
			return i + 4 + k + 3
		}
		return len(h)
	}
	j := i + 1
	closing := j < len(h) && h[j] == '/'
	if closing {
		j++
	}
	n := j
	for n < len(h) && (isAlpha(h[n]) || (n > j && isDigit(h[n]))) {
		n++
	}
	if n == j {
		if j < len(h) && (h[j] == '!' || h[j] == '?') {
			if k := strings.IndexByte(h[j:], '>'); k >= 0 {
				return j + k + 1
			}
			return len(h)
		}
		r.text("<")
		return i + 1
	}
	name := strings.ToLower(h[j:n])
	end, attrs := tagEnd(h, n)
	if closing {
		r.close(name)
		return end
	}
	switch name {
	case "script", "style", "head", "title", "template", "noscript", "xml":
		return skipRaw(h, end, name)
	}
	r.open(name, attrs)
	return end
}

// tagEnd returns the offset after the '>' that ends a tag whose name ends
// at n, and the tag's attribute text; quoted values may hold '>'.
func tagEnd(h string, n int) (int, string) {
	var q byte
	for k := n; k < len(h); k++ {
		c := h[k]
		switch {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '"' || c == '\'':
			q = c
		case c == '>':
			return k + 1, h[n:k]
		}
	}
	return len(h), h[n:]
}

// skipRaw returns the offset after the end tag of a raw-text element (or
// the end of h when it never ends).
func skipRaw(h string, from int, name string) int {
	for k := from; k < len(h); {
		j := strings.Index(h[k:], "</")
		if j < 0 {
			return len(h)
		}
		k += j + 2
		if len(h)-k >= len(name) && strings.EqualFold(h[k:k+len(name)], name) {
			if e := strings.IndexByte(h[k:], '>'); e >= 0 {
				return k + e + 1
			}
			return len(h)
		}
	}
	return len(h)
}

var blockTags = map[string]bool{
	"p": true, "div": true, "br": true, "tr": true, "li": true, "h1": true, "h2": true, "h3": true, "h4": true,
	"h5": true, "h6": true, "table": true, "ul": true, "ol": true, "blockquote": true, "pre": true, "hr": true,
	"center": true, "section": true, "article": true, "header": true, "footer": true, "dl": true, "dt": true,
	"dd": true, "body": true, "main": true, "nav": true, "address": true, "figure": true, "figcaption": true,
}

var voidTags = map[string]bool{
	"br": true, "img": true, "hr": true, "meta": true, "link": true, "input": true, "col": true, "wbr": true,
	"area": true, "base": true, "source": true, "embed": true, "param": true, "track": true,
}

func (r *htmlReader) open(name string, attrs string) {
	if blockTags[name] {
		r.newline()
	}
	if name == "img" {
		for k := len(r.stack) - 1; k >= 0; k-- {
			if a := r.stack[k].anchor; a >= 0 {
				r.anchors[a].image = true
				break
			}
		}
	}
	if voidTags[name] || strings.HasSuffix(attrs, "/") && name != "a" && name != "td" && name != "th" {
		return
	}
	e := element{name: name, cell: -1, anchor: -1}
	if len(r.stack) > 0 {
		e.flags = r.stack[len(r.stack)-1].flags
	}
	switch name {
	case "b", "strong":
		e.flags |= emBold
	case "h1", "h2":
		e.flags |= emBold | emLarge
	case "h3":
		e.flags |= emBold
	case "big":
		e.flags |= emLarge
	case "code", "kbd", "tt", "samp", "pre":
		e.flags |= emMono
	case "td", "th":
		r.tab()
		e.cell = len(r.out)
	case "a":
		// An <a> inside an <a> ends the first, as browsers do.
		r.close("a")
	}
	if name == "pre" {
		r.pre++
	}
	style := attr(attrs, "style")
	e.flags |= styleFlags(style)
	if name == "font" {
		if sz, err := strconv.Atoi(strings.TrimPrefix(attr(attrs, "size"), "+")); err == nil && sz >= 5 {
			e.flags |= emLarge
		}
		if f := strings.ToLower(attr(attrs, "face")); strings.Contains(f, "courier") || strings.Contains(f, "mono") {
			e.flags |= emMono
		}
	}
	bg := attr(attrs, "bgcolor") != "" || hasBackground(style)
	e.bg = bg
	if name == "a" {
		if href := strings.TrimSpace(html.UnescapeString(attr(attrs, "href"))); href != "" && len(r.anchors) < maxAnchors {
			cls := strings.ToLower(attr(attrs, "class"))
			button := bg || strings.Contains(cls, "btn") || strings.Contains(cls, "button") || strings.Contains(cls, "cta") ||
				strings.Contains(strings.ToLower(style), "padding") || strings.Contains(strings.ToLower(style), "inline-block")
			for k := len(r.stack) - 1; k >= 0 && k >= len(r.stack)-3; k-- {
				button = button || r.stack[k].bg && r.stack[k].cell >= 0
			}
			e.anchor = len(r.anchors)
			r.anchors = append(r.anchors, anchor{href: href, start: len(r.out), end: -1, button: button})
		}
	}
	if len(r.stack) < maxDepth {
		r.stack = append(r.stack, e)
	}
}

// close pops the innermost open element called name and everything opened
// inside it; an end tag with no open element is ignored.
func (r *htmlReader) close(name string) {
	k := len(r.stack) - 1
	for ; k >= 0 && len(r.stack)-k <= 64; k-- {
		if r.stack[k].name == name {
			break
		}
	}
	if k < 0 || len(r.stack)-k > 64 {
		if blockTags[name] {
			r.newline()
		}
		return
	}
	for len(r.stack) > k {
		e := r.stack[len(r.stack)-1]
		r.stack = r.stack[:len(r.stack)-1]
		r.ended(e)
	}
}

// ended records what an element leaves behind once it is closed.
func (r *htmlReader) ended(e element) {
	end := len(r.out)
	if e.anchor >= 0 {
		r.anchors[e.anchor].end = end
	}
	if e.cell >= 0 && end-e.cell <= shortCell {
		if !strings.ContainsAny(string(r.out[e.cell:end]), "\t\n") {
			r.cells = append(r.cells, span{start: e.cell, end: end})
		}
	}
	if e.name == "pre" && r.pre > 0 {
		r.pre--
	}
	if blockTags[e.name] {
		r.newline()
	}
}

// text appends a run of character data, decoded, with white space
// collapsed, and records its emphasis.
func (r *htmlReader) text(s string) {
	if strings.IndexByte(s, '&') >= 0 {
		s = html.UnescapeString(s)
	}
	var flags emph
	if len(r.stack) > 0 {
		flags = r.stack[len(r.stack)-1].flags
	}
	start := len(r.out)
	for _, c := range s {
		switch {
		case c == '\u200b' || c == '\u200c' || c == '\u200d' || c == '\ufeff' || c == '\u00ad' || c == '\u034f':
			// zero-width characters pad preheaders and split words
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\u00a0' || c == '\u2007' || c == '\u202f' || c == '\u2009':
			if r.pre > 0 && c == '\n' {
				r.newline()
			} else {
				r.space()
			}
		default:
			r.out = utf8.AppendRune(r.out, c)
		}
	}
	if flags != 0 && len(r.out) > start {
		if n := len(r.emph); n > 0 && r.emph[n-1].end == start && r.emph[n-1].flags == flags {
			r.emph[n-1].end = len(r.out)
		} else {
			r.emph = append(r.emph, span{start: start, end: len(r.out), flags: flags})
		}
	}
}

func (r *htmlReader) last() byte {
	if len(r.out) == 0 {
		return '\n'
	}
	return r.out[len(r.out)-1]
}

func (r *htmlReader) space() {
	if c := r.last(); c != ' ' && c != '\n' && c != '\t' {
		r.out = append(r.out, ' ')
	}
}

func (r *htmlReader) newline() {
	r.trimSpace()
	if r.last() != '\n' {
		r.out = append(r.out, '\n')
	}
}

func (r *htmlReader) tab() {
	r.trimSpace()
	if c := r.last(); c != '\n' && c != '\t' {
		r.out = append(r.out, '\t')
	}
}

// trimSpace drops a space that would end a line or stand before a cell,
// unless an emphasized span or a cell already ends after it.
func (r *htmlReader) trimSpace() {
	n := len(r.out)
	if n == 0 || r.out[n-1] != ' ' {
		return
	}
	if k := len(r.emph); k > 0 && r.emph[k-1].end == n {
		return
	}
	r.out = r.out[:n-1]
}

// attr returns the value of attribute name in a tag's attribute text.
func attr(attrs, name string) string {
	for i := 0; i < len(attrs); {
		for i < len(attrs) && !isAttrChar(attrs[i]) {
			i++
		}
		j := i
		for j < len(attrs) && isAttrChar(attrs[j]) {
			j++
		}
		key := attrs[i:j]
		k := j
		for k < len(attrs) && (attrs[k] == ' ' || attrs[k] == '\t' || attrs[k] == '\n' || attrs[k] == '\r') {
			k++
		}
		if k >= len(attrs) || attrs[k] != '=' {
			if j == i {
				j++
			}
			i = j
			if strings.EqualFold(key, name) {
				return ""
			}
			continue
		}
		k++
		for k < len(attrs) && (attrs[k] == ' ' || attrs[k] == '\t' || attrs[k] == '\n' || attrs[k] == '\r') {
			k++
		}
		var val string
		if k < len(attrs) && (attrs[k] == '"' || attrs[k] == '\'') {
			q := attrs[k]
			e := strings.IndexByte(attrs[k+1:], q)
			if e < 0 {
				e = len(attrs) - k - 1
			}
			val = attrs[k+1 : k+1+e]
			i = min(len(attrs), k+2+e)
		} else {
			e := k
			for e < len(attrs) && attrs[e] != ' ' && attrs[e] != '\t' && attrs[e] != '\n' && attrs[e] != '\r' {
				e++
			}
			val = attrs[k:e]
			i = e
		}
		if strings.EqualFold(key, name) {
			return val
		}
	}
	return ""
}

func isAttrChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '-' || c == '_' || c == ':'
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// styleFlags reads the emphasis of an inline style.
func styleFlags(style string) emph {
	if style == "" {
		return 0
	}
	var f emph
	s := strings.ToLower(style)
	for _, decl := range strings.Split(s, ";") {
		prop, val, ok := strings.Cut(decl, ":")
		if !ok {
			continue
		}
		prop, val = strings.TrimSpace(prop), strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(val), "!important"))
		switch prop {
		case "font-weight":
			if val == "bold" || val == "bolder" || len(val) == 3 && val[0] >= '6' && val[0] <= '9' && val[1:] == "00" {
				f |= emBold
			}
		case "font-size":
			if largeFont(val) {
				f |= emLarge
			}
		case "letter-spacing":
			if val != "" && val != "0" && val != "normal" && !strings.HasPrefix(val, "0px") && !strings.HasPrefix(val, "0em") && !strings.HasPrefix(val, "-") {
				f |= emSpaced
			}
		case "font-family":
			if strings.Contains(val, "mono") || strings.Contains(val, "courier") || strings.Contains(val, "consolas") || strings.Contains(val, "menlo") {
				f |= emMono
			}
		case "font":
			for _, part := range strings.Fields(val) {
				if largeFont(strings.Split(part, "/")[0]) {
					f |= emLarge
				}
				if part == "bold" || part == "700" || part == "800" || part == "900" {
					f |= emBold
				}
			}
		}
	}
	return f
}

// largeFont reports whether a CSS font size is at least about 18px.
func largeFont(v string) bool {
	switch v {
	case "large", "x-large", "xx-large", "xxx-large", "larger":
		return true
	}
	num := strings.TrimRight(v, "abcdefghijklmnopqrstuvwxyz%")
	unit := v[len(num):]
	x, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil {
		return false
	}
	switch unit {
	case "px":
		return x >= 18
	case "pt":
		return x >= 14
	case "em", "rem":
		return x >= 1.3
	case "%":
		return x >= 130
	}
	return false
}

// hasBackground reports whether an inline style paints a background.
func hasBackground(style string) bool {
	s := strings.ToLower(style)
	for _, decl := range strings.Split(s, ";") {
		prop, val, ok := strings.Cut(decl, ":")
		prop, val = strings.TrimSpace(prop), strings.TrimSpace(val)
		if ok && (prop == "background" || prop == "background-color") && val != "" && val != "none" && val != "transparent" &&
			val != "#fff" && val != "#ffffff" && val != "white" && val != "inherit" {
			return true
		}
	}
	return false
}

// ownReach is how much longer than a candidate its emphasized span may be
// (punctuation, spaces) and still be its own.
const ownReach = 24

// alnumIn reports whether s holds a letter or a digit.
func alnumIn(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

// emphasisAt is a cursor over a doc's emphasized spans for offsets asked
// in increasing order.
type emphasisAt struct {
	spans []span
	k     int
}

// at returns the emphasis common to all of text[start:end] that is not
// white space (a code split over cells is still bold when each cell is).
// Emphasis counts only where it sets the candidate apart: a span that
// also holds other words ("<b>Growth 2026 team</b>") emphasizes them all.
func (c *emphasisAt) at(text string, start, end int) emph {
	for c.k < len(c.spans) && c.spans[c.k].end <= start {
		c.k++
	}
	all := emph(0xff)
	k := c.k
	for i := start; i < end; {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == ' ' || r == '\t' || r == '\n' || r == '-' {
			i += size
			continue
		}
		for k < len(c.spans) && c.spans[k].end <= i {
			k++
		}
		if k == len(c.spans) || c.spans[k].start > i {
			return 0
		}
		sp := c.spans[k]
		if sp.end-sp.start > end-start+ownReach || alnumIn(text[sp.start:max(sp.start, min(start, sp.end))]) ||
			alnumIn(text[min(sp.end, max(end, sp.start)):sp.end]) {
			return 0
		}
		all &= sp.flags
		i += size
	}
	if all == 0xff {
		return 0
	}
	return all
}
