// Package urls finds the http and https URLs in a text. It is what the
// inbox needs to make links of a message body, kept apart from code
// extraction so that the agent's inbox does not link the code that finds
// one-time codes.
package urls

import (
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// scheme finds where a URL may start; only http and https are links (never
// javascript:, data: or mailto:).
var scheme = regexp.MustCompile(`(?i)https?://`)

// Span is the byte range of one URL in a text.
type Span struct{ Start, End int }

// Spans returns the http and https URLs of text, in order, as byte
// ranges. A URL ends at white space, a control character, a quote or any
// of <>`{}|\^; trailing sentence punctuation and unbalanced closing
// brackets are not part of it ("see https://x.example/a." and
// "(https://x.example/a)").
func Spans(text string) []Span {
	var out []Span
	pos := 0
	for pos < len(text) {
		loc := scheme.FindStringIndex(text[pos:])
		if loc == nil {
			break
		}
		start, end := pos+loc[0], pos+loc[1]
		for end < len(text) {
			c, size := utf8.DecodeRuneInString(text[end:])
			if !Rune(c) {
				break
			}
			end += size
		}
		end = start + trim(text[start:end])
		if prev, _ := utf8.DecodeLastRuneInString(text[:start]); (start == 0 || !unicode.IsLetter(prev)) && Valid(text[start:end]) {
			out = append(out, Span{start, end})
			pos = end
			continue
		}
		pos = start + loc[1]
	}
	return out
}

// Rune reports whether c may stand inside a URL.
func Rune(c rune) bool {
	if c == utf8.RuneError || unicode.IsSpace(c) || unicode.IsControl(c) {
		return false
	}
	return !strings.ContainsRune("<>\"'`{}|\\^", c)
}

// trim returns the length of u without trailing punctuation and
// unbalanced closing brackets.
func trim(u string) int {
	for len(u) > 0 {
		last := u[len(u)-1]
		switch {
		case strings.IndexByte(".,;:!?*", last) >= 0:
		case last == ')' && strings.Count(u, "(") < strings.Count(u, ")"):
		case last == ']' && strings.Count(u, "[") < strings.Count(u, "]"):
		default:
			return len(u)
		}
		u = u[:len(u)-1]
	}
	return 0
}

// Valid reports whether u is an absolute http(s) URL with a host.
func Valid(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return false
	}
	s := strings.ToLower(p.Scheme)
	return s == "http" || s == "https"
}
