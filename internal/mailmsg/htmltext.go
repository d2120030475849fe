package mailmsg

import (
	"html"
	"strings"
)

// HTMLText derives readable text from an HTML body, for mail that has no
// text part: block elements become line breaks, a link keeps its URL next
// to its words (so a reader can still follow it), scripts and styles are
// dropped, entities are decoded.
//
// It reads the HTML in a few passes of plain loops rather than regular
// expressions: Go's regexp clears a bitmap as long as the whole text
// before every match on texts of up to some kilobytes, and searches from
// every unclosed "<a" or "<!--" to the end, so a sender's HTML of many
// small tags made it superlinear. Each pass here reads each byte a fixed
// number of times, and finds every closing mark with a forward-only search.
func HTMLText(h string) string {
	parses.Add(1)
	s := dropHidden(h)
	s = replaceLinks(s)
	s = breakBlocks(s)
	s = dropTags(s)
	s = html.UnescapeString(s)
	s = strings.ReplaceAll(s, "\u00a0", " ")
	// Each line without spaces around it and with runs of spaces and tabs
	// made one space; at most one blank line in a row.
	var b strings.Builder
	b.Grow(len(s))
	blank := false // a blank line since the last line written
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			blank = true
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
			if blank {
				b.WriteByte('\n')
			}
		}
		blank = false
		oneSpace(&b, line)
	}
	return strings.TrimSpace(b.String())
}

// dropHidden removes comments and script, style, head and title elements
// (an element may be closed by the end tag of any of the four). An
// element or comment that is never closed is left to the later passes.
func dropHidden(s string) string {
	var b strings.Builder
	comments := forward{s: s, find: func(t string) (int, int) { return index(t, "-->") }}
	closers := forward{s: s, find: func(t string) (int, int) {
		return findEndTag(t, hiddenElement)
	}}
	gts := forward{s: s, find: func(t string) (int, int) { return index(t, ">") }}
	kept := 0
	for p := 0; p < len(s); p++ {
		if s[p] != '<' {
			continue
		}
		end := -1
		if strings.HasPrefix(s[p:], "<!--") {
			if _, e := comments.after(p + 4); e >= 0 {
				end = e
			}
		} else if name := word(s, p+1); hiddenElement(name) {
			if _, g := gts.after(p + 1 + len(name)); g >= 0 {
				if _, e := closers.after(g); e >= 0 {
					end = e
				}
			}
		}
		if end >= 0 {
			if kept == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[kept:p])
			kept, p = end, end-1
		}
	}
	if kept == 0 {
		return s
	}
	b.WriteString(s[kept:])
	return b.String()
}

func hiddenElement(name string) bool {
	for _, n := range []string{"script", "style", "head", "title"} {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// replaceLinks replaces each <a href=…>words</a> with "words (href)", or
// with the href alone when there are no words or the words are the href.
func replaceLinks(s string) string {
	var b strings.Builder
	gts := forward{s: s, find: func(t string) (int, int) { return index(t, ">") }}
	dquotes := forward{s: s, find: func(t string) (int, int) { return index(t, `"`) }}
	squotes := forward{s: s, find: func(t string) (int, int) { return index(t, "'") }}
	closers := forward{s: s, find: func(t string) (int, int) {
		return findEndTag(t, func(name string) bool { return strings.EqualFold(name, "a") })
	}}
	kept := 0
	for p := 0; p < len(s); p++ {
		if s[p] != '<' || !strings.EqualFold(word(s, p+1), "a") {
			continue
		}
		g, _ := gts.after(p + 2)
		if g < 0 {
			break // no tag closes from here on
		}
		// The href is in the start tag; a failed start tag fails every
		// "<a" inside it too, so the scan goes on after it.
		href, valueEnd, ok := findHref(s, p+2, g, &dquotes, &squotes)
		if !ok {
			p = g
			continue
		}
		tagEnd, _ := gts.after(valueEnd)
		if tagEnd < 0 {
			break
		}
		closeAt, closeEnd := closers.after(tagEnd + 1)
		if closeAt < 0 {
			break // no link closes from here on
		}
		if kept == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[kept:p])
		words := strings.TrimSpace(dropTags(s[tagEnd+1 : closeAt]))
		if words == "" || html.UnescapeString(words) == html.UnescapeString(href) {
			b.WriteString(" " + href + " ")
		} else {
			b.WriteString(words + " (" + href + ")")
		}
		kept, p = closeEnd, closeEnd-1
	}
	if kept == 0 {
		return s
	}
	b.WriteString(s[kept:])
	return b.String()
}

// findHref finds the first href attribute with a value between from and
// the tag's first '>' at g: a quoted value (which may run past g) or an
// unquoted one. It returns the value and where it ends.
func findHref(s string, from, g int, dquotes, squotes *forward) (href string, end int, ok bool) {
	for k := from; k < g; k++ {
		i := indexFold(s[k:g], "href")
		if i < 0 {
			return "", 0, false
		}
		k += i
		if isWordByte(s[k-1]) {
			continue
		}
		v := skipSpace(s, k+4)
		if v >= len(s) || s[v] != '=' {
			continue
		}
		v = skipSpace(s, v+1)
		if v >= len(s) {
			return "", 0, false
		}
		var quotes *forward
		switch s[v] {
		case '"':
			quotes = dquotes
		case '\'':
			quotes = squotes
		}
		if quotes != nil {
			if q, _ := quotes.after(v + 1); q >= 0 {
				return s[v+1 : q], q + 1, true
			}
		}
		e := v
		for e < len(s) && s[e] != '>' && !isSpace(s[e]) {
			e++
		}
		if e > v {
			return s[v:e], e, true
		}
	}
	return "", 0, false
}

// breakBlocks turns <br> and the start and end tags of block elements
// into line breaks.
func breakBlocks(s string) string {
	var b strings.Builder
	gts := forward{s: s, find: func(t string) (int, int) { return index(t, ">") }}
	kept := 0
	for p := 0; p < len(s); p++ {
		if s[p] != '<' {
			continue
		}
		end := -1
		if n := word(s, p+1); strings.EqualFold(n, "br") {
			e := skipSpace(s, p+3)
			if e < len(s) && s[e] == '/' {
				e++
			}
			if e < len(s) && s[e] == '>' {
				end = e + 1
			}
		}
		if end < 0 {
			name := p + 1
			if name < len(s) && s[name] == '/' {
				name++
			}
			if n := word(s, name); blockElement(n) {
				if _, g := gts.after(name + len(n)); g >= 0 {
					end = g
				}
			}
		}
		if end >= 0 {
			if kept == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[kept:p])
			b.WriteByte('\n')
			kept, p = end, end-1
		}
	}
	if kept == 0 {
		return s
	}
	b.WriteString(s[kept:])
	return b.String()
}

func blockElement(name string) bool {
	switch strings.ToLower(name) {
	case "p", "div", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "blockquote", "pre", "hr":
		return true
	}
	return false
}

// dropTags removes every "<…>" from s; a "<" with no ">" after it is text.
func dropTags(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		s = s[i+j+1:]
	}
	if b.Len() == 0 {
		return s
	}
	b.WriteString(s)
	return b.String()
}

// oneSpace writes line with each run of spaces and tabs made one space.
func oneSpace(b *strings.Builder, line string) {
	space := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == ' ' || c == '\t' {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteByte(c)
	}
}

// forward finds the next occurrence of something in s at or after a
// position. Asked for positions in increasing order, as the passes above
// do, it reads each byte of s once: the answer for a position before the
// last one found is that one again, and "none" stays none.
type forward struct {
	s    string
	find func(string) (at, end int) // first occurrence in a text, or -1, -1
	// the last search started at from and found [at, end), or nothing.
	from, at, end int
	searched      bool
}

// after returns the first occurrence at or after q, or -1, -1.
func (f *forward) after(q int) (at, end int) {
	if f.searched && q >= f.from && (f.at < 0 || q <= f.at) {
		return f.at, f.end
	}
	f.from, f.at, f.end, f.searched = q, -1, -1, true
	if q <= len(f.s) {
		if a, e := f.find(f.s[q:]); a >= 0 {
			f.at, f.end = q+a, q+e
		}
	}
	return f.at, f.end
}

func index(s, sub string) (int, int) {
	if i := strings.Index(s, sub); i >= 0 {
		return i, i + len(sub)
	}
	return -1, -1
}

// findEndTag finds the first end tag "</name>" whose name passes ok, with
// white space allowed before the '>'.
func findEndTag(s string, ok func(string) bool) (int, int) {
	const open = "</"
	for off := 0; ; {
		i := strings.Index(s[off:], open)
		if i < 0 {
			return -1, -1
		}
		at := off + i
		name := word(s, at+len(open))
		if e := skipSpace(s, at+len(open)+len(name)); ok(name) && e < len(s) && s[e] == '>' {
			return at, e + 1
		}
		off = at + 1
	}
}

// word returns the run of ASCII letters, digits and '_' at s[i:].
func word(s string, i int) string {
	e := i
	for e < len(s) && isWordByte(s[e]) {
		e++
	}
	return s[min(i, len(s)):e]
}

func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// isSpace is white space as HTML and the old expressions' \s knew it.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// indexFold is strings.Index for an ASCII lower-case sub, ignoring case.
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}
