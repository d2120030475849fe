// Package urls finds the http and https URLs in a text. It is what the
// inbox needs to make links of a message body, kept apart from code
// extraction so that the agent's inbox does not link the code that finds
// one-time codes.
package urls

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/limits"
)

// Span is the byte range of one URL in a text.
type Span struct{ Start, End int }

// Spans returns the http and https URLs of text, in order, as byte
// ranges. A URL ends at white space, a control character, a quote or any
// of <>`{}|\^; trailing sentence punctuation and unbalanced closing
// brackets are not part of it ("see https://x.example/a." and
// "(https://x.example/a)"). Only http and https are links (never
// javascript:, data: or mailto:).
//
// Spans reads text once, in time linear in its length. Only URLs that
// start in the first limits.LinkifyBytes of text are found, and a run of
// URL characters longer than limits.URLBytes from its scheme on is not a
// URL. A scheme that is not a URL (after a letter, or not valid) moves the
// scan past the scheme, not to the next character, and the run it is in
// is read once for all the schemes in it. The work spent on checking
// candidates is bounded by the text's length: a text of many invalid
// candidates gets no more links once that budget is spent, and nothing a
// sender writes makes this slower than reading the text a few times.
func Spans(text string) []Span {
	window := min(len(text), limits.LinkifyBytes)
	// budget is what the candidates may cost: each valid URL costs its
	// length once, so ordinary text never runs out.
	budget := 2*window + limits.URLBytes
	var out []Span
	// The run of URL characters being read: every character from the
	// last scheme in it up to reach is one, and runEnded says the run
	// ends at reach. It is read once for all the schemes in it.
	reach, runEnded := -1, false
	for i := 0; i < window; {
		if c := text[i]; c != 'h' && c != 'H' {
			i++ // no scheme starts here; most bytes are not even an h
			continue
		}
		n := schemeAt(text, i)
		if n == 0 {
			i++
			continue
		}
		if prev, _ := utf8.DecodeLastRuneInString(text[:i]); i > 0 && unicode.IsLetter(prev) {
			i += n // a scheme inside a word ("xhttp://")
			continue
		}
		if reach < i+n { // a new run (a scheme is all URL characters)
			reach, runEnded = i+n, false
		}
		// Read the run on, but not further than a URL may reach.
		for !runEnded && reach <= i+limits.URLBytes && reach < len(text) {
			if c := text[reach]; c < utf8.RuneSelf && urlByte[c] {
				reach++
				continue
			}
			c, size := utf8.DecodeRuneInString(text[reach:])
			if !Rune(c) {
				runEnded = true
				break
			}
			reach += size
		}
		end := reach
		if reach == len(text) {
			runEnded = true
		}
		if !runEnded || end-i > limits.URLBytes {
			i += n // too long to be a link
			continue
		}
		if budget -= end - i; budget < 0 {
			break
		}
		end = i + trim(text[i:end])
		if Valid(text[i:end]) {
			if out == nil {
				out = make([]Span, 0, 8) // a mail's few links in one allocation, none for a text without
			}
			out = append(out, Span{i, end})
			i = end
			continue
		}
		i += n
	}
	return out
}

// schemeAt returns the length of "http://" or "https://" (in any case) at
// text[i:], or 0.
func schemeAt(text string, i int) int {
	if i >= len(text) {
		return 0
	}
	if c := text[i]; c != 'h' && c != 'H' {
		return 0
	}
	for _, s := range [...]string{"http://", "https://"} {
		if len(text)-i >= len(s) && strings.EqualFold(text[i:i+len(s)], s) {
			return len(s)
		}
	}
	return 0
}

// urlByte is Rune of each ASCII character, read without a call.
var urlByte = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = Rune(rune(c))
	}
	return t
}()

// Rune reports whether c may stand inside a URL.
func Rune(c rune) bool {
	if c == utf8.RuneError || unicode.IsSpace(c) || unicode.IsControl(c) {
		return false
	}
	return !strings.ContainsRune("<>\"'`{}|\\^", c)
}

// trim returns the length of u without trailing punctuation and
// unbalanced closing brackets. The brackets are counted once, not again
// for every character trimmed.
func trim(u string) int {
	open, closed := strings.Count(u, "("), strings.Count(u, ")")
	openSq, closedSq := strings.Count(u, "["), strings.Count(u, "]")
	n := len(u)
	for ; n > 0; n-- {
		switch last := u[n-1]; {
		case strings.IndexByte(".,;:!?*", last) >= 0:
		case last == ')' && open < closed:
			closed--
		case last == ']' && openSq < closedSq:
			closedSq--
		default:
			return n
		}
	}
	return 0
}

// Valid reports whether u is an absolute http(s) URL with a host, of at
// most limits.URLBytes bytes.
func Valid(u string) bool {
	return len(u) <= limits.URLBytes && (plain(u) || parsed(u))
}

// parsed is Valid's answer by url.Parse.
func parsed(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return false
	}
	s := strings.ToLower(p.Scheme)
	return s == "http" || s == "https"
}

// plain reports whether u is a URL as mail mostly writes them, which
// url.Parse takes with a host (FuzzValid): "http://" or "https://", a
// host of ASCII letters, digits and "-._~", then after a '/' or '?' only
// those and "/?!$&'()*+,;=:@" (no '%' escape, no '#', no port). Most
// URLs are read here without the allocations of a parse.
func plain(u string) bool {
	n := schemeAt(u, 0)
	if n == 0 {
		return false
	}
	host := n // the host's end, until a '/' or '?' ends it
	for i := n; i < len(u); i++ {
		switch c := u[i]; {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~':
			if host == i {
				host++
			}
		case host == i && i > n && (c == '/' || c == '?'):
			host = -1
		case host < 0 && strings.IndexByte("/?!$&'()*+,;=:@", c) >= 0:
		default:
			return false
		}
	}
	return host != n
}
